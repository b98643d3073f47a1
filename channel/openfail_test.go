package channel

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// TestCapacityUpperBound: a Capacity above MaxCapacity is refused by the
// config check, before Open touches the disk (it used to start writing
// 8 TiB of zeros for 1<<40); MaxCapacity itself is accepted, and its
// checkpoint file fits a signed 32-bit length.
func TestCapacityUpperBound(t *testing.T) {
	if n := (int64(MaxCapacity) + checkpoint.HeaderSlots) * 8; n > math.MaxInt32 {
		t.Fatalf("a checkpoint of MaxCapacity is %d bytes, more than MaxInt32", n)
	}
	for _, capacity := range []int{MaxCapacity + 1, 1 << 40} {
		// Should the check be missing, the fault stops the 8-byte-per-slot
		// allocation at once instead of filling memory.
		ff := vfs.NewFaultFS(vfs.NewMem())
		ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpTruncate, vfs.OpWriteAt}, Name: checkpoint.CheckpointName, Err: syscall.ENOSPC})
		cfg := memConfig(ff, 1)
		cfg.Capacity = capacity
		c, err := Open(cfg)
		if err == nil {
			c.Close()
			t.Fatalf("Open accepted Capacity %d", capacity)
		}
		if !strings.Contains(err.Error(), "exceeds MaxCapacity") {
			t.Fatalf("Open with Capacity %d: %v; want the config error naming MaxCapacity", capacity, err)
		}
		if ff.Ops() != 0 {
			t.Fatalf("Open with Capacity %d changed the filesystem (%d operations: %v) before refusing it", capacity, ff.Ops(), ff.Log())
		}
	}
	cfg := memConfig(vfs.NewMem(), 1)
	cfg.Capacity = MaxCapacity
	if _, err := cfg.withDefaults(); err != nil {
		t.Fatalf("Capacity = MaxCapacity refused: %v", err)
	}
}

