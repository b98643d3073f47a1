package channel

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
)

func ptrOf(x uint64) eventqueue.Pointer { return eventqueue.Pointer(x) }

// dlqConfig is testConfig with group a (MaxDeliveries max, dead letters in
// a.dlq) and group b, which counts nothing.
func dlqConfig(t testing.TB, max int) Config {
	cfg := testConfig(t, 2)
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: max}, {Name: "b"}}
	return cfg
}

// groupView is what a test compares of a channel across restarts: per
// group, its queued events in order, and the delivery count of each that
// has one (read without taking anything, so without counting).
type groupView struct {
	Queued     []string
	Deliveries map[string]int
}

func viewGroups(t testing.TB, c *FileChannel) map[string]groupView {
	t.Helper()
	c.queueMu.Lock()
	type ptrs struct {
		name string
		q    []uint64
		d    map[uint64]uint32
	}
	var all []ptrs
	for _, g := range c.groups {
		p := ptrs{name: g.cfg.Name, d: map[uint64]uint32{}}
		for _, x := range g.queue.Pointers() {
			p.q = append(p.q, uint64(x))
		}
		for x, n := range g.deliveries {
			p.d[uint64(x)] = n
		}
		all = append(all, p)
	}
	c.queueMu.Unlock()
	out := map[string]groupView{}
	for _, p := range all {
		v := groupView{Deliveries: map[string]int{}}
		byPtr := map[uint64]string{}
		for _, x := range p.q {
			ev, err := c.readEvent(ptrOf(x))
			if err != nil {
				t.Fatalf("read %s's event %#x: %v", p.name, x, err)
			}
			v.Queued = append(v.Queued, string(ev.Body))
			byPtr[x] = string(ev.Body)
		}
		for x, n := range p.d {
			if b, ok := byPtr[x]; ok {
				v.Deliveries[b] = int(n)
			}
		}
		out[p.name] = v
	}
	return out
}

