package replay

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/logfile"
)

// pad overwrites the records of log file id from off up to end with
// padding, as a repair does.
func (l *logSet) pad(id uint32, off, end int64) {
	l.tb.Helper()
	if _, err := logfile.PadRegion(l.fs, l.path(id), off, end-off); err != nil {
		l.tb.Fatal(err)
	}
}

// TestPaddingCountsAsDamage: a region a repair overwrote with padding is
// treated like the damage it replaced: a put transaction that lost a record
// to it is listed as damaged, that event counted lost and the intact ones
// delivered; padding before a transaction costs it nothing.
func TestPaddingCountsAsDamage(t *testing.T) {
	t.Run("lost_put_costs_that_event", func(t *testing.T) {
		l := newLogSet(t, 1)
		l.create(0, 1)
		before := l.putCommitted(1, 1, 1)
		ps := l.putCommitted(1, 2, 3)
		after := l.putCommitted(1, 3, 2)
		l.pad(1, int64(ps[0].Offset()), int64(ps[1].Offset()))

		res, q := l.mustRun(nil, nil)
		wantQueue(t, q, cat(before, ps[1:], after))
		if res.Padding != 1 || res.Corrupt != 0 || res.DamagedTxs != 1 || res.Dropped != 0 || !res.Damaged[0].Cause.Padding {
			t.Errorf("Padding, Corrupt, DamagedTxs, Dropped = %d, %d, %d, %d, %+v; want 1, 0, 1, 0, blaming the padding",
				res.Padding, res.Corrupt, res.DamagedTxs, res.Dropped, res.Damaged)
		}
		if res.Records != 8 {
			t.Errorf("Records %d, want 8 (padding aside)", res.Records)
		}
	})
	t.Run("padding_before_a_transaction_costs_it_nothing", func(t *testing.T) {
		l := newLogSet(t, 1)
		l.create(0, 1)
		lost := l.putCommitted(1, 1, 1)
		start := l.size(1)
		ps := l.putCommitted(1, 2, 3)
		l.pad(1, int64(lost[0].Offset()), start) // tx 1's put and commit
		res, q := l.mustRun(nil, nil)
		wantQueue(t, q, ps)
		if res.Padding != 1 || res.DamagedTxs != 0 {
			t.Errorf("Padding, DamagedTxs = %d, %d, want 1, 0", res.Padding, res.DamagedTxs)
		}
	})
}

// TestVerifyStepsOverPadding: padding is counted apart from the records,
// takes no part in the write-order check, and is no problem.
func TestVerifyStepsOverPadding(t *testing.T) {
	v := newVerifyChannel(t)
	v.writeCheckpoint()
	// The rollback record is exactly the smallest padding's size.
	v.l.pad(2, v.rollback, v.rollback+logfile.MinPaddingSize)
	rep := v.verify(v.opts())
	if !rep.OK() || rep.Queued != 6 {
		t.Fatalf("queued %d, problems:\n%v", rep.Queued, rep)
	}
	if l := rep.Logs[1]; l.Padding != 1 || l.Records != 8 || l.Rollbacks != 0 || l.LastWOID != 18 {
		t.Errorf("log 2: %+v, want 1 padding, 8 records, no rollback, last id 18", l)
	}
}

func TestRunCapacityError(t *testing.T) {
	l := newLogSet(t, 1)
	l.create(0, 1)
	l.putCommitted(1, 1, 5)
	_, _, err := l.run(nil, newQueue(t, 3, 0, nil))
	var ce *CapacityError
	if !errors.As(err, &ce) || ce.Needed != 5 || ce.Capacity != 3 || !errors.Is(err, eventqueue.ErrFull) {
		t.Fatalf("err = %v, want a *CapacityError for 5 events in 3 wrapping eventqueue.ErrFull", err)
	}
}

