package channel

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// returned fails if done does not close soon: nothing woke the waiter.
func returned(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still waiting 5s after an event became takeable", what)
	}
}

// notReturned fails if done is already closed: the call it stands for
// should still be waiting.
func notReturned(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s returned on an empty channel", what)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestTakeContextWaitsForACommit(t *testing.T) {
	c := mustOpen(t, testConfig(t, 1))
	defer c.Close()
	tx, _ := c.Begin()
	var got Event
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err = tx.TakeContext(context.Background())
	}()
	notReturned(t, done, "TakeContext")
	// An uncommitted put does not wake it for good.
	ptx, _ := c.Begin()
	if err := ptx.Put(Event{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	notReturned(t, done, "TakeContext")
	if err := ptx.Commit(); err != nil {
		t.Fatal(err)
	}
	returned(t, done, "TakeContext")
	if err != nil || string(got.Body) != "x" {
		t.Fatalf("TakeContext = %q, %v", got.Body, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Queued != 0 || s.InflightTakes != 0 {
		t.Fatalf("stats after the take commit: %+v", s)
	}
}

func TestTakeContextEnds(t *testing.T) {
	c := mustOpen(t, testConfig(t, 1))
	putN(t, c, 0, 1, 1)
	tx, _ := c.Begin()
	if _, err := tx.TakeContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Deadline: the error is the context's, the earlier take stays.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := tx.TakeContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TakeContext after the deadline = %v", err)
	}
	if s := c.Stats(); s.InflightTakes != 1 {
		t.Fatalf("in-flight takes %d, want 1", s.InflightTakes)
	}
	// An ended context returns at once, even with events queued.
	cancel()
	if err := c.Wait(ctx); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with an ended context = %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatalf("Wait with an event queued = %v", err)
	}
	// Close wakes a waiter with ErrClosed.
	tx2, _ := c.Begin()
	if _, err := tx2.TakeContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}
	tx3, _ := c.Begin()
	errc := make(chan error, 1)
	go func() {
		_, err := tx3.TakeContext(context.Background())
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("TakeContext across Close = %v, want ErrClosed", err)
	}
	if err := c.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait on a closed channel = %v", err)
	}
	//lint:ignore SA1012 a nil context is the misuse under test
	if _, err := tx3.TakeContext(nil); err == nil {
		t.Fatal("TakeContext(nil) succeeded")
	}
}

// A rollback returns events to the head, which wakes a waiting sink.
func TestTakeRollbackWakesWaiter(t *testing.T) {
	c := mustOpen(t, testConfig(t, 1))
	defer c.Close()
	putN(t, c, 0, 3, 3)
	holder, _ := c.Begin()
	for range 3 {
		if _, ok, err := holder.Take(); !ok || err != nil {
			t.Fatalf("take: %v %v", ok, err)
		}
	}
	waiter, _ := c.Begin()
	done := make(chan struct{})
	var got Event
	go func() {
		defer close(done)
		got, _ = waiter.TakeContext(context.Background())
	}()
	notReturned(t, done, "TakeContext")
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	returned(t, done, "TakeContext")
	if string(got.Body) != string(body(0)) {
		t.Fatalf("woken take got %q, want the returned head %q", got.Body, body(0))
	}
	if err := waiter.Rollback(); err != nil {
		t.Fatal(err)
	}
}

func TestPutContextOnAFullChannel(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Capacity, cfg.TransactionCapacity = 2, 2
	cfg.KeepAlive = time.Hour
	c := mustOpen(t, cfg)
	defer c.Close()
	putN(t, c, 0, 2, 2)

	// The context ends long before KeepAlive.
	tx, _ := c.Begin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tx.PutContext(ctx, Event{Body: []byte("x")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PutContext = %v, want the deadline", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	// KeepAlive ends before the context.
	cfg2 := testConfig(t, 1)
	cfg2.Capacity, cfg2.TransactionCapacity, cfg2.KeepAlive = 1, 1, 10*time.Millisecond
	c2 := mustOpen(t, cfg2)
	defer c2.Close()
	putN(t, c2, 0, 1, 1)
	tx2, _ := c2.Begin()
	if err := tx2.PutContext(context.Background(), Event{Body: []byte("x")}); !errors.Is(err, ErrChannelFull) {
		t.Fatalf("PutContext = %v, want ErrChannelFull", err)
	}
	_ = tx2.Rollback()

	// Room made by a take commit lets a waiting put in.
	tx3, _ := c.Begin()
	errc := make(chan error, 1)
	go func() { errc <- tx3.PutContext(context.Background(), Event{Body: []byte("late")}) }()
	time.Sleep(10 * time.Millisecond)
	if got := takeN(t, c, 1, 1); len(got) != 1 {
		t.Fatalf("took %v", got)
	}
	if err := <-errc; err != nil {
		t.Fatalf("PutContext after room appeared = %v", err)
	}
	if err := tx3.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, c); !slices.Equal(got, []string{string(body(1)), "late"}) {
		t.Fatalf("channel holds %v", got)
	}
}

// Sinks blocked in TakeContext and producers running at once: every event
// is delivered exactly once and the sinks stop when their context ends.
func TestBlockingSinksDeliverEverythingOnce(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.Capacity = 200
	cfg.KeepAlive = 5 * time.Second
	c := mustOpen(t, cfg)
	defer c.Close()
	const producers, perProducer, sinks = 3, 300, 3
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []string
	var swg sync.WaitGroup
	for range sinks {
		swg.Add(1)
		go func() {
			defer swg.Done()
			for {
				tx, err := c.Begin()
				if err != nil {
					t.Error(err)
					return
				}
				// Block for the first event, then take what is there.
				var batch []string
				if ev, err := tx.TakeContext(ctx); err == nil {
					batch = append(batch, string(ev.Body))
				}
				for len(batch) > 0 && len(batch) < 7 {
					ev, ok, err := tx.Take()
					if err != nil {
						t.Error(err)
					}
					if !ok {
						break
					}
					batch = append(batch, string(ev.Body))
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, batch...)
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	var pwg sync.WaitGroup
	for p := range producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := 0; i < perProducer; i += 5 {
				tx, _ := c.Begin()
				for j := i; j < i+5; j++ {
					if err := tx.PutContext(ctx, Event{Body: []byte(strconv.Itoa(p*perProducer + j))}); err != nil {
						t.Error(err)
						return
					}
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	pwg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= producers*perProducer || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	swg.Wait()
	sort.Strings(got)
	var want []string
	for i := range producers * perProducer {
		want = append(want, strconv.Itoa(i))
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("sinks got %d events, want %d once each", len(got), len(want))
	}
}
