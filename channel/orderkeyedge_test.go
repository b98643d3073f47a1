package channel

import (
	"errors"
	"testing"
	"time"
)

// A checkpoint that comes while a keyed Take is between its pop and its
// claim (takeKeyed reads the event in between, under the group's orderMu)
// must not list the popped event in flight under the taker: recovery
// returns in-flight takes to the head transaction by transaction, oldest
// first, and a taker older than the key's holder would bring the key's
// later event back ahead of the holder's. The checkpoint waits for the
// step (capture takes orderMu): the event is listed parked, behind the
// holder's. The test runs takeKeyed's steps by hand to stop in between.
func TestOrderKeyCheckpointDuringPop(t *testing.T) {
	cfg := orderConfig(t)
	c := mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "", "x", "x")
	older := mustBegin(t, g) // first in flight: it takes 0: (no key)
	if ev, _, err := older.Take(); err != nil || string(ev.Body) != "0:" {
		t.Fatalf("Take: %q, %v", ev.Body, err)
	}
	holder := mustBegin(t, g) // holds x with 1:x
	if ev, _, err := holder.Take(); err != nil || string(ev.Body) != "1:x" {
		t.Fatalf("Take: %q, %v", ev.Body, err)
	}
	// older's next Take, stopped after its pop of 2:x.
	gs := g.g
	gs.orderMu.Lock()
	p, _, _, ok, err := c.takeHead(gs, older.id)
	if err != nil || !ok {
		t.Fatalf("takeHead: %v, %v", ok, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Checkpoint() }()
	select {
	case err := <-done: // the checkpoint did not wait for the claim
		if err != nil {
			t.Fatal(err)
		}
		done <- nil
	case <-time.After(200 * time.Millisecond): // it waits (or is slow: either way the test holds)
	}
	ev, err := c.readEvent(p)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := gs.orderKeyOf(&ev)
	if !c.claimOrPark(gs, older.id, k, p) {
		t.Fatal("2:x was not parked behind the holder of x")
	}
	gs.orderMu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	crash(t, c)
	c = mustOpen(t, cfg)
	g = mustGroup(t, c, "a")
	tx := mustBegin(t, g)
	wantBodies(t, "after the crash", takeAll(t, tx), "0:", "1:x", "2:x")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// RemoveGroup while take transactions of a keyed group are open: one
// holding a key, one with an event parked behind it, and one between its
// pop and its key's claim (takeKeyed's steps, run by hand). Afterwards
// their Take, Commit and Rollback return clear errors (or nil for a
// Rollback), nothing panics, and no key of the removed group stays held
// (forgetRemovedKeys; claimOrPark claims nothing in a removed group). A
// group added again under the name starts free.
func TestOrderKeyRemoveGroupWhileHeld(t *testing.T) {
	cfg := orderConfig(t)
	c := mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	gs := g.g
	putKeyed(t, c, 0, "x", "x", "y", "z")
	holder := mustBegin(t, g)
	if ev, _, err := holder.Take(); err != nil || string(ev.Body) != "0:x" {
		t.Fatalf("Take: %q, %v", ev.Body, err)
	}
	other := mustBegin(t, g) // parks 1:x, takes 2:y
	if ev, _, err := other.Take(); err != nil || string(ev.Body) != "2:y" {
		t.Fatalf("Take: %q, %v", ev.Body, err)
	}
	popper := mustBegin(t, g) // pops 3:z and stops before the claim
	gs.orderMu.Lock()
	p, _, _, ok, err := c.takeHead(gs, popper.id)
	if err != nil || !ok {
		t.Fatalf("takeHead: %v, %v", ok, err)
	}
	ev, err := c.readEvent(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveGroup("a"); err != nil {
		t.Fatal(err)
	}
	k, _ := gs.orderKeyOf(&ev)
	parked := c.claimOrPark(gs, popper.id, k, p)
	gs.orderMu.Unlock()
	if parked {
		t.Fatal("claimOrPark parked an event of a removed group")
	}
	if _, _, err := holder.Take(); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Take after RemoveGroup: %v, want ErrNoGroup", err)
	}
	if err := holder.Commit(); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Commit after RemoveGroup: %v, want ErrNoGroup", err)
	}
	for _, tx := range []*Transaction{other, popper} { // holder's failed Commit ended it
		if err := tx.Rollback(); err != nil {
			t.Fatalf("Rollback after RemoveGroup: %v", err)
		}
	}
	c.queueMu.Lock()
	held, byTx, parkedN := len(gs.order.held), len(gs.order.byTx), gs.order.parked
	c.queueMu.Unlock()
	if held != 0 || byTx != 0 || parkedN != 0 {
		t.Fatalf("removed group: %d keys held (%d transactions), %d events parked", held, byTx, parkedN)
	}
	if _, err := c.AddGroup(GroupConfig{Name: "a", OrderKey: "k"}); err != nil {
		t.Fatal(err)
	}
	g = mustGroup(t, c, "a")
	putKeyed(t, c, 10, "x", "z")
	tx := mustBegin(t, g)
	wantBodies(t, "the group added again", takeAll(t, tx), "10:x", "11:z")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A Take that read an expired event and then finds its group removed
// (RemoveGroup came between the read and expireTaken) moves nothing to the
// dead-letter group, which outlives the group, and tells OnDeadLetter
// nothing: the event went with its group.
func TestExpireTakenAfterRemoveGroup(t *testing.T) {
	var dead deadLetters
	c, _, _ := expireSetup(t, 1, 0, func(cfg *Config) {
		cfg.Groups[0].DeadLetter = "a.dlq"
		cfg.OnDeadLetter = dead.add
	})
	g := mustGroup(t, c, "a")
	tx := mustBegin(t, g)
	p, _, _, ok, err := c.takeHead(g.g, tx.id) // Take's pop; its read found 0 expired
	if err != nil || !ok {
		t.Fatalf("takeHead: %v, %v", ok, err)
	}
	tx.takes = append(tx.takes, p)
	if err := c.RemoveGroup("a"); err != nil {
		t.Fatal(err)
	}
	notes, err := c.expireTaken(tx, p)
	if !errors.Is(err, ErrNoGroup) || len(notes) != 0 {
		t.Fatalf("expireTaken after RemoveGroup: %d dead letters, %v; want none, ErrNoGroup", len(notes), err)
	}
	if n := mustGroup(t, c, "a.dlq").Stats().Queued; n != 0 {
		t.Fatalf("the dead-letter group holds %d events of the removed group", n)
	}
	dead.mu.Lock()
	told := len(dead.got)
	dead.mu.Unlock()
	if told != 0 {
		t.Fatalf("OnDeadLetter told of %d events", told)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Repair of a channel that crashed with events waiting for their retry
// delay (group "w") and events parked behind a held key (group "k"), a
// checkpoint listing both: the rebuild (a full replay) counts the waiting
// events as the group's (rebuiltGroups), they still wait after it, and
// the parked ones are back in the ring, each key's in order.
func TestRepairWaitingAndParked(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "w", RetryDelays: []time.Duration{time.Hour}}, {Name: "k", OrderKey: "k"}}
	c := mustOpen(t, cfg)
	putKeyed(t, c, 0, "x", "x", "y", "x")
	w, k := mustGroup(t, c, "w"), mustGroup(t, c, "k")
	tx := mustBegin(t, w)
	for range 2 {
		if _, _, err := tx.Take(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Rollback(); err != nil { // 0:x and 1:x wait an hour
		t.Fatal(err)
	}
	holder := mustBegin(t, k)
	if _, _, err := holder.Take(); err != nil {
		t.Fatal(err)
	}
	other := mustBegin(t, k)
	wantBodies(t, "past held x", takeAll(t, other), "2:y")
	if st := k.Stats(); st.Parked != 2 || w.Stats().Waiting != 2 {
		t.Fatalf("parked %d, waiting %d; want 2, 2", st.Parked, w.Stats().Waiting)
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	crash(t, c)
	rep, err := Repair(cfg, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 || rep.Rebuild == nil {
		t.Fatalf("repair: problems %v, rebuild %v", rep.Problems, rep.Rebuild)
	}
	for _, g := range rep.Rebuild.Groups {
		if (g.Name == "w" || g.Name == "k") && g.Events != 4 {
			t.Fatalf("rebuilt group %q: %d events, want 4 (waiting ones included)", g.Name, g.Events)
		}
	}
	c = mustOpen(t, cfg)
	w, k = mustGroup(t, c, "w"), mustGroup(t, c, "k")
	if st := w.Stats(); st.Waiting != 2 || st.Queued != 2 {
		t.Fatalf("group w after the repair: waiting %d, queued %d; want 2, 2", st.Waiting, st.Queued)
	}
	tx = mustBegin(t, k)
	wantBodies(t, "group k after the repair", takeAll(t, tx), "0:x", "1:x", "2:y", "3:x")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A rebuild counts the events Open parks: of two events of one key that
// wait (rolled back before the group had its OrderKey), the rebuild's Open
// parks one behind the other once the group is keyed (keyWaiting), and
// both are the group's (rebuiltGroups counts Parked; it did not). After
// it, the key still waits with its first event.
func TestRebuildCountsParkedWaiting(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "w", RetryDelays: []time.Duration{time.Hour}}}
	c := mustOpen(t, cfg)
	putKeyed(t, c, 0, "x", "x", "y")
	tx := mustBegin(t, mustGroup(t, c, "w"))
	for range 2 {
		if _, _, err := tx.Take(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Rollback(); err != nil { // 0:x and 1:x wait, keyless
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Groups[0].OrderKey = "k"
	rep, err := Rebuild(cfg, RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Groups {
		if g.Name == "w" && g.Events != 3 {
			t.Fatalf("rebuilt group w: %d events, want 3 (the parked one included)", g.Events)
		}
	}
	c = mustOpen(t, cfg)
	w := mustGroup(t, c, "w")
	if st := w.Stats(); st.Waiting != 1 || st.Waiting+st.Parked+st.Queued != 3 {
		t.Fatalf("group w: waiting %d, parked %d, queued %d; want 1 waiting, 3 in all", st.Waiting, st.Parked, st.Queued)
	}
	tx = mustBegin(t, w) // 1:x is parked behind 0:x, which waits an hour
	wantBodies(t, "group w", takeAll(t, tx), "2:y")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
