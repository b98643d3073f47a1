package channel

import (
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// resetPointersPerRecord bounds the pointers of one take or move record a
// reset writes: 512 KiB of pointers, a write of its own.
const resetPointersPerRecord = 1 << 16

// ResetGroup moves group name to p: its queue becomes every event the logs
// retain that was committed from p on and that its filter (as it is now)
// matches, in commit order (the order of their commit records, which a
// replay follows), with delivery counts of zero. Events the group's dead-letter group holds (queued or in flight)
// are left there and not queued again. It returns the number of events
// now queued.
//
// The group's open take transactions cannot commit: their Take and Commit
// return ErrGroupReset and change nothing, and Rollback ends them (their
// events do not come back: the reset decided the queue). Other groups are
// untouched. The reset is one take transaction in the log, durable when
// ResetGroup returns (fsync, unless NoSync): a crash right after it, or a
// full replay, recovers the reset queue.
//
// When more events would be queued than the group has room for (its
// capacity, less what open put transactions hold), its WhenFull policy
// decides: Block refuses the reset (an error matching ErrChannelFull,
// nothing changed), DropOldest keeps the newest that fit, DropNewest the
// oldest. A dead-letter group cannot be reset (no put feeds it: use
// Redrive). Commits of every group wait while the reset reads the logs.
func (c *FileChannel) ResetGroup(name string, p Position) (int, error) {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	return c.resetGroupLocked(name, p)
}

// resetGroupLocked is ResetGroup; the caller holds groupMu.
func (c *FileChannel) resetGroupLocked(name string, p Position) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	grp, err := c.Group(name)
	if err != nil {
		return 0, fmt.Errorf("filechannel: ResetGroup: %w", err)
	}
	g := grp.g
	if g.dlqOnly {
		return 0, fmt.Errorf("filechannel: ResetGroup: %s is a dead-letter group: no put feeds it; move its events with Redrive",
			groupLabel(name))
	}
	c.ckptMu.Lock() // no log file is deleted while the reset reads them
	defer c.ckptMu.Unlock()
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if c.closed.Load() {
		return 0, ErrClosed
	}
	// Nor does a put short of space delete a retained file the reset
	// reads (logfile.Set.MakeRoom runs outside commitMu): once the reset
	// is landed, its group holds the files of what it queued.
	defer c.logs.HoldDeletes()()
	n, err := c.reset(g, p)
	if err != nil {
		return 0, fmt.Errorf("filechannel: ResetGroup %s to %s: %w", groupLabel(name), p, err)
	}
	return n, nil
}

// startNewGroups moves the groups Open created to their StartAt.
func (c *FileChannel) startNewGroups() error {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	for _, gc := range c.startAt {
		if _, err := c.resetGroupLocked(gc.Name, gc.StartAt); err != nil {
			return fmt.Errorf("%w (Open created the group; it starts at the latest event: reset it with ResetGroup)", err)
		}
	}
	c.startAt = nil
	return nil
}

// resetPlan is what a reset found: the events the group holds now (queued
// and in flight), those it will hold, and the room it has.
type resetPlan struct {
	old     []eventqueue.Pointer
	exclude map[eventqueue.Pointer]bool // in the dead-letter group
	room    int
	keep    pointerBlocks
	found   int // events of the history from p on (before the full policy)
	skipped int // damaged regions of the logs stepped over
}

