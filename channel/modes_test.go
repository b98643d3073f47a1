package channel

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// withUmask sets the process's umask for the test and restores it after:
// with 0, the modes on disk are the ones the channel asked for.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// Every file the channel creates is 0600 and every directory 0700 unless
// the Config says otherwise: data logs, .corrupt files, the checkpoint
// files, the backup's files and backupComplete, the lock files, and the
// directories Open makes (parents included), through Open, checkpoints,
// Close, Repair and Rebuild.
func TestFilesArePrivateByDefault(t *testing.T) {
	modesReachEveryFile(t, 0, 0, 0o600, 0o700)
}

// Config.FileMode and Config.DirMode widen them, for every file and
// directory alike.
func TestFileModeAndDirModeReachEveryFile(t *testing.T) {
	modesReachEveryFile(t, 0o640, 0o750, 0o640, 0o750)
}

func modesReachEveryFile(t *testing.T, fileMode, dirMode, wantFile, wantDir fs.FileMode) {
	withUmask(t, 0)
	root := filepath.Join(t.TempDir(), "fc") // Open makes it too
	cfg := testConfig(t, 2)
	cfg.CheckpointDir = filepath.Join(root, "checkpoint")
	cfg.BackupCheckpointDir = filepath.Join(root, "backup")
	cfg.DataDirs = []string{filepath.Join(root, "data0"), filepath.Join(root, "data1")}
	cfg.FileMode, cfg.DirMode = fileMode, dirMode
	cfg.Groups = []GroupConfig{{MaxDeliveries: 3}} // and its dead-letter group, and the delivery journal

	c := mustOpen(t, cfg)
	putN(t, c, 0, 20, 5)
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tx.Take(); err != nil { // in flight at the checkpoint
		t.Fatal(err)
	}
	if err := c.Checkpoint(); err != nil { // and the backup
		t.Fatal(err)
	}
	tx.Rollback()
	// A torn tail for Open to cut (a .corrupt file)...
	crash(t, c)
	tearLastLog(t, cfg.DataDirs[0])
	c = mustOpen(t, cfg)
	putN(t, c, 20, 5, 5)
	crash(t, c)
	// ... and one for Repair, which ends with a Rebuild.
	tearLastLog(t, cfg.DataDirs[1])
	if _, err := Repair(cfg, RepairOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Rebuild(cfg, RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	wantEvents(t, drain(t, c), bodies(0, 25))
	c.Close()

	var kinds []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := wantFile
		if d.IsDir() {
			want = wantDir
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", path, uint32(fi.Mode().Perm()), uint32(want))
		}
		if d.IsDir() {
			kinds = append(kinds, "dir")
		} else {
			kinds = append(kinds, kindOf(d.Name()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"dir", "log", "corrupt", checkpoint.CheckpointName, checkpoint.MetaName,
		checkpoint.InflightPutsName, checkpoint.InflightTakesName, checkpoint.BackupCompleteName, LockFileName,
		checkpoint.CatalogName, checkpoint.JournalName} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s file was checked (%v)", k, kinds)
		}
	}
}

// kindOf names the kind of a channel's file for modesReachEveryFile.
func kindOf(name string) string {
	if _, isLog := logfile.ParseLogName(name); isLog {
		return "log"
	}
	if strings.HasSuffix(name, ".corrupt") {
		return "corrupt"
	}
	return name
}

// tearLastLog appends a torn record to the newest log file of dir.
func tearLastLog(t *testing.T, dir string) {
	t.Helper()
	ids, err := logfile.ListLogs(vfsOS(), dir)
	if err != nil || len(ids) == 0 {
		t.Fatalf("ListLogs(%s) = %v, %v", dir, ids, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, logfile.LogName(ids[len(ids)-1])), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("\x00\x00\x00\x40half a record")); err != nil {
		t.Fatal(err)
	}
}

// The modes keep the owner's access, and are only modes.
func TestInvalidModes(t *testing.T) {
	base := t.TempDir()
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"file_mode_with_execute_bit", func(c *Config) { c.FileMode = 0o700 }, "FileMode 0700"},
		{"file_mode_not_owner_writable", func(c *Config) { c.FileMode = 0o444 }, "FileMode 0444"},
		{"file_mode_with_type_bits", func(c *Config) { c.FileMode = fs.ModeDir | 0o600 }, "FileMode"},
		{"file_mode_setuid", func(c *Config) { c.FileMode = fs.ModeSetuid | 0o600 }, "FileMode"},
		{"dir_mode_not_owner_searchable", func(c *Config) { c.DirMode = 0o600 }, "DirMode 0600"},
		{"dir_mode_sticky", func(c *Config) { c.DirMode = fs.ModeSticky | 0o700 }, "DirMode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{CheckpointDir: filepath.Join(base, "cp"), DataDirs: []string{filepath.Join(base, "d")}, MinimumRequiredSpace: -1}
			tc.mod(&cfg)
			c, err := Open(cfg)
			if err == nil {
				c.Close()
				t.Fatal("Open accepted the config")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(base, "cp")); err == nil {
		t.Error("Open of an invalid config made a directory")
	}
}
