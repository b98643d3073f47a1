package channel

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/replay"
)

// errCallback is what the callbacks of these tests panic with.
var errCallback = errors.New("callback bug")

// mustPanic runs f and fails t unless it panics with errCallback.
func mustPanic(t testing.TB, what string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if r := recover(); r != errCallback {
			t.Fatalf("%s: recovered %v, want the callback's panic", what, r)
		}
	}()
	f()
}

// panickyDeadLetters is dlqConfig(max) whose OnDeadLetter panics for
// event-0 and counts the calls.
func panickyDeadLetters(t testing.TB, max int, calls *int) Config {
	cfg := dlqConfig(t, max)
	cfg.OnDeadLetter = func(d DeadLetter) {
		*calls++
		if string(d.Event.Body) == "event-0" {
			panic(errCallback)
		}
	}
	return cfg
}

// TestOnDeadLetterPanicInTake: an OnDeadLetter that panics in the Take that
// moves an event (it reached MaxDeliveries before a crash), recovered above
// a deferred Rollback, leaves the event in the dead-letter group only: not
// back in its group, not delivered again, after a checkpoint, a crash and a
// full replay too.
func TestOnDeadLetterPanicInTake(t *testing.T) {
	var calls int
	cfg := panickyDeadLetters(t, 1, &calls)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	takeOne(t, mustGroup(t, c, "a")) // event-0's one delivery, then a crash
	crash(t, c)
	c = mustOpen(t, cfg)

	a := mustGroup(t, c, "a")
	mustPanic(t, "Take", func() {
		tx, err := a.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		tx.Take() // moves event-0: OnDeadLetter panics
		t.Fatal("Take returned")
	})
	if calls != 1 {
		t.Fatalf("OnDeadLetter called %d times", calls)
	}
	want := map[string]groupView{
		"a":     {Queued: bodies(1, 2), Deliveries: map[string]int{}},
		"a.dlq": {Queued: bodies(0, 1), Deliveries: map[string]int{}},
		"b":     {Queued: bodies(0, 3), Deliveries: map[string]int{}},
	}
	wantView(t, "after the panic", viewGroups(t, c), want)
	// The checkpoint captures the queues as they are now: the event must
	// be in one of them only.
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	crash(t, c)
	c = mustOpen(t, cfg)
	wantView(t, "after a crash", viewGroups(t, c), want)
	c = reopenBoth(t, c, cfg)
	wantView(t, "after a full replay", viewGroups(t, c), want)
	wantEvents(t, drainGroup(t, c, "a"), bodies(1, 2))
	wantEvents(t, drainGroup(t, c, "a.dlq"), bodies(0, 1))
}

