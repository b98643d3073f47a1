package channel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flumego/filechannel/logfile"
)

// This file: the API used after Close, concurrently with Close, and a
// Transaction used from two goroutines. None of it may panic, hang or lose
// an event.

// closeWithin closes c and fails t if Close does not return within d (a lock
// left held makes it hang forever).
func closeWithin(t *testing.T, c *FileChannel, d time.Duration) {
	t.Helper()
	returnsWithin(t, d, "Close", c.Close)
}

// TestTakeTransactionEndedAfterClose: a sink whose take transaction is still
// open when the channel closes (the shutdown path of the package doc's sink)
// gets ErrClosed from every call, nothing panics, and the events it held are
// back after reopen, in order.
func TestTakeTransactionEndedAfterClose(t *testing.T) {
	cases := []struct {
		name string
		end  func(t *testing.T, tx *Transaction)
	}{
		{"rollback", func(t *testing.T, tx *Transaction) {
			if err := tx.Rollback(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Rollback after Close: %v, want ErrClosed", err)
			}
			if err := tx.Rollback(); !errors.Is(err, ErrTransactionDone) {
				t.Fatalf("second Rollback: %v, want ErrTransactionDone", err)
			}
		}},
		{"commit_then_rollback", func(t *testing.T, tx *Transaction) {
			if err := tx.Commit(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Commit after Close: %v, want ErrClosed", err)
			}
			// The failed Commit ended the transaction, as every failed
			// Commit does.
			if err := tx.Rollback(); !errors.Is(err, ErrTransactionDone) {
				t.Fatalf("Rollback after the failed Commit: %v, want ErrTransactionDone", err)
			}
		}},
		{"take_then_rollback", func(t *testing.T, tx *Transaction) {
			if _, _, err := tx.Take(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Take after Close: %v, want ErrClosed", err)
			}
			if _, err := tx.TakeContext(context.Background()); !errors.Is(err, ErrClosed) {
				t.Fatalf("TakeContext after Close: %v, want ErrClosed", err)
			}
			if err := tx.Rollback(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Rollback after Close: %v, want ErrClosed", err)
			}
		}},
	}
	for _, ckptOnClose := range []bool{true, false} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/checkpoint_on_close=%v", tc.name, ckptOnClose), func(t *testing.T) {
				cfg := testConfig(t, 1)
				cfg.NoCheckpointOnClose = !ckptOnClose
				c := mustOpen(t, cfg)
				putN(t, c, 0, 10, 5)
				tx, err := c.Begin()
				if err != nil {
					t.Fatal(err)
				}
				for range 4 {
					if _, ok, err := tx.Take(); err != nil || !ok {
						t.Fatalf("take: %v, %v", ok, err)
					}
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				tc.end(t, tx)

				c = mustOpen(t, cfg)
				defer c.Close()
				wantEvents(t, drain(t, c), bodies(0, 10))
			})
		}
	}
}

