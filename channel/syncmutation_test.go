package channel

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// These tests pin down the fsyncs that the crash-state enumeration does not
// reach: each one fails if the fsync it names is removed (found by a mutation
// run that turned every Sync and SyncDir of the non-test code into a no-op in
// turn; see issue 3).

// beginIn begins a transaction whose records go to data dir i. Transactions
// are spread over the dirs by id, so it rolls back the ones that land
// elsewhere.
func beginIn(t *testing.T, c *FileChannel, i int) *Transaction {
	t.Helper()
	for range 2 * c.logs.NumDirs() {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if tx.dir == i {
			return tx
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("no transaction lands in data dir %d", i)
	return nil
}

// kill abandons c like a killed process: unlike crash, it leaves the open
// log files unsynced (their handles are dropped, not closed).
func kill(t *testing.T, c *FileChannel) {
	t.Helper()
	c.logs.Abandon()
	crash(t, c)
}

// Open removes a log file that a crash inside logfile.Create left without a
// header, then starts a new log file in every data dir; the first of those
// may take the removed file's id. Fails without the SyncDir after that
// removal (channel.go): a crash after the new file is durable brings the
// empty one back in the other dir, and no later Open gets past "log file id
// exists in two data dirs".
func TestEmptyLogRemovalIsDurableBeforeItsIDIsReused(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 2)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 5)
	next := c.logs.NextFileID() // the id the next Open gives its first new file
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The crash inside Create: the name became durable, the header did not.
	empty := filepath.Join(cfg.DataDirs[1], logfile.LogName(next))
	f, err := mem.Create(empty, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir(cfg.DataDirs[1]); err != nil {
		t.Fatal(err)
	}

	var images []image
	mem.SetHook(func(p vfs.CrashPoint) {
		images = append(images, image{fs: p.Clone(false, 0), what: fmt.Sprintf("crash after op %d (%s %s) of the Open", p.Seq, p.Op, p.Path)})
	})
	c = mustOpen(t, cfg)
	mem.SetHook(nil)
	if _, err := mem.Stat(empty); err == nil {
		t.Fatalf("Open left the empty log %s", empty)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	recoverEach(t, images, 2, bodies(0, 10))
}

// Repair removes a log file left without a header by a crash inside its
// creation; the next Open may give that id to a new file in another dir.
// The rebuild that ends a repair opens the channel, whose new log files sync
// every data dir; a repair blocked by a file it cannot fix skips the rebuild,
// and then only the SyncDir after the removal (repair.go) keeps the empty
// file from coming back beside the new one (the failure of
// TestEmptyLogRemovalIsDurableBeforeItsIDIsReused).
func TestBlockedRepairRemovesAnEmptyLogDurably(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 2)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 5)
	next := c.logs.NextFileID()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// A file renamed by hand (its header names another id) blocks the
	// repair's rebuild.
	w, err := logfile.Create(mem, cfg.DataDirs[0], next+6)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(cfg.DataDirs[0], logfile.LogName(next+5))
	if err := mem.Rename(w.Path(), renamed); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(cfg.DataDirs[1], logfile.LogName(next))
	f, err := mem.Create(empty, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range cfg.DataDirs {
		if err := mem.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	rep, _ := Repair(cfg, RepairOptions{})
	if rep == nil || rep.Rebuild != nil {
		t.Fatalf("repair report %+v, want a blocked repair", rep)
	}
	if _, err := mem.Stat(empty); err == nil {
		t.Fatalf("Repair left the empty log %s", empty)
	}
	// The operator moves the renamed file away, as the report says.
	if err := mem.Rename(renamed, "/moved-away"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/", cfg.DataDirs[0]} {
		if err := mem.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	var images []image
	mem.SetHook(func(p vfs.CrashPoint) {
		images = append(images, image{fs: p.Clone(false, 0), what: fmt.Sprintf("crash after op %d (%s %s) of the Open after Repair", p.Seq, p.Op, p.Path)})
	})
	c = mustOpen(t, cfg)
	mem.SetHook(nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	recoverEach(t, images, 2, bodies(0, 10))
}

// With NoSync, a killed process leaves committed records in the page cache
// only. The next Open replays them and checkpoints, and a checkpoint makes the
// events it covers durable. Fails without the fsync of the replayed log files
// (syncFile in channel.go): after a power loss the checkpoint's queue points
// at records that never reached the disk.
func TestReplayedRecordsAreDurableBeforeACheckpointCoversThem(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	cfg.NoSync = true
	c := mustOpen(t, cfg)
	putN(t, c, 0, 20, 5) // never fsynced
	kill(t, c)           // the page cache survives
	c = mustOpen(t, cfg)
	if s := c.Stats(); s.ReplayRecords == s.ReplaySkipped {
		t.Fatalf("nothing replayed: %+v", s)
	}
	img := mem.CrashClone(true, 1) // power loss after the Open's checkpoint
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, memConfig(img, 1))
	defer c.Close()
	if got := drain(t, c); !slices.Equal(got, bodies(0, 20)) {
		t.Fatalf("after power loss got %s, want the %d events the checkpoint covered: %s",
			short(got), 20, short(bodies(0, 20)))
	}
}

// A checkpoint deletes a log file of puts (in data1) together with the log
// file of their takes (in data0). Fails without the SyncDir of every dir
// that lost a file (collectGarbage): the next roll of data0 makes the take
// file's deletion durable while the put file's is not, and a full replay
// (after losing the checkpoint) brings the taken events back.
func TestLogDeletionIsDurableInEveryDir(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 2)
	c := mustOpen(t, cfg)
	tx := beginIn(t, c, 1)
	for i := range 10 {
		if err := tx.Put(Event{Body: body(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	putFile := c.logs.Active(1).Path()
	tx = beginIn(t, c, 0)
	for range 10 {
		if _, ok, err := tx.Take(); err != nil || !ok {
			t.Fatalf("take: ok=%v err=%v", ok, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	takeFile := c.logs.Active(0).Path()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg) // rolls both files, so a checkpoint may delete them
	defer c.Close()
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{putFile, takeFile} {
		if _, err := mem.Stat(p); err == nil {
			t.Fatalf("the checkpoint kept %s", p)
		}
	}
	// Later puts to data0 roll its log file (a create and a SyncDir of
	// data0 only).
	w0, n := c.logs.Active(0), 10
	for ; c.logs.Active(0) == w0; n++ {
		tx := beginIn(t, c, 0)
		if err := tx.Put(Event{Body: body(n)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	img := mem.CrashClone(false, 0)
	for _, name := range []string{checkpoint.CheckpointName, checkpoint.MetaName} {
		if err := img.Remove(filepath.Join(cfg.CheckpointDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c2 := mustOpen(t, memConfig(img, 2))
	defer c2.Close()
	if s := c2.Stats(); s.RecoveredFrom != "full replay" {
		t.Fatalf("recovered from %q, want a full replay", s.RecoveredFrom)
	}
	if got, want := drain(t, c2), bodies(10, n-10); !slices.Equal(got, want) {
		t.Fatalf("full replay after power loss got %s, want %s", short(got), short(want))
	}
}

// recoverEach opens every crash image (with dirs data dirs) and checks
// that it holds exactly want.
func recoverEach(t *testing.T, images []image, dirs int, want []string) {
	t.Helper()
	for _, img := range images {
		c, err := Open(memConfig(img.fs, dirs))
		if err != nil {
			t.Fatalf("%s: open: %v", img.what, err)
		}
		if got := drain(t, c); !slices.Equal(got, want) {
			t.Fatalf("%s: got %s, want %s", img.what, short(got), short(want))
		}
		if err := c.Close(); err != nil {
			t.Fatalf("%s: close: %v", img.what, err)
		}
	}
}
