package channel

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// foreignBytes is what a file that is not the channel's holds: longer than
// a log header and not zeros, so a log reader would take it for a log file
// with a damaged header and a torn tail to cut.
var foreignBytes = []byte("someone else's file, never to be cut or copied\n")

// entryState is what Lstat and Readlink say of an entry, to tell that
// nothing changed it.
func entryState(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	link, _ := os.Readlink(path)
	return fi.Mode().Type().String() + " " + link
}

// requireForeignIntact fails t unless target still holds foreignBytes and
// no file of cfg's directories holds a copy of them (a .corrupt file).
func requireForeignIntact(t *testing.T, cfg Config, target string) {
	t.Helper()
	if b, err := os.ReadFile(target); err != nil || !bytes.Equal(b, foreignBytes) {
		t.Errorf("the foreign file %s now holds %q (%v)", target, b, err)
	}
	for _, d := range append([]string{cfg.CheckpointDir}, cfg.DataDirs...) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			if b, _ := os.ReadFile(filepath.Join(d, e.Name())); bytes.Contains(b, foreignBytes[:16]) {
				t.Errorf("%s holds the foreign file's bytes", filepath.Join(d, e.Name()))
			}
		}
	}
}

// An entry of a data dir named like a log file that is not a regular file
// (a link, a directory, a named pipe) is not the channel's: Open, Verify,
// Repair and Rebuild leave it alone (a link's target is never cut, nor
// copied into a .corrupt file), no new log file takes its id, and Verify
// reports it as not-a-regular-file.
func TestEntriesNamedLikeLogsThatAreNotFilesAreLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(entry, target string) error
	}{
		{"symlink", func(entry, target string) error { return os.Symlink(target, entry) }},
		{"dangling_symlink", func(entry, target string) error { return os.Symlink(target+".gone", entry) }},
		{"directory", func(entry, _ string) error { return os.Mkdir(entry, 0o700) }},
		{"fifo", func(entry, _ string) error { return syscall.Mkfifo(entry, 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			c := mustOpen(t, cfg)
			putN(t, c, 0, 10, 5)
			c.Close()
			ids, err := logfile.ListLogs(vfsOS(), cfg.DataDirs[0])
			if err != nil || len(ids) == 0 {
				t.Fatalf("ListLogs = %v, %v", ids, err)
			}
			// The id the next Open's new log file would take.
			entry := filepath.Join(cfg.DataDirs[0], logfile.LogName(ids[len(ids)-1]+1))
			target := filepath.Join(t.TempDir(), "foreign")
			if err := os.WriteFile(target, foreignBytes, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(entry, target); err != nil {
				t.Fatal(err)
			}
			expectProblems(t, replay.ProblemNotRegularFile)
			state := entryState(t, entry)

			c = mustOpen(t, cfg)
			wantEvents(t, drain(t, c), bodies(0, 10))
			putN(t, c, 10, 5, 5)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}

			rep, err := Verify(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Problems) != 1 || rep.Problems[0].Kind != replay.ProblemNotRegularFile || rep.Problems[0].File != entry {
				t.Fatalf("Verify problems %v, want one %s for %s", rep.Problems, replay.ProblemNotRegularFile, entry)
			}
			rr, err := Repair(cfg, RepairOptions{})
			if err != nil {
				t.Fatalf("Repair: %v", err)
			}
			for _, a := range rr.Actions {
				if a.File == entry {
					t.Errorf("Repair acted on %s: %+v", entry, a)
				}
			}
			if _, err := Rebuild(cfg, RebuildOptions{}); err != nil {
				t.Fatalf("Rebuild: %v", err)
			}
			c = mustOpen(t, cfg)
			wantEvents(t, drain(t, c), bodies(10, 5))
			c.Close()

			if got := entryState(t, entry); got != state {
				t.Errorf("%s was %q, now %q", entry, state, got)
			}
			requireForeignIntact(t, cfg, target)
		})
	}
}

