package replay

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// deliveryChannel is a channel with dead letters built from the primitives
// the way the channel leaves its files: no unnamed group, group a (1,
// MaxDeliveries 2, dead letters to a.dlq) and its dead-letter group a.dlq
// (2), one data dir.
//
//	file 1: groups{a, a.dlq} | put e0 e1 e2 e3, commit (a only)
//	        | deliver e0:1 (a), rollback | deliver e0:2 e1:1 (a), rollback
//	W: a holds e0 e1 e2 e3, e0 delivered twice, e1 once; a.dlq is empty
//	after W: take e0 (a) and move it to a.dlq, commit
//	        | deliver e2:1 (a), take e2, commit | deliver e3:1 e1:1 (a), rollback
//
// The channel holds: a e1 (delivered once) e3 (once), a.dlq e0 (its count
// ended with the move).
type deliveryChannel struct {
	*verifyChannel
	e       []ptr
	catalog []logfile.GroupInfo
	states  map[uint32]*checkpoint.State // each group's state at W (0: the top level's)
	w       uint64
}

func newDeliveryChannel(t *testing.T) *deliveryChannel {
	t.Helper()
	mem := vfs.NewMem()
	fault := vfs.NewFaultFS(mem)
	d := &deliveryChannel{verifyChannel: &verifyChannel{t: t, mem: mem, fault: fault, l: newLogSetOn(t, fault, "/data", 1)}}
	l := d.l
	l.create(0, 1)
	d.catalog = []logfile.GroupInfo{
		{ID: 1, Name: "a", Since: 1, Capacity: 8, MaxDeliveries: 2, DeadLetter: "a.dlq"},
		{ID: 2, Name: "a.dlq", Since: 1, Capacity: 8, DeadLetterGroup: true},
	}
	l.write(1, logfile.Record{Type: logfile.RecordGroups, NextGroupID: 3, Catalog: d.catalog})
	d.e = l.putCommitted(1, 1, 4)
	l.deliver(1, 2, 1, []ptr{d.e[0]}, 1)
	l.rollback(1, 2)
	l.deliver(1, 3, 1, []ptr{d.e[0], d.e[1]}, 2, 1)
	l.rollback(1, 3)

	d.w = l.woid
	d.states = map[uint32]*checkpoint.State{0: l.state(d.w, nil), 1: l.state(d.w, d.e), 2: l.state(d.w, nil)}
	d.states[0].Capacity = 1 // no unnamed group: an empty ring of one slot
	for id := uint32(1); id <= 2; id++ {
		d.states[id].Capacity = 8
	}
	for _, st := range d.states {
		st.MaxTxID = 3
	}

	l.writeGroupTake(1, 4, 1, d.e[0])
	l.write(1, logfile.Record{Type: logfile.RecordMove, TxID: 4, Group: 2, Pointers: []uint64{uint64(d.e[0])}})
	l.commitTake(1, 4)
	l.deliver(1, 5, 1, []ptr{d.e[2]}, 1)
	l.writeGroupTake(1, 5, 1, d.e[2])
	l.commitTake(1, 5)
	l.deliver(1, 6, 1, []ptr{d.e[3]}, 1)
	l.deliver(1, 6, 1, []ptr{d.e[1]}, 1) // a smaller count than the one before: the larger stays
	l.rollback(1, 6)
	if err := fault.MkdirAll(vCkptDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// writeCheckpoint writes the checkpoint set at W as the channel does, the
// catalog with a's delivery counts.
func (d *deliveryChannel) writeCheckpoint() {
	t := d.t
	t.Helper()
	cat := &checkpoint.Catalog{WriteOrderID: d.w, NextGroupID: 3}
	rings := map[uint32][]ptr{1: d.e}
	for _, gi := range d.catalog {
		g := checkpoint.Group{ID: gi.ID, Name: gi.Name, Since: gi.Since, Capacity: int(gi.Capacity), Policy: gi.Policy,
			MaxDeliveries: gi.MaxDeliveries, DeadLetter: gi.DeadLetter, DeadLetterGroup: gi.DeadLetterGroup}
		if gi.ID == 1 {
			g.Deliveries = []checkpoint.Delivery{{Pointer: uint64(d.e[0]), Count: 2}, {Pointer: uint64(d.e[1]), Count: 1}}
		}
		cat.Groups = append(cat.Groups, g)
		if err := checkpoint.CreateGroupDir(d.fault, vCkptDir, gi.ID); err != nil {
			t.Fatal(err)
		}
		writeCheckpoint(t, d.fault, checkpoint.GroupDir(vCkptDir, gi.ID), d.states[gi.ID], rings[gi.ID])
	}
	if err := checkpoint.WriteCatalog(d.fault, vCkptDir, cat); err != nil {
		t.Fatal(err)
	}
	writeCheckpoint(t, d.fault, vCkptDir, d.states[0], nil)
}

func (d *deliveryChannel) opts() VerifyOptions {
	return VerifyOptions{FS: d.fault, CheckpointDir: vCkptDir, DataDirs: d.l.dirs}
}

// deliver writes a deliver record: ps had been delivered to group counts
// times.
func (l *logSet) deliver(id uint32, tx uint64, group uint32, ps []ptr, counts ...uint32) {
	raw := make([]uint64, len(ps))
	for i, p := range ps {
		raw[i] = uint64(p)
	}
	l.write(id, logfile.Record{Type: logfile.RecordDeliver, TxID: tx, Group: group, Pointers: raw, Counts: counts})
}

// TestEventDeliveries: ListEvents gives each queued event's delivery
// count, the group it lists and every group (with limit 0, or for a group
// the channel does not have, without listing an event); Verify's
// Report.Groups has the same counts. A deliver record's count replaces a
// smaller one (the catalog's, or an earlier record's) and never a larger
// one, a take or a move ends an event's count, and the
// dead-letter group lists the moved event, with no count. A full replay
// and a recovery from the checkpoint agree.
func TestEventDeliveries(t *testing.T) {
	for _, tcase := range []struct {
		from    string
		journal bool
	}{{FromFullReplay, false}, {FromCheckpoint, false}, {FromCheckpoint, true}} {
		from := tcase.from
		name := from
		if tcase.journal {
			name += "+journal"
		}
		t.Run(name, func(t *testing.T) {
			d := newDeliveryChannel(t)
			if from == FromCheckpoint {
				d.writeCheckpoint()
			}
			e := d.e
			e3 := uint32(1)
			if tcase.journal {
				// The journal's larger count of e3 wins; its count of e0,
				// moved since, and its smaller count of e1 do not.
				j, err := checkpoint.CreateJournal(d.fault, vCkptDir, 16, 42, []checkpoint.JournalEntry{
					{Pointer: uint64(e[3]), Group: 1, Count: 5}, {Pointer: uint64(e[0]), Group: 1, Count: 9},
					{Pointer: uint64(e[1]), Group: 1, Count: 1}, {Pointer: uint64(e[3]), Group: 1, Count: 2},
				})
				if err != nil {
					t.Fatal(err)
				}
				j.Close()
				e3 = 5
			}
			for _, tc := range []struct {
				group string
				info  logfile.GroupInfo
				want  []ptr
				count []uint32
			}{
				{"a", d.catalog[0], []ptr{e[1], e[3]}, []uint32{1, e3}},
				{"a.dlq", d.catalog[1], []ptr{e[0]}, []uint32{0}},
			} {
				var got []ptr
				var counts []uint32
				l, err := ListEvents(d.opts(), tc.group, 0, -1, func(ev Event) error {
					if ev.Err != nil || string(ev.Body) == "" || !reflect.DeepEqual(ev.Group, tc.info) {
						t.Errorf("group %s, event %d: body %q, %v, group %+v", tc.group, ev.Index, ev.Body, ev.Err, ev.Group)
					}
					got, counts = append(got, ev.Pointer), append(counts, ev.Deliveries)
					return nil
				})
				if n := l.Queued; err != nil || n != len(tc.want) || !slices.Equal(got, tc.want) || !slices.Equal(counts, tc.count) {
					t.Errorf("group %s: %d events %v, counts %v, %v; want %v, %v", tc.group, n, got, counts, err, tc.want, tc.count)
				}
				if !reflect.DeepEqual(l.Group, tc.info) || !reflect.DeepEqual(l.Groups, d.catalog) {
					t.Errorf("group %s: group %+v, groups %+v; want %+v, %+v", tc.group, l.Group, l.Groups, tc.info, d.catalog)
				}
			}
			// limit 0: the groups without the events.
			l, err := ListEvents(d.opts(), "a", 0, 0, func(Event) error { return errors.New("listed an event") })
			if err != nil || l.Queued != 2 || !reflect.DeepEqual(l.Group, d.catalog[0]) {
				t.Errorf("limit 0: %+v, %v", l, err)
			}
			l, err = ListEvents(d.opts(), "nope", 0, 0, func(Event) error { return nil })
			if !errors.Is(err, ErrNoGroup) || !reflect.DeepEqual(l.Groups, d.catalog) || l.Queued != 0 {
				t.Errorf("unknown group: %+v, %v", l, err)
			}
			rep := d.verify(d.opts())
			ok := rep.OK()
			if from == FromFullReplay {
				ok = len(rep.Problems) == 1 && rep.Problems[0].Kind == ProblemCheckpointMissing
			}
			if !ok || rep.RecoveredFrom != from {
				t.Fatalf("verify: recovered from %s, %v", rep.RecoveredFrom, rep)
			}
			want := map[string]map[eventqueue.Pointer]uint32{"a": {e[1]: 1, e[3]: e3}, "a.dlq": nil}
			if len(rep.Groups) != 2 {
				t.Fatalf("groups %+v", rep.Groups)
			}
			for _, g := range rep.Groups {
				if w := want[g.Info.Name]; !maps.Equal(g.Deliveries, w) || (w == nil) != (g.Deliveries == nil) {
					t.Errorf("group %s: Report deliveries %v, want %v", g.Info.Name, g.Deliveries, w)
				}
			}
		})
	}
}
