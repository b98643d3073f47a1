package channel

import (
	"context"
	"math"
	"sync"
	"time"
)

// gate bounds the events in the channel: queued events plus uncommitted
// puts plus uncommitted takes. A Put takes a permit; a take commit or a put
// rollback gives permits back.
//
// It also counts the Puts that found no room: how many waited, for how
// long, how many wait now and how many gave up with ErrChannelFull
// (Stats.PutWaits, PutWaitTime, PutsWaiting, PutsFull). A Put that finds
// room pays for none of it: the counting happens on the waiting path only.
type gate struct {
	// mu guards every field below but epoch.
	mu      sync.Mutex
	used    int
	cap     int
	waiters int           // Puts waiting for room now
	freed   chan struct{} // closed (and replaced) when permits are released while someone waits

	waits  int64         // Puts that found no room and waited, those waiting now included
	full   int64         // Puts that returned ErrChannelFull
	waited time.Duration // time spent by the waits that have ended
	// waitingSince is the sum, over the Puts waiting now, of the time from
	// epoch to the start of their wait: waiters × now − waitingSince is the
	// time they have waited so far. Times since epoch are read from the
	// monotonic clock, so a change of the wall clock does not shift them.
	// Both terms may overflow after months with many waiters; Go's integer
	// arithmetic wraps, so their difference is still right.
	waitingSince time.Duration
	epoch        time.Time
}

// gateWaits is what a gate counted of Puts that found no room.
type gateWaits struct {
	waits   int64
	full    int64
	time    time.Duration // waits in progress included
	waiting int
}

func newGate(capacity, used int) *gate {
	return &gate{cap: capacity, used: used, freed: make(chan struct{}), epoch: time.Now()}
}

// acquire takes n permits, waiting up to wait for room. It returns
// ErrChannelFull on timeout, ErrClosed if done closes first and ctx's error
// if ctx ends first (ctx may be nil); a wait that fails takes no permit.
// Only when there is no room does it read the clock and count the wait.
func (g *gate) acquire(ctx context.Context, n int, wait time.Duration, done <-chan struct{}) error {
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	g.mu.Lock()
	if g.used+n <= g.cap {
		g.used += n
		g.mu.Unlock()
		return nil
	}
	if wait <= 0 {
		g.full++
		g.mu.Unlock()
		return ErrChannelFull
	}
	start := time.Since(g.epoch)
	g.waiters++
	g.waits++
	g.waitingSince += start
	g.mu.Unlock()

	err := g.wait(ctx, n, wait, done)

	g.mu.Lock()
	// The end is read under mu, so that a snapshot never counts more of
	// this wait than what is added here.
	g.waited += time.Since(g.epoch) - start
	g.waitingSince -= start
	g.waiters--
	if err == ErrChannelFull {
		g.full++
	}
	g.mu.Unlock()
	return err
}

// wait is acquire's waiting, after it found no room and counted itself
// among the waiters (so that release wakes it). Room that appears as ctx
// ends or done closes is left to others: the caller fails, and a permit it
// took would never be given back. Each look for room first looks at ctx
// and done, under mu, so an ended wait never takes room, whichever it
// sees first.
func (g *gate) wait(ctx context.Context, n int, wait time.Duration, done <-chan struct{}) error {
	var ctxDone <-chan struct{}
	if ctx != nil {
		ctxDone = ctx.Done()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		g.mu.Lock()
		select {
		case <-done:
			g.mu.Unlock()
			return ErrClosed
		case <-ctxDone:
			g.mu.Unlock()
			return ctx.Err()
		default:
		}
		if g.used+n <= g.cap {
			g.used += n
			g.mu.Unlock()
			return nil
		}
		freed := g.freed
		g.mu.Unlock()
		select {
		case <-freed:
			continue
		case <-timer.C:
		case <-done:
			return ErrClosed
		case <-ctxDone:
			return ctx.Err()
		}
		// One last try: room may have appeared as the timer fired.
		g.mu.Lock()
		ok := g.used+n <= g.cap
		if ok {
			g.used += n
		}
		g.mu.Unlock()
		if ok {
			return nil
		}
		return ErrChannelFull
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

// adjust changes the permits in use by n (a reset's new queue less the
// events it removed), waking waiting Puts when it frees some.
func (g *gate) adjust(n int) {
	if n < 0 {
		g.release(-n)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used += n
}

func (g *gate) inUse() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used
}

// putWaits returns the counts of Puts that found no room, the time of the
// waits in progress included: successive calls never see a count or the
// time decrease.
func (g *gate) putWaits() gateWaits {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := gateWaits{waits: g.waits, full: g.full, time: g.waited, waiting: g.waiters}
	if g.waiters > 0 {
		w.time += time.Duration(g.waiters)*time.Since(g.epoch) - g.waitingSince
	}
	return w
}

// tryAcquire takes n permits if there is room for them now, without
// waiting or counting a wait.
func (g *gate) tryAcquire(n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.used+n > g.cap {
		return false
	}
	g.used += n
	return true
}

// free returns the permits there is room for now.
func (g *gate) free() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return max(g.cap-g.used, 0)
}

// unbound lifts the gate's bound and wakes its waiters: the gate of a
// removed group, so that no Put keeps waiting for it.
func (g *gate) unbound() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cap = math.MaxInt / 2
	if g.waiters > 0 {
		close(g.freed)
		g.freed = make(chan struct{})
	}
}
