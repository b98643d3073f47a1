package channel

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// faultChannel opens a channel on a FaultFS over a MemFS. Its log files
// are not laid out ahead: the zero-fills' own syncs and writes, in the
// background, would take a fault meant for the operation a test aims it at
// (a rule with Times: 1 on the logs' syncs failed a zero-fill about once in
// 120 runs, and the commit's fsync then succeeded).
func faultChannel(t *testing.T, backup bool) (*FileChannel, Config, *vfs.FaultFS) {
	t.Helper()
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 1)
	cfg.Preallocate = -1
	if backup {
		cfg.BackupCheckpointDir = "/fc/backup"
	}
	return mustOpen(t, cfg), cfg, ff
}

func mustVerify(t *testing.T, cfg Config) {
	t.Helper()
	rep, err := Verify(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %s", rep)
	}
}

// TestFailedFsyncDoesNotBlockCheckpointsOrClose: after a commit's fsync
// fails, the dir's writer is dead until the next append rolls it; a
// checkpoint meanwhile covers its file only up to its last good fsync, and
// Close does not report the failure a second time.
func TestFailedFsyncDoesNotBlockCheckpointsOrClose(t *testing.T) {
	c, cfg, ff := faultChannel(t, false)
	putN(t, c, 0, 10, 5)
	ff.Add(vfs.Rule{Ops: []vfs.Op{"sync"}, Name: "log-*", Times: 1})
	tx, _ := c.Begin()
	tx.Put(Event{Body: []byte("lost")})
	if err := tx.Commit(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("commit with a failing fsync: %v", err)
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatalf("checkpoint after a failed fsync: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close after a failed fsync: %v", err)
	}
	mustVerify(t, cfg)
	c = mustOpen(t, cfg)
	defer c.Close()
	wantEvents(t, drain(t, c), bodies(0, 10))
}

// TestSpilledPutsLostToAFailedFsyncFailTheirCommit: a transaction's spilled
// puts sit unsynced in a writer whose fsync then fails (for another
// commit) and which cuts them off; the transaction's commit must fail, and
// none of its events may appear.
func TestSpilledPutsLostToAFailedFsyncFailTheirCommit(t *testing.T) {
	c, cfg, ff := faultChannel(t, false)
	big, _ := c.Begin()
	for i := range 4 { // 4 x 400 bytes: over the 1 KiB spill threshold of MaxFileSize 4096
		if err := big.Put(Event{Body: fmt.Appendf(nil, "spilled-%d-%0400d", i, i)}); err != nil {
			t.Fatal(err)
		}
	}
	if !big.spilled {
		t.Fatal("the transaction did not spill")
	}
	ff.Add(vfs.Rule{Ops: []vfs.Op{"sync"}, Name: "log-*", Times: 1})
	other, _ := c.Begin()
	other.Put(Event{Body: []byte("other")})
	if err := other.Commit(); err == nil {
		t.Fatal("commit with a failing fsync succeeded")
	}
	if err := big.Commit(); err == nil {
		t.Fatal("a commit whose spilled puts were cut off succeeded")
	}
	putN(t, c, 0, 3, 3)
	wantEvents(t, drain(t, c), bodies(0, 3))
	if s := c.Stats(); s.CorruptSkipped != 0 {
		t.Fatalf("takes skipped %d damaged events", s.CorruptSkipped)
	}
	putN(t, c, 3, 2, 2)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, cfg)
	c = mustOpen(t, cfg)
	defer c.Close()
	wantEvents(t, drain(t, c), bodies(3, 2))
}

// TestFailedBackupKeepsLogFiles: when the backup checkpoint fails, no log
// file is deleted (a power loss could bring the previous backup back, and it
// needs them) until a backup succeeds again.
func TestFailedBackupKeepsLogFiles(t *testing.T) {
	c, cfg, ff := faultChannel(t, true)
	defer func() { c.Close() }()
	for i := range 6 {
		putN(t, c, i*20, 20, 20) // many log files (MaxFileSize 4096)
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	takeN(t, c, 100, 20)
	logs := func() []uint32 {
		ids, err := logfile.ListLogs(cfg.fs, cfg.DataDirs[0])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	before := logs()
	ff.Add(vfs.Rule{Ops: []vfs.Op{"syncdir"}, Name: "/fc/backup", Times: 1})
	if err := c.Checkpoint(); err != nil {
		t.Fatalf("checkpoint with a failing backup: %v", err)
	}
	if c.Stats().BackupErrs != 1 {
		t.Fatalf("BackupErrs = %d", c.Stats().BackupErrs)
	}
	if after := logs(); len(after) < len(before) {
		t.Fatalf("log files %v deleted to %v after a failed backup", before, after)
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if after := logs(); len(after) >= len(before) {
		t.Fatalf("no log file deleted once the backup worked again: %v", after)
	}
	wantEvents(t, drain(t, c), bodies(100, 20))
}
