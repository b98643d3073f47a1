package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// A backupComplete that is a symbolic link is no marker, even when it
// points at a file: nothing in a checkpoint dir is followed.
func TestBackupMarkerThatIsALinkIsNoMarker(t *testing.T) {
	fsys := vfs.OS()
	dir := t.TempDir()
	other := filepath.Join(t.TempDir(), "some-file")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, BackupCompleteName)
	if err := os.Symlink(other, marker); err != nil {
		t.Fatal(err)
	}
	if HasBackup(fsys, dir) {
		t.Error("HasBackup is true for a link named backupComplete")
	}
	if err := RestoreBackup(fsys, dir, t.TempDir()); !errors.Is(err, ErrNoBackup) {
		t.Errorf("RestoreBackup: err %v, want ErrNoBackup", err)
	}
	os.Remove(marker)
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !HasBackup(fsys, dir) {
		t.Error("HasBackup is false for a regular backupComplete")
	}
}
