package channel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
)

// retryConfig is a channel with one group "a" with these RetryDelays, on
// a test clock.
func retryConfig(t *testing.T, delays ...time.Duration) (Config, *testClock) {
	cfg := testConfig(t, 1)
	clock := &testClock{now: time.Now()}
	cfg.now = clock.Now
	cfg.Groups = []GroupConfig{{Name: "a", RetryDelays: delays}}
	return cfg, clock
}

// takeBody takes one event of g and commits (commit) or rolls back the
// transaction; it returns the event's body ("" when g had none to take)
// and its delivery count.
func takeBody(t *testing.T, g *Group, commit bool) (string, int) {
	t.Helper()
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ev, ok, err := tx.Take()
	if err != nil {
		t.Fatal(err)
	}
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "", 0
	}
	return string(ev.Body), ev.Deliveries
}

// wantTake checks that the next take of g (committed or rolled back)
// returns want ("": nothing) with deliveries n.
func wantTake(t *testing.T, what string, g *Group, commit bool, want string, n int) {
	t.Helper()
	got, d := takeBody(t, g, commit)
	if got != want || (want != "" && d != n) {
		t.Fatalf("%s: took %q (delivery %d), want %q (delivery %d)", what, got, d, want, n)
	}
}

// TestRetryDelaysHonoured: a rolled-back event waits RetryDelays[n-1]
// before its n-th redelivery (the last delay repeats), never less, while
// the group's other events are taken.
func TestRetryDelaysHonoured(t *testing.T) {
	cfg, clock := retryConfig(t, 10*time.Second, 30*time.Second)
	reg := prometheus.NewPedanticRegistry()
	cfg.Registerer, cfg.Name = reg, "m"
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	a := groupOf(t, c, "a")
	wantTake(t, "first delivery", a, false, "event-0", 1)
	wantTake(t, "while event-0 waits", a, true, "event-1", 1)
	if st := a.Stats(); st.Waiting != 1 || st.Queued != 1 {
		t.Fatalf("Stats: %d waiting, %d queued; want 1, 1", st.Waiting, st.Queued)
	}
	wantMetric(t, reg, "filechannel_group_retry_waiting_events", map[string]string{"channel_name": "m", "group": "a"}, 1)
	wantTake(t, "while event-0 waits", a, true, "event-2", 1)
	wantTake(t, "before the 1st delay", a, false, "", 0)
	for i, d := range []time.Duration{10 * time.Second, 30 * time.Second, 30 * time.Second} {
		clock.Add(d - time.Millisecond)
		wantTake(t, "a millisecond early", a, false, "", 0)
		clock.Add(time.Millisecond)
		wantTake(t, "when due", a, i == 2, "event-0", i+2)
	}
	if st := a.Stats(); st.Waiting != 0 || st.Queued != 0 {
		t.Fatalf("Stats at the end: %d waiting, %d queued", st.Waiting, st.Queued)
	}
}

// TestRetryDueBeforeHead: a due waiting event is taken before the
// queue's head (it is older).
func TestRetryDueBeforeHead(t *testing.T) {
	cfg, clock := retryConfig(t, time.Second)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	a := groupOf(t, c, "a")
	wantTake(t, "first delivery", a, false, "event-0", 1)
	clock.Add(time.Second)
	wantTake(t, "due", a, true, "event-0", 2)
	wantTake(t, "then the head", a, true, "event-1", 1)
}

// TestRetryMaxDeliveriesDeadLetters: an event that reached MaxDeliveries
// goes to the dead-letter group instead of waiting.
func TestRetryMaxDeliveriesDeadLetters(t *testing.T) {
	cfg, clock := retryConfig(t, time.Second)
	cfg.Groups[0].MaxDeliveries = 2
	c := mustOpen(t, cfg)
	putN(t, c, 0, 1, 1)
	a, dlq := groupOf(t, c, "a"), groupOf(t, c, "a.dlq")
	wantTake(t, "first delivery", a, false, "event-0", 1)
	clock.Add(time.Second)
	wantTake(t, "second delivery", a, false, "event-0", 2)
	if st := a.Stats(); st.Waiting != 0 || dlq.Len() != 1 {
		t.Fatalf("after MaxDeliveries: %d waiting in a, %d in a.dlq; want 0, 1", st.Waiting, dlq.Len())
	}
}