// reset rebuilds g's queue from the history; the caller holds ckptMu and
// commitMu exclusively, and saw the channel open.
func (c *FileChannel) reset(g *groupState, p Position) (int, error) {
	plan := c.planReset(g)
	if err := c.collect(g, p, plan); err != nil {
		return 0, err
	}
	if c.cfg.resetRead != nil {
		c.cfg.resetRead()
	}
	if len(plan.old) == 0 && plan.keep.len() == 0 {
		return 0, nil
	}
	// Their counts in g start again: no journal entry of an earlier stay
	// may come back after a crash.
	if err := c.eraseDeliveries(g, plan.keep.all()); err != nil {
		return 0, opErr("reset", err)
	}
	if err := c.writeReset(g, plan); err != nil {
		// As for a take commit that failed: the group goes on as it was,
		// and the reset's records may still be in the log, applied by
		// the next Open's recovery.
		return 0, opErrNote("reset", err, " (the group goes on unchanged; the reset may still be applied when the channel reopens: reset again)")
	}
	c.landReset(g, plan)
	if plan.found > plan.keep.len() {
		c.log.Warn("reset group: more events than it has room for; its full policy dropped some", "group", g.cfg.Name,
			"policy", g.cfg.WhenFull.String(), "found", plan.found, "queued", plan.keep.len())
	}
	c.log.Info("consumer group reset", "group", g.cfg.Name, "to", p.String(), "queued", plan.keep.len(),
		"dropped_from_queue", len(plan.old), "damaged_regions", plan.skipped)
	return plan.keep.len(), nil
}

// planReset captures, under queueMu, the events g holds, the room it has
// for a new queue, and the events its dead-letter group holds.
func (c *FileChannel) planReset(g *groupState) *resetPlan {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	plan := &resetPlan{old: g.queue.Pointers()}
	for _, e := range g.inflight.Entries() {
		plan.old = append(plan.old, e.Pointers...)
	}
	for _, w := range g.wait.heap {
		plan.old = append(plan.old, w.p) // waiting for a retry delay
	}
	plan.old = append(plan.old, g.parkedPointers()...) // OrderKey
	// The permits in use that are not g's events are open put
	// transactions' (Block groups): they keep them.
	plan.room = g.queue.Capacity() - max(g.gate.inUse()-len(plan.old), 0)
	if d := g.dlq; d != nil {
		plan.exclude = map[eventqueue.Pointer]bool{}
		for _, q := range d.queue.Pointers() {
			plan.exclude[q] = true
		}
		for _, e := range d.inflight.Entries() {
			for _, q := range e.Pointers {
				plan.exclude[q] = true
			}
		}
	}
	return plan
}

// collect reads the history from p on (the events g's filter, as it is
// now, matches) into plan.keep, applying g's full policy to what does not
// fit in plan.room.
func (c *FileChannel) collect(g *groupState, p Position, plan *resetPlan) error {
	keep, err := filterKeep(g.cfg.Filter)
	if err != nil {
		return fmt.Errorf("group's filter: %w", err)
	}
	files := c.logs.LiveFiles()
	files = skipTo(files, p.from(files, c.logs.FileIndex), c.logs.FileIndex)
	scan := func(emit func(replay.HistoryEvent) bool) (int, error) {
		return replay.FilteredHistory(c.logs, files, c.log, keep, emit)
	}
	return plan.collect(scan, p, g.cfg.WhenFull, g.queue.Capacity(), true)
}

// collect reads the history scan gives from p on, counting in found the
// events the group would get and keeping (when keep) those that fit in
// room under policy in keep: all, the newest (DropOldest) or the oldest
// (DropNewest); Block refuses more than room (ErrChannelFull).
func (plan *resetPlan) collect(scan func(func(replay.HistoryEvent) bool) (int, error), p Position, policy FullPolicy,
	capacity int, keep bool) error {
	if p.latest() {
		return nil
	}
	room := plan.room
	head := 0 // DropOldest, once keep is full: where its oldest event is
	started := false
	skipped, err := scan(func(ev replay.HistoryEvent) bool {
		if !started && !p.starts(ev) {
			return true
		}
		started = true
		if plan.exclude[ev.Pointer] {
			return true
		}
		plan.found++
		switch {
		case plan.found <= room:
			if keep {
				plan.keep.add(ev.Pointer)
			}
		case policy == DropOldest && room > 0:
			if keep {
				plan.keep.set(head, ev.Pointer)
				head = (head + 1) % room
			}
		case policy == Block:
			return false // refused below
		}
		return true
	})
	plan.skipped = skipped
	if err != nil {
		return err
	}
	if plan.found > room && policy == Block {
		return fmt.Errorf("%w: more than %d events from %s on, and the group has room for %d (capacity %d): raise its Capacity or reset to a later position",
			ErrChannelFull, room, p, room, capacity)
	}
	plan.keep.rotate(head)
	return nil
}

