package channel

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// Checkpoint writes a checkpoint now: the queue as of this moment, so the
// next Open replays only what comes after. Then it deletes log files that no
// longer hold anything the channel needs. Before it, the expired events at
// the head of groups with an ExpireAfter are moved or dropped (Config.
// OnDeadLetter is told of them on this goroutine, last). After Close, or
// when Close starts before it, it returns ErrClosed; Close waits for a
// checkpoint in progress.
func (c *FileChannel) Checkpoint() error {
	notes, err := c.sweptCheckpoint()
	c.notifyDeadLetters(notes)
	return err
}

// sweptCheckpoint is Checkpoint but for the notes of the expired events
// its sweep moved.
func (c *FileChannel) sweptCheckpoint() ([]DeadLetter, error) {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	notes := c.sweepExpired()
	return notes, c.checkpointLocked()
}

func (c *FileChannel) checkpointLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-c.closing:
			return
		case <-t.C:
			c.notifyInBackground(c.sweepExpired())
			// Nothing written since the last checkpoint: it still holds.
			// A full data dir may have room again all the same, and a
			// retained log file may have aged out (its deletion follows
			// a checkpoint, as every deletion does).
			if c.logs.LastWriteOrderID() == c.lastCkptW.Load() && !c.logs.RetentionDue() {
				c.logs.KeepReserves()
				continue
			}
			if err := c.checkpoint(); err != nil {
				c.log.Error("periodic checkpoint failed", "err", err)
			}
		}
	}
}

// notifyInBackground tells Config.OnDeadLetter of notes on the channel's
// own goroutine: a panic in it is logged, not let up to kill the process.
func (c *FileChannel) notifyInBackground(notes []DeadLetter) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("Config.OnDeadLetter panicked on the checkpoint goroutine (the dead letters after it were not reported)", "panic", r)
		}
	}()
	c.notifyDeadLetters(notes)
}

// checkpoint writes a checkpoint (see checkpointLocked).
func (c *FileChannel) checkpoint() error {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	return c.checkpointLocked()
}

// checkpointLocked writes a checkpoint and keeps the score: counters,
// duration, and the error Health reports until a checkpoint succeeds. The
// caller holds ckptMu. Once Close has released the files it returns
// ErrClosed and touches nothing.
func (c *FileChannel) checkpointLocked() error {
	if c.released {
		return ErrClosed
	}
	start := time.Now()
	err := c.writeCheckpoint(start)
	c.metrics.checkpointSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		c.stats.checkpointErrs.Add(1)
		c.metrics.checkpointErrors.Inc()
		c.ckptErr.Store(&err)
		return err
	}
	c.metrics.checkpoints.Inc()
	return nil
}

// writeCheckpoint is checkpointLocked's work: capture, sync, write, back up,
// delete the log files no longer needed.
//
// With consumer groups the checkpoint is several checkpoint files, all at
// the same write-order id: each named group's in its group-N subdir, then
// the catalog, then the checkpoint dir's own (the unnamed group's ring and
// the channel's state), whose COMPLETE marker is written last. Open uses
// them only if they all agree (checkpoint.OpenSet).
func (c *FileChannel) writeCheckpoint(start time.Time) error {
	snap, sn := c.capture()
	capture := time.Since(start)
	st := snap.top

	// Every record at or before the checkpoint's write-order id must be
	// durable before the checkpoint says so (in-flight spilled puts are
	// not synced by their own transactions yet).
	if err := sn.Sync(); err != nil {
		c.thaw(snap, false)
		return fmt.Errorf("checkpoint: %w", err)
	}
	// The window's snapshot holds at least the ids the checkpoint covers.
	if err := c.persistDedup(); err != nil {
		c.thaw(snap, false)
		return fmt.Errorf("checkpoint: %w", err)
	}
	err := c.writeCheckpointFiles(snap)
	c.thaw(snap, err == nil)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	c.lastCkptW.Store(st.WriteOrderID)
	c.lastCkptTime.Store(time.Now().UnixNano())
	if b := c.cfg.BackupCheckpointDir; b != "" {
		if err := checkpoint.Backup(c.fs, c.cfg.CheckpointDir, b); err != nil {
			// The main checkpoint is good. The backup is marked
			// incomplete, unless the failure was in making that mark
			// durable: then a power loss could bring the previous backup
			// back, and it needs the log files it knew. Delete none until
			// a backup succeeds.
			c.stats.backupErrs.Add(1)
			c.metrics.backupErrors.Inc()
			c.log.Error("backup checkpoint failed; keeping every log file until a backup succeeds", "dir", b, "err", err)
			err = fmt.Errorf("backup checkpoint in %s: %w", b, err)
			c.ckptErr.Store(&err)
			return nil
		}
	}
	c.ckptErr.Store(nil)
	c.removeStaleGroupDirs(snap.stale)
	deleted, err := c.logs.Reclaim(sn, c.unheld)
	c.log.Info("checkpoint", "write_order_id", st.WriteOrderID, "queued", st.Size,
		"inflight_takes", len(st.InflightTakes), "groups", len(snap.groups), "deleted_logs", deleted,
		"capture", capture.Round(time.Microsecond), "duration", time.Since(start).Round(time.Microsecond))
	if err != nil {
		return fmt.Errorf("checkpoint: delete old logs: %w", err)
	}
	return nil
}

// ckptSnapshot is what a checkpoint captured: the channel's state with the
// unnamed group's ring (top; an empty ring when there is none), each named
// group's, the catalog, and the subdirs of removed groups it no longer
// lists.
type ckptSnapshot struct {
	top     *checkpoint.State
	groups  []groupSnapshot
	catalog *checkpoint.Catalog
	stale   []uint32
}

