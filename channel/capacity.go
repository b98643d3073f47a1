package channel

import (
	"context"
	"sync"
	"time"
)

// gate bounds the events in the channel: queued events plus uncommitted
// puts plus uncommitted takes. A Put takes a permit; a take commit or a put
// rollback gives permits back.
type gate struct {
	// mu guards used, waiters and freed.
	mu      sync.Mutex
	used    int
	cap     int
	waiters int
	freed   chan struct{} // closed (and replaced) when permits are released while someone waits
}

func newGate(capacity, used int) *gate {
	return &gate{cap: capacity, used: used, freed: make(chan struct{})}
}

// acquire takes n permits, waiting up to wait for room. It returns
// ErrChannelFull on timeout, ErrClosed if done closes first and ctx's error
// if ctx ends first (ctx may be nil).
func (g *gate) acquire(ctx context.Context, n int, wait time.Duration, done <-chan struct{}) error {
	var ctxDone <-chan struct{}
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		ctxDone = ctx.Done()
	}
	var timer *time.Timer
	for {
		g.mu.Lock()
		if g.used+n <= g.cap {
			g.used += n
			g.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		if wait <= 0 {
			g.mu.Unlock()
			return ErrChannelFull
		}
		g.waiters++
		freed := g.freed
		g.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		var err error
		select {
		case <-freed:
		case <-timer.C:
			err = ErrChannelFull
		case <-done:
			err = ErrClosed
		case <-ctxDone:
			err = ctx.Err()
		}
		g.mu.Lock()
		g.waiters--
		g.mu.Unlock()
		if err != nil {
			// One last try: room may have appeared as the timer fired.
			g.mu.Lock()
			ok := g.used+n <= g.cap
			if ok {
				g.used += n
			}
			g.mu.Unlock()
			if ok && err == ErrChannelFull {
				return nil
			}
			return err
		}
	}
}

// release gives back n permits and wakes waiters.
func (g *gate) release(n int) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.used -= n
	if g.waiters > 0 {
		close(g.freed)
		g.freed = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *gate) inUse() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used
}