func TestRunReportsProgress(t *testing.T) {
	l := newLogSet(t, 2)
	l.create(0, 1)
	l.create(1, 2)
	for tx := uint64(1); tx <= 100; tx++ {
		l.putCommitted(uint32(tx%2+1), tx, 99)
	}
	var total int64
	for id := uint32(1); id <= 2; id++ {
		total += l.size(id) - logfile.HeaderSize
	}
	var got []Progress
	q := newQueue(t, 10000, 0, nil)
	res, err := Run(Options{FS: l.fs, DataDirs: l.dirs, Queue: q, ProgressEvery: time.Nanosecond,
		Progress: func(p Progress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	// A look at the clock every 4096 records: twice in 10 000, and the end.
	if len(got) != 3 {
		t.Fatalf("%d calls: %+v", len(got), got)
	}
	for i, p := range got {
		if p.TotalBytes != total || p.Bytes > total || p.Records > res.Records {
			t.Fatalf("call %d: %+v, total %d", i, p, total)
		}
		if i > 0 && (p.Bytes < got[i-1].Bytes || p.Records < got[i-1].Records || p.Elapsed < got[i-1].Elapsed) {
			t.Fatalf("call %d went back: %+v after %+v", i, p, got[i-1])
		}
	}
	if last := got[len(got)-1]; last.Bytes != total || last.Records != res.Records || res.Records != 10000 {
		t.Fatalf("last call %+v, want %d bytes and %d records", last, total, res.Records)
	}
	if got[0].Bytes == 0 || got[0].Bytes == total {
		t.Fatalf("first call %+v: no progress in between", got[0])
	}
}

// eventsOf lists the events ListEvents gives for the unnamed group, as
// "pointer body" or "pointer error".
func eventsOf(t *testing.T, opts VerifyOptions, skip, limit int) ([]string, int) {
	t.Helper()
	var out []string
	l, err := ListEvents(opts, "", skip, limit, func(e Event) error {
		if e.Index != skip+len(out) {
			t.Fatalf("event index %d, want %d", e.Index, skip+len(out))
		}
		if e.Err != nil {
			out = append(out, e.Pointer.String()+" error")
			return nil
		}
		out = append(out, e.Pointer.String()+" "+string(e.Body))
		return nil
	})
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	return out, l.Queued
}

func describe(v *verifyChannel, ps []ptr) []string {
	var out []string
	for _, p := range ps {
		rec, err := logfile.OpenReader(v.fault, filepath.Join(v.l.dirs[p.FileID()-1], logfile.LogName(p.FileID())))
		if err != nil {
			v.t.Fatal(err)
		}
		r, err := rec.ReadRecord(int64(p.Offset()))
		rec.Close()
		if err != nil {
			v.t.Fatal(err)
		}
		out = append(out, p.String()+" "+string(r.Body))
	}
	return out
}

func TestEventsListsTheRecoveredQueue(t *testing.T) {
	for _, tc := range []struct {
		name       string
		checkpoint bool
	}{
		{"from_the_checkpoint", true},
		{"full_replay", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifyChannel(t)
			if tc.checkpoint {
				v.writeCheckpoint()
			}
			all := describe(v, cat(v.a[2:], v.b, v.c, v.d))
			before, ops := hashTree(t, v.mem), v.fault.Ops()
			for _, w := range []struct{ skip, limit, from, to int }{
				{0, -1, 0, 6},
				{0, 100, 0, 6},
				{2, 3, 2, 5},
				{5, -1, 5, 6},
				{6, -1, 6, 6},
				{9, 2, 6, 6},
				{1, 0, 1, 1},
			} {
				got, n := eventsOf(t, v.opts(), w.skip, w.limit)
				if n != 6 || !slices.Equal(got, all[w.from:w.to]) {
					t.Fatalf("skip %d limit %d: %d queued, %v; want 6, %v", w.skip, w.limit, n, got, all[w.from:w.to])
				}
			}
			if v.fault.Ops() != ops || !maps.Equal(before, hashTree(t, v.mem)) {
				t.Fatal("ListEvents changed the files")
			}
		})
	}
}

func TestEventsDamagedEventGivesAnError(t *testing.T) {
	v := newVerifyChannel(t)
	v.writeCheckpoint()
	// a2 is in the checkpoint's ring, before W: the recovery does not read
	// it, a take would find it damaged.
	v.l.flip(1, int64(v.a[2].Offset())+logfile.FrameHeaderSize+3)
	var errs []error
	l, err := ListEvents(v.opts(), "", 0, -1, func(e Event) error {
		errs = append(errs, e.Err)
		if e.Err != nil && (e.Headers != nil || e.Body != nil) {
			t.Errorf("event %d: an error with headers %v body %q", e.Index, e.Headers, e.Body)
		}
		return nil
	})
	if err != nil || l.Queued != 6 || len(errs) != 6 {
		t.Fatalf("ListEvents: %d queued, %d calls, %v", l.Queued, len(errs), err)
	}
	var ce *corrupt.Error
	if !errors.As(errs[0], &ce) || ce.Offset != int64(v.a[2].Offset()) {
		t.Fatalf("event 0: err %v, want a corruption error at offset %d", errs[0], v.a[2].Offset())
	}
	for i, e := range errs[1:] {
		if e != nil {
			t.Fatalf("event %d: %v", i+1, e)
		}
	}

	// A pointer to a record that is not a put, and into a missing file.
	v.setRing(v.commit1, eventqueue.NewPointer(9, logfile.HeaderSize))
	v.st.InflightTakes = nil
	v.writeCheckpoint()
	errs = nil
	if _, err := ListEvents(v.opts(), "", 0, 2, func(e Event) error {
		errs = append(errs, e.Err)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if !errors.Is(e, corrupt.ErrCorrupt) {
			t.Fatalf("event %d: err %v, want a corruption error", i, e)
		}
	}
}

func TestEventsStopsAtTheCallbacksError(t *testing.T) {
	v := newVerifyChannel(t)
	v.writeCheckpoint()
	stop := errors.New("stop")
	calls := 0
	l, err := ListEvents(v.opts(), "", 0, -1, func(Event) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || l.Queued != 6 || calls != 2 {
		t.Fatalf("ListEvents: %d queued, %d calls, %v; want 6, 2, stop", l.Queued, calls, err)
	}
}

// TestEventsFullReplayBeyondTheFirstGuess: a full replay recovering more
// events than the first queue holds runs again with a queue that fits.
func TestEventsFullReplayBeyondTheFirstGuess(t *testing.T) {
	l := newLogSet(t, 1)
	l.create(0, 1)
	n := firstGuess + 10
	batch := make([]byte, 0, n*30)
	for i := range n {
		var err error
		batch, err = l.w[1].Framing().AppendRecord(batch, &logfile.Record{Type: logfile.RecordPut, TxID: 1, WriteOrderID: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
	}
	batch, _ = l.w[1].Framing().AppendRecord(batch, &logfile.Record{Type: logfile.RecordCommit, TxID: 1, WriteOrderID: uint64(n + 1), CommitType: logfile.RecordPut, Count: uint64(n)})
	if _, err := l.w[1].Write(batch); err != nil {
		t.Fatal(err)
	}
	if err := l.fs.MkdirAll(vCkptDir, 0o755); err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := ListEvents(VerifyOptions{FS: l.fs, CheckpointDir: vCkptDir, DataDirs: l.dirs}, "", n-1, -1,
		func(e Event) error {
			calls++
			if e.Index != n-1 || e.Err != nil {
				return fmt.Errorf("event %d: %v", e.Index, e.Err)
			}
			return nil
		})
	if err != nil || got.Queued != n || calls != 1 {
		t.Fatalf("ListEvents: %d queued, %d calls, %v; want %d, 1", got.Queued, calls, err, n)
	}
}

func TestEventsErrors(t *testing.T) {
	v := newVerifyChannel(t)
	v.writeCheckpoint()
	noop := func(Event) error { return nil }
	bad := v.opts()
	bad.DataDirs = nil
	if _, err := ListEvents(bad, "", 0, -1, noop); err == nil {
		t.Error("ListEvents without data dirs succeeded")
	}
	// A recovery the channel could not do either: the checkpoint's queue
	// has no room for the events after it.
	v.st.Capacity, v.st.Head = 3, 0
	v.writeCheckpoint()
	if _, err := ListEvents(v.opts(), "", 0, -1, noop); !errors.Is(err, eventqueue.ErrFull) {
		t.Errorf("ListEvents over a full checkpoint: %v, want eventqueue.ErrFull", err)
	}
}
