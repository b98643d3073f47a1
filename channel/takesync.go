package channel

import (
	"sync"
	"time"

	"github.com/flumego/filechannel/logfile"
)

// Take commits made durable within a bound (Config.TakeSyncDelay).
//
// With the option, a take commit returns once its records are written, not
// synced: they are durable with the next fsync of the file they went to,
// whoever leads it (a put commit's group commit, Writer.SyncTo, syncs all
// that was written; a checkpoint syncs every file; a roll syncs the file it
// leaves; Close syncs them all), and at the latest when the timer armed by
// the first of them fires, TakeSyncDelay later, and syncs each file to its
// last one. A power loss before that loses them: the events come back
// (duplicates, never a loss), and the deliveries counted for MaxDeliveries
// stay lower bounds. Recovery needs nothing new: an unsynced take record
// is a torn tail like any unsynced write, and no sync mark vouches for it
// until an fsync covered it (Set.Sync writes marks only of what was
// synced).

// takeSyncs holds the take commits written and not yet synced.
type takeSyncs struct {
	// mu guards pending and timer.
	mu sync.Mutex
	// pending is, by data dir, where the last unsynced take commit
	// there ended: syncing its file to there covers the earlier ones (a
	// roll synced the files the dir left).
	pending map[int]logfile.Appended
	timer   *time.Timer // armed while pending is not empty
	// running counts the timers armed and the syncs they run: Close
	// waits for it.
	running sync.WaitGroup
}

// syncTake makes a, a take commit's records, durable: at once (sync)
// without TakeSyncDelay, or else within it (takeSyncs). The caller holds
// commitMu shared. A commit that moves events
// to a dead-letter group (moves) is synced at once all the same: the dead
// letters are queued when it returns, and records of another data dir,
// whose fsyncs do not cover this one's file, may come to depend on the
// move (their take, a Redrive: docs/crash-safety.md, "A move at the
// limit").
func (c *FileChannel) syncTake(dir int, a logfile.Appended, moves bool) error {
	if c.cfg.TakeSyncDelay <= 0 || c.cfg.NoSync || moves {
		return c.sync(a)
	}
	ts := &c.takeSyncs
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if c.closed.Load() {
		// Close began, and may have stopped the timer already (a commit
		// that saw the channel open is finishing): no timer may be armed
		// after that, or Close would wait for it.
		return c.sync(a)
	}
	if ts.pending == nil {
		ts.pending = make(map[int]logfile.Appended)
	}
	if last, ok := ts.pending[dir]; !ok || endsAfter(a, last) {
		// Commits reach here in any order, not in the order of their
		// appends: the timer must sync to the last.
		ts.pending[dir] = a
	}
	if ts.timer == nil {
		ts.running.Add(1)
		ts.timer = time.AfterFunc(c.cfg.TakeSyncDelay, c.syncPendingTakes)
	}
	return nil
}

// endsAfter reports whether a, appended to a data dir, ends after b,
// appended to the same dir: in a newer file (file ids increase within a
// dir) or further in the same one.
func endsAfter(a, b logfile.Appended) bool {
	if a.W != b.W {
		return a.W.ID() > b.W.ID()
	}
	return a.End > b.End
}

// syncPendingTakes syncs the files of the take commits written and not
// synced: TakeSyncDelay after the first of them. It holds commitMu shared,
// so that the log set is not closed under it; after Close began it leaves
// them to Close (Set.Close syncs every writer). A failed fsync is the
// writer's, sticky: the next commit to that file fails with it and Health
// reports it; the takes it did not make durable come back after a restart.
func (c *FileChannel) syncPendingTakes() {
	defer c.takeSyncs.running.Done()
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	ts := &c.takeSyncs
	ts.mu.Lock()
	pending := ts.pending
	ts.pending, ts.timer = nil, nil
	ts.mu.Unlock()
	if c.closed.Load() {
		return
	}
	for _, a := range pending {
		if err := c.sync(a); err != nil {
			c.log.Error("sync take commits", "err", err)
		}
	}
}

// stopTakeSyncs stops the timer of the take commits not yet synced, after
// Close began: Close syncs them with every writer.
func (c *FileChannel) stopTakeSyncs() {
	ts := &c.takeSyncs
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.timer != nil && ts.timer.Stop() {
		ts.running.Done()
	}
	ts.pending, ts.timer = nil, nil
}
