package channel

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fullChannel opens a channel of capacity n with the given KeepAlive and
// fills it with committed events.
func fullChannel(t *testing.T, n int, keepAlive time.Duration) *FileChannel {
	t.Helper()
	cfg := testConfig(t, 1)
	cfg.Capacity, cfg.TransactionCapacity, cfg.KeepAlive = n, n, keepAlive
	c := mustOpen(t, cfg)
	t.Cleanup(func() { c.Close() })
	putN(t, c, 0, n, n)
	return c
}

// waitForWaitingPuts polls Stats until n Puts wait for room, and returns
// those Stats.
func waitForWaitingPuts(t *testing.T, c *FileChannel, n int, errc <-chan error) Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := c.Stats()
		if s.PutsWaiting == n {
			return s
		}
		select {
		case err := <-errc:
			t.Fatalf("Put returned %v; it should still wait for room", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats().PutsWaiting = %d after 10s, want %d (%+v)", s.PutsWaiting, n, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// The usual wait: a Put into a full channel blocks until a take commits,
// and returns nil. It shows as waiting while it waits, and is counted and
// timed after.
func TestPutWaitForRoomIsCounted(t *testing.T) {
	c := fullChannel(t, 2, time.Hour)
	if s := c.Stats(); s.PutWaits != 0 || s.PutWaitTime != 0 || s.PutsWaiting != 0 || s.PutsFull != 0 {
		t.Fatalf("puts with room counted as waits: %+v", s)
	}

	tx, _ := c.Begin()
	errc := make(chan error, 1)
	go func() { errc <- tx.PutContext(context.Background(), Event{Body: []byte("late")}) }()
	during := waitForWaitingPuts(t, c, 1, errc)
	if during.PutWaits != 1 {
		t.Fatalf("while a Put waits: PutWaits = %d, want 1 (it counts from the start of the wait)", during.PutWaits)
	}
	// The wait in progress is timed too: a source stuck behind a stopped
	// sink must not read as "waited 0s".
	for deadline := time.Now().Add(10 * time.Second); during.PutWaitTime <= 0; during = c.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("a Put waiting for 10s: PutWaitTime = %v, want > 0", during.PutWaitTime)
		}
		time.Sleep(time.Millisecond)
	}

	if got := takeN(t, c, 1, 1); len(got) != 1 { // room for the waiting Put
		t.Fatalf("took %v", got)
	}
	if err := <-errc; err != nil {
		t.Fatalf("PutContext after a take made room = %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	if after.PutWaits != 1 || after.PutsWaiting != 0 || after.PutsFull != 0 {
		t.Fatalf("after the wait: PutWaits %d, PutsWaiting %d, PutsFull %d; want 1, 0, 0", after.PutWaits, after.PutsWaiting, after.PutsFull)
	}
	if after.PutWaitTime < during.PutWaitTime {
		t.Fatalf("PutWaitTime went down from %v (while waiting) to %v", during.PutWaitTime, after.PutWaitTime)
	}
	if again := c.Stats(); again.PutWaitTime != after.PutWaitTime {
		t.Fatalf("PutWaitTime grows with nobody waiting: %v, then %v", after.PutWaitTime, again.PutWaitTime)
	}
}

// Every way a wait can end counts as a wait; only the KeepAlive timeout
// counts as full as well.
func TestPutWaitOutcomesAreCounted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
		// end makes the waiting Put return, if KeepAlive does not first.
		end      func(c *FileChannel, cancel context.CancelFunc)
		wantErr  error
		wantFull int64
	}{
		{"keep_alive_ends", 10 * time.Millisecond, nil, ErrChannelFull, 1},
		{"context_canceled", time.Hour, func(_ *FileChannel, cancel context.CancelFunc) { cancel() }, context.Canceled, 0},
		{"channel_closed", time.Hour, func(c *FileChannel, _ context.CancelFunc) { c.Close() }, ErrClosed, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fullChannel(t, 1, tc.keepAlive)
			tx, _ := c.Begin()
			defer tx.Rollback()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- tx.PutContext(ctx, Event{Body: []byte("x")}) }()
			if tc.end != nil {
				waitForWaitingPuts(t, c, 1, errc)
				tc.end(c, cancel)
			}
			if err := <-errc; !errors.Is(err, tc.wantErr) {
				t.Fatalf("PutContext = %v, want %v", err, tc.wantErr)
			}
			s := c.Stats()
			if s.PutWaits != 1 || s.PutWaitTime <= 0 || s.PutsWaiting != 0 || s.PutsFull != tc.wantFull {
				t.Fatalf("PutWaits %d, PutWaitTime %v, PutsWaiting %d, PutsFull %d; want 1, > 0, 0, %d",
					s.PutWaits, s.PutWaitTime, s.PutsWaiting, s.PutsFull, tc.wantFull)
			}
		})
	}
}

// KeepAlive < 0: a Put into a full channel fails at once. It is full, not
// a wait.
func TestPutWithoutKeepAliveIsFullNotAWait(t *testing.T) {
	c := fullChannel(t, 1, -1)
	tx, _ := c.Begin()
	defer tx.Rollback()
	if err := tx.Put(Event{Body: []byte("x")}); !errors.Is(err, ErrChannelFull) {
		t.Fatalf("Put = %v, want ErrChannelFull", err)
	}
	s := c.Stats()
	if s.PutWaits != 0 || s.PutWaitTime != 0 || s.PutsWaiting != 0 || s.PutsFull != 1 {
		t.Fatalf("PutWaits %d, PutWaitTime %v, PutsWaiting %d, PutsFull %d; want 0, 0, 0, 1",
			s.PutWaits, s.PutWaitTime, s.PutsWaiting, s.PutsFull)
	}
}

// Room that appears as a waiting Put's context ends is not taken by the
// Put that fails: a permit taken and not given back would shrink the
// channel until the next Open.
func TestGateCanceledWaitTakesNoRoom(t *testing.T) {
	g := newGate(1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.acquire(ctx, 1, time.Hour, nil) }()
	for deadline := time.Now().Add(10 * time.Second); g.putWaits().waiting != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("acquire never waited")
		}
	}
	// Room, without the wake-up release would send, and the context's end,
	// at once for the waiter: parked, it wakes for the context only; not
	// parked yet (it counts itself waiting before its first look for room),
	// its next look sees both.
	g.mu.Lock()
	g.used = 0
	cancel()
	g.mu.Unlock()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire = %v, want context.Canceled", err)
	}
	if n := g.inUse(); n != 0 {
		t.Fatalf("a canceled acquire holds %d permits, want 0", n)
	}
}
