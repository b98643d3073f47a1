package channel

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// TestFramesInAnEventBodyAreNeverRecords is issue 13's attack, end to end: a
// producer puts an event whose body holds well-formed frames (a put of a
// phantom event, a take of the three committed events, and their commits,
// with a transaction id far above the channel's), and a crash tears that
// event's record, the most common crash state: the file ends inside it
// (cut_inside), or its frame header is garbled with its commit after it
// (garbled_header). A resync then searches the body. After Open: no phantom
// event, the three committed events still queued, and the transaction-id
// counter where it was.
//
// The producer cannot know the salt of the channel's log file, so it builds
// the frames the ways it can: copied from a log file of another channel in
// which it made those very records (another_channel), or sealed with a
// guessed salt (guessed_salt: 0).
func TestFramesInAnEventBodyAreNeverRecords(t *testing.T) {
	for _, source := range []string{"another_channel", "guessed_salt"} {
		for _, tear := range []string{"cut_inside", "garbled_header"} {
			t.Run(source+"/"+tear, func(t *testing.T) {
				expectProblems(t, replay.ProblemCorruptRecord)
				cfg := testConfig(t, 1)
				c := mustOpen(t, cfg)
				putN(t, c, 0, 3, 3)
				log1 := logPath(cfg, 1)
				var offs []uint32
				for i := range 3 {
					offs = append(offs, uint32(putOffset(t, log1, i)))
				}
				var forged []byte
				if source == "another_channel" {
					forged = framesFromAnotherChannel(t)
				} else {
					forged = framesWithSalt(t, 0, offs)
				}
				body := slices.Concat([]byte("looks like any event "), forged, bytes.Repeat([]byte{'.'}, 200))
				tx, _ := c.Begin()
				if err := tx.Put(Event{Body: body}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				txBefore := c.nextTxID.Load()
				crash(t, c)

				evil := putOffsetOf(t, log1, body)
				switch tear {
				case "cut_inside": // the write reached the forgery, not the end of the body
					if err := os.Truncate(log1, evil+logfile.FrameHeaderSize+int64(len(body))-100); err != nil {
						t.Fatal(err)
					}
				case "garbled_header":
					flipAt(t, log1, evil+1) // the length field
				}

				c = mustOpen(t, cfg)
				if got := c.nextTxID.Load(); got > txBefore+1 {
					t.Errorf("the transaction-id counter jumped from %d to %d", txBefore, got)
				}
				wantEvents(t, drain(t, c), bodies(0, 3))
				if s := c.Stats(); tear == "garbled_header" && s.ReplayCorrupt != 1 {
					t.Errorf("ReplayCorrupt %d, want the torn put's record", s.ReplayCorrupt)
				}
			})
		}
	}
}

// framesFromAnotherChannel makes, in a channel of its own, the records the
// attack needs and returns their frames as that channel's log file holds
// them: the same three events (so that its take points where the victim's
// events are), a hundred thousand empty transactions (so that its
// transaction ids are far above the victim's), a put of a phantom event, a
// take of the three events, and their commits.
func framesFromAnotherChannel(t *testing.T) []byte {
	t.Helper()
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	for range 100_000 {
		tx, _ := c.Begin()
		tx.Rollback()
	}
	tx, _ := c.Begin()
	if err := tx.Put(Event{Body: []byte("phantom")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := takeN(t, c, 3, 3); !slices.Equal(got, bodies(0, 3)) {
		t.Fatalf("took %v", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logPath(cfg, 1))
	if err != nil {
		t.Fatal(err)
	}
	// Everything after the commit of the three events.
	return b[recordEnd(t, logPath(cfg, 1), 4):]
}

// framesWithSalt builds the attack's four frames as a producer who guessed
// salt would: the phantom put (transaction 1<<40), its commit, the take of
// the events at offs of log file 1, and its commit, with write-order ids
// right after the victim's (6 to 9).
func framesWithSalt(t *testing.T, salt uint64, offs []uint32) []byte {
	t.Helper()
	ptrs := make([]uint64, len(offs))
	for i, off := range offs {
		ptrs[i] = uint64(eventqueue.NewPointer(1, off))
	}
	var out []byte
	for _, r := range []logfile.Record{
		{Type: logfile.RecordPut, TxID: 1 << 40, WriteOrderID: 6, Body: []byte("phantom")},
		{Type: logfile.RecordCommit, TxID: 1 << 40, WriteOrderID: 7, CommitType: logfile.RecordPut, Count: 1},
		{Type: logfile.RecordTake, TxID: 1<<40 + 1, WriteOrderID: 8, Pointers: ptrs},
		{Type: logfile.RecordCommit, TxID: 1<<40 + 1, WriteOrderID: 9, CommitType: logfile.RecordTake, Count: uint64(len(ptrs))},
	} {
		frame, err := logfile.AppendUnsealed(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, testutil.LogFrame(salt, frame[logfile.FrameHeaderSize:])...)
	}
	return out
}

// recordEnd returns the offset just past the n-th record (from 1) of the
// log file at path.
func recordEnd(t *testing.T, path string, n int) int64 {
	t.Helper()
	s, err := logfile.NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < n; i++ {
		if !s.Next() {
			t.Fatalf("%s has %d records, want %d", path, i, n)
		}
	}
	return s.End()
}

// putOffsetOf returns the frame offset of the put record whose body is b
// in the log file at path.
func putOffsetOf(t *testing.T, path string, b []byte) int64 {
	t.Helper()
	s, err := logfile.NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Next() {
		if r := s.Record(); r.Type == logfile.RecordPut && bytes.Equal(r.Body, b) {
			return s.Offset()
		}
	}
	t.Fatalf("no put of that body in %s", path)
	return 0
}
