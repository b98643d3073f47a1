package replay

import (
	"errors"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/logfile"
)

// flip damages one byte of log file id at off.
func (l *logSet) flip(id uint32, off int64) {
	l.tb.Helper()
	b := l.bytes(id)
	b[off] ^= 0x55
	l.setBytes(id, b)
}

// TestDamagedRecordIsSkippedAndTheRestRecovered: a record failing its
// checksum in the middle of a file costs only what it held; every later
// transaction of that file (and of the other files) is recovered, and the
// damage is reported with its file and offset.
func TestDamagedRecordIsSkippedAndTheRestRecovered(t *testing.T) {
	l := newLogSet(t, 2)
	l.create(0, 1)
	l.create(1, 2)
	a := l.putCommitted(1, 1, 3)
	b := l.putCommitted(2, 2, 2)
	lost := l.putCommitted(1, 3, 1)
	c := l.putCommitted(1, 4, 2)
	d := l.putCommitted(2, 5, 1)
	l.takeCommitted(1, 6, a[0])
	l.flip(1, int64(lost[0].Offset())+logfile.FrameHeaderSize+4)

	res, q := l.mustRun(nil, nil)
	wantQueue(t, q, cat(a[1:], b, c, d))
	// Transaction 3 lost its only put: its commit finds none of them.
	if res.Corrupt != 1 || res.DamagedTxs != 1 {
		t.Errorf("Corrupt, DamagedTxs = %d, %d, want 1, 1", res.Corrupt, res.DamagedTxs)
	}
	lf := res.Logs[0]
	if len(lf.Skipped) != 1 || lf.Skipped[0].Offset != int64(lost[0].Offset()) {
		t.Fatalf("file 1 skipped %+v, want the put at %d", lf.Skipped, lost[0].Offset())
	}
	var ce *corrupt.Error
	if !errors.As(lf.Skipped[0].Err, &ce) || ce.File != l.path(1) || ce.Offset != int64(lost[0].Offset()) {
		t.Errorf("skip error %v does not name the file and offset", lf.Skipped[0].Err)
	}
	if lf.Tail != logfile.TailClean {
		t.Errorf("tail %v", lf.Tail)
	}
}

// TestDamageInsideATransactionCostsOnlyTheDamagedPut: a put transaction
// whose commit record is intact is committed: when damage took one of its
// puts, that event is lost (the transaction is counted and listed with the
// damage) and every intact put of it is delivered. Damage to a neighbour's
// record costs the neighbour only.
func TestDamageInsideATransactionCostsOnlyTheDamagedPut(t *testing.T) {
	l := newLogSet(t, 1)
	l.create(0, 1)
	before := l.putCommitted(1, 1, 1)
	ps := l.putCommitted(1, 2, 3)
	after := l.putCommitted(1, 3, 2)
	l.flip(1, int64(ps[0].Offset())+logfile.FrameHeaderSize+2) // its first put

	res, q := l.mustRun(nil, nil)
	wantQueue(t, q, cat(before, ps[1:], after))
	if res.Corrupt != 1 || res.DamagedTxs != 1 || res.Dropped != 0 {
		t.Errorf("Corrupt, DamagedTxs, Dropped = %d, %d, %d, want 1, 1, 0", res.Corrupt, res.DamagedTxs, res.Dropped)
	}
	if len(res.Damaged) != 1 || res.Damaged[0].Lost() != 1 || res.Damaged[0].Found != 2 ||
		res.Damaged[0].Cause.Offset != int64(ps[0].Offset()) {
		t.Errorf("Damaged = %+v, want one transaction losing 1 event, 2 found, blaming offset %d", res.Damaged, ps[0].Offset())
	}

	// A damaged take record: the events it took stay queued (delivered
	// again rather than lost); the rest of the take applies.
	l3 := newLogSet(t, 1)
	l3.create(0, 1)
	ev := l3.putCommitted(1, 1, 3)
	takeOff := l3.size(1)
	l3.take(1, 2, ev[0])
	l3.take(1, 2, ev[1])
	l3.commitTake(1, 2)
	l3.flip(1, takeOff+logfile.FrameHeaderSize+3)
	res, q = l3.mustRun(nil, nil)
	wantQueue(t, q, cat(ev[:1], ev[2:]))
	if res.Corrupt != 1 || res.DamagedTxs != 1 {
		t.Errorf("Corrupt, DamagedTxs = %d, %d, want 1, 1", res.Corrupt, res.DamagedTxs)
	}

	// The same damage on the transaction's commit record instead: the
	// transaction never committed as far as the log can tell.
	l2 := newLogSet(t, 1)
	l2.create(0, 1)
	before = l2.putCommitted(1, 1, 1)
	ps = l2.puts(1, 2, 2)
	commitOff := l2.size(1)
	l2.commitPut(1, 2)
	after = l2.putCommitted(1, 3, 1)
	l2.flip(1, commitOff+logfile.FrameHeaderSize+1)
	res, q = l2.mustRun(nil, nil)
	wantQueue(t, q, cat(before, after))
	if res.Corrupt != 1 || res.DamagedTxs != 0 || res.Dropped != len(ps) {
		t.Errorf("Corrupt, DamagedTxs, Dropped = %d, %d, %d, want 1, 0, %d", res.Corrupt, res.DamagedTxs, res.Dropped, len(ps))
	}
}

