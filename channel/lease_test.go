package channel

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flumego/filechannel/checkpoint"
)

// leaseConfig is a channel with one group "a" whose take transactions have
// a lease of d.
func leaseConfig(t *testing.T, d time.Duration) Config {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "a", LeaseTimeout: d}}
	return cfg
}

// leaseTaken opens a channel of leaseConfig(t, lease), puts events
// [0, put) and takes the first take of them in a transaction it returns
// open (take 0: none).
func leaseTaken(t *testing.T, lease time.Duration, put, take int) (*FileChannel, Config, *Group, *Transaction) {
	t.Helper()
	cfg := leaseConfig(t, lease)
	c := mustOpen(t, cfg)
	putN(t, c, 0, put, put)
	a := groupOf(t, c, "a")
	var tx *Transaction
	if take > 0 {
		tx, _ = takeSome(t, a, take)
	}
	return c, cfg, a, tx
}

// leaseCounting opens a channel of leaseConfig(t, lease) whose group a has
// MaxDeliveries max, and puts events [0, put).
func leaseCounting(t *testing.T, lease time.Duration, max, put int) (*FileChannel, Config, *Group) {
	t.Helper()
	cfg := leaseConfig(t, lease)
	cfg.Groups[0].MaxDeliveries = max
	c := mustOpen(t, cfg)
	putN(t, c, 0, put, put)
	return c, cfg, groupOf(t, c, "a")
}

// takeSome takes n events of g in a new transaction and returns it open,
// with their bodies.
func takeSome(t *testing.T, g *Group, n int) (*Transaction, []string) {
	t.Helper()
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range n {
		ev, ok, err := tx.Take()
		if err != nil || !ok {
			t.Fatalf("take: %v, ok %v", err, ok)
		}
		got = append(got, string(ev.Body))
	}
	return tx, got
}