// TestEveryCallAfterClose: every method of a FileChannel and of a
// Transaction (put or take, empty or not) is safe after Close: the ones
// that return an error return ErrClosed, the others touch nothing Close
// released, and metrics collection still works.
func TestEveryCallAfterClose(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Registerer = prometheus.NewRegistry()
	c := mustOpen(t, cfg)
	putN(t, c, 0, 5, 5)
	fresh, _ := c.Begin()
	puts, _ := c.Begin()
	if err := puts.Put(Event{Body: []byte("uncommitted")}); err != nil {
		t.Fatal(err)
	}
	takes, _ := c.Begin()
	if _, ok, err := takes.Take(); err != nil || !ok {
		t.Fatalf("take: %v, %v", ok, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	closed := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	ctx := context.Background()
	_, err := c.Begin()
	closed("Begin", err)
	closed("Checkpoint", c.Checkpoint())
	closed("Wait", c.Wait(ctx))
	closed("Health", c.Health())
	_ = c.Len()
	_ = c.Stats()
	_ = c.Cap()
	collect(c)
	for name, tx := range map[string]*Transaction{"fresh": fresh, "put": puts, "take": takes} {
		closed(name+" Put", tx.Put(Event{Body: []byte("x")}))
		closed(name+" PutContext", tx.PutContext(ctx, Event{Body: []byte("x")}))
		_, _, err := tx.Take()
		closed(name+" Take", err)
		_, err = tx.TakeContext(ctx)
		closed(name+" TakeContext", err)
	}
	closed("fresh Commit", fresh.Commit())
	closed("put Rollback", puts.Rollback())
	closed("take Rollback", takes.Rollback())

	c = mustOpen(t, cfg)
	defer c.Close()
	wantEvents(t, drain(t, c), bodies(0, 5))
}

// collect runs every collector of c's metrics, as a scrape would.
func collect(c *FileChannel) {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		for _, x := range c.metrics.all {
			x.Collect(ch)
		}
		close(ch)
	}()
	for range ch {
	}
}

// TestSinkLoopRacingClose: the package doc's sink loop runs while the
// channel closes at a random moment. Nothing panics, the sink stops with
// ErrClosed, and after reopen every event is either back in the channel or
// was taken by a take Commit that returned nil, never both and never
// neither.
func TestSinkLoopRacingClose(t *testing.T) {
	trials := 40
	if testing.Short() {
		trials = 10
	}
	for trial := range trials {
		cfg := testConfig(t, 1)
		cfg.Capacity = 5000
		cfg.NoCheckpointOnClose = trial%2 == 1
		cfg.NoSync = true // the sink spends its time taking, not syncing
		c := mustOpen(t, cfg)
		const n = 3000
		putN(t, c, 0, n, 100)

		var committed []string
		sinkDone := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			sinkDone <- sinkLoop(ctx, c, 7, func(batch []string) { committed = append(committed, batch...) })
		}()
		time.Sleep(time.Duration(rand.IntN(5000)) * time.Microsecond)
		closeWithin(t, c, 10*time.Second)
		queued := c.Len()
		if err := <-sinkDone; !errors.Is(err, ErrClosed) {
			t.Fatalf("trial %d: sink stopped with %v, want ErrClosed", trial, err)
		}
		cancel()
		// The sink's last Commit or Rollback came after Close: it left
		// the released queue alone.
		if n := c.Len(); n != queued {
			t.Fatalf("trial %d: Len %d after Close returned, %d once the sink stopped: the sink changed the released queue", trial, queued, n)
		}
		if s := c.Stats(); s.CorruptSkipped != 0 {
			t.Fatalf("trial %d: %d events skipped as damaged: a read of a file Close closed is not damage", trial, s.CorruptSkipped)
		}

		c = mustOpen(t, cfg)
		left := drain(t, c)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		all := append(slices.Clone(committed), left...)
		slices.SortFunc(all, compareBodies)
		wantEvents(t, all, bodies(0, n))
	}
}

