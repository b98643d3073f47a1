package logfile

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The group commit (Writer.SyncTo).
//
// An fsync covers every byte written before it started. A caller that
// finds no fsync in flight leads one. Callers arriving while one is in
// flight join the writer's waiters, ordered by the offset they need, each
// with a wake of its own (a channel of one). When an fsync ends, its
// leader wakes exactly the waiters it covered (they return without taking
// the writer's lock again), and if waiters remain (they wrote after it
// started) the next fsync starts at once, in a syncer goroutine that keeps
// syncing while waiters remain and ends when none do; the leader itself
// returns. Nobody woken has to run before the next fsync starts, and no
// waiter is woken by an fsync that does not cover it. (Pebble's
// record.LogWriter does the same with its sync queue and flush loop, with
// a goroutine per log instead of one per busy spell.)

// syncWaiter is a SyncTo caller waiting for an fsync to cover off.
type syncWaiter struct {
	off  int64
	done chan error // cap 1: nil once [0,off) is durable, or why it cannot be
}

// syncWaiters recycles syncWaiters: one per commit that waits.
var syncWaiters = sync.Pool{New: func() any { return &syncWaiter{done: make(chan error, 1)} }}

// SyncTo returns once bytes [0,off) of the file are durable. It is the group
// commit: one fsync covers every byte written before it started, callers
// arriving while an fsync is in flight wait and share the next one (started
// as soon as the one in flight ends), and a caller whose range is already
// covered returns nil without an fsync (even after a later failure or
// Close, since those bytes are on disk). Otherwise it returns the writer's
// sticky failure. off must not exceed Size().
func (w *Writer) SyncTo(off int64) error { return w.syncTo(off, nil) }

// A syncGate is told when an fsync of a writer starts and ends (by the
// fsync's leader, without the writer's locks): a dir holds back merged
// appends meanwhile (setmerge.go).
type syncGate interface {
	holdAppends()
	releaseAppends()
}

// syncTo is SyncTo, telling gate (if not nil) when an fsync starts and
// ends; the syncer that goes on after this caller's fsync tells it too.
func (w *Writer) syncTo(off int64, gate syncGate) error {
	w.mu.Lock()
	if gate != nil {
		w.gate = gate
	}
	if off <= w.synced {
		w.mu.Unlock()
		return nil
	}
	if err := w.syncableLocked(off); err != nil {
		w.mu.Unlock()
		return err
	}
	if w.syncing {
		sw := syncWaiters.Get().(*syncWaiter)
		sw.off = off
		i, _ := slices.BinarySearchFunc(w.waiters, off, func(x *syncWaiter, off int64) int { return cmp.Compare(x.off, off) })
		w.waiters = slices.Insert(w.waiters, i, sw)
		w.mu.Unlock()
		err := <-sw.done
		syncWaiters.Put(sw)
		return err
	}
	w.syncing = true
	more, err := w.syncRoundLocked(gate)
	if more {
		go w.syncer()
	}
	return err
}

// syncableLocked returns why [0,off) cannot be synced, or nil.
func (w *Writer) syncableLocked(off int64) error {
	if err := w.unusableLocked(); err != nil {
		return err
	}
	if size := w.size.Load(); off > size {
		return fmt.Errorf("sync log %d to offset %d: past its end at %d", w.id, off, size)
	}
	return nil
}

// syncer leads the fsyncs of w while waiters remain.
func (w *Writer) syncer() {
	for more := true; more; {
		w.mu.Lock()
		more, _ = w.syncRoundLocked(w.gate) // a failure is sticky, and every waiter got it
	}
}

// syncRoundLocked leads one fsync covering every byte written so far,
// with w.mu held and w.syncing set on entry; it returns with w.mu
// released. It wakes the waiters the fsync covered and reports whether
// others remain, for whom the caller leads the next fsync. When none do,
// or the writer failed (every waiter then gets the failure), it clears
// w.syncing.
func (w *Writer) syncRoundLocked(gate syncGate) (more bool, err error) {
	if err := w.unusableLocked(); err != nil { // a Write failed since
		w.endSyncingLocked(err)
		w.mu.Unlock()
		return false, err
	}
	target := w.size.Load()
	w.mu.Unlock()
	if gate != nil {
		gate.holdAppends()
	}
	start := time.Now()
	err = w.f.Sync()
	if w.observeSync != nil {
		w.observeSync(time.Since(start))
	}
	w.syncs.Add(1)
	if err != nil {
		if gate != nil {
			gate.releaseAppends()
		}
		w.mu.Lock()
		return false, w.syncFailedLocked(err)
	}
	// Synced is raised before the appends held back go on: the write of
	// them carries the sync mark this fsync made due (Set.Sync).
	w.mu.Lock()
	w.setSyncedLocked(target)
	n := 0
	for n < len(w.waiters) && w.waiters[n].off <= w.synced {
		w.waiters[n].done <- nil
		n++
	}
	rest := copy(w.waiters, w.waiters[n:])
	clear(w.waiters[rest:])
	w.waiters = w.waiters[:rest]
	if rest == 0 {
		w.endSyncingLocked(nil)
	}
	w.mu.Unlock()
	if gate != nil {
		gate.releaseAppends()
	}
	return rest > 0, nil
}

// endSyncingLocked ends the fsyncs of the leader or syncer: the waiters
// left get err (not nil if any are left), and Close may go on.
func (w *Writer) endSyncingLocked(err error) {
	w.failWaitersLocked(err)
	w.syncing = false
	w.syncDone.Broadcast()
}

// failWaitersLocked wakes every waiter with err.
func (w *Writer) failWaitersLocked(err error) {
	for _, sw := range w.waiters {
		sw.done <- err
	}
	clear(w.waiters)
	w.waiters = w.waiters[:0]
}

// syncFailedLocked makes the failed fsync's err sticky, fails the waiters,
// and takes back what the file holds past its last good fsync before it
// ends the fsyncs (Close waits for that: the file stays open meanwhile).
// It is called with w.mu held and returns with it released.
func (w *Writer) syncFailedLocked(err error) error {
	err = fmt.Errorf("sync log %d: %w", w.id, err)
	if w.err == nil {
		w.err = err
	}
	w.failWaitersLocked(w.unusableLocked())
	// Nothing after the last good fsync can be trusted to reach the disk,
	// but the page cache still holds it, and a restart without a power
	// loss would replay it: take it back (best effort; the failure stays
	// sticky either way). Writes that passed their health check before
	// w.err was set finish first; later ones see w.err.
	synced := w.synced
	w.mu.Unlock()
	w.stopLayout()
	w.writing.Lock()
	terr := w.takeBack(synced)
	w.writing.Unlock()
	w.mu.Lock()
	w.endSyncingLocked(nil)
	w.mu.Unlock()
	if terr != nil {
		err = errors.Join(err, terr)
	}
	return err
}
