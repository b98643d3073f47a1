package channel

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// bigEvent is event i's body: 900 bytes, four events to a 4 KiB log file
// (and below the spill threshold of MaxFileSize/4).
func bigEvent(i int) []byte {
	b := fmt.Appendf(nil, "event-%d|", i)
	return append(b, strings.Repeat("x", 900-len(b))...)
}

func bigEvents(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(bigEvent(from + i))
	}
	return out
}

// putBig commits events [from, from+n) of bigEvent, one per transaction.
func putBig(t testing.TB, c *FileChannel, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := putOne(c, bigEvent(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
}

func putOne(c *FileChannel, body []byte) error {
	tx, err := c.Begin()
	if err != nil {
		return err
	}
	if err := tx.Put(Event{Body: body}); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// A channel with a thousand log files holds a bounded number of them
// open: at most MaxOpenLogFiles readers, the writers, the checkpoint. Under
// an open-file limit only a little above that (a FaultFS failing opens with
// EMFILE, as RLIMIT_NOFILE does), puts, takes, a reopen (replay) and Verify
// all work. Before the reader cache the channel held every file open and
// commits failed at the limit.
func TestManyLogFilesKeepOpenFilesBounded(t *testing.T) {
	const events = 4400 // four to a file: about 1,100 log files over two dirs
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 2)
	cfg.Capacity = events
	// Readers, the two writers, the checkpoint and its meta and inflight
	// files, a little room.
	bound := DefaultMaxOpenLogFiles + 2 + 8
	ff.SetOpenLimit(bound)
	c := mustOpen(t, cfg)
	putBig(t, c, 0, events)
	files := c.Stats().LogFiles
	if files < 1000 {
		t.Fatalf("%d log files, want over 1000", files)
	}
	if err := c.Health(); err != nil {
		t.Fatalf("Health with %d log files: %v", files, err)
	}
	wantEvents(t, takeN(t, c, events/2, 50), bigEvents(0, events/2))
	t.Logf("%d log files: at most %d files open at once (puts and takes)", files, ff.PeakOpenFiles())
	if err := c.Checkpoint(); err != nil { // deletes the files taken
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ff.OpenFiles(); n != 0 {
		t.Fatalf("%d files open after Close", n)
	}

	ff.ResetPeakOpenFiles()
	c = mustOpen(t, cfg)
	t.Logf("Open of %d log files: at most %d files open at once", c.Stats().LogFiles, ff.PeakOpenFiles())
	// Replay: a file per data dir and one more; the checkpoint's files;
	// the new writers.
	if peak := ff.PeakOpenFiles(); peak > 16 {
		t.Errorf("Open of %d log files held %d files open at once, want at most 16", c.Stats().LogFiles, peak)
	}
	wantEvents(t, drain(t, c), bigEvents(events/2, events/2))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, cfg) // under the limit too
}

// A roll that cannot create the new log file (EMFILE here) fails the
// commit with an error saying so, and Health reports the data dir until a
// roll succeeds again.
func TestFailedRollMakesChannelUnhealthy(t *testing.T) {
	c, _, ff := faultChannel(t, false)
	putBig(t, c, 0, 4) // the active file is full: the next commit rolls
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpCreate}, Name: "log-*", Err: syscall.EMFILE})
	for i := range 2 {
		err := putOne(c, bigEvent(4))
		if !errors.Is(err, syscall.EMFILE) || !strings.Contains(err.Error(), "start a new log file") {
			t.Fatalf("commit %d needing a new log file that cannot be created: %v, want an EMFILE error saying it could not start one", i, err)
		}
		herr := c.Health()
		if !errors.Is(herr, syscall.EMFILE) || !strings.Contains(herr.Error(), c.cfg.DataDirs[0]) {
			t.Fatalf("Health after a failed roll: %v, want it to name the data dir and EMFILE", herr)
		}
	}
	ff.Clear()
	putBig(t, c, 5, 1)
	if err := c.Health(); err != nil {
		t.Fatalf("Health once a roll succeeded again: %v", err)
	}
	wantEvents(t, drain(t, c), append(bigEvents(0, 4), string(bigEvent(5))))
}
