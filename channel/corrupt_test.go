package channel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// logPath is the path of log file id in the first data dir.
func logPath(cfg Config, id uint32) string {
	return filepath.Join(cfg.DataDirs[0], logfile.LogName(id))
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func removeCheckpoint(t *testing.T, cfg Config) {
	t.Helper()
	for _, n := range []string{checkpoint.CheckpointName, checkpoint.MetaName} {
		if err := os.Remove(filepath.Join(cfg.CheckpointDir, n)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTornTailIsCutAndKept: garbage after the last record of the log being
// written when the process died is cut on open, its bytes kept in a
// .corrupt file; the channel then works and replays cleanly, even in full.
func TestTornTailIsCutAndKept(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 30, 10)
	path := c.logs.Active(0).Path()
	crash(t, c)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	end := fi.Size() // the records (crash closes the writers: the zeros laid out go)
	garbage := []byte("\x00\x00\x01\x00half a frame, then the power went")
	appendBytes(t, path, garbage)

	c = mustOpen(t, cfg)
	if s := c.Stats(); s.TornTails != 1 || s.ReplayCorrupt != 0 {
		t.Fatalf("TornTails %d, ReplayCorrupt %d, want 1, 0", s.TornTails, s.ReplayCorrupt)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != end {
		t.Fatalf("log after open: %v, %v; want size %d", fi, err, end)
	}
	id, _ := logfile.ParseLogName(filepath.Base(path))
	kept, err := os.ReadFile(filepath.Join(cfg.DataDirs[0], logfile.CorruptName(id, end)))
	if err != nil || string(kept) != string(garbage) {
		t.Fatalf("kept %q, %v", kept, err)
	}
	putN(t, c, 30, 10, 10)
	c.Close()

	removeCheckpoint(t, cfg)
	c = mustOpen(t, cfg)
	defer c.Close()
	if s := c.Stats(); s.TornTails != 0 || s.ReplayCorrupt != 0 || s.RecoveredFrom != "full replay" {
		t.Fatalf("second open: %+v", s)
	}
	wantEvents(t, drain(t, c), bodies(0, 40))
}

// TestCorruptRecordInTheMiddleCostsOnlyItsEvent: a put record damaged
// inside a log file (found by a full replay) costs its event alone: the
// other events of its transaction, whose commit record is intact, and the
// transactions after it in the same file are recovered.
func TestCorruptRecordInTheMiddleCostsOnlyItsEvent(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 5) // two transactions
	path := c.logs.Active(0).Path()
	second := c.logs.Active(0).Size()
	putN(t, c, 10, 5, 5) // the damaged one
	putN(t, c, 15, 10, 5)
	c.Close()
	flipAt(t, path, second+logfile.FrameHeaderSize+20)
	removeCheckpoint(t, cfg)

	c = mustOpen(t, cfg)
	defer c.Close()
	if s := c.Stats(); s.ReplayCorrupt != 1 || s.ReplayDamagedTxs != 1 {
		t.Fatalf("ReplayCorrupt %d, ReplayDamagedTxs %d, want 1, 1", s.ReplayCorrupt, s.ReplayDamagedTxs)
	}
	wantEvents(t, drain(t, c), append(bodies(0, 10), bodies(11, 14)...))
}

// TestTakeSkipsDamagedEvents: events damaged on disk after their commit are
// skipped by takes (counted), never returned and never block the queue.
func TestTakeSkipsDamagedEvents(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	path := c.logs.Active(0).Path()
	first := c.logs.Active(0).Size()
	putN(t, c, 0, 1, 1)
	putN(t, c, 1, 4, 4)
	flipAt(t, path, first+logfile.FrameHeaderSize+20)
	expectProblems(t, replay.ProblemCorruptRecord)
	got := drain(t, c)
	wantEvents(t, got, bodies(1, 4))
	if s := c.Stats(); s.CorruptSkipped != 1 {
		t.Fatalf("CorruptSkipped %d", s.CorruptSkipped)
	}
	c.Close()
}

// TestDamagedLogHeaderIsSalvaged: a damaged header of an older log file does
// not stop the channel: the file is read by its name.
func TestDamagedLogHeaderIsSalvaged(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	path := c.logs.Active(0).Path()
	putN(t, c, 0, 20, 10)
	c.Close()
	flipAt(t, path, 1)
	expectProblems(t, replay.ProblemBadHeader) // the channel reads past it, never rewrites it
	for _, full := range []bool{false, true} {
		if full {
			removeCheckpoint(t, cfg)
		}
		c = mustOpen(t, cfg)
		tx, _ := c.Begin()
		var got []string
		for {
			ev, ok, err := tx.Take()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, string(ev.Body))
		}
		tx.Rollback()
		wantEvents(t, got, bodies(0, 20))
		// The damaged header is reported whenever the file is read.
		if s := c.Stats(); s.ReplayCorrupt != 1 {
			t.Fatalf("full replay %v: ReplayCorrupt %d", full, s.ReplayCorrupt)
		}
		c.Close()
	}
}

// TestDamagedEventsDoNotCountTowardTransactionCapacity: a sink whose batch
// is TransactionCapacity and that rolls back on any error (the package
// doc's sink) gets past more damaged events than one transaction holds:
// the damaged events Take steps over do not count toward the capacity, and
// its commit consumes them with the good ones.
func TestDamagedEventsDoNotCountTowardTransactionCapacity(t *testing.T) {
	const batch, damaged, good = 5, 12, 20
	cfg := testConfig(t, 1)
	cfg.TransactionCapacity = batch
	c := mustOpen(t, cfg)
	path := c.logs.Active(0).Path()
	for i := range damaged {
		off := c.logs.Active(0).Size() // the put record is the commit's first
		putN(t, c, i, 1, 1)
		flipAt(t, path, off+logfile.FrameHeaderSize+20)
	}
	putN(t, c, damaged, good, batch)
	expectProblems(t, replay.ProblemCorruptRecord)

	var got []string
	for attempt := 0; len(got) < good; attempt++ {
		if attempt == 2*good {
			t.Fatalf("after %d attempts the sink has %d of %d events: it does not progress", attempt, len(got), good)
		}
		tx, _ := c.Begin()
		var b []string
		var err error
		for len(b) < batch {
			var ev Event
			var ok bool
			if ev, ok, err = tx.Take(); err != nil || !ok {
				break
			}
			b = append(b, string(ev.Body))
		}
		if err != nil {
			t.Logf("attempt %d: %v", attempt, err)
			tx.Rollback()
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		got = append(got, b...)
	}
	wantEvents(t, got, bodies(damaged, good))
	if s := c.Stats(); s.CorruptSkipped != damaged || s.Queued != 0 {
		t.Fatalf("CorruptSkipped %d, Queued %d; want %d, 0", s.CorruptSkipped, s.Queued, damaged)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	if n := c.Len(); n != 0 {
		t.Fatalf("%d events after reopen, want 0: the commits consumed the damaged events", n)
	}
}
