package channel

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// txOnDir begins a transaction whose records go to data dir dir (a
// transaction's dir is its id modulo the dirs), rolling back the others.
func txOnDir(t *testing.T, c *FileChannel, dir int) *Transaction {
	t.Helper()
	for {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if tx.dir == dir {
			return tx
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashInsideReclaimThenInsideRecovery: two log files in two data
// dirs whose records take each other's events (a cycle) are deleted in
// one round, each dir synced in turn; a power loss between the two syncs
// leaves the second file without the file that took its event. The
// checkpoint keeps that harmless, but a second power loss while a later
// checkpoint is written (the recovery's, or Close's) leaves a full
// replay, which would bring that event back unless the recovery first
// deleted what the interrupted round left (Set.FinishReclaim).
func TestCrashInsideReclaimThenInsideRecovery(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := memConfig(fsys, 2)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, dir := range []int{0, 1} { // a in data0's file, b in data1's
		tx := txOnDir(t, c, dir)
		if err := tx.Put(Event{Body: []byte(fmt.Sprint("ab"[i : i+1]))}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []int{1, 0} { // a taken in data1's file, b in data0's
		tx := txOnDir(t, c, dir)
		if _, ok, err := tx.Take(); err != nil || !ok {
			t.Fatalf("take: %v %v", ok, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := c.logs.Roll(i); err != nil {
			t.Fatal(err)
		}
	}
	// The image right after the round's first dir sync: data0's file is
	// gone for good, data1's (which holds the take of a) is back.
	var img *vfs.MemFS
	removed := 0
	fsys.SetHook(func(p vfs.CrashPoint) {
		if p.Op == "remove" && strings.Contains(p.Path, "/log-") {
			removed++
		}
		if img == nil && removed == 2 && p.Op == "syncdir" && p.Path == "/fc/data0" {
			img = p.Clone(false, 0)
		}
	})
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	fsys.SetHook(nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if img == nil {
		t.Fatal("no crash image inside the deletion round")
	}
	// Recover it (and close), with a power loss at each operation.
	drainRecoveryCrashes(t, cfg, img, func(at string, got []string, st Stats) {
		if len(got) != 0 {
			t.Fatalf("%s: taken events back: %q (recovered from %s)", at, got, st.RecoveredFrom)
		}
	})
}

// TestFinishReclaimKeepsWhatTheCheckpointNeeds: a log file lost for
// another reason than a deletion round (an operator's rm) that completed
// a file the checkpoint still counts queued events in does not make Open
// delete that file before its own checkpoint: a power loss in between
// would leave the old checkpoint pointing into a missing file, and the
// next Open would fail.
func TestFinishReclaimKeepsWhatTheCheckpointNeeds(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := memConfig(fsys, 1)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	step := func(f func(tx *Transaction) error) {
		t.Helper()
		tx, err := c.Begin()
		if err == nil {
			err = f(tx)
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	take := func(tx *Transaction) error {
		if _, ok, err := tx.Take(); err != nil || !ok {
			return fmt.Errorf("take: %v %v", ok, err)
		}
		return nil
	}
	step(func(tx *Transaction) error { // a, b in file 1
		return errors.Join(tx.Put(Event{Body: []byte("a")}), tx.Put(Event{Body: []byte("b")}))
	})
	f1 := c.logs.Active(0).Path()
	if err := c.logs.Roll(0); err != nil {
		t.Fatal(err)
	}
	step(take) // a, taken in file 2
	f2 := c.logs.Active(0).Path()
	if err := c.logs.Roll(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Checkpoint(); err != nil { // b queued in file 1: both stay
		t.Fatal(err)
	}
	step(take) // b, taken after the checkpoint
	img := fsys.CrashClone(false, 0)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(img.Remove(f2), img.SyncDir("/fc/data0")); err != nil {
		t.Fatal(err)
	}
	if !existsMem(img, f1) {
		t.Fatalf("%s gone before the recovery", f1)
	}
	drainRecoveryCrashes(t, cfg, img, func(at string, got []string, _ Stats) {
		// A full replay (the recovery's checkpoint half written) reads
		// file 1 without the lost take of a: a comes back, the loss of
		// file 2 shows. b's take is in a file that stays.
		if len(got) > 1 || len(got) == 1 && got[0] != "a" {
			t.Fatalf("%s: got %q", at, got)
		}
	})
}

// drainRecoveryCrashes opens the channel of cfg on each image a power loss
// inside the recovery of img leaves (recoveryCrashImages), drains and
// closes it, and hands check where the crash was, what it took and its
// Stats before the Close.
func drainRecoveryCrashes(t *testing.T, cfg Config, img *vfs.MemFS, check func(at string, got []string, st Stats)) {
	t.Helper()
	inner, ops := recoveryCrashImages(t, cfg, img)
	for i, in := range inner {
		at := fmt.Sprintf("crash after op %d (%s) of the recovery", i+1, ops[i])
		icfg := cfg
		icfg.fs = in
		c, err := Open(icfg)
		if err != nil {
			t.Fatalf("%s: open: %v", at, err)
		}
		got := drain(t, c)
		st := c.Stats()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		check(at, got, st)
	}
}

// existsMem reports whether name exists in fsys.
func existsMem(fsys *vfs.MemFS, name string) bool {
	_, err := fsys.Stat(name)
	return err == nil
}

// recoveryCrashImages opens (and closes) the channel of cfg on img, the
// image of a crash, and returns the image of a power loss after each
// operation of that recovery, with the operation.
func recoveryCrashImages(t *testing.T, cfg Config, img *vfs.MemFS) ([]*vfs.MemFS, []string) {
	t.Helper()
	var inner []*vfs.MemFS
	var ops []string
	img.SetHook(func(p vfs.CrashPoint) {
		inner = append(inner, p.Clone(false, 0))
		ops = append(ops, p.Op+" "+p.Path)
	})
	defer img.SetHook(nil)
	cfg.fs = img
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return inner, ops
}
