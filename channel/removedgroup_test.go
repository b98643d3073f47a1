package channel

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// removedConfig is testConfig with group a (MaxDeliveries 5: it counts
// deliveries, and its dead letters and rejects go to a.dlq) and group b.
func removedConfig(t testing.TB) Config {
	cfg := testConfig(t, 2)
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 5}, {Name: "b"}}
	return cfg
}

// wantNoGroup fails t unless err matches ErrNoGroup.
func wantNoGroup(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrNoGroup) {
		t.Fatalf("%s on a removed group: %v, want an error matching ErrNoGroup", what, err)
	}
}

// TestRemovedGroupTransactionsFail: the open take transactions of a group
// RemoveGroup removed fail with ErrNoGroup (Take, Reject, Commit) and change
// nothing: no dead letter moved, no permit of the dead-letter group kept,
// nothing written that recovery applies. Rollback ends them. A Group handle
// from before the removal refuses to begin, and neither it nor the old
// transactions touch a group re-added with the same name.
func TestRemovedGroupTransactionsFail(t *testing.T) {
	cfg := removedConfig(t)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 5, 5)
	oldA := mustGroup(t, c, "a")
	dlq := mustGroup(t, c, "a.dlq")

	rejecting, ev0 := takeOne(t, oldA) // rejects event-0, then commits
	if err := rejecting.Reject(ev0); err != nil {
		t.Fatal(err)
	}
	second, ok, err := rejecting.Take()
	if !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	rollingBack, _ := takeOne(t, oldA) // event-2, rolled back
	empty, err := oldA.Begin()         // took nothing
	if err != nil {
		t.Fatal(err)
	}
	late, ev3 := takeOne(t, oldA) // event-3, rejected after the group is back
	if string(second.Body) != "event-1" || string(ev3.Body) != "event-3" {
		t.Fatalf("took %s and %s", second.Body, ev3.Body)
	}

	if err := c.RemoveGroup("a"); err != nil {
		t.Fatal(err)
	}
	_, _, err = rejecting.Take()
	wantNoGroup(t, "Take", err)
	wantNoGroup(t, "Reject", rejecting.Reject(second))
	wantNoGroup(t, "Commit with a Reject", rejecting.Commit())
	if err := rejecting.Rollback(); !errors.Is(err, ErrTransactionDone) {
		t.Fatalf("Rollback after the failed Commit: %v", err)
	}
	if err := rollingBack.Rollback(); err != nil {
		t.Fatalf("Rollback on a removed group: %v", err)
	}
	wantNoGroup(t, "Commit of a transaction that took nothing", empty.Commit())
	if n := dlq.Len(); n != 0 {
		t.Fatalf("the dead-letter group holds %d events after a removed group's commit", n)
	}
	if free := dlq.g.gate.free(); free != dlq.Cap() {
		t.Fatalf("the dead-letter group has room for %d events of %d: the reject's permit was kept", free, dlq.Cap())
	}

	// The old handle stays on the removed group.
	_, err = oldA.Begin()
	wantNoGroup(t, "Group.Begin", err)
	wantNoGroup(t, "Group.Wait", oldA.Wait(context.Background()))
	if n := oldA.Len(); n != 0 {
		t.Fatalf("Len of a removed group: %d", n)
	}

	// The same name again, with the same dead-letter group, and new events.
	if _, err := c.AddGroup(GroupConfig{Name: "a", MaxDeliveries: 5}); err != nil {
		t.Fatal(err)
	}
	putN(t, c, 5, 2, 2)
	_, err = oldA.Begin()
	wantNoGroup(t, "Group.Begin after the name was added again", err)
	wantNoGroup(t, "Reject after the name was added again", late.Reject(ev3))
	_, _, err = late.Take()
	wantNoGroup(t, "Take after the name was added again", err)
	wantNoGroup(t, "Commit after the name was added again", late.Commit())

	want := map[string]groupView{
		"a":     {Queued: bodies(5, 2), Deliveries: map[string]int{}},
		"a.dlq": {Deliveries: map[string]int{}},
		"b":     {Queued: bodies(0, 7), Deliveries: map[string]int{}},
	}
	wantView(t, "after the removed group's transactions ended", viewGroups(t, c), want)
	// Nothing of them comes back after a crash, a restart or a full
	// replay.
	crash(t, c)
	c = mustOpen(t, cfg)
	wantView(t, "after a crash", viewGroups(t, c), want)
	c = reopenBoth(t, c, cfg)
	wantView(t, "after a full replay", viewGroups(t, c), want)
	wantEvents(t, drainGroup(t, c, "a"), bodies(5, 2))
}

