package channel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSymlinkAliasIsRefused: two roles given one directory through a
// symlink are refused by the config's validation, with a message that says
// so, and nothing is created; before, the lock was taken twice and Open
// said "in use by another channel".
func TestSymlinkAliasIsRefused(t *testing.T) {
	base := t.TempDir()
	x, y := filepath.Join(base, "x"), filepath.Join(base, "y")
	if err := os.Symlink(x, y); err != nil { // dangling until x is made
		t.Fatal(err)
	}
	real, link := filepath.Join(base, "real"), filepath.Join(base, "link")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		mkdir bool // x exists
		cfg   Config
		want  string
	}{
		{"data_dir_is_the_checkpoint_dir", true, Config{CheckpointDir: x, DataDirs: []string{y}},
			"DataDirs[0] " + y + " is CheckpointDir " + x + " (through a symlink)"},
		{"dangling_link_to_a_dir_not_made_yet", false, Config{CheckpointDir: x, DataDirs: []string{y}},
			"DataDirs[0] " + y + " is CheckpointDir " + x + " (through a symlink)"},
		{"backup_dir_is_the_checkpoint_dir", true, Config{CheckpointDir: y, BackupCheckpointDir: x, DataDirs: []string{filepath.Join(base, "d")}},
			"BackupCheckpointDir " + x + " is CheckpointDir " + y + " (through a symlink)"},
		{"two_data_dirs_through_a_linked_parent", false, Config{CheckpointDir: filepath.Join(base, "c"),
			DataDirs: []string{filepath.Join(real, "d"), filepath.Join(link, "d")}},
			"DataDirs[1] " + filepath.Join(link, "d") + " is DataDirs[0] " + filepath.Join(real, "d") + " (through a symlink)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(x)
			if tc.mkdir {
				if err := os.Mkdir(x, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			before := names(t, base, real)
			cfg := tc.cfg
			cfg.MinimumRequiredSpace = -1
			c, err := Open(cfg)
			if err == nil {
				c.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), "invalid config") || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrLocked) {
				t.Errorf("error %q, want an invalid config saying %q", err, tc.want)
			}
			if after := names(t, base, real); after != before {
				t.Errorf("entries %s, were %s", after, before)
			}
		})
	}
}

// names lists the entries of dirs.
func names(t *testing.T, dirs ...string) string {
	t.Helper()
	var out []string
	for _, d := range dirs {
		es, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			out = append(out, filepath.Join(d, e.Name()))
		}
	}
	return strings.Join(out, " ")
}