func wantView(t testing.TB, what string, got, want map[string]groupView) {
	t.Helper()
	if !maps.EqualFunc(got, want, func(a, b groupView) bool {
		return slices.Equal(a.Queued, b.Queued) && maps.Equal(a.Deliveries, b.Deliveries)
	}) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// reopenBoth checks that c's groups come back the same after a clean
// restart and after a full replay (no checkpoint), and returns the
// channel reopened the second way.
func reopenBoth(t *testing.T, c *FileChannel, cfg Config) *FileChannel {
	t.Helper()
	want := viewGroups(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	wantView(t, "after a restart", viewGroups(t, c), want)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	removeCheckpoint(t, cfg)
	c = mustOpen(t, cfg)
	got := viewGroups(t, c)
	// A full replay finds the counts in the logs it reads.
	wantView(t, "after a full replay", got, want)
	return c
}

// takeOne takes one event of g in a new transaction and returns both.
func takeOne(t testing.TB, g *Group) (*Transaction, Event) {
	t.Helper()
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ev, ok, err := tx.Take()
	if err != nil || !ok {
		t.Fatalf("take from %s: %v, %v", g.Name(), ok, err)
	}
	return tx, ev
}

func TestDeadLetterAfterMaxRollbacks(t *testing.T) {
	cfg := dlqConfig(t, 3)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	a, dlq := mustGroup(t, c, "a"), mustGroup(t, c, "a.dlq")
	if dlq.Len() != 0 || mustGroup(t, c, "b").Len() != 3 {
		t.Fatalf("the dead-letter group holds %d events (puts reached it?), b %d", dlq.Len(), mustGroup(t, c, "b").Len())
	}
	for i := 1; i <= 3; i++ {
		tx, ev := takeOne(t, a)
		if string(ev.Body) != "event-0" || ev.Deliveries != i {
			t.Fatalf("take %d: %s with Deliveries %d, want event-0 with %d", i, ev.Body, ev.Deliveries, i)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	// The third rollback moved it: a goes on with the next event.
	if dlq.Len() != 1 || a.Len() != 2 {
		t.Fatalf("after 3 rollbacks: a.dlq holds %d, a %d; want 1, 2", dlq.Len(), a.Len())
	}
	st := a.Stats()
	if st.DeadLettered != 1 || st.DeadLetter != "a.dlq" || st.MaxDeliveries != 3 || !dlq.Stats().DeadLetterGroup {
		t.Fatalf("stats %+v / %+v", st, dlq.Stats())
	}
	tx, ev := takeOne(t, a)
	if string(ev.Body) != "event-1" || ev.Deliveries != 1 {
		t.Fatalf("next take: %s (%d)", ev.Body, ev.Deliveries)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	c = reopenBoth(t, c, cfg)
	defer c.Close()
	wantView(t, "state", viewGroups(t, c), map[string]groupView{
		"a":     {Queued: bodies(1, 2), Deliveries: map[string]int{"event-1": 1}},
		"a.dlq": {Queued: bodies(0, 1), Deliveries: map[string]int{}},
		"b":     {Queued: bodies(0, 3), Deliveries: map[string]int{}},
	})
	// The dead-letter group is a normal group: taken, rolled back, taken.
	tx, ev = takeOne(t, mustGroup(t, c, "a.dlq"))
	if string(ev.Body) != "event-0" || ev.Deliveries != 0 {
		t.Fatalf("dead letter: %s (%d)", ev.Body, ev.Deliveries)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, drainGroup(t, c, "a"), bodies(1, 2))
}

// TestDeadLetterAfterCrashes: a consumer that crashes holding the event
// (no rollback, no close) still has its deliveries counted: after three
// crashes the event is moved by the next Take, which returns the next one.
func TestDeadLetterAfterCrashes(t *testing.T) {
	cfg := dlqConfig(t, 3)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	for i := 1; i <= 3; i++ {
		_, ev := takeOne(t, mustGroup(t, c, "a"))
		if string(ev.Body) != "event-0" || ev.Deliveries != i {
			t.Fatalf("crash %d: took %s with Deliveries %d", i, ev.Body, ev.Deliveries)
		}
		crash(t, c)
		c = mustOpen(t, cfg)
	}
	tx, ev := takeOne(t, mustGroup(t, c, "a"))
	if string(ev.Body) != "event-1" || ev.Deliveries != 1 {
		t.Fatalf("after 3 crashes took %s (%d), want event-1 (1)", ev.Body, ev.Deliveries)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	crash(t, c) // after the move and the take commit
	c = mustOpen(t, cfg)
	defer c.Close()
	wantView(t, "after the crash", viewGroups(t, c), map[string]groupView{
		"a":     {Deliveries: map[string]int{}},
		"a.dlq": {Queued: bodies(0, 1), Deliveries: map[string]int{}},
		"b":     {Queued: bodies(0, 2), Deliveries: map[string]int{}},
	})
}

func TestRejectCommitAndRollback(t *testing.T) {
	cfg := testConfig(t, 2)
	// DeadLetter alone: rejects, no delivery limit (and no counting).
	cfg.Groups = []GroupConfig{{Name: "a", DeadLetter: "a-dead"}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 5, 5)
	a := mustGroup(t, c, "a")
	tx, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for range 5 {
		ev, _, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Deliveries != 0 {
			t.Fatalf("Deliveries %d in a group that counts none", ev.Deliveries)
		}
		evs = append(evs, ev)
	}
	if err := tx.Reject(evs[3]); err != nil {
		t.Fatal(err)
	}
	// Reject + rollback: everything back, nothing dead-lettered.
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 5 || mustGroup(t, c, "a-dead").Len() != 0 {
		t.Fatalf("after Reject+Rollback: a %d, a-dead %d", a.Len(), mustGroup(t, c, "a-dead").Len())
	}
	tx, err = a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	evs = evs[:0]
	for range 5 {
		ev, _, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	// By content as well as by identity.
	if err := tx.Reject(Event{Body: []byte("event-1"), Headers: map[string]string{"i": "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Reject(evs[3]); err != nil {
		t.Fatal(err)
	}
	if err := tx.Reject(evs[3]); !errors.Is(err, ErrNotTaken) {
		t.Fatalf("second Reject of one event: %v, want ErrNotTaken", err)
	}
	if err := tx.Reject(Event{Body: []byte("never taken")}); !errors.Is(err, ErrNotTaken) {
		t.Fatalf("Reject of an event not taken: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Rejected != 2 || st.Taken != 3 {
		t.Fatalf("stats: rejected %d taken %d", st.Rejected, st.Taken)
	}
	putN(t, c, 5, 1, 1)
	c = reopenBoth(t, c, cfg)
	defer c.Close()
	wantView(t, "state", viewGroups(t, c), map[string]groupView{
		"a":      {Queued: bodies(5, 1), Deliveries: map[string]int{}},
		"a-dead": {Queued: []string{"event-1", "event-3"}, Deliveries: map[string]int{}},
	})
}

func TestRejectMisuse(t *testing.T) {
	cfg := dlqConfig(t, 3)
	c := mustOpen(t, cfg)
	defer c.Close()
	putN(t, c, 0, 2, 2)
	tx, _ := c.Begin()
	if err := tx.Reject(Event{Body: body(0)}); !errors.Is(err, ErrNotTaken) {
		t.Fatalf("Reject on an unused transaction: %v", err)
	}
	if err := tx.Put(Event{Body: body(9)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Reject(Event{Body: body(9)}); !errors.Is(err, ErrNotTaken) {
		t.Fatalf("Reject in a put transaction: %v", err)
	}
	tx.Rollback()
	tx, ev := takeOne(t, mustGroup(t, c, "b"))
	if err := tx.Reject(ev); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Reject in a group without a dead-letter group: %v", err)
	}
	tx.Rollback()
	if err := tx.Reject(ev); !errors.Is(err, ErrTransactionDone) {
		t.Fatalf("Reject after Rollback: %v", err)
	}
}

func TestRedrive(t *testing.T) {
	cfg := dlqConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 4, 4)
	a := mustGroup(t, c, "a")
	// MaxDeliveries 1: every rollback dead-letters.
	for range 3 {
		tx, _ := takeOne(t, a)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	dlq := mustGroup(t, c, "a.dlq")
	if dlq.Len() != 3 || a.Len() != 1 {
		t.Fatalf("a.dlq %d, a %d", dlq.Len(), a.Len())
	}
	for _, tc := range []struct {
		from, to string
		n        int
		want     error
	}{
		{"a", "a.dlq", 1, nil}, // not a dead-letter group
		{"a.dlq", "a.dlq", 1, nil},
		{"a.dlq", "b", 1, nil}, // not the group a.dlq's events left (b holds them still)
		{"nope", "a", 1, ErrNoGroup},
		{"a.dlq", "nope", 1, ErrNoGroup},
		{"a.dlq", "a", -1, nil},
	} {
		if n, err := c.Redrive(tc.from, tc.to, tc.n); err == nil || n != 0 || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Fatalf("Redrive(%q, %q, %d) = %d, %v", tc.from, tc.to, tc.n, n, err)
		}
	}
	putN(t, c, 4, 1, 1)
	n, err := c.Redrive("a.dlq", "a", 2)
	if err != nil || n != 2 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	if st := dlq.Stats(); st.Redriven != 2 {
		t.Fatalf("Redriven %d", st.Redriven)
	}
	c = reopenBoth(t, c, cfg)
	wantView(t, "state", viewGroups(t, c), map[string]groupView{
		"a":     {Queued: []string{"event-3", "event-4", "event-0", "event-1"}, Deliveries: map[string]int{}},
		"a.dlq": {Queued: []string{"event-2"}, Deliveries: map[string]int{}},
		"b":     {Queued: bodies(0, 5), Deliveries: map[string]int{}},
	})
	// Counts start again: a redriven event is delivered MaxDeliveries
	// times more.
	a = mustGroup(t, c, "a")
	takeGroup(t, a, 2, 2)
	tx, ev := takeOne(t, a)
	if string(ev.Body) != "event-0" || ev.Deliveries != 1 {
		t.Fatalf("redriven event: %s (%d)", ev.Body, ev.Deliveries)
	}
	tx.Commit()
	if n, err := c.Redrive("a.dlq", "a", 100); err != nil || n != 1 {
		t.Fatalf("Redrive of the rest = %d, %v", n, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Redrive(cfg, "a.dlq", "a", 1); err != nil {
		t.Fatalf("offline Redrive of an empty group: %v", err)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	if _, err := Redrive(cfg, "a.dlq", "a", 1); !errors.Is(err, ErrLocked) {
		t.Fatalf("offline Redrive while open: %v, want ErrLocked", err)
	}
	wantEvents(t, drainGroup(t, c, "a"), []string{"event-1", "event-2"})
}

func TestDeadLetterGroupPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy FullPolicy
		dlq    []string // what the dead-letter group holds after three dead letters
		a      []string // what a holds
	}{
		{Block, []string{"event-0"}, []string{"event-1", "event-2"}}, // the others stay, delivered again
		{DropOldest, []string{"event-2"}, nil},
		{DropNewest, []string{"event-0"}, nil},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			cfg := testConfig(t, 1)
			cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 1, DeadLetter: "dead"}, {Name: "dead", Capacity: 1, WhenFull: tc.policy}}
			cfg.TransactionCapacity = 1
			c := mustOpen(t, cfg)
			putN(t, c, 0, 3, 1)
			a := mustGroup(t, c, "a")
			for range 3 {
				tx, _ := takeOne(t, a)
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.policy == Block {
				// Each move the full group refused is counted: the second
				// rollback's, then the third take's and rollback's.
				if st := a.Stats(); st.DeadLetterRefused != 3 || st.DeadLettered != 1 {
					t.Fatalf("refused %d, dead-lettered %d", st.DeadLetterRefused, st.DeadLettered)
				}
				// The refused one is delivered again, over its limit.
				tx, ev := takeOne(t, a)
				if string(ev.Body) != "event-1" || ev.Deliveries != 3 {
					t.Fatalf("took %s (%d)", ev.Body, ev.Deliveries)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				// Puts are not held up by the full dead-letter group.
				putN(t, c, 3, 1, 1)
				tc.a = []string{"event-2", "event-3"}
			}
			c = reopenBoth(t, c, cfg)
			defer c.Close()
			v := viewGroups(t, c)
			if !slices.Equal(v["dead"].Queued, tc.dlq) || !slices.Equal(v["a"].Queued, tc.a) {
				t.Fatalf("dead %v, a %v; want %v, %v", v["dead"].Queued, v["a"].Queued, tc.dlq, tc.a)
			}
		})
	}
}

func TestOnDeadLetter(t *testing.T) {
	cfg := dlqConfig(t, 2)
	var mu sync.Mutex
	var got []DeadLetter
	cfg.OnDeadLetter = func(d DeadLetter) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}
	c := mustOpen(t, cfg)
	defer c.Close()
	putN(t, c, 0, 3, 3)
	a := mustGroup(t, c, "a")
	for range 2 {
		tx, _ := takeOne(t, a)
		tx.Rollback()
	}
	tx, ev := takeOne(t, a)
	if err := tx.Reject(ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		fmt.Sprintf("%s>%s %s %d %v", "a", "a.dlq", "event-0", 2, false),
		fmt.Sprintf("%s>%s %s %d %v", "a", "a.dlq", "event-1", 1, true),
	}
	var have []string
	for _, d := range got {
		have = append(have, fmt.Sprintf("%s>%s %s %d %v", d.Group, d.DeadLetter, d.Event.Body, d.Deliveries, d.Rejected))
	}
	if !slices.Equal(have, want) {
		t.Fatalf("OnDeadLetter got %q, want %q", have, want)
	}
}

// TestNoDeliveryWritesWithoutMaxDeliveries: a group that counts no
// deliveries writes nothing for a Take (and a rollback); one that counts
// notes a Take in the delivery journal, with no log write, and a rollback
// writes one deliver record.
func TestNoDeliveryWritesWithoutMaxDeliveries(t *testing.T) {
	cfg := dlqConfig(t, 3)
	c := mustOpen(t, cfg)
	defer c.Close()
	putN(t, c, 0, 2, 2)
	before := c.Stats().LogBytes
	tx, _ := takeOne(t, mustGroup(t, c, "b"))
	tx.Rollback()
	if after := c.Stats().LogBytes; after != before {
		t.Fatalf("a take and rollback of group b wrote %d bytes", after-before)
	}
	if !c.journal.Mapped() {
		t.Skip("the delivery journal is not mapped here")
	}
	tx, _ = takeOne(t, mustGroup(t, c, "a"))
	if after := c.Stats().LogBytes; after != before {
		t.Fatalf("a take of group a wrote %d log bytes (the journal is mapped)", after-before)
	}
	tx.Rollback()
	if after := c.Stats().LogBytes; after == before {
		t.Fatal("the rollback in group a (MaxDeliveries) wrote no deliver record")
	}
}

// TestRedriveErasesJournalCounts: a redriven event's counts start again,
// after a crash too: the delivery journal's entries of its earlier stay in
// the group do not come back.
func TestRedriveErasesJournalCounts(t *testing.T) {
	cfg := dlqConfig(t, 2)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 1, 1)
	a := mustGroup(t, c, "a")
	for range 2 {
		tx, _ := takeOne(t, a)
		tx.Rollback() // the second moves event-0
	}
	if n, err := c.Redrive("a.dlq", "a", 1); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	_, ev := takeOne(t, a)
	if ev.Deliveries != 1 {
		t.Fatalf("after the redrive: Deliveries %d", ev.Deliveries)
	}
	crash(t, c)
	c = mustOpen(t, cfg)
	defer c.Close()
	tx, ev := takeOne(t, mustGroup(t, c, "a"))
	if string(ev.Body) != "event-0" || ev.Deliveries != 2 {
		t.Fatalf("after a crash: took %s with Deliveries %d, want event-0 with 2 (a count of its first stay came back?)", ev.Body, ev.Deliveries)
	}
	tx.Rollback()
}

// TestDeliveryCountsInTheCheckpoint: the counts the checkpoint keeps are
// those of its write-order id; a full replay after the log files holding
// the deliver records were deleted loses them, in the safe direction.
func TestDeliveryCountsInTheCheckpoint(t *testing.T) {
	cfg := dlqConfig(t, 5)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	for range 2 {
		tx, _ := takeOne(t, mustGroup(t, c, "a"))
		tx.Rollback()
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	cat, err := checkpoint.ReadCatalog(vfsOS(), cfg.CheckpointDir)
	if err != nil {
		t.Fatal(err)
	}
	var counts []checkpoint.Delivery
	for _, g := range cat.Groups {
		if g.Name == "a" {
			counts = g.Deliveries
		}
		if g.Name == "a.dlq" && !g.DeadLetterGroup {
			t.Fatal("the catalog does not mark a.dlq as a dead-letter group")
		}
	}
	if len(counts) != 1 || counts[0].Count != 2 {
		t.Fatalf("the checkpoint's counts of a: %+v", counts)
	}
	crash(t, c)
	c = mustOpen(t, cfg)
	defer c.Close()
	tx, ev := takeOne(t, mustGroup(t, c, "a"))
	if ev.Deliveries != 3 {
		t.Fatalf("after the checkpoint: Deliveries %d, want 3", ev.Deliveries)
	}
	tx.Rollback()
}

func TestDeadLetterConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		groups []GroupConfig
	}{
		{"self", []GroupConfig{{Name: "a", MaxDeliveries: 1, DeadLetter: "a"}}},
		{"bad name", []GroupConfig{{Name: "a", MaxDeliveries: 1, DeadLetter: "A!"}}},
		{"negative", []GroupConfig{{Name: "a", MaxDeliveries: -1}}},
		{"default too long", []GroupConfig{{Name: string(slices.Repeat([]byte("x"), 64)), MaxDeliveries: 1}}},
		{"chain", []GroupConfig{{Name: "a", MaxDeliveries: 1}, {Name: "a.dlq", MaxDeliveries: 1}}},
		{"shared", []GroupConfig{{Name: "a", MaxDeliveries: 1, DeadLetter: "d"}, {Name: "b", DeadLetter: "d"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			cfg.Groups = tc.groups
			if c, err := Open(cfg); err == nil {
				c.Close()
				t.Fatal("Open accepted it")
			}
		})
	}
	// A group puts feed cannot become a dead-letter group.
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "a"}, {Name: "b"}}
	c := mustOpen(t, cfg)
	if _, err := c.AddGroup(GroupConfig{Name: "c", MaxDeliveries: 2, DeadLetter: "b"}); err == nil {
		t.Fatal("AddGroup made a fed group a dead-letter group")
	}
	if _, err := c.AddGroup(GroupConfig{Name: "c", MaxDeliveries: 2}); err != nil {
		t.Fatal(err)
	}
	if mustGroup(t, c, "c.dlq").Stats().DeadLetterGroup != true {
		t.Fatal("AddGroup did not create c.dlq as a dead-letter group")
	}
	if _, err := c.AddGroup(GroupConfig{Name: "e", DeadLetter: "c.dlq"}); err == nil {
		t.Fatal("AddGroup shared c's dead-letter group")
	}
	if err := c.RemoveGroup("c.dlq"); err == nil {
		t.Fatal("RemoveGroup removed the dead-letter group of c")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 3, DeadLetter: "b"}}
	if c, err := Open(cfg); err == nil {
		c.Close()
		t.Fatal("Open made fed group b a dead-letter group")
	}
	// Not listed, the dead-letter group is kept without a warning; c keeps
	// its config from the logs.
	cfg.Groups = []GroupConfig{{Name: "a"}}
	c = mustOpen(t, cfg)
	defer c.Close()
	if st := mustGroup(t, c, "c").Stats(); st.MaxDeliveries != 2 || st.DeadLetter != "c.dlq" {
		t.Fatalf("c after a restart: %+v", st)
	}
}

// TestDeadLetterGroupNotFedNorBlocking: puts never reach a dead-letter
// group, and a full one holds up no Put.
func TestDeadLetterGroupNotFedNorBlocking(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Capacity, cfg.TransactionCapacity = 10, 5
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 1}, {Name: "a.dlq", Capacity: 1}}
	c := mustOpen(t, cfg)
	defer c.Close()
	putN(t, c, 0, 5, 5)
	takeGroup(t, mustGroup(t, c, "a"), 5, 5)
	putN(t, c, 5, 10, 5) // a's capacity, with the one-slot dlq empty
	if n := mustGroup(t, c, "a.dlq").Len(); n != 0 {
		t.Fatalf("a.dlq holds %d events", n)
	}
}

// TestDeadLetterFilesKept: a log file whose events only a dead-letter group
// holds is kept (and found by a full replay); once the dead letters are
// taken it is deleted.
func TestDeadLetterFilesKept(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.MaxFileSize = 4 << 10
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 1}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 1, 1)
	tx, _ := takeOne(t, mustGroup(t, c, "a"))
	tx.Rollback() // event-0: a dead letter, in the first log file
	putN(t, c, 1, 200, 10)
	takeGroup(t, mustGroup(t, c, "a"), 200, 10)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(cfg.DataDirs[0], "log-0000000001")
	if _, err := os.Stat(first); err != nil {
		t.Fatalf("the file of the dead letter: %v", err)
	}
	c = reopenBoth(t, c, cfg)
	defer c.Close()
	wantEvents(t, drainGroup(t, c, "a.dlq"), bodies(0, 1))
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the first log file outlived its last event: %v", err)
	}
}

