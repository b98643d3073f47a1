package channel

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// signal wakes the goroutines waiting for events. Waiters take the current
// channel, check the condition, then wait on the channel; broadcast closes
// it and puts a fresh one in its place, so a wake-up between the check and
// the wait is never lost.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) broadcast() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil // the next waiter makes a new one; no allocation while nobody waits
	}
	s.mu.Unlock()
}

// Wait blocks until the channel holds at least one event that a take could
// return, ctx is done (it returns ctx.Err()) or the channel closes
// (ErrClosed). Another consumer may take the event first, so a Take after
// Wait can still find the channel empty; TakeContext handles that loop.
func (c *FileChannel) Wait(ctx context.Context) error {
	if ctx == nil {
		return errors.New("filechannel: Wait: nil context")
	}
	g := c.unnamedGroup()
	if g == nil {
		return fmt.Errorf("%w: this channel has no unnamed group: wait on a named one (Group.Wait)", ErrNoGroup)
	}
	return c.waitGroup(ctx, g)
}

// waitGroup is Wait on group g; a removed g returns ErrNoGroup.
func (c *FileChannel) waitGroup(ctx context.Context, g *groupState) error {
	if ctx == nil {
		return errors.New("filechannel: Wait: nil context")
	}
	for {
		if c.closed.Load() {
			return ErrClosed
		}
		ready := g.avail.wait()
		n, removed := c.groupLen(g)
		if removed {
			return errRemoved(g)
		}
		if n > 0 {
			return nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closing:
			return ErrClosed
		}
	}
}

// groupLen returns g's queued events (plus one if a waiting event is
// due) and whether it was removed.
func (c *FileChannel) groupLen(g *groupState) (int, bool) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if g.removed || c.released {
		return 0, g.removed
	}
	n := g.queue.Size()
	if g.dueLocked(c.nowNano()) {
		n++ // a waiting event is due
	}
	return n, false
}

// TakeContext is Take that waits for an event instead of reporting an
// empty channel: it returns the next event, ctx.Err() when ctx ends first,
// or ErrClosed when the channel closes. It is the call for a sink's loop:
//
//	ev, err := tx.TakeContext(ctx)
//
// Events taken earlier in the transaction stay taken whatever it returns.
func (t *Transaction) TakeContext(ctx context.Context) (Event, error) {
	if ctx == nil {
		return Event{}, errors.New("filechannel: TakeContext: nil context")
	}
	if err := t.enter(); err != nil {
		return Event{}, err
	}
	defer t.leave()
	for {
		ev, ok, err := t.takeCounted()
		if err != nil || ok {
			return ev, err
		}
		// The first take chose the group (or failed without one).
		if err := t.c.waitGroup(ctx, t.grp); err != nil {
			return Event{}, err
		}
	}
}