// waitLen waits up to limit for g to hold n events, and returns how long
// it took.
func waitLen(t *testing.T, g *Group, n int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for g.Len() != n {
		if time.Since(start) > limit {
			t.Fatalf("group holds %d events after %v, want %d", g.Len(), limit, n)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

func TestLeaseExpiryReturnsEventsOnceAndFencesTheTransaction(t *testing.T) {
	const lease = 150 * time.Millisecond
	c := mustOpen(t, leaseConfig(t, lease))
	putN(t, c, 0, 10, 10)
	a := groupOf(t, c, "a")
	start := time.Now()
	tx, got := takeSome(t, a, 4)
	wantEvents(t, got, bodies(0, 4))
	// The taker never calls again: the events come back within about the
	// lease, not before it.
	waitLen(t, a, 10, 20*lease)
	if took := time.Since(start); took < lease {
		t.Fatalf("the events came back after %v, before the lease of %v", took, lease)
	}
	if s := a.Stats(); s.LeasesExpired != 1 || s.InflightTakes != 0 {
		t.Fatalf("after the expiry: LeasesExpired %d, InflightTakes %d; want 1 and 0", s.LeasesExpired, s.InflightTakes)
	}
	// Another taker gets them, in order, once.
	wantEvents(t, takeWith(t, a.Begin, 100, 3), bodies(0, 10))
	if _, _, err := tx.Take(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Take after the expiry: %v, want ErrLeaseExpired", err)
	}
	if err := tx.Commit(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Commit after the expiry: %v, want ErrLeaseExpired", err)
	}
	if err := tx.Rollback(); !errors.Is(err, ErrTransactionDone) {
		t.Fatalf("Rollback after the failed Commit: %v", err)
	}
	// Rollback of an expired transaction ends it with nothing to return.
	putN(t, c, 10, 3, 3)
	tx, _ = takeSome(t, a, 3)
	waitLen(t, a, 3, 20*lease)
	rollbacks := a.Stats().Rollbacks
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback after the expiry: %v", err)
	}
	if n := a.Stats().Rollbacks - rollbacks; n != 0 {
		t.Fatalf("the Rollback of an expired transaction counted %d rollbacks", n)
	}
	wantEvents(t, takeWith(t, a.Begin, 100, 10), bodies(10, 3))
	if n := len(c.leases) + len(a.g.fenced); n != 0 {
		t.Fatalf("%d leases or fences left after every transaction ended", n)
	}
}

func TestLeaseLateCommitChangesNothing(t *testing.T) {
	const lease = 50 * time.Millisecond
	c, cfg, a, tx := leaseTaken(t, lease, 6, 6)
	waitLen(t, a, 6, 40*lease)
	if err := tx.Commit(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("late Commit: %v, want ErrLeaseExpired", err)
	}
	if a.Len() != 6 {
		t.Fatalf("the late commit consumed events: %d queued, want 6", a.Len())
	}
	// Nothing was written: a crash and a replay of the logs find them all.
	crash(t, c)
	c = mustOpen(t, cfg)
	wantEvents(t, takeWith(t, groupOf(t, c, "a").Begin, 100, 4), bodies(0, 6))
}

// TestLeaseCommitBeforeExpiryKeepsItsEvents: a commit within the lease
// ends it; the timer never returns committed events.
func TestLeaseCommitBeforeExpiryKeepsItsEvents(t *testing.T) {
	const lease = 200 * time.Millisecond
	_, _, a, tx := leaseTaken(t, lease, 5, 5)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * lease)
	if s := a.Stats(); s.Queued != 0 || s.LeasesExpired != 0 {
		t.Fatalf("after a commit in time: Queued %d, LeasesExpired %d; want 0 and 0", s.Queued, s.LeasesExpired)
	}
}

// TestLeaseCommitRacesExpiry hammers commits that end at about the time
// their lease expires: each event is consumed exactly once or still
// queued (or, with MaxDeliveries, a dead letter), never two of them, never
// lost; a commit that failed with ErrLeaseExpired consumed nothing.
func TestLeaseCommitRacesExpiry(t *testing.T) {
	for _, maxDeliveries := range []int{0, 2} {
		cfg := leaseConfig(t, time.Millisecond)
		cfg.Groups[0].MaxDeliveries = maxDeliveries
		cfg.Capacity, cfg.TransactionCapacity = 5000, 10
		c := mustOpen(t, cfg)
		const n = 2000
		putN(t, c, 0, n, 10)
		a := groupOf(t, c, "a")
		var mu sync.Mutex
		consumed := map[string]int{}
		expired := 0
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 7))
				for range 600 {
					tx, err := a.Begin()
					if err != nil {
						t.Error(err)
						return
					}
					var got []string
					for range 1 + r.IntN(5) {
						ev, ok, err := tx.Take()
						if err != nil || !ok {
							break
						}
						got = append(got, string(ev.Body))
					}
					time.Sleep(time.Duration(r.IntN(1500)) * time.Microsecond)
					err = tx.Commit()
					mu.Lock()
					switch {
					case err == nil:
						for _, b := range got {
							consumed[b]++
						}
					case errors.Is(err, ErrLeaseExpired):
						expired++
					default:
						t.Errorf("commit: %v", err)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if expired == 0 || len(consumed) == 0 {
			t.Fatalf("MaxDeliveries %d: %d commits expired, %d events consumed: the race was not exercised", maxDeliveries, expired, len(consumed))
		}
		if s := a.Stats(); s.InflightTakes != 0 {
			t.Fatalf("%d events still in flight", s.InflightTakes)
		}
		for _, b := range takeWith(t, a.Begin, n, 10) {
			consumed[b]++
		}
		if maxDeliveries > 0 {
			for _, b := range takeWith(t, groupOf(t, c, "a.dlq").Begin, n, 10) {
				consumed[b]++
			}
		}
		for _, b := range bodies(0, n) {
			if consumed[b] != 1 {
				t.Fatalf("MaxDeliveries %d: %s consumed %d times (%d commits expired)", maxDeliveries, b, consumed[b], expired)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLeaseCloseWithArmedLeases(t *testing.T) {
	cfg := leaseConfig(t, time.Hour)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 6, 6)
	a := groupOf(t, c, "a")
	tx, _ := takeSome(t, a, 3)
	if len(c.leases) != 1 {
		t.Fatalf("%d leases armed, want 1", len(c.leases))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if len(c.leases) != 0 {
		t.Fatalf("Close left %d leases armed", len(c.leases))
	}
	if err := tx.Commit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close: %v", err)
	}
	c = mustOpen(t, cfg)
	wantEvents(t, takeWith(t, groupOf(t, c, "a").Begin, 100, 4), bodies(0, 6))
	// Expiries that run while Close does: none outlives it (goleak, at
	// the end of the tests), none panics.
	for i := range 8 {
		cfg := leaseConfig(t, time.Duration(i%4)*100*time.Microsecond+time.Microsecond)
		c := mustOpen(t, cfg)
		putN(t, c, 0, 4, 4)
		tx, _ := groupOf(t, c, "a").Begin()
		for range 2 {
			if _, _, err := tx.Take(); err != nil && !errors.Is(err, ErrLeaseExpired) {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Takes racing Close arm no lease after it.
	for range 10 {
		c := mustOpen(t, leaseConfig(t, time.Hour))
		putN(t, c, 0, 50, 10)
		a := groupOf(t, c, "a")
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				tx, err := a.Begin()
				if err != nil {
					return
				}
				_, _, err = tx.Take()
				if tx.Rollback() != nil || err != nil {
					return
				}
			}
		}()
		time.Sleep(time.Millisecond)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
		// A Take that passed its check of closed before Close reaches
		// takeHead after stopLeases (a window too narrow to hit here):
		// it arms nothing.
		c.armLeaseLocked(a.g, 1<<40)
		if len(c.leases) != 0 {
			t.Fatalf("%d leases armed after Close", len(c.leases))
		}
	}
}

func TestLeaseOfARemovedGroup(t *testing.T) {
	const lease = 200 * time.Millisecond
	cfg := leaseConfig(t, lease)
	cfg.Groups = append(cfg.Groups, GroupConfig{Name: "b"})
	c := mustOpen(t, cfg)
	putN(t, c, 0, 5, 5)
	tx, _ := takeSome(t, groupOf(t, c, "a"), 3)
	if err := c.RemoveGroup("a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * lease)
	if err := tx.Commit(); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Commit after RemoveGroup and the lease: %v, want ErrNoGroup", err)
	}
	if n := len(c.leases); n != 0 {
		t.Fatalf("%d leases left", n)
	}
	if s := (&Group{c: c, g: tx.grp}).Stats(); s.LeasesExpired != 0 {
		t.Fatalf("the lease of a removed group expired: LeasesExpired %d", s.LeasesExpired)
	}
}

func TestLeaseOfAResetGroup(t *testing.T) {
	const lease = 200 * time.Millisecond
	c, _, a, tx := leaseTaken(t, lease, 8, 3)
	if n, err := c.ResetGroup("a", Earliest()); err != nil || n != 8 {
		t.Fatalf("ResetGroup = %d, %v; want 8", n, err)
	}
	time.Sleep(2 * lease)
	// The expiry found the transaction fenced by the reset: it returned
	// nothing (the reset decided the queue).
	if s := a.Stats(); s.Queued != 8 || s.LeasesExpired != 0 {
		t.Fatalf("after the reset and the lease: Queued %d, LeasesExpired %d; want 8 and 0", s.Queued, s.LeasesExpired)
	}
	if err := tx.Commit(); !errors.Is(err, ErrGroupReset) {
		t.Fatalf("Commit: %v, want ErrGroupReset", err)
	}
	wantEvents(t, takeWith(t, a.Begin, 100, 5), bodies(0, 8))
}

// TestLeaseExpiredThenCrash: a checkpoint saw the events in flight, the
// lease returned them, and the process died before anyone took them:
// they are back once, in order.
func TestLeaseExpiredThenCrash(t *testing.T) {
	const lease = 40 * time.Millisecond
	c, cfg, a, _ := leaseTaken(t, lease, 10, 4)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	waitLen(t, a, 10, 40*lease)
	crash(t, c)
	c = mustOpen(t, cfg)
	wantEvents(t, takeWith(t, groupOf(t, c, "a").Begin, 100, 3), bodies(0, 10))
}

// TestLeaseExpiryCountsDeliveries: an expiry is a rollback for
// MaxDeliveries: after MaxDeliveries expired leases the event is a dead
// letter, also when only the log has the counts (the deliver records a
// rollback writes).
func TestLeaseExpiryCountsDeliveries(t *testing.T) {
	const lease = 30 * time.Millisecond
	c, cfg, a := leaseCounting(t, lease, 2, 2)
	for i := 1; i <= 2; i++ {
		tx, err := a.Begin()
		if err != nil {
			t.Fatal(err)
		}
		ev, _, err := tx.Take()
		if err != nil || ev.Deliveries != i {
			t.Fatalf("take %d: deliveries %d, %v", i, ev.Deliveries, err)
		}
		waitLen(t, a, 2, 40*lease)
	}
	crash(t, c)
	if err := os.Remove(filepath.Join(cfg.CheckpointDir, checkpoint.JournalName)); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	a = groupOf(t, c, "a")
	wantEvents(t, takeWith(t, a.Begin, 100, 5), bodies(1, 1))
	if d := groupOf(t, c, "a.dlq"); d.Len() != 1 {
		t.Fatalf("dead-letter group holds %d, want 1", d.Len())
	}
}

func TestLeaseTimeoutNegativeIsRefused(t *testing.T) {
	cfg := leaseConfig(t, -time.Second)
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "LeaseTimeout") {
		t.Fatalf("Open with a negative LeaseTimeout: %v", err)
	}
	c := mustOpen(t, testConfig(t, 1))
	if _, err := c.AddGroup(GroupConfig{Name: "x", LeaseTimeout: -1}); err == nil || !strings.Contains(err.Error(), "LeaseTimeout") {
		t.Fatalf("AddGroup with a negative LeaseTimeout: %v", err)
	}
	if slices.Contains(c.GroupNames(), "x") {
		t.Fatal("AddGroup created the group it refused")
	}
}

// TestLeaseOfATransactionLeftWithNothing: a Take that dead-letters the
// event it found (at MaxDeliveries) leaves its transaction holding nothing;
// its Commit still ends the lease.
func TestLeaseOfATransactionLeftWithNothing(t *testing.T) {
	const lease = 200 * time.Millisecond
	c, _, a := leaseCounting(t, lease, 1, 1)
	first, _ := takeSome(t, a, 1)
	waitLen(t, a, 1, 40*lease) // back at the head, at MaxDeliveries
	if err := first.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tx.Take(); ok || err != nil {
		t.Fatalf("Take of the event at MaxDeliveries: ok %v, %v; want a dead letter", ok, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * lease)
	if s := a.Stats(); s.LeasesExpired != 1 || len(c.leases)+len(a.g.fenced) != 0 {
		t.Fatalf("LeasesExpired %d (want 1), %d leases and %d fences left", s.LeasesExpired, len(c.leases), len(a.g.fenced))
	}
	if d := groupOf(t, c, "a.dlq"); d.Len() != 1 {
		t.Fatalf("dead-letter group holds %d, want 1", d.Len())
	}
}
