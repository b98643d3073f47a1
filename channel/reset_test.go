package channel

import (
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// resetConfig is a channel with groups a and b; no checkpoint runs but the
// tests' own, so the logs keep every event taken since the last one.
func resetConfig(t *testing.T, dirs int) Config {
	cfg := testConfig(t, dirs)
	cfg.Groups = []GroupConfig{{Name: "a"}, {Name: "b"}}
	return cfg
}

func groupOf(t *testing.T, c *FileChannel, name string) *Group {
	t.Helper()
	g, err := c.Group(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestResetGroupEarliestQueuesTakenEventsAgainInCommitOrder(t *testing.T) {
	for _, dirs := range []int{1, 3} {
		cfg := resetConfig(t, dirs)
		c := mustOpen(t, cfg)
		putN(t, c, 0, 40, 7)
		a, b := groupOf(t, c, "a"), groupOf(t, c, "b")
		wantEvents(t, takeWith(t, a.Begin, 25, 4), bodies(0, 25))
		wantEvents(t, takeWith(t, b.Begin, 10, 4), bodies(0, 10))
		n, err := c.ResetGroup("a", Earliest())
		if err != nil || n != 40 {
			t.Fatalf("ResetGroup = %d, %v; want 40", n, err)
		}
		if a.Len() != 40 || b.Len() != 30 {
			t.Fatalf("after the reset a holds %d, b %d; want 40 and 30", a.Len(), b.Len())
		}
		putN(t, c, 40, 5, 5)
		// Durable: the reset survives a crash (no checkpoint since), then
		// a full replay.
		crash(t, c)
		c = mustOpen(t, cfg)
		if a, b := groupOf(t, c, "a"), groupOf(t, c, "b"); a.Len() != 45 || b.Len() != 35 {
			t.Fatalf("after a crash a holds %d, b %d; want 45 and 35", a.Len(), b.Len())
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(cfg.CheckpointDir); err != nil {
			t.Fatal(err)
		}
		c = mustOpen(t, cfg)
		wantEvents(t, takeWith(t, groupOf(t, c, "a").Begin, 100, 9), bodies(0, 45))
		wantEvents(t, takeWith(t, groupOf(t, c, "b").Begin, 100, 9), bodies(10, 35))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestResetGroupLatestEmptiesOnlyThatGroup(t *testing.T) {
	cfg := resetConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 12, 5)
	n, err := c.ResetGroup("a", Latest())
	if err != nil || n != 0 {
		t.Fatalf("ResetGroup = %d, %v; want 0", n, err)
	}
	putN(t, c, 12, 3, 3)
	wantEvents(t, takeWith(t, groupOf(t, c, "a").Begin, 100, 5), bodies(12, 3))
	wantEvents(t, takeWith(t, groupOf(t, c, "b").Begin, 100, 5), bodies(0, 15))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestResetGroupFencesOpenTakeTransactions(t *testing.T) {
	cfg := resetConfig(t, 2)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 10)
	a := groupOf(t, c, "a")
	tx, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := tx.Take(); err != nil {
			t.Fatal(err)
		}
	}
	other, err := a.Begin() // open, took nothing: not fenced
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.ResetGroup("a", Earliest()); err != nil || n != 10 {
		t.Fatalf("ResetGroup = %d, %v; want 10", n, err)
	}
	if _, _, err := tx.Take(); !errors.Is(err, ErrGroupReset) {
		t.Fatalf("Take after the reset: %v, want ErrGroupReset", err)
	}
	if err := tx.Commit(); !errors.Is(err, ErrGroupReset) {
		t.Fatalf("Commit after the reset: %v, want ErrGroupReset", err)
	}
	if a.Len() != 10 {
		t.Fatalf("a holds %d events after the fenced commit; want 10", a.Len())
	}
	wantEvents(t, takeWith(t, func() (*Transaction, error) { return other, nil }, 4, 4), bodies(0, 4))
	tx2, _ := a.Begin()
	tx2.Take()
	if _, err := c.ResetGroup("a", Earliest()); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Rollback(); err != nil {
		t.Fatalf("Rollback of a fenced transaction: %v", err)
	}
	// 10 events from the reset; none came back from the rollback.
	wantEvents(t, takeWith(t, a.Begin, 100, 7), bodies(0, 10))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestResetGroupOverCapacityFollowsThePolicy(t *testing.T) {
	for _, tc := range []struct {
		policy FullPolicy
		want   []string
		err    error
	}{
		{Block, nil, ErrChannelFull},
		{DropOldest, bodies(14, 6), nil},
		{DropNewest, bodies(0, 6), nil},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			cfg := testConfig(t, 1)
			cfg.TransactionCapacity = 4
			cfg.Groups = []GroupConfig{{Name: "a", Capacity: 6, WhenFull: tc.policy}, {Name: "b"}}
			c := mustOpen(t, cfg)
			a := groupOf(t, c, "a")
			for i := 0; i < 20; i += 4 {
				putN(t, c, i, 4, 4)
				takeWith(t, a.Begin, 4, 4)
			}
			n, err := c.ResetGroup("a", Earliest())
			if tc.err != nil {
				if !errors.Is(err, tc.err) || a.Len() != 0 {
					t.Fatalf("ResetGroup = %d, %v with a holding %d; want %v and nothing changed", n, err, a.Len(), tc.err)
				}
				return
			}
			if err != nil || n != 6 {
				t.Fatalf("ResetGroup = %d, %v; want 6", n, err)
			}
			wantEvents(t, takeWith(t, a.Begin, 100, 4), tc.want)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestResetGroupRefusesDeadLetterGroupsAndUnknownNames(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 2, DeadLetter: "dlq"}}
	c := mustOpen(t, cfg)
	if _, err := c.ResetGroup("dlq", Earliest()); err == nil {
		t.Fatal("reset of a dead-letter group succeeded")
	}
	if _, err := c.ResetGroup("nope", Earliest()); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("reset of an unknown group: %v, want ErrNoGroup", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResetGroup("a", Earliest()); !errors.Is(err, ErrClosed) {
		t.Fatalf("reset after Close: %v, want ErrClosed", err)
	}
}

func TestStartAtEarliestForAddGroupAndOpen(t *testing.T) {
	cfg := resetConfig(t, 2)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 3)
	takeWith(t, groupOf(t, c, "a").Begin, 10, 5)
	takeWith(t, groupOf(t, c, "b").Begin, 10, 5)
	g, err := c.AddGroup(GroupConfig{Name: "audit", StartAt: Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	late, err := c.AddGroup(GroupConfig{Name: "late"}) // zero StartAt: Latest
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 10 || late.Len() != 0 {
		t.Fatalf("new groups hold %d (Earliest) and %d (Latest); want 10 and 0", g.Len(), late.Len())
	}
	crash(t, c)
	cfg.Groups = append(cfg.Groups, GroupConfig{Name: "audit"}, GroupConfig{Name: "late"},
		GroupConfig{Name: "new", StartAt: Earliest()})
	c = mustOpen(t, cfg)
	wantEvents(t, takeWith(t, groupOf(t, c, "audit").Begin, 100, 4), bodies(0, 10))
	wantEvents(t, takeWith(t, groupOf(t, c, "new").Begin, 100, 4), bodies(0, 10))
	if n := groupOf(t, c, "late").Len(); n != 0 {
		t.Fatalf("late holds %d", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// StartAt does nothing to a group that exists.
	c = mustOpen(t, cfg)
	if n := groupOf(t, c, "new").Len(); n != 0 {
		t.Fatalf("an existing group with StartAt holds %d after Open; want 0", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestResetGroupOnAClosedChannel(t *testing.T) {
	cfg := resetConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 4)
	takeWith(t, groupOf(t, c, "b").Begin, 10, 4) // a holds them: the files stay
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := ResetGroup(cfg, "b", Earliest())
	if err != nil || n != 10 {
		t.Fatalf("ResetGroup on a closed channel = %d, %v; want 10", n, err)
	}
	c = mustOpen(t, cfg)
	if _, err := ResetGroup(cfg, "b", Earliest()); !errors.Is(err, ErrLocked) {
		t.Fatalf("ResetGroup of an open channel: %v, want ErrLocked", err)
	}
	wantEvents(t, takeWith(t, groupOf(t, c, "b").Begin, 100, 4), bodies(0, 10))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAddGroupWhoseStartAtFailsIsNotCreated(t *testing.T) {
	cfg := resetConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 10)
	_, err := c.AddGroup(GroupConfig{Name: "small", Capacity: 4, StartAt: Earliest()})
	if !errors.Is(err, ErrChannelFull) {
		t.Fatalf("AddGroup of a Block group too small for its StartAt: %v, want ErrChannelFull", err)
	}
	if _, err := c.Group("small"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("the group exists after its AddGroup failed: %v", err)
	}
	if _, err := c.Group("small.dlq"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("a dead-letter group exists: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPreviewResetChangesNothing(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.TransactionCapacity = 4
	cfg.Groups = []GroupConfig{{Name: "a"}, {Name: "small", Capacity: 6}, {Name: "old", Capacity: 6, WhenFull: DropOldest}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 6, 3)
	takeWith(t, groupOf(t, c, "small").Begin, 6, 3)
	takeWith(t, groupOf(t, c, "old").Begin, 6, 3)
	putN(t, c, 6, 4, 4)
	takeWith(t, groupOf(t, c, "a").Begin, 7, 4)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		group string
		p     Position
		want  ResetPreview
	}{
		{"a", Earliest(), ResetPreview{Held: 3, Found: 10, Queued: 10, Capacity: 1000}},
		{"a", Latest(), ResetPreview{Held: 3, Capacity: 1000}},
		{"small", Earliest(), ResetPreview{Held: 4, Found: 7, Capacity: 6, Refused: true}},
		{"old", Earliest(), ResetPreview{Held: 4, Found: 10, Queued: 6, Capacity: 6, Policy: DropOldest}},
	} {
		got, err := PreviewReset(cfg, tc.group, tc.p)
		if err != nil || got != tc.want {
			t.Errorf("PreviewReset(%s, %s) = %+v, %v; want %+v", tc.group, tc.p, got, err, tc.want)
		}
	}
	c = mustOpen(t, cfg)
	if n := groupOf(t, c, "a").Len(); n != 3 {
		t.Fatalf("a holds %d after the previews; want 3", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A reset brings back what the group dead-lettered, unless its dead-letter
// group still holds it; delivery counts start at zero.
func TestResetGroupDeadLettersAndDeliveryCounts(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 3}, {Name: "keep"}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 6, 6)
	a := groupOf(t, c, "a")
	tx, _ := a.Begin()
	for i := range 6 {
		ev, _, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 || i == 4 {
			if err := tx.Reject(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	dlq := groupOf(t, c, "a.dlq")
	if dlq.Len() != 2 {
		t.Fatalf("a.dlq holds %d, want 2", dlq.Len())
	}
	// Event 1 leaves the dead-letter group (taken for good): it is the
	// group's history again; event 4 is still there.
	wantEvents(t, takeWith(t, dlq.Begin, 1, 1), bodies(1, 1))
	// Deliveries: two rolled-back takes of event 6 count 2 so far.
	putN(t, c, 6, 1, 1)
	for range 2 {
		tx, _ := a.Begin()
		if ev, ok, err := tx.Take(); !ok || err != nil || string(ev.Body) != string(body(6)) {
			t.Fatalf("take: %q %v %v, want event 6", ev.Body, ok, err)
		}
		tx.Rollback()
	}
	n, err := c.ResetGroup("a", Earliest())
	if err != nil || n != 6 {
		t.Fatalf("ResetGroup = %d, %v; want 6 (7 events, event 4 still a dead letter)", n, err)
	}
	tx, _ = a.Begin()
	var got []string
	for {
		ev, ok, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if ev.Deliveries != 1 {
			t.Fatalf("event %q: %d deliveries after the reset, want 1", ev.Body, ev.Deliveries)
		}
		got = append(got, string(ev.Body))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, got, []string{string(body(0)), string(body(1)), string(body(2)), string(body(3)), string(body(5)), string(body(6))})
	if dlq.Len() != 1 {
		t.Fatalf("a.dlq holds %d after the reset, want 1 (it is untouched)", dlq.Len())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// The history keeps a spilled transaction's events for its commit (in
// commit order, after what committed meanwhile) and drops a rolled-back
// one's.
func TestResetGroupHistoryOfSpilledTransactions(t *testing.T) {
	cfg := resetConfig(t, 2)
	cfg.MaxFileSize = 64 << 10 // spills from 16 KiB
	c := mustOpen(t, cfg)
	big := func(from int) *Transaction {
		tx, _ := c.Begin()
		for i := from; i < from+40; i++ {
			if err := tx.Put(Event{Body: append(body(i), make([]byte, 1000)...)}); err != nil {
				t.Fatal(err)
			}
		}
		return tx
	}
	rolled := big(1000)
	spilled := big(2000)
	putN(t, c, 0, 5, 5)
	if err := rolled.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := spilled.Commit(); err != nil {
		t.Fatal(err)
	}
	putN(t, c, 5, 5, 5)
	takeWith(t, groupOf(t, c, "a").Begin, 100, 50)
	if n, err := c.ResetGroup("a", Earliest()); err != nil || n != 50 {
		t.Fatalf("ResetGroup = %d, %v; want 50", n, err)
	}
	got := takeWith(t, groupOf(t, c, "a").Begin, 100, 50)
	for i := range got {
		got[i] = strings.TrimRight(got[i], "\x00")
	}
	want := append(bodies(0, 5), bodies(2000, 40)...)
	wantEvents(t, got, append(want, bodies(5, 5)...))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// AtTime and AfterEvent start the queue at the event they name, in commit
// order, with many log files (most of them skipped by their index).
func TestResetGroupAtTimeAndAfterEvent(t *testing.T) {
	cfg := resetConfig(t, 2)
	cfg.MaxFileSize = 4096
	c := mustOpen(t, cfg)
	pad := strings.Repeat("x", 900)
	for i := range 60 {
		tx, _ := c.Begin()
		if err := tx.Put(Event{Body: append(body(i), pad...)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	b := groupOf(t, c, "b")
	tx, _ := b.Begin()
	var evs []Event
	for range 60 {
		ev, ok, err := tx.Take()
		if err != nil || !ok {
			t.Fatalf("take: %v %v", ok, err)
		}
		evs = append(evs, ev)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].ID.Compare(evs[i-1].ID) <= 0 || evs[i].Time.Before(evs[i-1].Time) {
			t.Fatalf("event %d: id %s time %v after id %s time %v", i, evs[i].ID, evs[i].Time, evs[i-1].ID, evs[i-1].Time)
		}
	}
	takeWith(t, groupOf(t, c, "a").Begin, 60, 30)
	// A reset near the end reads a file or two of each dir, not all.
	files := c.logs.LiveFiles()
	near := AtTime(evs[57].Time)
	if kept := skipTo(files, near.from(files, c.logs.FileIndex), c.logs.FileIndex); len(kept) > 4 || len(files) < 10 {
		t.Errorf("a reset to %s reads %d of the %d log files", near, len(kept), len(files))
	}
	for _, tc := range []struct {
		p    Position
		want []string
	}{
		{AfterEvent(evs[44].ID), bodies(45, 15)},
		{AfterEvent(evs[59].ID), nil},
		{AfterEvent(EventID{}), bodies(0, 60)},
		{AtTime(evs[52].Time), bodies(52, 8)},
		{AtTime(evs[59].Time.Add(time.Hour)), nil},
		{AtTime(time.Time{}), bodies(0, 60)},
	} {
		p, err := ParsePosition(tc.p.String())
		if err != nil || p.String() != tc.p.String() {
			t.Fatalf("ParsePosition(%q) = %v, %v", tc.p, p, err)
		}
		n, err := c.ResetGroup("a", p)
		if err != nil || n != len(tc.want) {
			t.Fatalf("ResetGroup(%s) = %d, %v; want %d", tc.p, n, err, len(tc.want))
		}
		tx, _ := groupOf(t, c, "a").Begin()
		var got []string
		for {
			ev, ok, err := tx.Take()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, strings.TrimRight(string(ev.Body), "x"))
		}
		tx.Rollback()
		wantEvents(t, got, tc.want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// skipTo keeps each dir's files from the first one that may hold an
// event at or after from; from follows the indexes.
func TestResetSkipsFilesByTheirIndex(t *testing.T) {
	files := []logfile.File{{ID: 1, Dir: "a"}, {ID: 2, Dir: "b"}, {ID: 3, Dir: "a"}, {ID: 4, Dir: "b"}, {ID: 5, Dir: "a"}, {ID: 6, Dir: "b"}}
	idx := map[uint32]logfile.FileIndex{
		1: {Known: true, FirstCommit: 10, LastCommit: 20, MinTime: 100, MaxTime: 200},
		2: {Known: true, FirstCommit: 15, LastCommit: 40, MinTime: 150, MaxTime: 400},
		3: {Known: true, FirstCommit: 30, LastCommit: 50, MinTime: 300, MaxTime: 500},
		4: {Known: true},                                                              // no event
		5: {Known: true, FirstCommit: 60, LastCommit: 70, MinTime: 250, MaxTime: 700}, // a clock set back
		6: {Known: true, FirstCommit: 65, LastCommit: 80, MinTime: 650, MaxTime: 800},
	}
	index := func(id uint32) (logfile.FileIndex, bool) { x, ok := idx[id]; return x, ok }
	ids := func(fs []logfile.File) []uint32 {
		var out []uint32
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return out
	}
	for _, tc := range []struct {
		p    Position
		from uint64
		want []uint32
	}{
		{Earliest(), 0, []uint32{1, 2, 3, 4, 5, 6}},
		{AtTime(time.Unix(0, 450)), 30, []uint32{3, 2, 4, 5, 6}},
		{AtTime(time.Unix(0, 750)), 65, []uint32{5, 6}},
		{AtTime(time.Unix(0, 900)), math.MaxUint64, nil},
		{AfterEvent(EventID{order: 45, seq: 45}), 45, []uint32{3, 5, 6}},
	} {
		from := tc.p.from(files, index)
		got := ids(skipTo(files, from, index))
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if from != tc.from || !slices.Equal(got, want) {
			t.Errorf("%s: from %d, files %v; want %d, %v", tc.p, from, got, tc.from, want)
		}
	}
	if got := ids(skipTo(files, 5, index)); !slices.Contains(got, 1) {
		t.Errorf("file 1 (commits 10 to 20) is skipped for a start at 5: kept %v", got)
	}
	delete(idx, 1) // no index: a file that stores no event
	if got := ids(skipTo(files, 5, index)); slices.Contains(got, 1) {
		t.Errorf("a file without an index is not skipped like an empty one: kept %v", got)
	}
	idx[3] = logfile.FileIndex{} // not known: everything is scanned
	if from := AtTime(time.Unix(0, 450)).from(files, index); from != 0 {
		t.Errorf("from with an unknown index = %d, want 0", from)
	}
	if got := ids(skipTo(files, 30, index)); !slices.Contains(got, 3) {
		t.Errorf("a file whose index is not known is skipped: kept %v", got)
	}
}

func TestPositionAccessors(t *testing.T) {
	at := time.Unix(100, 5)
	id := EventID{order: 7, seq: 7}
	for _, tc := range []struct {
		p                      Position
		earliest, latest, t, e bool
	}{
		{Earliest(), true, false, false, false},
		{Latest(), false, true, false, false},
		{Position{}, false, true, false, false},
		{AtTime(at), false, false, true, false},
		{AfterEvent(id), false, false, false, true},
		{AfterEvent(EventID{}), true, false, false, false},
	} {
		gt, tok := tc.p.Time()
		ge, eok := tc.p.Event()
		if tc.p.IsEarliest() != tc.earliest || tc.p.IsLatest() != tc.latest || tok != tc.t || eok != tc.e ||
			(tok && !gt.Equal(at)) || (eok && ge != id) {
			t.Errorf("%s: earliest %v latest %v time %v,%v event %v,%v", tc.p, tc.p.IsEarliest(), tc.p.IsLatest(), gt, tok, ge, eok)
		}
	}
}

// A group's lag: Stats' Oldest is its head event's commit time, and the
// metric its age.
func TestGroupLag(t *testing.T) {
	cfg := resetConfig(t, 1)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	c := mustOpen(t, cfg)
	if gs := groupOf(t, c, "a").Stats(); !gs.Oldest.IsZero() {
		t.Fatalf("empty group: Oldest %v", gs.Oldest)
	}
	before := time.Now()
	putN(t, c, 0, 3, 1)
	time.Sleep(20 * time.Millisecond)
	putN(t, c, 3, 1, 1)
	a := groupOf(t, c, "a")
	oldest := a.Stats().Oldest
	if oldest.Before(before) || time.Since(oldest) < 20*time.Millisecond {
		t.Fatalf("Oldest %v: not the first put's commit (after %v, 20ms ago at least)", oldest, before)
	}
	takeWith(t, a.Begin, 3, 3)
	if o := a.Stats().Oldest; !o.After(oldest) {
		t.Fatalf("after taking 3, Oldest %v; want later than %v", o, oldest)
	}
	var s Stats = c.Stats()
	for _, g := range s.Groups {
		if g.Name == "b" && !g.Oldest.Equal(oldest) {
			t.Fatalf("Stats: b's Oldest %v, want %v", g.Oldest, oldest)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ages := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "filechannel_group_oldest_event_age_seconds" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "group" {
						ages[l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	if ages["b"] < 0.02 || ages["a"] > ages["b"] {
		t.Fatalf("group_oldest_event_age_seconds: %v; want b at least 0.02 and a below it", ages)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// pointerBlocks across blocks, used as a ring the way a DropOldest reset
// uses it: the newest room events, oldest first.
func TestPointerBlocksRing(t *testing.T) {
	const room, total = pointerBlock*2 + 7, pointerBlock*5 + 3
	var l pointerBlocks
	head := 0
	for i := range total {
		p := eventqueue.Pointer(i)
		if l.len() < room {
			l.add(p)
			continue
		}
		l.set(head, p)
		head = (head + 1) % room
	}
	l.rotate(head)
	want := total - room
	n := 0
	for p := range l.all() {
		if int(p) != want {
			t.Fatalf("pointer %d is %d, want %d", n, p, want)
		}
		want++
		n++
	}
	if n != room || l.len() != room {
		t.Fatalf("%d pointers (len %d), want %d", n, l.len(), room)
	}
}