// TestDeadLetterConcurrent: takers of one group compete, roll back, reject
// and commit while producers put; every event ends up taken for good or in
// the dead-letter group, exactly once, and an event is a dead letter only
// if it was rejected or delivered MaxDeliveries times.
func TestDeadLetterConcurrent(t *testing.T) {
	const maxD, events, takers = 2, 2000, 4
	cfg := testConfig(t, 2)
	cfg.Capacity, cfg.TransactionCapacity = 5000, 20
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: maxD}}
	c := mustOpen(t, cfg)
	defer c.Close()
	a := mustGroup(t, c, "a")
	var mu sync.Mutex
	taken := map[string]int{}     // committed takes
	rejected := map[string]bool{} // rejected by a commit that returned
	seen := map[string]int{}      // the largest Deliveries seen
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		putN(t, c, 0, events, 10)
	}()
	done := make(chan struct{})
	for w := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				tx, err := a.Begin()
				if err != nil {
					t.Error(err)
					return
				}
				var evs []Event
				for range 1 + (n+w)%7 {
					ev, ok, err := tx.Take()
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						break
					}
					evs = append(evs, ev)
				}
				mu.Lock()
				for _, ev := range evs {
					if ev.Deliveries < 1 || ev.Deliveries > maxD {
						t.Errorf("%s delivered with Deliveries %d", ev.Body, ev.Deliveries)
					}
					seen[string(ev.Body)] = max(seen[string(ev.Body)], ev.Deliveries)
				}
				mu.Unlock()
				switch {
				case len(evs) == 0:
					tx.Rollback()
				case n%3 == 0:
					if err := tx.Rollback(); err != nil {
						t.Error(err)
					}
				default:
					var rej string
					if n%5 == 1 {
						if err := tx.Reject(evs[0]); err != nil {
							t.Error(err)
						}
						rej = string(evs[0].Body)
					}
					if err := tx.Commit(); err != nil {
						t.Error(err)
						continue
					}
					mu.Lock()
					for _, ev := range evs {
						if string(ev.Body) != rej {
							taken[string(ev.Body)]++
						}
					}
					if rej != "" {
						rejected[rej] = true
					}
					mu.Unlock()
				}
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Minute) // a hang fails, with the counts
	for {
		mu.Lock()
		n := len(taken)
		mu.Unlock()
		if n+mustGroup(t, c, "a.dlq").Len() >= events || t.Failed() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stuck: %d events taken, %d dead letters, %d queued", n, mustGroup(t, c, "a.dlq").Len(), a.Len())
		}
		time.Sleep(time.Millisecond)
	}
	close(done)
	wg.Wait()
	dead := takeGroup(t, mustGroup(t, c, "a.dlq"), 1<<30, 20)
	if len(dead) <= len(rejected) || len(rejected) == 0 {
		t.Fatalf("%d dead letters, %d rejected: the test did not dead-letter by deliveries and by Reject", len(dead), len(rejected))
	}
	t.Logf("%d taken, %d dead letters (%d rejected)", len(taken), len(dead), len(rejected))
	count := map[string]int{}
	for b, n := range taken {
		count[b] += n
	}
	for _, b := range dead {
		count[b]++
		if !rejected[b] && seen[b] < maxD {
			t.Errorf("%s is a dead letter after %d deliveries, not rejected", b, seen[b])
		}
	}
	for i := range events {
		if b := string(body(i)); count[b] != 1 {
			t.Errorf("%s: taken %d times, dead letter: %v", b, taken[b], slices.Contains(dead, b))
		}
	}
}