// TestOnDeadLetterPanicInTakeKeepsTheTransaction: after a panic in the
// OnDeadLetter of a Take's move, the transaction is as it was before that
// Take: it takes on, rejects what it took (not the moved event) and
// commits.
func TestOnDeadLetterPanicInTakeKeepsTheTransaction(t *testing.T) {
	var calls int
	cfg := panickyDeadLetters(t, 1, &calls)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	takeOne(t, mustGroup(t, c, "a"))
	crash(t, c)
	c = mustOpen(t, cfg)
	defer c.Close()

	tx, err := mustGroup(t, c, "a").Begin()
	if err != nil {
		t.Fatal(err)
	}
	mustPanic(t, "Take", func() { tx.Take() })
	ev, ok, err := tx.Take()
	if err != nil || !ok || string(ev.Body) != "event-1" || ev.Deliveries != 1 {
		t.Fatalf("Take after the panic: %s (%d), %v, %v", ev.Body, ev.Deliveries, ok, err)
	}
	if err := tx.Reject(ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantView(t, "after the commit", viewGroups(t, c), map[string]groupView{
		"a":     {Queued: bodies(2, 1), Deliveries: map[string]int{}},
		"a.dlq": {Queued: bodies(0, 2), Deliveries: map[string]int{}},
		"b":     {Queued: bodies(0, 3), Deliveries: map[string]int{}},
	})
}

// TestOnDeadLetterPanicInCommitAndRollback: a panic in the OnDeadLetter of
// a Commit (a Reject) or a Rollback (MaxDeliveries reached) comes after the
// call is complete: the commit durable and counted, the transaction ended,
// no lock held.
func TestOnDeadLetterPanicInCommitAndRollback(t *testing.T) {
	var calls int
	cfg := panickyDeadLetters(t, 1, &calls)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	a := mustGroup(t, c, "a")

	// Commit: event-0 rejected, event-1 taken.
	tx, ev := takeOne(t, a)
	if _, ok, err := tx.Take(); !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	if err := tx.Reject(ev); err != nil {
		t.Fatal(err)
	}
	commits := testutil.ToFloat64(c.metrics.takeSuccess)
	mustPanic(t, "Commit", func() { tx.Commit() })
	if got := testutil.ToFloat64(c.metrics.takeSuccess) - commits; got != 2 {
		t.Fatalf("the panicking commit counted %v taken events, want 2", got)
	}
	if err := tx.Rollback(); !errors.Is(err, ErrTransactionDone) {
		t.Fatalf("Rollback after the commit: %v", err)
	}
	want := map[string]groupView{
		"a":     {Queued: bodies(2, 1), Deliveries: map[string]int{}},
		"a.dlq": {Queued: bodies(0, 1), Deliveries: map[string]int{}},
		"b":     {Queued: bodies(0, 3), Deliveries: map[string]int{}},
	}
	wantView(t, "after the commit's panic", viewGroups(t, c), want)

	// Rollback: event-0, back in a by a redrive, reaches MaxDeliveries.
	if n, err := c.Redrive("a.dlq", "a", 1); n != 1 || err != nil {
		t.Fatalf("redrive: %d, %v", n, err)
	}
	tx, ev = takeOne(t, a)
	if string(ev.Body) != "event-2" {
		t.Fatalf("took %s", ev.Body)
	}
	if ev, ok, err := tx.Take(); !ok || err != nil || string(ev.Body) != "event-0" {
		t.Fatalf("take: %s, %v %v", ev.Body, ok, err)
	}
	mustPanic(t, "Rollback", func() { tx.Rollback() })
	if err := tx.Rollback(); !errors.Is(err, ErrTransactionDone) {
		t.Fatalf("Rollback after the panicking one: %v", err)
	}
	// Both reached MaxDeliveries: event-2 reported first, then event-0.
	if calls != 3 {
		t.Fatalf("OnDeadLetter called %d times, want 3", calls)
	}
	want["a"] = groupView{Deliveries: map[string]int{}}
	want["a.dlq"] = groupView{Queued: []string{"event-2", "event-0"}, Deliveries: map[string]int{}}
	wantView(t, "after the rollback's panic", viewGroups(t, c), want)
	c = reopenBoth(t, c, cfg)
	wantView(t, "after a full replay", viewGroups(t, c), want)
	c.Close()
}

// TestReplayProgressPanicReleasesOpen: a ReplayProgress that panics makes
// Open panic, and leaves nothing held: the next Open succeeds (the
// directories are not left locked) with every event.
func TestReplayProgressPanicReleasesOpen(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 5)
	c.Close()
	removeCheckpoint(t, cfg) // a full replay, which creates a checkpoint
	bad := cfg
	bad.ReplayProgress = func(replay.Progress) { panic(errCallback) }
	mustPanic(t, "Open", func() {
		if c, err := Open(bad); err == nil {
			c.Close()
		}
	})
	// As a failed Open, it removed the checkpoint it had created.
	if _, err := os.Stat(filepath.Join(cfg.CheckpointDir, checkpoint.CheckpointName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the checkpoint the panicking Open created: %v", err)
	}
	c = mustOpen(t, cfg)
	wantEvents(t, drain(t, c), bodies(0, 10))
}