// compareBodies orders "event-N" bodies by N.
func compareBodies(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// sinkLoop is the package doc's sink: TakeContext for the first event of a
// batch, Take for the rest, Rollback on any error; delivering a batch takes
// a while (Close may run meanwhile), then a quarter of them fail and roll
// back. delivered sees each batch whose take Commit returned nil.
func sinkLoop(ctx context.Context, c *FileChannel, batchSize int, delivered func([]string)) error {
	for {
		tx, err := c.Begin()
		if err != nil {
			return err
		}
		ev, err := tx.TakeContext(ctx)
		if err != nil {
			tx.Rollback()
			return err
		}
		batch := []string{string(ev.Body)}
		for len(batch) < batchSize {
			ev, ok, err := tx.Take()
			if err != nil {
				tx.Rollback()
				return err
			}
			if !ok {
				break
			}
			batch = append(batch, string(ev.Body))
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // delivering
		if rand.IntN(4) == 0 {
			if err := tx.Rollback(); err != nil {
				return err
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			tx.Rollback()
			return err
		}
		delivered(batch)
	}
}

// TestCheckpointRacingClose: Checkpoint calls racing with Close either
// finish before Close releases the files or return ErrClosed; none touches
// the released checkpoint mapping (run it under -race).
func TestCheckpointRacingClose(t *testing.T) {
	trials := 150
	if testing.Short() {
		trials = 30
	}
	for trial := range trials {
		cfg := testConfig(t, 1)
		// Without a checkpoint of its own, Close does not wait for ckptMu
		// on its way to releasing the files.
		cfg.NoCheckpointOnClose = trial%2 == 0
		c := mustOpen(t, cfg)
		putN(t, c, 0, 20, 10)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				for {
					if err := c.Checkpoint(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		closeWithin(t, c, 10*time.Second)
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("trial %d: Checkpoint racing Close: %v, want nil or ErrClosed", trial, err)
			}
		}
		c = mustOpen(t, cfg)
		if n := c.Len(); n != 20 {
			t.Fatalf("trial %d: %d events after reopen, want 20", trial, n)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTransactionUsedFromTwoGoroutines: a Transaction belongs to one
// goroutine; one hammered by two gets ErrConcurrentUse (or the errors of
// calls made in a bad order), never a panic or a hang, and Close returns.
func TestTransactionUsedFromTwoGoroutines(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.TransactionCapacity = 20
	c := mustOpen(t, cfg)
	putN(t, c, 0, 300, 20)
	var concurrent atomic.Int64
	deadline := time.Now().Add(time.Second)
	if testing.Short() {
		deadline = time.Now().Add(200 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		panics := make(chan any, 2)
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if p := recover(); p != nil {
						panics <- p
					}
				}()
				for i := range 50 {
					var err error
					switch (g + i) % 5 {
					case 0:
						err = tx.Put(Event{Body: []byte("x")})
					case 1, 2:
						_, _, err = tx.Take()
					case 3:
						err = tx.Commit()
					case 4:
						err = tx.Rollback()
					}
					switch {
					case errors.Is(err, ErrConcurrentUse):
						concurrent.Add(1)
					case err == nil, errors.Is(err, ErrTransactionDone), errors.Is(err, ErrMixedTransaction),
						errors.Is(err, ErrTransactionFull):
					default:
						t.Errorf("goroutine %d call %d: %v", g, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(panics)
		for p := range panics {
			t.Fatalf("a transaction used from two goroutines panicked: %v", p)
		}
		tx.Rollback()
	}
	t.Logf("%d calls got ErrConcurrentUse", concurrent.Load())
	if concurrent.Load() == 0 {
		t.Error("no call detected the concurrent use")
	}
	closeWithin(t, c, 10*time.Second)
}

// panickingHandler is a slog.Handler (a user's logger) that panics on the
// message armed holds, once.
type panickingHandler struct {
	armed *atomic.Pointer[string]
}

func (h panickingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h panickingHandler) Handle(_ context.Context, r slog.Record) error {
	if m := h.armed.Load(); m != nil && *m == r.Message && h.armed.CompareAndSwap(m, nil) {
		panic("logger panics on " + r.Message)
	}
	return nil
}
func (h panickingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h panickingHandler) WithGroup(string) slog.Handler      { return h }

// TestPanicUnderTheLocksLeavesNoneHeld: a panic in code the channel runs
// under its locks (here the user's logger, called while a write rolls the
// log file: under commitMu and the data dir's lock) reaches the caller and
// leaves no lock held: the channel goes on working and Close returns.
func TestPanicUnderTheLocksLeavesNoneHeld(t *testing.T) {
	for _, kind := range []string{"put_commit", "take_commit", "spilled_put_rollback"} {
		t.Run(kind, func(t *testing.T) {
			cfg := testConfig(t, 1)
			cfg.MaxFileSize = MinMaxFileSize
			var armed atomic.Pointer[string]
			cfg.Logger = slog.New(panickingHandler{&armed})
			c := mustOpen(t, cfg)
			putN(t, c, 0, 3, 3)
			tx, _ := c.Begin()
			var end func() error
			switch kind {
			case "put_commit":
				if err := tx.Put(Event{Body: []byte("x")}); err != nil {
					t.Fatal(err)
				}
				end = tx.Commit
			case "take_commit":
				if _, ok, err := tx.Take(); err != nil || !ok {
					t.Fatal(ok, err)
				}
				end = tx.Commit
			case "spilled_put_rollback":
				// The rollback of a spilled put writes a record under
				// commitMu.
				if err := tx.Put(Event{Body: make([]byte, cfg.MaxFileSize/4)}); err != nil {
					t.Fatal(err)
				}
				if !tx.spilled {
					t.Fatal("the put did not spill")
				}
				end = tx.Rollback
			}
			fillLog(t, c) // so that end's write rolls the file
			msg := "rolled log file"
			armed.Store(&msg)
			func() {
				defer func() {
					if p := recover(); p == nil {
						t.Fatalf("%s did not panic", kind)
					}
				}()
				end()
			}()
			// The channel still works: a commit and a checkpoint take
			// every lock the panic went through.
			returnsWithin(t, 10*time.Second, "a put commit after the panic", func() error {
				tx, _ := c.Begin()
				if err := tx.Put(Event{Body: []byte("after")}); err != nil {
					return err
				}
				return tx.Commit()
			})
			returnsWithin(t, 10*time.Second, "Checkpoint after the panic", c.Checkpoint)
			returnsWithin(t, 10*time.Second, "Close after the panic", c.Close)
		})
	}
}

// returnsWithin runs f and fails t if it fails or does not return within d (a
// lock left held makes it hang forever).
func returnsWithin(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s did not return within %v: a lock is still held", what, d)
	}
}

// fillLog commits a put that leaves data dir 0's active log file less room
// than any record needs, so that the next write to it rolls it.
func fillLog(t *testing.T, c *FileChannel) {
	t.Helper()
	for {
		left := c.cfg.MaxFileSize - c.logs.Active(0).Size()
		if left < 8 {
			return
		}
		tx, _ := c.Begin()
		size := func(n int64) int64 {
			put := logfile.Record{Type: logfile.RecordPut, TxID: tx.id, Body: make([]byte, n)}
			commit := logfile.Record{Type: logfile.RecordCommit, TxID: tx.id, CommitType: logfile.RecordPut, Count: 1}
			return int64(put.EncodedSize() + commit.EncodedSize())
		}
		n := max(1, left-size(0))
		for n > 1 && size(n) > left {
			n--
		}
		if err := tx.Put(Event{Body: make([]byte, n)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}