// TestFailedOpenRemovesTheCheckpointItCreated: when a step of Open fails
// after it created the checkpoint file (a first start or full replay, a
// capacity change), the file goes with the failed Open; a checkpoint Open
// found, or one it wrote before failing, stays as it was.
func TestFailedOpenRemovesTheCheckpointItCreated(t *testing.T) {
	failRoll := vfs.Rule{Ops: []vfs.Op{vfs.OpCreate}, Name: "log-*", Err: syscall.EIO}
	failMeta := vfs.Rule{Ops: []vfs.Op{vfs.OpWrite}, Name: checkpoint.MetaName + ".tmp", Err: syscall.EIO}
	for _, tc := range []struct {
		name string
		// setup prepares the files (with no fault) and returns the config
		// of the Open that must fail.
		setup func(t *testing.T, cfg Config) Config
		fault vfs.Rule
		// created: the failed Open created the checkpoint, and must have
		// removed it; else the checkpoint files must be unchanged.
		created bool
		want    []string // the events the next Open recovers
	}{
		{name: "first_open_roll_fails", fault: failRoll, created: true,
			setup: func(t *testing.T, cfg Config) Config { return cfg }},
		{name: "first_open_checkpoint_fails", fault: failMeta, created: true,
			setup: func(t *testing.T, cfg Config) Config { return cfg }},
		{name: "full_replay_roll_fails", fault: failRoll, created: true, want: bodies(0, 20),
			setup: func(t *testing.T, cfg Config) Config {
				c := mustOpen(t, cfg)
				putN(t, c, 0, 20, 10)
				crash(t, c)
				if err := checkpoint.Remove(cfg.fs, cfg.CheckpointDir); err != nil {
					t.Fatal(err)
				}
				return cfg
			}},
		{name: "capacity_change_roll_fails", fault: failRoll, created: true, want: bodies(0, 20),
			setup: func(t *testing.T, cfg Config) Config {
				c := mustOpen(t, cfg)
				putN(t, c, 0, 20, 10)
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				cfg.Capacity *= 2
				return cfg
			}},
		{name: "found_checkpoint_roll_fails", fault: failRoll, want: bodies(0, 20),
			setup: func(t *testing.T, cfg Config) Config {
				c := mustOpen(t, cfg)
				putN(t, c, 0, 20, 10)
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				return cfg
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ff := vfs.NewFaultFS(vfs.NewMem())
			cfg := tc.setup(t, memConfig(ff, 1))
			before := checkpointFiles(t, cfg)
			ff.Add(tc.fault)
			if c, err := Open(cfg); err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			} else {
				t.Logf("failed Open: %v", err)
			}
			ff.Clear()
			after := checkpointFiles(t, cfg)
			if tc.created {
				if len(after) != 0 {
					t.Fatalf("the failed Open left the checkpoint it created: %v", ckptFileNames(after))
				}
			} else if !sameFiles(before, after) {
				t.Fatalf("the failed Open changed the checkpoint it found: %v, then %v", ckptFileNames(before), ckptFileNames(after))
			}
			c := mustOpen(t, cfg)
			defer c.Close()
			wantEvents(t, drain(t, c), tc.want)
		})
	}

	// A checkpoint the failed Open wrote is a good one: it stays. Here the
	// checkpoint after a full replay is written, and deleting the log
	// files it no longer needs fails.
	t.Run("checkpoint_written_then_deletion_fails", func(t *testing.T) {
		ff := vfs.NewFaultFS(vfs.NewMem())
		cfg := memConfig(ff, 1)
		c := mustOpen(t, cfg)
		putN(t, c, 0, 200, 10) // several files of 4 KiB
		wantEvents(t, takeN(t, c, 200, 10), bodies(0, 200))
		putN(t, c, 200, 5, 5)
		crash(t, c)
		if err := checkpoint.Remove(ff, cfg.CheckpointDir); err != nil {
			t.Fatal(err)
		}
		ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpRemove}, Name: "log-*", Err: syscall.EIO})
		if c, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "delete old logs") {
			if err == nil {
				c.Close()
			}
			t.Fatalf("Open = %v; want the log deletion after its checkpoint to fail", err)
		}
		ff.Clear()
		if len(checkpointFiles(t, cfg)) == 0 {
			t.Fatal("the failed Open removed the checkpoint it had written")
		}
		c = mustOpen(t, cfg)
		defer c.Close()
		if got := c.Stats().RecoveredFrom; got != replay.FromCheckpoint {
			t.Errorf("recovered from %q, want the checkpoint the failed Open wrote", got)
		}
		wantEvents(t, drain(t, c), bodies(200, 5))
	})
}

// ckptFile is a file of a checkpoint dir and its contents.
type ckptFile struct {
	name string
	data []byte
}

// checkpointFiles returns the checkpoint's files in cfg's checkpoint dir:
// all but the lock and channel.id (which names the channel, and which an
// Open that fails later keeps: the dir is this channel's).
func checkpointFiles(t *testing.T, cfg Config) []ckptFile {
	t.Helper()
	list, err := cfg.fs.List(cfg.CheckpointDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []ckptFile
	for _, name := range list {
		if name == LockFileName || name == checkpoint.OwnerName {
			continue
		}
		b, err := vfs.ReadFile(cfg.fs, filepath.Join(cfg.CheckpointDir, name))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ckptFile{name, b})
	}
	return out
}

func ckptFileNames(files []ckptFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.name)
	}
	return out
}

func sameFiles(a, b []ckptFile) bool {
	return slices.EqualFunc(a, b, func(x, y ckptFile) bool { return x.name == y.name && bytes.Equal(x.data, y.data) })
}

