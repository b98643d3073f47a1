package channel

import (
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
	p, ok, err := c.takeHead(gs, older.id)
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
