package channel

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flumego/filechannel/logfile"
)

// This file: a Transaction used from two goroutines, and panics under the
// channel's locks. None of it may hang or leave a lock held.

// closeWithin closes c and fails t if Close does not return within d (a lock
// left held makes it hang forever).
func closeWithin(t *testing.T, c *FileChannel, d time.Duration) {
	t.Helper()
	returnsWithin(t, d, "Close", c.Close)
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