// TestRedriveAcrossCheckpoint: an event the checkpoint has in its group's
// ring that is dead-lettered and redriven back after it is queued once, at
// the tail, after a replay from that checkpoint and after a full one.
func TestRedriveAcrossCheckpoint(t *testing.T) {
	cfg := dlqConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	tx, _ := takeOne(t, mustGroup(t, c, "a"))
	tx.Rollback() // event-0 moves to a.dlq
	if n, err := c.Redrive("a.dlq", "a", 1); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	tx, ev := takeOne(t, mustGroup(t, c, "a"))
	if string(ev.Body) != "event-1" {
		t.Fatalf("took %s", ev.Body)
	}
	tx.Rollback() // event-1 moves too
	want := viewGroups(t, c)
	wantView(t, "live", want, map[string]groupView{
		"a":     {Queued: []string{"event-2", "event-0"}, Deliveries: map[string]int{}},
		"a.dlq": {Queued: []string{"event-1"}, Deliveries: map[string]int{}},
		"b":     {Queued: bodies(0, 3), Deliveries: map[string]int{}},
	})
	crash(t, c)
	c = mustOpen(t, cfg) // from the checkpoint
	wantView(t, "after a crash", viewGroups(t, c), want)
	c = reopenBoth(t, c, cfg)
	c.Close()
}