// A file the channel opens by its name (the checkpoint files, in_use.lock)
// that is a symbolic link is refused with ErrNotRegular by Open, Repair and
// Rebuild, the link and its target untouched, even when the target holds
// the very file the channel expects. Verify reports such a checkpoint file.
// The directories themselves may be links.
func TestFilesOpenedByNameAreNotFollowedThroughLinks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		file   func(cfg Config) string
		verify bool // Verify reports it (else Verify fails as Open does)
	}{
		{"checkpoint", func(cfg Config) string { return filepath.Join(cfg.CheckpointDir, checkpoint.CheckpointName) }, true},
		{"checkpoint.meta", func(cfg Config) string { return filepath.Join(cfg.CheckpointDir, checkpoint.MetaName) }, true},
		{"inflighttakes", func(cfg Config) string { return filepath.Join(cfg.CheckpointDir, checkpoint.InflightTakesName) }, true},
		{"backup_checkpoint", func(cfg Config) string { return filepath.Join(cfg.BackupCheckpointDir, checkpoint.CheckpointName) }, true},
		{"checkpoint_dir_lock", func(cfg Config) string { return filepath.Join(cfg.CheckpointDir, LockFileName) }, false},
		{"data_dir_lock", func(cfg Config) string { return filepath.Join(cfg.DataDirs[0], LockFileName) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The channel's dirs are links to the real ones.
			real := t.TempDir()
			base := t.TempDir()
			for _, d := range []string{"checkpoint", "backup", "data0"} {
				if err := os.Mkdir(filepath.Join(real, d), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(real, d), filepath.Join(base, d)); err != nil {
					t.Fatal(err)
				}
			}
			cfg := testConfig(t, 1)
			cfg.CheckpointDir, cfg.DataDirs = filepath.Join(base, "checkpoint"), []string{filepath.Join(base, "data0")}
			cfg.BackupCheckpointDir = filepath.Join(base, "backup")
			c := mustOpen(t, cfg)
			putN(t, c, 0, 10, 5)
			c.Close()

			// The file moves out and a link takes its place.
			file := tc.file(cfg)
			target := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(file, target); err != nil {
				t.Fatal(err)
			}
			saved, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, file); err != nil {
				t.Fatal(err)
			}
			defer func() { // put it back for the Verify at the end of the test
				os.Remove(file)
				os.Rename(target, file)
			}()

			_, err = Open(cfg)
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), file) {
				t.Fatalf("Open: err %v, want one matching ErrNotRegular naming %s", err, file)
			}
			rep, err := Verify(cfg)
			switch {
			case tc.verify && err != nil:
				t.Fatalf("Verify: %v", err)
			case tc.verify && !hasProblem(rep, replay.ProblemNotRegularFile, file):
				t.Errorf("Verify problems %v, want a %s for %s", rep.Problems, replay.ProblemNotRegularFile, file)
			case !tc.verify && !errors.Is(err, ErrNotRegular):
				t.Errorf("Verify: err %v, want one matching ErrNotRegular", err)
			}
			if _, err := Repair(cfg, RepairOptions{}); !errors.Is(err, ErrNotRegular) {
				t.Errorf("Repair: err %v, want one matching ErrNotRegular", err)
			}
			if _, err := Rebuild(cfg, RebuildOptions{}); !errors.Is(err, ErrNotRegular) {
				t.Errorf("Rebuild: err %v, want one matching ErrNotRegular", err)
			}
			if b, err := os.ReadFile(target); err != nil || !bytes.Equal(b, saved) {
				t.Errorf("the link's target changed (%v)", err)
			}
			if fi, err := os.Lstat(file); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("the link %s was replaced or removed: %v, %v", file, fi, err)
			}
		})
	}
}

func hasProblem(rep *replay.Report, kind replay.ProblemKind, file string) bool {
	for _, p := range rep.Problems {
		if p.Kind == kind && p.File == file {
			return true
		}
	}
	return false
}

// A .corrupt name taken by a link (dangling or not) is left alone: the
// bytes a torn-tail cut keeps go to the next free name, and the link's
// target is neither written nor created.
func TestCorruptNameTakenByALinkIsSkipped(t *testing.T) {
	for _, dangling := range []bool{false, true} {
		t.Run(map[bool]string{false: "symlink", true: "dangling_symlink"}[dangling], func(t *testing.T) {
			corruptNameTakenByALink(t, dangling)
		})
	}
}

func corruptNameTakenByALink(t *testing.T, dangling bool) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 5)
	crash(t, c)
	ids, err := logfile.ListLogs(vfsOS(), cfg.DataDirs[0])
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(cfg.DataDirs[0], logfile.LogName(ids[len(ids)-1]))
	fi, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	end := fi.Size()
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("torn tail: a record half written\x01\x02\x03"))
	f.Close()
	target := filepath.Join(t.TempDir(), "foreign")
	if err := os.WriteFile(target, foreignBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	taken := filepath.Join(cfg.DataDirs[0], logfile.CorruptName(ids[len(ids)-1], end))
	to := target
	if dangling {
		to = target + ".gone"
	}
	if err := os.Symlink(to, taken); err != nil {
		t.Fatal(err)
	}

	c = mustOpen(t, cfg)
	wantEvents(t, drain(t, c), bodies(0, 10))
	c.Close()
	if fi, err := os.Lstat(taken); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("%s was replaced: %v, %v", taken, fi, err)
	}
	next := strings.TrimSuffix(taken, ".corrupt") + ".1.corrupt"
	if b, err := os.ReadFile(next); err != nil || !bytes.HasPrefix(b, []byte("torn tail")) {
		t.Errorf("the cut bytes are not in %s: %q, %v", next, b, err)
	}
	requireForeignIntact(t, cfg, target)
	if _, err := os.Lstat(target + ".gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
}