// TestDamagedHeaderIsSalvaged: a log file whose header is damaged is read by
// its name; the damage is counted.
func TestDamagedHeaderIsSalvaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte)
	}{
		{"bad_magic", func(b []byte) { b[0] = 'X' }},
		{"zeroed", func(b []byte) { clear(b[:logfile.HeaderSize]) }},
		{"bad_checksum", func(b []byte) { b[13] ^= 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogSet(t, 1)
			l.create(0, 1)
			ps := l.putCommitted(1, 1, 2)
			b := l.bytes(1)
			tc.damage(b)
			l.setBytes(1, b)
			res, q := l.mustRun(nil, nil)
			wantQueue(t, q, ps)
			if res.Corrupt != 1 || len(res.Logs) != 1 || res.Logs[0].Skipped[0].Offset != 0 {
				t.Errorf("Corrupt = %d, logs %+v", res.Corrupt, res.Logs)
			}
		})
	}
}

// TestTornTailIsReported: garbage after the last record is a torn tail, with
// the file's size and the reason, and costs nothing that was whole.
func TestTornTailIsReported(t *testing.T) {
	l := newLogSet(t, 1)
	l.create(0, 1)
	ps := l.putCommitted(1, 1, 2)
	end := l.size(1)
	half := l.puts(1, 2, 1)
	l.commitPut(1, 2)
	b := l.bytes(1)
	l.setBytes(1, b[:int64(half[0].Offset())+5])
	b = append(l.bytes(1), []byte("junk")...)
	l.setBytes(1, b)

	res, q := l.mustRun(nil, nil)
	wantQueue(t, q, ps)
	lf := res.Logs[0]
	if lf.Tail != logfile.TailTorn || lf.End != end || lf.Size != int64(len(b)) || lf.TailErr == nil || res.Corrupt != 0 {
		t.Errorf("log %+v, Corrupt %d", lf, res.Corrupt)
	}
}

// TestCommitCountWithSpillFileDeleted: a put transaction spilled puts into
// log file 1 and committed in file 2; file 1 was deleted because its events
// were all taken. A full replay finds fewer puts than the commit counts, but
// no damage: it applies the puts it found. With damage among the spilled
// puts instead, it applies the intact ones too, and counts the damaged one
// as lost.
func TestCommitCountWithSpillFileDeleted(t *testing.T) {
	for _, damage := range []bool{false, true} {
		l := newLogSet(t, 1)
		l.create(0, 1)
		l.create(0, 2)
		spilled := l.puts(1, 7, 2)
		rest := l.puts(2, 7, 1)
		l.commitPut(2, 7)
		if damage {
			l.flip(1, int64(spilled[1].Offset())+logfile.FrameHeaderSize+2)
		} else if err := l.fs.Remove(l.path(1)); err != nil {
			t.Fatal(err)
		}
		res, q := l.mustRun(nil, nil)
		if damage {
			wantQueue(t, q, cat(spilled[:1], rest))
			// The damaged put ends file 1: a torn tail, not a skipped region.
			if res.DamagedTxs != 1 || res.Logs[0].Tail != logfile.TailTorn || res.Puts != 2 || res.Damaged[0].Lost() != 1 {
				t.Errorf("damaged spill: DamagedTxs %d, tail %v, Puts %d, %+v; want 1, torn, 2, 1 lost", res.DamagedTxs, res.Logs[0].Tail, res.Puts, res.Damaged)
			}
		} else {
			wantQueue(t, q, rest)
			if res.DamagedTxs != 0 || res.Puts != 1 {
				t.Errorf("deleted spill file: DamagedTxs %d, Puts %d; want 0, 1", res.DamagedTxs, res.Puts)
			}
		}
	}
}