// TestRetryCapacityCountsWaiting: waiting events hold their place in the
// group's capacity.
func TestRetryCapacityCountsWaiting(t *testing.T) {
	cfg, _ := retryConfig(t, time.Hour)
	cfg.Groups[0].Capacity = 2
	cfg.TransactionCapacity = 2
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	a := groupOf(t, c, "a")
	wantTake(t, "first delivery", a, false, "event-0", 1)
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Put(Event{Body: []byte("x")}); !errors.Is(err, ErrChannelFull) {
		t.Fatalf("Put with 1 queued and 1 waiting in capacity 2: %v, want ErrChannelFull", err)
	}
	tx.Rollback()
}

// TestRetryWakesTakeContext: a taker blocked in TakeContext gets the
// waiting event when it becomes due (the group's timer wakes it).
func TestRetryWakesTakeContext(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "a", RetryDelays: []time.Duration{150 * time.Millisecond}}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 1, 1)
	a := groupOf(t, c, "a")
	start := time.Now()
	wantTake(t, "first delivery", a, false, "event-0", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, _ := a.Begin()
	ev, err := tx.TakeContext(ctx)
	if err != nil || string(ev.Body) != "event-0" {
		t.Fatalf("TakeContext: %q, %v", ev.Body, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("redelivered after %v, before its delay 150ms", d)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestRetryLeaseExpiryWaits: the events of an expired lease wait as after
// a rollback.
func TestRetryLeaseExpiryWaits(t *testing.T) {
	cfg, clock := retryConfig(t, time.Minute)
	cfg.Groups[0].LeaseTimeout = 20 * time.Millisecond
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	a := groupOf(t, c, "a")
	tx, _ := takeOne(t, a)
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().Waiting != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the expired lease's event does not wait")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("late Commit: %v", err)
	}
	wantTake(t, "while it waits", a, true, "event-1", 1)
	clock.Add(time.Minute)
	wantTake(t, "when due", a, true, "event-0", 2)
}

// TestRetryDelaySurvivesRestart: a waiting event still waits its delay,
// never less, after a crash, a full replay (no checkpoint) and a Close
// and Open, while the group's other events are taken.
func TestRetryDelaySurvivesRestart(t *testing.T) {
	for _, tc := range restartCases {
		for _, name := range []string{"a", ""} {
			t.Run(tc.name+"/group_"+name, func(t *testing.T) {
				retryRestart(t, name, tc.restart)
			})
		}
	}
}

// restartCases are the ways a test ends a channel before it opens it
// again: a crash, Close and a full replay (no checkpoint), Close, a
// checkpoint then a crash, and Close then Rebuild.
var restartCases = []struct {
	name    string
	restart func(t *testing.T, c *FileChannel, cfg Config)
}{
	{"crash", func(t *testing.T, c *FileChannel, cfg Config) { crash(t, c) }},
	{"full_replay", func(t *testing.T, c *FileChannel, cfg Config) {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		removeCheckpoint(t, cfg)
	}},
	{"close", func(t *testing.T, c *FileChannel, cfg Config) {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}},
	{"checkpoint_then_crash", func(t *testing.T, c *FileChannel, cfg Config) {
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		crash(t, c)
	}},
	{"rebuild", func(t *testing.T, c *FileChannel, cfg Config) {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := Rebuild(cfg, RebuildOptions{}); err != nil {
			t.Fatal(err)
		}
	}},
}

// retryRestart makes an event of group name wait an hour, restarts the
// channel, and checks that it still waits its delay.
func retryRestart(t *testing.T, name string, restart func(t *testing.T, c *FileChannel, cfg Config)) {
	cfg, clock := retryConfig(t, time.Hour)
	cfg.Groups[0].Name = name
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	wantTake(t, "first delivery", groupOf(t, c, name), false, "event-0", 1)
	clock.Add(time.Minute)
	restart(t, c, cfg)
	c = mustOpen(t, cfg)
	a := groupOf(t, c, name)
	if st := a.Stats(); st.Waiting != 1 || st.Queued != 2 {
		t.Fatalf("after the restart: %d waiting, %d queued; want 1, 2", st.Waiting, st.Queued)
	}
	wantTake(t, "after the restart", a, true, "event-1", 1)
	wantTake(t, "after the restart", a, true, "event-2", 1)
	clock.Add(time.Hour - time.Minute - time.Millisecond)
	wantTake(t, "a millisecond early", a, true, "", 0)
	clock.Add(time.Millisecond)
	wantTake(t, "when due", a, true, "event-0", 2)
}

// TestTransactionRetry: Retry(e, after) commits the transaction's other
// events and makes e wait `after` (never less), also across a crash and a
// full replay; its delivery counts toward MaxDeliveries.
func TestTransactionRetry(t *testing.T) {
	for _, restart := range []string{"none", "crash", "full_replay"} {
		t.Run(restart, func(t *testing.T) {
			cfg, clock := retryConfig(t)
			cfg.Groups[0].MaxDeliveries = 2
			c := mustOpen(t, cfg)
			putN(t, c, 0, 4, 4)
			a := groupOf(t, c, "a")
			tx, _ := a.Begin()
			var evs []Event
			for range 3 {
				ev, ok, err := tx.Take()
				if !ok || err != nil {
					t.Fatalf("take: %v, %v", ok, err)
				}
				evs = append(evs, ev)
			}
			if err := tx.Retry(evs[1], time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := tx.Retry(evs[1], time.Minute); !errors.Is(err, ErrNotTaken) {
				t.Fatalf("second Retry of the same event: %v, want ErrNotTaken", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			switch restart {
			case "crash":
				crash(t, c)
				c = mustOpen(t, cfg)
			case "full_replay":
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				removeCheckpoint(t, cfg)
				c = mustOpen(t, cfg)
			}
			a = groupOf(t, c, "a")
			if st := a.Stats(); st.Waiting != 1 || st.Queued != 1 {
				t.Fatalf("after the commit: %d waiting, %d queued; want 1, 1", st.Waiting, st.Queued)
			}
			wantTake(t, "the others were committed", a, true, "event-3", 1)
			clock.Add(time.Minute - time.Millisecond)
			wantTake(t, "a millisecond early", a, true, "", 0)
			clock.Add(time.Millisecond)
			wantTake(t, "when due", a, false, "event-1", 2)
			if n := groupOf(t, c, "a.dlq").Len(); n != 1 {
				t.Fatalf("after MaxDeliveries deliveries and a rollback: %d in a.dlq, want 1", n)
			}
		})
	}
}

// TestRetryResetGroup: ResetGroup replaces the waiting events with the
// rest of the group's queue: none waits after it, and none comes back
// twice.
func TestRetryResetGroup(t *testing.T) {
	cfg, clock := retryConfig(t, time.Hour)
	cfg.Retention = Retention{MaxAge: time.Hour}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	a := groupOf(t, c, "a")
	wantTake(t, "first delivery", a, false, "event-0", 1)
	n, err := c.ResetGroup("a", Earliest())
	if err != nil || n != 2 {
		t.Fatalf("ResetGroup: %d, %v; want 2", n, err)
	}
	if st := a.Stats(); st.Waiting != 0 || st.Queued != 2 {
		t.Fatalf("after the reset: %d waiting, %d queued; want 0, 2", st.Waiting, st.Queued)
	}
	clock.Add(time.Hour)
	wantTake(t, "after the reset", a, true, "event-0", 1)
	wantTake(t, "after the reset", a, true, "event-1", 1)
	wantTake(t, "after the reset, when the old due time passed", a, true, "", 0)
}

// TestRetryPowerLoss: the retry record of a rollback is not synced: a
// power loss before the next fsync of its file loses it, and the event is
// back at once (its wait shortened, the event never lost); once a later
// commit synced the file, the wait survives the power loss too.
func TestRetryPowerLoss(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := memConfig(fsys, 1)
	clock := &testClock{now: time.Now()}
	cfg.now = clock.Now
	cfg.Groups = []GroupConfig{{Name: "a", RetryDelays: []time.Duration{time.Hour}}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	a := groupOf(t, c, "a")
	wantTake(t, "first delivery", a, false, "event-0", 1)
	lost := fsys.CrashClone(false, 1)
	putN(t, c, 2, 1, 1) // its fsync makes the retry record durable
	kept := fsys.CrashClone(false, 1)
	for _, tc := range []struct {
		name        string
		img         *vfs.MemFS
		first       string
		waiting     int
		queuedAfter int
	}{
		{"record_lost", lost, "event-0", 0, 2},
		{"record_synced", kept, "event-1", 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			icfg := cfg
			icfg.fs = tc.img
			c := mustOpen(t, icfg)
			defer c.Close()
			a := groupOf(t, c, "a")
			if st := a.Stats(); st.Waiting != tc.waiting || st.Queued+st.Waiting != tc.queuedAfter {
				t.Fatalf("%d waiting, %d queued; want %d waiting of %d", st.Waiting, st.Queued, tc.waiting, tc.queuedAfter)
			}
			got, _ := takeBody(t, a, true)
			if got != tc.first {
				t.Fatalf("first take %q, want %q", got, tc.first)
			}
		})
	}
}

// TestRetryExpiresWhenDue: an event that waits past its ExpireAfter is
// expired by the Take that finds it due, not delivered.
func TestRetryExpiresWhenDue(t *testing.T) {
	cfg, clock := retryConfig(t, time.Hour)
	cfg.Groups[0].ExpireAfter = 30 * time.Minute
	c := mustOpen(t, cfg)
	putN(t, c, 0, 1, 1)
	a := groupOf(t, c, "a")
	wantTake(t, "first delivery", a, false, "event-0", 1)
	clock.Add(time.Hour)
	wantTake(t, "due but expired", a, true, "", 0)
	if st := a.Stats(); st.Waiting != 0 || st.Expired != 1 {
		t.Fatalf("%d waiting, %d expired; want 0, 1", st.Waiting, st.Expired)
	}
}

// TestRetryRemoveGroup: RemoveGroup drops the group's waiting events, and
// its timer with them; a group of the same name added again starts empty.
func TestRetryRemoveGroup(t *testing.T) {
	cfg, _ := retryConfig(t, 50*time.Millisecond)
	cfg.Groups = append(cfg.Groups, GroupConfig{Name: "b"})
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	wantTake(t, "first delivery", groupOf(t, c, "a"), false, "event-0", 1)
	if err := c.RemoveGroup("a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // its timer would have fired
	if _, err := c.AddGroup(GroupConfig{Name: "a", RetryDelays: []time.Duration{time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if st := groupOf(t, c, "a").Stats(); st.Waiting != 0 || st.Queued != 0 {
		t.Fatalf("the new group a: %d waiting, %d queued", st.Waiting, st.Queued)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	if st := groupOf(t, c, "a").Stats(); st.Waiting != 0 || st.Queued != 0 {
		t.Fatalf("after a restart, the new group a: %d waiting, %d queued", st.Waiting, st.Queued)
	}
}

// TestRetryRebuild: Rebuild (a full replay into a new checkpoint) keeps a
// waiting event waiting, and counts it among its group's events.
func TestRetryRebuild(t *testing.T) {
	cfg, clock := retryConfig(t, time.Hour)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	wantTake(t, "first delivery", groupOf(t, c, "a"), false, "event-0", 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Rebuild(cfg, RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Groups {
		if g.Name == "a" && g.Events != 2 {
			t.Fatalf("Rebuild counts %d events in a, want 2 (1 waiting)", g.Events)
		}
	}
	c = mustOpen(t, cfg)
	a := groupOf(t, c, "a")
	wantTake(t, "after the rebuild", a, true, "event-1", 1)
	wantTake(t, "after the rebuild, before the due time", a, true, "", 0)
	clock.Add(time.Hour)
	wantTake(t, "when due", a, true, "event-0", 2)
}

// TestRetryAddGroupJournal: AddGroup of a group with RetryDelays (which
// counts deliveries) on a channel without one creates the delivery
// journal, so its Takes note their counts with no system call.
func TestRetryAddGroupJournal(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	if _, err := os.Stat(filepath.Join(cfg.CheckpointDir, checkpoint.JournalName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a journal before any group counts deliveries: %v", err)
	}
	if _, err := c.AddGroup(GroupConfig{Name: "r", RetryDelays: []time.Duration{time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.CheckpointDir, checkpoint.JournalName)); err != nil {
		t.Fatalf("no delivery journal after AddGroup of a group with RetryDelays: %v", err)
	}
}

// TestRetryCapacityShrinkCountsWaiting: reopening with a capacity below
// the events a group holds, waiting ones included, is refused.
func TestRetryCapacityShrinkCountsWaiting(t *testing.T) {
	cfg, _ := retryConfig(t, time.Hour)
	cfg.Groups[0].Capacity, cfg.TransactionCapacity = 3, 1
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 1)
	wantTake(t, "first delivery", groupOf(t, c, "a"), false, "event-0", 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Groups[0].Capacity = 2
	if c, err := Open(cfg); err == nil {
		c.Close()
		t.Fatal("Open with capacity 2 of a group holding 2 queued and 1 waiting event succeeded")
	}
}