type groupSnapshot struct {
	g  *groupState
	st *checkpoint.State
}

// writeCheckpointFiles writes the checkpoint set in its order
// (checkpoint.WriteSet).
func (c *FileChannel) writeCheckpointFiles(snap *ckptSnapshot) error {
	groups := make([]checkpoint.SetWrite, 0, len(snap.groups))
	for _, gs := range snap.groups {
		groups = append(groups, checkpoint.SetWrite{Name: gs.g.cfg.Name, Checkpoint: gs.g.ckpt, State: gs.st})
	}
	return checkpoint.WriteSet(c.fs, c.cfg.CheckpointDir, c.top, snap.top, snap.catalog, groups)
}

// removeStaleGroupDirs deletes the checkpoint subdirs of removed groups
// once a checkpoint without them was written.
func (c *FileChannel) removeStaleGroupDirs(ids []uint32) {
	for _, id := range ids {
		if err := checkpoint.RemoveGroupDir(c.fs, c.cfg.CheckpointDir, id); err != nil {
			c.log.Warn("remove the checkpoint of a removed group", "id", id, "err", err)
			continue
		}
		c.staleGroupDirs = slices.DeleteFunc(c.staleGroupDirs, func(x uint32) bool { return x == id })
	}
}

func (c *FileChannel) thaw(snap *ckptSnapshot, ok bool) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	c.top.Thaw(ok)
	for _, gs := range snap.groups {
		gs.g.ckpt.Thaw(ok)
	}
}

// capture takes the checkpoint's snapshot. It holds commitMu exclusively, so
// no commit is half applied (and no log is appended to), each keyed group's
// orderMu, so no keyed Take is between its pop and its key's claim
// (lockTakeSteps), and queueMu, so no take is half done; all only for the
// time it takes to copy the bookkeeping.
func (c *FileChannel) capture() (*ckptSnapshot, *logfile.Snapshot) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	sn := c.logs.Snapshot()
	meta := checkpoint.Meta{
		WriteOrderID: sn.WriteOrderID,
		NextFileID:   sn.NextFileID,
		MaxTxID:      c.nextTxID.Load(),
		Time:         time.Now(),
	}
	for _, f := range sn.Files {
		meta.Logs = append(meta.Logs, checkpoint.LogState{FileID: f.ID, Position: f.Position, Completes: f.Completes,
			Spilled: spilledStates(f.Spilled), Index: checkpoint.LogIndex(f.Index)})
	}
	newState := func() *checkpoint.State {
		st := &checkpoint.State{Meta: meta}
		st.Logs = slices.Clone(meta.Logs)
		return st
	}
	defer c.lockTakeSteps()()
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	snap := &ckptSnapshot{top: newState(), catalog: c.checkpointCatalog(sn.WriteOrderID), stale: slices.Clone(c.staleGroupDirs)}
	snap.top.InflightPuts = c.inflightPuts.Entries()
	for id := range c.inflightPuts.Files() {
		sn.Keep(id)
	}
	for _, g := range c.groups {
		st := snap.top
		if g.id != 0 {
			st = newState()
			snap.groups = append(snap.groups, groupSnapshot{g: g, st: st})
		}
		g.capture(st, sn)
		g.ckpt.Freeze()
	}
	if c.main == nil {
		// The top file's ring is an empty one of one slot.
		snap.top.Capacity, snap.top.Head, snap.top.Size = c.top.Capacity(), 0, 0
		for i := range snap.top.Logs {
			snap.top.Logs[i].Refs = 0
		}
		c.top.Freeze()
	}
	return snap, sn
}

// lockTakeSteps takes the orderMu of every keyed group (OrderKey) and
// returns the unlock; the caller holds commitMu exclusively (c.groups
// stays as it is). A keyed Take whose event's key tag is unknown pops it
// into its transaction's takes and claims its key only once it has read
// it, under orderMu exclusive (popKeyedExclusive): a snapshot in between
// would list the event in flight under the taker,
// and recovery, which returns in-flight takes transaction by transaction
// (oldest first), would bring it back ahead of its key's holder's earlier
// events. Waiting for the step, the snapshot lists it parked (or taken).
// A pop and claim by key tag (orderMu shared) is one queueMu round, which
// the capture cannot come between; the read that follows it needs no
// wait: the taker holds the key by then, as after any claim.
func (c *FileChannel) lockTakeSteps() func() {
	var unlocks []func()
	for _, g := range c.groups {
		if g.keyed() {
			unlocks = append(unlocks, g.lockOrder())
		}
	}
	return func() {
		for _, u := range slices.Backward(unlocks) {
			u()
		}
	}
}

// unheld returns the log files of candidates that no consumer group and no
// put in flight points into now (the log set's question before it deletes
// them).
func (c *FileChannel) unheld(candidates []uint32) []uint32 {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	puts := c.inflightPuts.Files()
	takes := make([]map[uint32]int, len(c.groups))
	for i, g := range c.groups {
		takes[i] = g.inflight.Files()
	}
	var out []uint32
next:
	for _, id := range candidates {
		if puts[id] != 0 {
			continue
		}
		for i, g := range c.groups {
			if g.holds(id, takes[i]) {
				continue next
			}
		}
		out = append(out, id)
	}
	return out
}

// spilledStates returns a log file's spilled commits as its checkpoint
// entry lists them: by transaction id.
func spilledStates(m map[uint64]logfile.SpilledCommit) []checkpoint.SpilledTx {
	var out []checkpoint.SpilledTx
	for _, tx := range slices.Sorted(maps.Keys(m)) {
		out = append(out, checkpoint.SpilledTx{Tx: tx, WriteOrderID: m[tx].WriteOrderID, Time: m[tx].Time})
	}
	return out
}