// writeReset writes the reset as one take transaction of g: takes of
// every event it holds, then moves of the new queue's events to its tail,
// then the commit, synced. The take and move records go out in batches of
// resetPointersPerRecord pointers, written as they are encoded (the
// commit's batch counts them as a put commit counts spilled puts: they
// are durable before it, and its file outlives theirs), so that a reset's
// memory is its two lists of pointers, not also their records.
func (c *FileChannel) writeReset(g *groupState, plan *resetPlan) error {
	tx := c.nextTxID.Add(1) - 1
	dir := int(tx % uint64(c.logs.NumDirs()))
	var after []logfile.Mark
	var files []uint32
	chunk := resetPointersPerRecord
	if c.cfg.resetChunk > 0 {
		chunk = c.cfg.resetChunk
	}
	words := make([]uint64, 0, min(len(plan.old)+plan.keep.len(), chunk))
	completes := map[uint32]bool{}
	// write writes the take or move record of the pointers in words.
	write := func(typ logfile.RecordType) error {
		rec := logfile.Record{Type: typ, TxID: tx, Group: g.id, Pointers: words}
		a, err := c.writeRecords(dir, []logfile.Record{rec}, nil, true)
		if err != nil {
			return err
		}
		after, files = append(after, logfile.Mark{W: a.W, End: a.End}), append(files, a.W.ID())
		words = words[:0]
		return nil
	}
	for _, part := range []struct {
		typ  logfile.RecordType
		ptrs iter.Seq[eventqueue.Pointer]
	}{{logfile.RecordTake, slices.Values(plan.old)}, {logfile.RecordMove, plan.keep.all()}} {
		for p := range part.ptrs {
			completes[p.FileID()] = true
			if words = append(words, uint64(p)); len(words) == chunk {
				if err := write(part.typ); err != nil {
					return err
				}
			}
		}
		if len(words) > 0 {
			if err := write(part.typ); err != nil {
				return err
			}
		}
	}
	for id := range completes {
		files = append(files, id)
	}
	slices.Sort(files)
	commit := logfile.Record{Type: logfile.RecordCommit, TxID: tx, CommitType: logfile.RecordTake, Count: uint64(len(plan.old))}
	a, err := c.writeBatch(dir, c.logs.NewBatch(), []logfile.Record{commit}, after, slices.Compact(files), true)
	if err != nil {
		return err
	}
	return c.sync(a)
}

// landReset makes the written reset g's state: the new queue, no
// delivery counts, its open take transactions fenced, its permits
// recounted.
func (c *FileChannel) landReset(g *groupState, plan *resetPlan) {
	var qerr error
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		for g.queue.Size() > 0 {
			g.queue.RemoveHead()
		}
		for _, e := range g.inflight.Entries() {
			g.fenceLocked(e.Tx, fenceReset)
			g.inflight.Remove(e.Tx)
		}
		g.deliveries = nil
		c.clearWaitingLocked(g)
		g.clearOrderLocked()
		for p := range plan.keep.all() {
			qerr = errors.Join(qerr, g.queue.AddTail(p))
		}
	}()
	if qerr != nil {
		// planReset counted the room under the same locks: impossible.
		c.log.Error("queue refused events of a reset", "group", g.cfg.Name, "err", qerr)
	}
	g.gate.adjust(plan.keep.len() - len(plan.old))
	g.avail.broadcast()
}
