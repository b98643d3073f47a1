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
					t.Fatalf("the failed Open left the checkpoint it created: %v", names(after))
				}
			} else if !sameFiles(before, after) {
				t.Fatalf("the failed Open changed the checkpoint it found: %v, then %v", names(before), names(after))
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

// checkpointFiles returns the files of cfg's checkpoint dir but the lock.
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
		if name == LockFileName {
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

func names(files []ckptFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.name)
	}
	return out
}

func sameFiles(a, b []ckptFile) bool {
	return slices.EqualFunc(a, b, func(x, y ckptFile) bool { return x.name == y.name && bytes.Equal(x.data, y.data) })
}
