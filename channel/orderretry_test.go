package channel

import (
	"errors"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// OrderKey with RetryDelays and Transaction.Retry (issue 32): a key waits
// with its event.

// orderRetryConfig is a channel with one group "a" keyed by header "k",
// with these RetryDelays, on a test clock.
func orderRetryConfig(t *testing.T, delays ...time.Duration) (Config, *testClock) {
	cfg := orderConfig(t)
	clock := &testClock{now: time.Now()}
	cfg.now = clock.Now
	cfg.Groups[0].RetryDelays = delays
	return cfg, clock
}

// takeN takes up to n events in one transaction of g (fewer when g has
// no more free) and returns it with their bodies.
func takeUpTo(t *testing.T, g *Group, n int) (*Transaction, []string) {
	t.Helper()
	tx := mustBegin(t, g)
	var out []string
	for len(out) < n {
		ev, ok, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		out = append(out, string(ev.Body))
	}
	return tx, out
}

// rollbackTakes takes up to n events of g in one transaction and rolls
// it back.
func rollbackTakes(t *testing.T, g *Group, n int) {
	t.Helper()
	tx, _ := takeUpTo(t, g, n)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
}

// wantCommitted takes all g's free events in one transaction, commits it
// and checks their bodies.
func wantCommitted(t *testing.T, what string, g *Group, want ...string) {
	t.Helper()
	tx := mustBegin(t, g)
	wantBodies(t, what, takeAll(t, tx), want...)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func wantStats(t *testing.T, what string, g *Group, waiting, parked int) {
	t.Helper()
	if st := g.Stats(); st.Waiting != waiting || st.Parked != parked {
		t.Fatalf("%s: %d waiting, %d parked; want %d, %d", what, st.Waiting, st.Parked, waiting, parked)
	}
}

// A rolled-back key waits with its first event: the key's later events
// (those of the same transaction first, then those behind) are held back
// until it is due and taken, in order, while the other keys flow.
func TestOrderRetryStuckKeyWaits(t *testing.T) {
	cfg, clock := orderRetryConfig(t, time.Hour)
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x", "y", "x", "", "y")
	tx, got := takeUpTo(t, a, 2)
	wantBodies(t, "first takes", got, "0:x", "1:x")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantStats(t, "after the rollback", a, 1, 1)
	wantCommitted(t, "while x waits", a, "2:y", "4:", "5:y")
	wantStats(t, "x's events held back", a, 1, 2)
	putKeyed(t, c, 6, "y", "x")
	clock.Add(time.Hour - time.Millisecond)
	wantCommitted(t, "a millisecond early", a, "6:y")
	clock.Add(time.Millisecond)
	// One transaction takes x's waiting event and then the key's others:
	// it holds the key, nothing of it is skipped before them.
	tx, got = takeUpTo(t, a, 10)
	wantBodies(t, "when due", got, "0:x")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantCommitted(t, "after x's first", a, "1:x", "3:x", "7:x")
	wantStats(t, "at the end", a, 0, 0)
}

// The transaction that takes a key's waiting event holds the key: the
// key's events parked behind it are delivered only after it ends, and a
// rollback makes the key wait again with the same event.
func TestOrderRetryWaitsAgain(t *testing.T) {
	cfg, clock := orderRetryConfig(t, time.Minute, time.Hour)
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x")
	rollbackTakes(t, a, 2)
	clock.Add(time.Minute)
	tx, got := takeUpTo(t, a, 10)
	wantBodies(t, "second delivery", got, "0:x")
	other, got := takeUpTo(t, a, 10)
	wantBodies(t, "beside the holder", got)
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantStats(t, "waiting again", a, 1, 1)
	clock.Add(time.Hour - time.Millisecond)
	wantCommitted(t, "before the second delay", a)
	clock.Add(time.Millisecond)
	wantCommitted(t, "when due", a, "0:x")
	wantCommitted(t, "after x's first", a, "1:x")
}

// Transaction.Retry in a keyed group: e waits with its key; the key's
// other retried events are parked behind it and none comes back before
// its own delay; the transaction's other events are committed.
func TestOrderRetryTransactionRetry(t *testing.T) {
	cfg, clock := orderRetryConfig(t)
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x", "y")
	tx := mustBegin(t, a)
	evs := map[string]Event{}
	for range 3 {
		ev, ok, err := tx.Take()
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		evs[string(ev.Body)] = ev
	}
	// Marked out of take order, the second with the longer delay.
	if err := tx.Retry(evs["1:x"], time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := tx.Retry(evs["0:x"], time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantStats(t, "after the commit", a, 1, 1)
	putKeyed(t, c, 3, "x", "z")
	wantCommitted(t, "while x waits", a, "4:z")
	clock.Add(time.Minute)
	wantCommitted(t, "after the shorter delay: 1:x waits an hour", a)
	clock.Add(time.Hour - time.Minute)
	wantCommitted(t, "when both are due", a, "0:x")
	wantCommitted(t, "after x's first", a, "1:x", "3:x")
}

// The key still waits across a restart: its later events are not
// delivered before the waiting one, nor the waiting one before its due
// time, whether recovery reads a checkpoint or replays the logs in full
// (or Rebuild rebuilt the checkpoint).
func TestOrderRetrySurvivesRestart(t *testing.T) {
	for _, tc := range restartCases {
		for _, how := range []string{"rollback", "retry"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				orderRetryRestart(t, how == "retry", tc.restart)
			})
		}
	}
}

// orderRetryRestart makes key x wait an hour with its first event, the
// second parked behind it, by a rollback or Transaction.Retry of both,
// restarts the channel and checks that x still waits.
func orderRetryRestart(t *testing.T, retry bool, restart func(t *testing.T, c *FileChannel, cfg Config)) {
	cfg, clock := orderRetryConfig(t, time.Hour)
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x", "y", "x")
	tx := mustBegin(t, a)
	for range 2 {
		ev, ok, err := tx.Take()
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if retry {
			if err := tx.Retry(ev, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	var err error
	if retry {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
	wantCommitted(t, "before the restart", a, "2:y")
	wantStats(t, "before the restart", a, 1, 2)
	clock.Add(time.Minute)
	restart(t, c, cfg)
	c = mustOpen(t, cfg)
	a = mustGroup(t, c, "a")
	if st := a.Stats(); st.Waiting != 1 {
		t.Fatalf("after the restart: %d waiting, want 1", st.Waiting)
	}
	wantCommitted(t, "after the restart", a)
	clock.Add(time.Hour - time.Minute - time.Millisecond)
	wantCommitted(t, "a millisecond early", a)
	clock.Add(time.Millisecond)
	wantCommitted(t, "when due", a, "0:x")
	wantCommitted(t, "after x's first", a, "1:x", "3:x")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// The events of an expired lease wait as after a rollback: the key with
// its first, the others parked behind it.
func TestOrderRetryLeaseExpiry(t *testing.T) {
	cfg, clock := orderRetryConfig(t, time.Minute)
	cfg.Groups[0].LeaseTimeout = 20 * time.Millisecond
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x", "y", "x")
	tx, got := takeUpTo(t, a, 2)
	wantBodies(t, "before the lease expires", got, "0:x", "1:x")
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().Waiting != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the expired lease's events do not wait")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("late Commit: %v", err)
	}
	wantCommitted(t, "while x waits", a, "2:y")
	clock.Add(time.Minute)
	wantCommitted(t, "when due", a, "0:x")
	wantCommitted(t, "after x's first", a, "1:x", "3:x")
}

// A key's waiting event that reached MaxDeliveries is a dead letter when
// it is due: its key is free at once, and the same Take goes on with the
// key's next event.
func TestOrderRetryDeadLetterFreesKey(t *testing.T) {
	cfg, clock := orderRetryConfig(t)
	cfg.Groups[0].MaxDeliveries = 1
	cfg.Groups[0].DeadLetter = "dead"
	cfg.Groups = append(cfg.Groups, GroupConfig{Name: "dead"})
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x")
	tx, ev := takeOne(t, a)
	if err := tx.Retry(ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantCommitted(t, "while x waits", a)
	clock.Add(time.Hour)
	tx, got := takeUpTo(t, a, 1)
	wantBodies(t, "when due", got, "1:x")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantCommitted(t, "the dead letter", mustGroup(t, c, "dead"), "0:x")
	wantStats(t, "at the end", a, 0, 0)
}

// A key's waiting event that expired (ExpireAfter) when it is due is
// dropped: its key is free at once, and the same Take goes on with the
// key's next event. (Events are stamped with the real clock: the test
// runs on it, with margins of 200 ms.)
func TestOrderRetryExpiredFreesKey(t *testing.T) {
	cfg := orderConfig(t)
	cfg.Groups[0].RetryDelays = []time.Duration{time.Second}
	cfg.Groups[0].ExpireAfter = 800 * time.Millisecond
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x")
	rollbackTakes(t, a, 1)
	due := time.Now().Add(time.Second)
	time.Sleep(900 * time.Millisecond)
	putKeyed(t, c, 1, "x")
	wantCommitted(t, "while x waits", a)
	wantStats(t, "while x waits", a, 1, 1)
	time.Sleep(time.Until(due))
	var got []string
	for deadline := time.Now().Add(500 * time.Millisecond); len(got) == 0 && time.Now().Before(deadline); {
		var tx *Transaction
		tx, got = takeUpTo(t, a, 1)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	wantBodies(t, "when due, expired", got, "1:x")
	if st := a.Stats(); st.Waiting != 0 || st.Parked != 0 || st.Expired != 1 {
		t.Fatalf("at the end: %+v", st)
	}
}

// ResetGroup drops a keyed group's waiting events and the events parked
// behind them with them: the reset's events are free and in order.
func TestOrderRetryResetGroup(t *testing.T) {
	cfg, clock := orderRetryConfig(t, time.Hour)
	cfg.Retention = Retention{MaxAge: time.Hour}
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x", "x")
	rollbackTakes(t, a, 2)
	wantCommitted(t, "while x waits", a)
	wantStats(t, "before the reset", a, 1, 2)
	if n, err := c.ResetGroup("a", Earliest()); err != nil || n != 3 {
		t.Fatalf("ResetGroup: %d, %v; want 3", n, err)
	}
	wantStats(t, "after the reset", a, 0, 0)
	clock.Add(time.Hour)
	wantCommitted(t, "after the reset", a, "0:x", "1:x", "2:x")
}

// A rollback that dead-letters a key's only event (MaxDeliveries) frees
// the key, while the transaction's other events wait: the events parked
// behind the key are taken next.
func TestOrderRetryDeadLetterAtRollback(t *testing.T) {
	cfg, clock := orderRetryConfig(t, time.Hour)
	cfg.Groups[0].MaxDeliveries = 2
	cfg.Groups[0].DeadLetter = "dead"
	cfg.Groups = append(cfg.Groups, GroupConfig{Name: "dead"})
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x")
	rollbackTakes(t, a, 1)
	clock.Add(time.Hour)
	putKeyed(t, c, 1, "y", "x")
	tx, got := takeUpTo(t, a, 2)
	wantBodies(t, "the second delivery", got, "0:x", "1:y")
	wantCommitted(t, "behind the holder", a)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantStats(t, "after the rollback", a, 1, 0)
	wantCommitted(t, "after the rollback", a, "2:x")
	wantCommitted(t, "the dead letter", mustGroup(t, c, "dead"), "0:x")
}

// A due keyed waiting event whose read fails (not damage) goes back to
// the head before the key's parked events, and the key is free: the next
// Take gets it, then the key's others, in order.
func TestOrderRetryFailedReadOfDue(t *testing.T) {
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 1)
	clock := &testClock{now: time.Now()}
	cfg.now = clock.Now
	cfg.Groups = []GroupConfig{{Name: "a", OrderKey: "k", RetryDelays: []time.Duration{time.Hour}}}
	c := mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x")
	rollbackTakes(t, a, 2)
	clock.Add(time.Hour)
	tx := mustBegin(t, a)
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpReadAt}, Name: "log-*", Times: 1})
	if _, _, err := tx.Take(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Take with a failing read: %v", err)
	}
	ff.Clear()
	wantBodies(t, "after the failed read", takeAll(t, tx), "0:x", "1:x")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A group given its OrderKey while two events of one key wait: Open lets
// the one due first hold the key and parks the other behind it.
func TestOrderRetryKeyAddedWhileWaiting(t *testing.T) {
	cfg, clock := orderRetryConfig(t, time.Hour)
	cfg.Groups[0].OrderKey = ""
	c := mustOpen(t, cfg)
	putKeyed(t, c, 0, "x", "x", "y")
	rollbackTakes(t, mustGroup(t, c, "a"), 2)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Groups[0].OrderKey = "k"
	c = mustOpen(t, cfg)
	a := mustGroup(t, c, "a")
	wantStats(t, "after Open", a, 1, 1)
	wantCommitted(t, "while x waits", a, "2:y")
	clock.Add(time.Hour)
	wantCommitted(t, "when due", a, "0:x")
	wantCommitted(t, "after x's first", a, "1:x")
}
