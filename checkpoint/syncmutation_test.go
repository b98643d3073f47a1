package checkpoint

import (
	"errors"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// This test pins down an fsync no other test needs: it fails if the fsync
// it names is removed (found by a mutation run over every Sync and SyncDir
// of the non-test code; see issue 3).

// A Backup that fails after it started replacing files must stay incomplete
// after a power loss: the channel goes on deleting the log files the old
// backup still points into. Fails without the SyncDir right after Backup
// removes backupComplete: the failed copy never reaches the next SyncDir, so
// the old marker comes back.
func TestFailedBackupStaysIncompleteAfterPowerLoss(t *testing.T) {
	mem := newMem(t, "/cp", "/backup")
	fsys := vfs.NewFaultFS(mem)
	c := mustCreate(t, fsys, "/cp", 100)
	commit(t, c, &State{Meta: Meta{WriteOrderID: 1, Capacity: 100}})
	if err := Backup(fsys, "/cp", "/backup"); err != nil {
		t.Fatal(err)
	}
	commit(t, c, &State{Meta: Meta{WriteOrderID: 2, Capacity: 100}})
	fsys.Add(vfs.Rule{Ops: []vfs.Op{"create"}, Name: MetaName + tmpSuffix}) // the second copy
	if err := Backup(fsys, "/cp", "/backup"); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Backup = %v, want the injected fault", err)
	}
	if HasBackup(mem.CrashClone(false, 0), "/backup") {
		t.Fatal("HasBackup true after a failed Backup and a power loss")
	}
}
