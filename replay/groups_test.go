package replay

import (
	"errors"
	"testing"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// catalogRec is a groups record listing groups (id, capacity, policy).
func catalogRec(next uint32, groups ...logfile.GroupInfo) logfile.Record {
	return logfile.Record{Type: logfile.RecordGroups, NextGroupID: next, Catalog: groups}
}

func resultQueue(t *testing.T, res *Result, id uint32) []ptr {
	t.Helper()
	g := res.Group(id)
	if g == nil {
		t.Fatalf("no group %d in the result (%d groups)", id, len(res.Groups))
	}
	return g.Queue.Pointers()
}

// TestReplayGroups replays, in full, a log with groups records, a group
// added and one removed between transactions, takes of each group, a skip
// and a drop: every group gets exactly its events.
func TestReplayGroups(t *testing.T) {
	l := newLogSet(t, 1)
	l.create(0, 1)
	a := logfile.GroupInfo{ID: 1, Name: "a", Capacity: 100}
	b := logfile.GroupInfo{ID: 2, Name: "b", Capacity: 100, Policy: 1}
	c := logfile.GroupInfo{ID: 3, Name: "c", Capacity: 100}
	l.write(1, catalogRec(3, a, b))
	p1 := l.putCommitted(1, 1, 3)      // a and b
	l.write(1, catalogRec(4, a, b, c)) // c added
	p2 := l.puts(1, 2, 2)              // a, b (drops p1[0]) and c; skips a
	l.writeGroupTake(1, 2, 2, p1[0])   // b's drop, by the put's transaction
	l.write(1, logfile.Record{Type: logfile.RecordSkip, TxID: 2, Skip: []uint32{1}})
	l.write(1, logfile.Record{Type: logfile.RecordCommit, TxID: 2, CommitType: logfile.RecordPut, Count: 2})
	l.writeGroupTake(1, 3, 1, p1[1]) // a takes p1[1]
	l.commitTake(1, 3)
	l.write(1, catalogRec(4, a, c)) // b removed
	p3 := l.putCommitted(1, 4, 1)   // a and c
	res, _ := l.mustRun(nil, nil)
	if res.Group(0) != nil || res.Group(2) != nil {
		t.Fatalf("groups %v: the implicit unnamed group or the removed b survived", res.Groups)
	}
	wantPtrs(t, "a", resultQueue(t, res, 1), cat(p1[:1], p1[2:], p3))
	wantPtrs(t, "c", resultQueue(t, res, 3), cat(p2, p3))
	if res.GroupsCreated != 3 || res.GroupsRemoved != 2 || res.GroupSkips != 2 || res.NextGroupID != 4 {
		t.Fatalf("created %d removed %d skips %d next %d", res.GroupsCreated, res.GroupsRemoved, res.GroupSkips, res.NextGroupID)
	}
}

// TestReplayGroupOverflowFollowsPolicy: a DropOldest group whose events do
// not fit (its drop records were lost) keeps the newest; a Block group is a
// CapacityError as before.
func TestReplayGroupOverflowFollowsPolicy(t *testing.T) {
	for _, policy := range []uint8{0, 1, 2} {
		l := newLogSet(t, 1)
		l.create(0, 1)
		l.write(1, catalogRec(2, logfile.GroupInfo{ID: 1, Name: "g", Capacity: 3, Policy: policy}))
		ps := l.putCommitted(1, 1, 5)
		res, _, err := l.run(nil, nil)
		switch policy {
		case 0:
			var ce *CapacityError
			if !errors.As(err, &ce) || ce.Needed != 5 || ce.Capacity != 3 {
				t.Fatalf("Block group overflow: %v, want a CapacityError", err)
			}
		case 1:
			if err != nil {
				t.Fatal(err)
			}
			wantPtrs(t, "drop-oldest", resultQueue(t, res, 1), ps[2:])
		case 2:
			if err != nil {
				t.Fatal(err)
			}
			wantPtrs(t, "drop-newest", resultQueue(t, res, 1), ps[:3])
		}
	}
}

func (l *logSet) writeGroupTake(id uint32, tx uint64, group uint32, ps ...ptr) {
	raw := make([]uint64, len(ps))
	for i, p := range ps {
		raw[i] = uint64(p)
	}
	l.write(id, logfile.Record{Type: logfile.RecordTake, TxID: tx, Group: group, Pointers: raw})
}

func wantPtrs(t *testing.T, what string, got, want []eventqueue.Pointer) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}