// TestFailedOpenLeavesNoEmptyLogFile: an Open that fails after it started
// a new log file in every data dir (here its checkpoint after replay
// fails) deletes those files again, so Opens retried on a broken disk do
// not leave one more empty log file each.
func TestFailedOpenLeavesNoEmptyLogFile(t *testing.T) {
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 2)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 30, 10)
	crash(t, c) // records after the checkpoint: Open writes one after replay
	logFiles := func() []string {
		var out []string
		for _, d := range cfg.DataDirs {
			names, err := ff.List(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if _, ok := logfile.ParseLogName(n); ok {
					out = append(out, filepath.Join(d, n))
				}
			}
		}
		return out
	}
	before := logFiles()
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWrite}, Name: checkpoint.MetaName + ".tmp", Err: syscall.EIO})
	for i := range 3 {
		c, err := Open(cfg)
		if err == nil {
			c.Close()
			t.Fatal("Open succeeded")
		}
		if after := logFiles(); !slices.Equal(after, before) {
			t.Fatalf("failed Open %d: log files %v, before it %v", i+1, after, before)
		}
	}
	ff.Clear()
	c = mustOpen(t, cfg)
	defer c.Close()
	wantEvents(t, drain(t, c), bodies(0, 30))
}

// TestOpenWithoutRoomForItsCheckpoint: when the checkpoint Open writes
// after replay fails for lack of space (and no space reserve helps), Open
// succeeds all the same, so that sinks can drain the channel: Health
// reports the failed checkpoint, takes commit, and the next checkpoint
// with room succeeds. A crash before it recovers the same events.
func TestOpenWithoutRoomForItsCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaultFS(mem)
	cfg := memConfig(ff, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 30, 10)
	crash(t, c)
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWrite}, Name: "*.tmp", Err: syscall.ENOSPC})
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open without room for its checkpoint: %v", err)
	}
	if err := c.Health(); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("Health after the checkpoint after replay failed: %v", err)
	}
	wantEvents(t, takeN(t, c, 10, 10), bodies(0, 10))
	crash(t, c)
	c = mustOpen(t, cfg)
	wantEvents(t, takeN(t, c, 10, 10), bodies(10, 10))
	ff.Clear()
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := c.Health(); err != nil {
		t.Fatalf("Health after a checkpoint with room: %v", err)
	}
	wantEvents(t, drain(t, c), bodies(20, 10))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTornTailLeftWithoutRoomToKeepIt: with no room for the .corrupt copy of
// a torn tail, Open leaves the tail in place (CutTail changes the log only
// once the copy is kept) instead of failing; an Open with room cuts it.
func TestTornTailLeftWithoutRoomToKeepIt(t *testing.T) {
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 1)
	cfg.MaxFileSize = 1 << 20
	c := mustOpen(t, cfg)
	putN(t, c, 0, 30, 10)
	path, end := c.logs.Active(0).Path(), c.logs.Active(0).Size()
	crash(t, c)
	garbage := []byte("\x00\x00\x01\x00half a frame, then the power went")
	f, err := ff.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(garbage, end); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		t.Helper()
		fi, err := ff.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}

	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWrite, vfs.OpWriteAt}, Name: "*.corrupt*", Err: syscall.ENOSPC})
	c, err = Open(cfg)
	if err != nil {
		t.Fatalf("Open without room to keep a torn tail: %v", err)
	}
	if s := c.Stats(); s.TornTails != 0 || size() != end+int64(len(garbage)) {
		t.Fatalf("TornTails %d, log size %d; want the tail left in place (%d bytes)", s.TornTails, size(), end+int64(len(garbage)))
	}
	wantEvents(t, takeN(t, c, 10, 10), bodies(0, 10))
	crash(t, c)
	ff.Clear()
	c = mustOpen(t, cfg)
	defer c.Close()
	if s := c.Stats(); s.TornTails != 1 || size() != end {
		t.Fatalf("with room: TornTails %d, log size %d; want it cut at %d", s.TornTails, size(), end)
	}
	wantEvents(t, drain(t, c), bodies(10, 20))
}
