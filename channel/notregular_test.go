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
// (a link, a directory, a named pipe) at the id of a file the channel
// deleted before its checkpoint is not the channel's: Open leaves it alone
// (a link's target is never cut, nor copied into a .corrupt file), and
// Verify reports it as not-a-regular-file. Repair and Rebuild, whose full
// replay cannot tell whether it stands for a log file, refuse it and change
// nothing (TestLogFileReplacedByANonFileIsNamed has the entries that stand
// where the recovery needs a log file).
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
			cfg.MaxFileSize = MinMaxFileSize
			c := mustOpen(t, cfg)
			putN(t, c, 0, 30, 5)
			takeN(t, c, 30, 5)
			c.Close() // deletes the log files of the events taken
			c = mustOpen(t, cfg)
			putN(t, c, 30, 10, 5)
			c.Close() // a checkpoint that still lists log file 1, then deleted
			c = mustOpen(t, cfg)
			c.Close() // a checkpoint that no longer lists it
			entry := filepath.Join(cfg.DataDirs[0], logfile.LogName(1))
			if _, err := os.Lstat(entry); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("log file 1 was not deleted: %v", err)
			}
			ck, st, err := checkpoint.Open(vfsOS(), cfg.CheckpointDir)
			if err != nil {
				t.Fatal(err)
			}
			ck.Close()
			if len(st.Logs) == 0 || st.Logs[0].FileID == 1 {
				t.Fatalf("the checkpoint still lists log file 1: %v", st.Logs)
			}
			target := filepath.Join(t.TempDir(), "foreign")
			if err := os.WriteFile(target, foreignBytes, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(entry, target); err != nil {
				t.Fatal(err)
			}
			// A full replay refuses it: Verify's, for its comparison, too.
			expectProblems(t, replay.ProblemNotRegularFile, replay.ProblemRecoveryFailed)
			state := entryState(t, entry)

			c = mustOpen(t, cfg)
			wantEvents(t, drain(t, c), bodies(30, 10))
			putN(t, c, 40, 5, 5)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}

			rep, err := Verify(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !hasProblem(rep, replay.ProblemNotRegularFile, entry) {
				t.Fatalf("Verify problems %v, want a %s for %s", rep.Problems, replay.ProblemNotRegularFile, entry)
			}
			before := regularFiles(t, cfg.CheckpointDir, cfg.DataDirs[0])
			if _, err := Repair(cfg, RepairOptions{}); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), entry) {
				t.Errorf("Repair: err %v, want one matching ErrNotRegular naming %s", err, entry)
			}
			if _, err := Rebuild(cfg, RebuildOptions{}); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), entry) {
				t.Errorf("Rebuild: err %v, want one matching ErrNotRegular naming %s", err, entry)
			}
			requireSame(t, before, cfg.CheckpointDir, cfg.DataDirs[0])
			c = mustOpen(t, cfg)
			wantEvents(t, drain(t, c), bodies(40, 5))
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

// regularFiles returns the regular files of dirs (not below them) with
// their bytes, and what Lstat says of every other entry: a snapshot that
// never opens a link, a directory or a named pipe.
func regularFiles(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			if !e.Type().IsRegular() {
				out[p] = entryState(t, p)
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = string(b)
		}
	}
	return out
}

