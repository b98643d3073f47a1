package minfree

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// RetryDelay is how long a source waits before it retries a batch refused
// for disk space. The channel looks at the disk at most once a second,
// and at once after a checkpoint deleted log files.
const RetryDelay = 500 * time.Millisecond

// Waiter is what an example's source does with a batch refused for disk
// space (channel.ErrInsufficientSpace), the batch rolled back: wait and
// try again, for as long as it takes, while the sinks drain (takes are
// never refused for space). What they drain leaves the disk only when a
// checkpoint deletes the log files whose events are all taken (never the
// one being written), so after each wait it asks for one (MakeRoom)
// instead of waiting up to 30s for the next periodic one.
//
// Wait is called by the source's goroutine only; Count and Waited by any.
type Waiter struct {
	// Out gets, after Prefix, the explanation of the first wait (with
	// Hint, what to lower on a small disk) and each new error of MakeRoom.
	Out    io.Writer
	Prefix string
	Hint   string
	// MakeRoom, if set, is called after each wait (FileChannel.Checkpoint).
	// Its error is printed, once while it stays the same, and the waits
	// go on: the channel's Health reports a failed checkpoint too.
	MakeRoom func() error

	n       atomic.Int64
	ns      atomic.Int64 // finished waits
	since   atomic.Int64 // start of the wait in progress (UnixNano), 0 if none
	roomErr string       // the last error of MakeRoom printed
}

// Wait waits RetryDelay, or until ctx ends, after err refused a batch,
// then calls MakeRoom (unless ctx ended).
func (w *Waiter) Wait(ctx context.Context, err error) {
	if w.n.Add(1) == 1 {
		fmt.Fprintf(w.Out, "%sthe source waits for disk space while takes go on, retrying every %v after a checkpoint: %v\n%s%s\n",
			w.Prefix, RetryDelay, err, w.Prefix, w.Hint)
	}
	t0 := time.Now()
	w.since.Store(t0.UnixNano())
	defer func() {
		w.since.Store(0)
		w.ns.Add(int64(time.Since(t0)))
	}()
	select {
	case <-time.After(RetryDelay):
	case <-ctx.Done():
		return
	}
	if w.MakeRoom == nil {
		return
	}
	if err := w.MakeRoom(); err != nil && err.Error() != w.roomErr {
		w.roomErr = err.Error()
		fmt.Fprintf(w.Out, "%sa checkpoint to make room failed (the source waits on): %v\n", w.Prefix, err)
	}
}

// Count is the number of waits so far: the batches refused for space.
func (w *Waiter) Count() int64 { return w.n.Load() }

// Waited is the time spent waiting so far, the wait in progress included
// (so it grows while the source waits).
func (w *Waiter) Waited() time.Duration {
	d := time.Duration(w.ns.Load())
	if t0 := w.since.Load(); t0 != 0 {
		d += max(0, time.Since(time.Unix(0, t0)))
	}
	return d
}