// TestRedriveCountsAfterPowerLoss: a power loss after a Redrive never
// brings back the counts of the redriven event's earlier stay in its group,
// even from the delivery journal Open replaced (its rename must be durable
// before the Redrive's erase is).
func TestRedriveCountsAfterPowerLoss(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 2}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 1, 1)
	for range 2 {
		tx, _ := takeOne(t, mustGroup(t, c, "a"))
		tx.Rollback() // the second moves event-0 to a.dlq
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	syncJournal(t, mem, cfg) // the kernel wrote the journal back (it is never synced)
	c = mustOpen(t, cfg)     // nothing to replay: no checkpoint; a new journal
	if n, err := c.Redrive("a.dlq", "a", 1); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	img := mem.CrashClone(false, 1)
	crash(t, c)
	cfg.fs = img
	c = mustOpen(t, cfg)
	defer c.Close()
	tx, ev := takeOne(t, mustGroup(t, c, "a"))
	if string(ev.Body) != "event-0" || ev.Deliveries != 1 {
		t.Fatalf("after the power loss: took %s with Deliveries %d, want event-0 with 1", ev.Body, ev.Deliveries)
	}
	tx.Rollback()
}

// TestDeadLetterMoveDurableWithTwoDirs: a dead-letter move is durable
// before its event lands in the dead-letter group. A take commit of the
// dead-letter group, or a Redrive, may be written to the other data dir,
// whose fsync does not cover the move's file: a power loss right after
// them must not undo the move beneath them (the event back in a after its
// take from a.dlq committed, or queued twice in a after a Redrive).
// Transaction ids alternate between the dirs; an idle transaction shifts
// them, so that one of the two runs of each case crosses dirs.
func TestDeadLetterMoveDurableWithTwoDirs(t *testing.T) {
	for _, redrive := range []bool{false, true} {
		for shift := range 2 {
			t.Run(fmt.Sprintf("redrive=%v/shift=%d", redrive, shift), func(t *testing.T) {
				fsys := vfs.NewMem()
				cfg := memConfig(fsys, 2)
				cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 1}}
				c := mustOpen(t, cfg)
				putN(t, c, 0, 2, 2)
				tx, _ := takeOne(t, mustGroup(t, c, "a"))
				if err := tx.Rollback(); err != nil { // event-0 dead-lettered
					t.Fatal(err)
				}
				for range shift {
					idle, _ := c.Begin()
					idle.Rollback()
				}
				want := []string{"event-1"}
				if redrive {
					if n, err := c.Redrive("a.dlq", "a", 1); n != 1 || err != nil {
						t.Fatalf("Redrive = %d, %v", n, err)
					}
					want = []string{"event-1", "event-0"}
				} else {
					tx, ev := takeOne(t, mustGroup(t, c, "a.dlq"))
					if string(ev.Body) != "event-0" {
						t.Fatalf("took %s from a.dlq", ev.Body)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
				}
				cfg.fs = fsys.CrashClone(false, 0) // a power loss
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				c = mustOpen(t, cfg)
				v := viewGroups(t, c)
				if !slices.Equal(v["a"].Queued, want) || len(v["a.dlq"].Queued) != 0 {
					t.Fatalf("after a power loss: a %q, a.dlq %q; want a %q, a.dlq empty", v["a"].Queued, v["a.dlq"].Queued, want)
				}
			})
		}
	}
}