// TestRemovedUnnamedGroupTransactionFails: a c.Begin() take transaction of
// the unnamed group fails the same way once RemoveGroup("") removed it.
func TestRemovedUnnamedGroupTransactionFails(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: ""}, {Name: "b"}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tx.Take(); !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	if err := c.RemoveGroup(""); err != nil {
		t.Fatal(err)
	}
	wantNoGroup(t, "Commit", tx.Commit())
	c.Close()
	removeCheckpoint(t, cfg)
	cfg.Groups = []GroupConfig{{Name: "b"}}
	c = mustOpen(t, cfg)
	if names := c.GroupNames(); len(names) != 1 || names[0] != "b" {
		t.Fatalf("groups after a full replay: %q", names)
	}
	wantEvents(t, drainGroup(t, c, "b"), bodies(0, 3))
}

// TestRemovedGroupRaces: take transactions that reject and commit while
// their group is removed and added again: a commit that returned nil moved
// its reject to the dead-letter group, one that returned ErrNoGroup moved
// nothing, whatever the interleaving; after a crash and a full replay too.
func TestRemovedGroupRaces(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.Groups = []GroupConfig{{Name: "a", DeadLetter: "a.dlq"}, {Name: "b"}}
	c := mustOpen(t, cfg)
	put := func(from, n int) error {
		tx, err := c.Begin()
		if err != nil {
			return err
		}
		for i := from; i < from+n; i++ {
			if err := tx.Put(Event{Body: body(i)}); err != nil {
				tx.Rollback()
				return err
			}
		}
		return tx.Commit()
	}
	if err := put(0, 50); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	moved := map[string]int{}
	var commits, failed atomic.Int64 // commits that returned nil, ErrNoGroup
	errs := make(chan error, 3)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				g, err := c.Group("a")
				if err != nil {
					continue
				}
				err = func() error {
					tx, err := g.Begin()
					if err != nil {
						return err
					}
					defer tx.Rollback()
					ev, ok, err := tx.Take()
					if err != nil || !ok {
						return err
					}
					if _, _, err := tx.Take(); err != nil {
						return err
					}
					if err := tx.Reject(ev); err != nil {
						return err
					}
					time.Sleep(50 * time.Microsecond) // room for a removal
					if err := tx.Commit(); err != nil {
						failed.Add(1)
						return err
					}
					mu.Lock()
					moved[string(ev.Body)]++
					mu.Unlock()
					commits.Add(1)
					return nil
				}()
				if err != nil && !errors.Is(err, ErrNoGroup) {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 20 {
		if err := c.RemoveGroup("a"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AddGroup(GroupConfig{Name: "a", DeadLetter: "a.dlq"}); err != nil {
			t.Fatal(err)
		}
		// Let the takers commit a few times before the next removal
		// (counted from before the put: on a loaded machine they may take
		// its 10 events before this goroutine looks; and for at most a
		// second, so that a slow round never hangs the test).
		n := commits.Load() + failed.Load()
		if err := put(50+10*i, 10); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Second); commits.Load()+failed.Load() < n+3 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string) {
		t.Helper()
		got := map[string]int{}
		for _, b := range viewGroups(t, c)["a.dlq"].Queued {
			got[b]++
		}
		if !maps.Equal(got, moved) {
			t.Fatalf("%s: the dead-letter group holds %v, the commits that returned nil rejected %v", what, got, moved)
		}
	}
	check("now")
	crash(t, c)
	c = mustOpen(t, cfg)
	check("after a crash")
	c = reopenBoth(t, c, cfg)
	check("after a full replay")
	t.Logf("%d commits returned nil, %d ErrNoGroup", commits.Load(), failed.Load())
}