// requireSame fails t unless dirs hold what before (regularFiles) says.
func requireSame(t *testing.T, before map[string]string, dirs ...string) {
	t.Helper()
	after := regularFiles(t, dirs...)
	for p, b := range before {
		if a, ok := after[p]; !ok || a != b {
			t.Errorf("%s was changed or removed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
		}
	}
}

// TestLogFileReplacedByANonFileIsNamed is issue 27's item 13: a log file
// the recovery needs that an operator moved to another disk, leaving a
// symbolic link, made Open fail with "missing from every data dir" (from a
// checkpoint), or was silently left out (a full replay, or a file newer
// than the checkpoint). Now Open, and Repair and Rebuild, fail with
// ErrNotRegular naming the entry and what to do, change nothing, and the
// file moved back recovers every event. The same for a dangling link (the
// other disk not mounted), a directory or a named pipe in the file's place.
func TestLogFileReplacedByANonFileIsNamed(t *testing.T) {
	kinds := []struct {
		name string
		link bool
		// make puts entry in the place of the log file, moved to moved.
		make func(entry, moved string) error
	}{
		{"symlink", true, func(entry, moved string) error { return os.Symlink(moved, entry) }},
		{"dangling_symlink", true, func(entry, moved string) error { return os.Symlink(moved+".unmounted", entry) }},
		{"directory", false, func(entry, _ string) error { return os.Mkdir(entry, 0o700) }},
		{"fifo", false, func(entry, _ string) error { return syscall.Mkfifo(entry, 0o600) }},
	}
	cases := []struct {
		name string
		// setup leaves a closed (or crashed) channel and returns the id of
		// the log file to replace, the events it recovers, and the start
		// of the error message.
		setup func(t *testing.T, cfg Config) (id uint32, events []string, need string)
		ours  bool // the checkpoint lists the file
	}{
		{"queued_per_the_checkpoint", func(t *testing.T, cfg Config) (uint32, []string, string) {
			c := mustOpen(t, cfg)
			putN(t, c, 0, 3, 3)
			c.Close()
			return 1, bodies(0, 3), "log file log-0000000001 holds 3 queued events according to the checkpoint, but "
		}, true},
		{"newer_than_the_checkpoint", func(t *testing.T, cfg Config) (uint32, []string, string) {
			c := mustOpen(t, cfg)
			putN(t, c, 0, 3, 3)
			c.Close()
			c = mustOpen(t, cfg) // rolls to log file 2
			putN(t, c, 3, 3, 3)
			crash(t, c)
			return 2, bodies(0, 6), "log file log-0000000002 is newer than the checkpoint and may hold events committed after it, but "
		}, false},
		{"full_replay", func(t *testing.T, cfg Config) (uint32, []string, string) {
			c := mustOpen(t, cfg)
			putN(t, c, 0, 3, 3)
			c.Close()
			if err := checkpoint.Remove(vfsOS(), cfg.CheckpointDir); err != nil {
				t.Fatal(err)
			}
			return 1, bodies(0, 3), "a full replay reads every log file, but "
		}, false},
	}
	for _, tc := range cases {
		for _, k := range kinds {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) {
				cfg := testConfig(t, 1)
				id, events, need := tc.setup(t, cfg)
				entry := filepath.Join(cfg.DataDirs[0], logfile.LogName(id))
				moved := filepath.Join(t.TempDir(), "moved-"+logfile.LogName(id))
				if err := os.Rename(entry, moved); err != nil {
					t.Fatal(err)
				}
				if err := k.make(entry, moved); err != nil {
					t.Fatal(err)
				}
				restored := false
				restore := func() {
					if restored {
						return
					}
					restored = true
					if err := os.Remove(entry); err != nil {
						t.Error(err)
					}
					if err := os.Rename(moved, entry); err != nil {
						t.Error(err)
					}
				}
				defer restore() // for the Verify of mustOpen's cleanup
				dirs := []string{cfg.CheckpointDir, cfg.DataDirs[0]}
				before := regularFiles(t, dirs...)

				// what is what the error says to do.
				what := func(ours bool) string {
					switch {
					case k.link && ours:
						return "the channel does not follow symbolic links; move the file back into the data dir in place of the link"
					case k.link:
						return "the channel does not follow symbolic links; if the link stands for a log file moved elsewhere, " +
							"move the file back into the data dir in place of the link, else move the link out of the data dir"
					case ours:
						kind := map[string]string{"directory": "directory", "fifo": "named pipe"}[k.name]
						return "the channel reads only regular files; move the " + kind + " out of the data dir and put the log file back in its place"
					}
					return "the channel reads only regular files; move it out of the data dir"
				}
				requireNamed := func(op string, err error, need string, ours bool) {
					t.Helper()
					if !errors.Is(err, ErrNotRegular) || errors.Is(err, ErrCorrupt) {
						t.Fatalf("%s: err %v, want one matching ErrNotRegular (and not ErrCorrupt)", op, err)
					}
					if w := need + entry + " is "; !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not say %q", op, err, w)
					}
					if w := ", not a regular file: " + what(ours); !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not say %q", op, err, w)
					}
					var ne *logfile.NotRegularError
					if !errors.As(err, &ne) || ne.Path != entry || ne.ID != id || ne.Ours != ours {
						t.Errorf("%s: error %#v, want a *logfile.NotRegularError for %s", op, ne, entry)
					}
				}
				_, err := Open(cfg)
				requireNamed("Open", err, need, tc.ours)
				requireSame(t, before, dirs...)
				// Rebuild and Repair replay in full.
				const full = "a full replay reads every log file, but "
				for _, run := range []struct {
					op string
					do func() error
				}{
					{"Rebuild", func() error { _, err := Rebuild(cfg, RebuildOptions{}); return err }},
					{"Repair", func() error { _, err := Repair(cfg, RepairOptions{}); return err }},
					{"Repair dry run", func() error { _, err := Repair(cfg, RepairOptions{DryRun: true}); return err }},
				} {
					err := run.do()
					requireNamed(run.op, err, full, false)
					if !strings.HasSuffix(err.Error(), " (nothing was changed)") {
						t.Errorf("%s: error %q does not say nothing was changed", run.op, err)
					}
				}
				requireSame(t, before, dirs...)

				rep, err := Verify(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if !hasProblem(rep, replay.ProblemNotRegularFile, entry) {
					t.Errorf("Verify: no %s problem for %s: %v", replay.ProblemNotRegularFile, entry, rep.Problems)
				}
				if tc.ours {
					var named bool
					for _, p := range rep.Problems {
						named = named || p.Kind == replay.ProblemMissingLog && strings.Contains(p.Detail, entry+" is ")
					}
					if !named {
						t.Errorf("Verify: no missing-log problem naming %s: %v", entry, rep.Problems)
					}
				}

				restore()
				c := mustOpen(t, cfg)
				wantEvents(t, drain(t, c), events)
			})
		}
	}
}