// TestAddGroupCreatesJournal: the first group with MaxDeliveries added at
// run time gets the delivery journal (its takes then write nothing to the
// log), and its counts survive a crash.
func TestAddGroupCreatesJournal(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	g, err := c.AddGroup(GroupConfig{Name: "late", MaxDeliveries: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !c.hasJournal() {
		t.Fatal("no delivery journal after AddGroup of a group with MaxDeliveries")
	}
	putN(t, c, 0, 1, 1)
	_, ev := takeOne(t, g)
	if ev.Deliveries != 1 {
		t.Fatalf("Deliveries %d", ev.Deliveries)
	}
	crash(t, c)
	c = mustOpen(t, cfg)
	defer c.Close()
	tx, ev := takeOne(t, mustGroup(t, c, "late"))
	if ev.Deliveries != 2 {
		t.Fatalf("after a crash: Deliveries %d, want 2", ev.Deliveries)
	}
	tx.Rollback() // the second: moved
	if n := mustGroup(t, c, "late.dlq").Len(); n != 1 {
		t.Fatalf("late.dlq holds %d", n)
	}
}

// syncJournal makes the delivery journal's bytes durable, as the kernel's
// writeback of the never-synced file would.
func syncJournal(t *testing.T, mem *vfs.MemFS, cfg Config) {
	t.Helper()
	f, err := mem.OpenReadWrite(filepath.Join(cfg.CheckpointDir, checkpoint.JournalName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveEraseDurable: the entries Redrive erases stay erased after a
// power loss right after it (fails without the journal's sync in Erase).
func TestRedriveEraseDurable(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 2}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 1, 1)
	for range 2 {
		tx, _ := takeOne(t, mustGroup(t, c, "a"))
		tx.Rollback() // the second moves event-0 to a.dlq
	}
	syncJournal(t, mem, cfg) // its entries of event-0 (1, 2) written back
	if n, err := c.Redrive("a.dlq", "a", 1); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	img := mem.CrashClone(false, 1)
	crash(t, c)
	cfg.fs = img
	c = mustOpen(t, cfg)
	defer c.Close()
	tx, ev := takeOne(t, mustGroup(t, c, "a"))
	if string(ev.Body) != "event-0" || ev.Deliveries != 1 {
		t.Fatalf("after the power loss: took %s with Deliveries %d, want event-0 with 1", ev.Body, ev.Deliveries)
	}
	tx.Rollback()
}

// TestJournalRemovalDurable: an Open without a counting group removes the
// journal durably: a power loss does not bring its counts back for an event
// redriven meanwhile. (The Open's checkpoint, written because the groups
// changed, syncs the checkpoint dir too, so this does not isolate the
// removal's own dir sync, which matters when that checkpoint fails for
// space.)
func TestJournalRemovalDurable(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 2}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 1, 1)
	for range 2 {
		tx, _ := takeOne(t, mustGroup(t, c, "a"))
		tx.Rollback()
	}
	syncJournal(t, mem, cfg)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Rejects only: no counting, no journal; the redrive erases nothing.
	cfg.Groups = []GroupConfig{{Name: "a", DeadLetter: "a.dlq"}}
	c = mustOpen(t, cfg)
	if n, err := c.Redrive("a.dlq", "a", 1); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	img := mem.CrashClone(false, 1)
	crash(t, c)
	cfg.fs = img
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 2}}
	c = mustOpen(t, cfg)
	defer c.Close()
	tx, ev := takeOne(t, mustGroup(t, c, "a"))
	if string(ev.Body) != "event-0" || ev.Deliveries != 1 {
		t.Fatalf("after the power loss: took %s with Deliveries %d, want event-0 with 1", ev.Body, ev.Deliveries)
	}
	tx.Rollback()
}
