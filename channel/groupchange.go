package channel

import (
	"errors"
	"fmt"
	"slices"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// How the set of consumer groups is made durable. The groups records in
// the data logs are the truth; the checkpoint's catalog is a copy as of its
// write-order id:
//
//   - A groups record lists every group (with its id, config and the
//     write-order id it was created at) and the next id. Replay takes the
//     set from the last groups record before each record it applies.
//   - Every new log file begins with one (logfile.SetOptions.FileStart), so
//     deleting old log files never loses the set.
//   - AddGroup and RemoveGroup append one and fsync it before they return.
//     It is written with commitMu held exclusively, so every put commit
//     is either before it (the new group does not receive it) or after.
//     Its file must outlive the other data dirs' active files, whose later
//     records it governs (logfile.Set.Complete).

// catalogRecord returns the groups record of the current groups. The
// caller holds queueMu or commitMu exclusively.
func (c *FileChannel) catalogRecord() *logfile.Record {
	rec := &logfile.Record{Type: logfile.RecordGroups, NextGroupID: c.nextGroupID}
	for _, g := range c.groups {
		rec.Catalog = append(rec.Catalog, g.info())
	}
	return rec
}

// fileStart is the log set's FileStart: the groups record every new log
// file begins with.
func (c *FileChannel) fileStart() []logfile.Record {
	if rec := c.catalog.Load(); rec != nil {
		return []logfile.Record{*rec}
	}
	return nil
}

// checkpointCatalog returns the catalog of the checkpoint at w. The caller
// holds queueMu.
func (c *FileChannel) checkpointCatalog(w uint64) *checkpoint.Catalog {
	cat := &checkpoint.Catalog{WriteOrderID: w, NextGroupID: c.nextGroupID}
	for _, g := range c.groups {
		cg := checkpoint.CatalogGroup(g.info(), g.catalogDeliveries())
		cg.Waiting = g.catalogWaiting()
		cat.Groups = append(cat.Groups, cg)
	}
	return cat
}

// AddGroup creates a consumer group. It receives every event committed
// after AddGroup returns (none from before), and is durable when AddGroup
// returns: it survives a crash, and a full replay finds it in the logs.
// With a DeadLetter (MaxDeliveries sets one by default), that group must
// be a dead-letter group already, or not exist: then AddGroup creates it
// too (with gc's capacity and the Block policy), in the same durable step.
func (c *FileChannel) AddGroup(gc GroupConfig) (*Group, error) {
	gc, err := gc.check(c.cfg.Capacity)
	if err != nil {
		return nil, fmt.Errorf("filechannel: AddGroup: %w", err)
	}
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if _, err := c.Group(gc.Name); err == nil {
		return nil, fmt.Errorf("filechannel: AddGroup: %s exists already", groupLabel(gc.Name))
	}
	dlq, err := c.newDeadLetterRing(gc) // nil: none to create with it
	if err != nil {
		return nil, err
	}
	g, err := c.newGroupRing(gc)
	if err != nil {
		c.discardGroupRings(dlq)
		return nil, opErr("add group", err)
	}
	// The first group that counts deliveries needs the delivery journal
	// (Open made none).
	var journal *checkpoint.Journal
	if (gc.MaxDeliveries > 0 || len(gc.RetryDelays) > 0) && !c.hasJournal() {
		if journal, err = c.newJournal(nil); err != nil {
			c.discardGroupRings(g, dlq)
			return nil, opErr("add group", err)
		}
	}
	add := func() {
		g.since = c.logs.LastWriteOrderID() + 1
		c.groups = insertGroup(c.groups, g)
		if dlq != nil {
			dlq.since = g.since
			c.groups = insertGroup(c.groups, dlq)
		}
		c.linkDeadLetters()
	}
	if err := c.changeGroups(add); err != nil {
		c.discardGroupRings(g, dlq)
		if journal != nil {
			journal.Close()
		}
		return nil, err
	}
	if journal != nil {
		c.setJournal(journal)
	}
	if !gc.StartAt.latest() {
		if _, err := c.resetGroupLocked(gc.Name, gc.StartAt); err != nil {
			return nil, errors.Join(err, c.undoAddGroup(g, dlq))
		}
	}
	c.log.Info("consumer group added", "group", gc.Name, "id", g.id, "capacity", gc.Capacity,
		"when_full", gc.WhenFull.String(), "since", g.since, "max_deliveries", gc.MaxDeliveries, "dead_letter", gc.DeadLetter)
	if dlq != nil {
		c.log.Info("dead-letter group added", "group", dlq.cfg.Name, "id", dlq.id, "for", gc.Name, "capacity", dlq.cfg.Capacity)
	}
	return &Group{c: c, g: g}, nil
}

// newDeadLetterRing checks gc's dead-letter group: one that exists must be
// a dead-letter group that no other group names. When none exists, it
// returns a new ring for it, for AddGroup to add with gc's group; nil when
// there is nothing to create.
func (c *FileChannel) newDeadLetterRing(gc GroupConfig) (*groupState, error) {
	if gc.DeadLetter == "" {
		return nil, nil
	}
	d, err := c.Group(gc.DeadLetter)
	switch {
	case err != nil:
		dlq, err := c.newGroupRing(GroupConfig{Name: gc.DeadLetter, Capacity: gc.Capacity})
		if err != nil {
			return nil, opErr("add group", err)
		}
		dlq.dlqOnly = true
		return dlq, nil
	case !d.g.dlqOnly:
		return nil, fmt.Errorf("filechannel: AddGroup: %s cannot be the dead-letter group of %s: puts feed it",
			groupLabel(gc.DeadLetter), groupLabel(gc.Name))
	}
	if other := c.deadLetterUser(gc.DeadLetter, nil); other != nil {
		return nil, fmt.Errorf("filechannel: AddGroup: %s is the dead-letter group of %s already: each group needs its own",
			groupLabel(gc.DeadLetter), groupLabel(other.cfg.Name))
	}
	return nil, nil
}

// hasJournal reports whether the channel has a delivery journal.
func (c *FileChannel) hasJournal() bool {
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	return c.journal != nil
}

// setJournal makes j the channel's delivery journal (until then, Takes of
// the group AddGroup just added write deliver records).
func (c *FileChannel) setJournal(j *checkpoint.Journal) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if c.closed.Load() {
		j.Close()
		return
	}
	c.journal = j
}

// RemoveGroup removes a consumer group and everything queued for it. Its
// open take transactions fail: Take, Reject and Commit return an error
// matching ErrNoGroup and change nothing (a Commit writes nothing, moves
// no dead letter); Rollback ends them. Its Group values fail the same way
// (Begin, Wait), even once a group of the same name is added again. The
// log files it alone held are deleted by a later checkpoint. The removal
// is durable when RemoveGroup returns.
func (c *FileChannel) RemoveGroup(name string) error {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	grp, err := c.Group(name)
	if err != nil {
		return err
	}
	return c.removeGroupLocked(grp.g)
}

// undoAddGroup removes the group AddGroup just added, and the dead-letter
// group it created with it (dlq, nil for none), when its StartAt failed.
func (c *FileChannel) undoAddGroup(g, dlq *groupState) error {
	err := c.removeGroupLocked(g)
	if dlq != nil && err == nil {
		err = c.removeGroupLocked(dlq)
	}
	if err != nil {
		return fmt.Errorf("remove the group again: %w", err)
	}
	return nil
}

// removeGroupLocked is RemoveGroup of g; the caller holds groupMu and saw
// the channel open.
func (c *FileChannel) removeGroupLocked(g *groupState) error {
	name := g.cfg.Name
	var err error
	if src := c.deadLetterUser(name, g); src != nil {
		return fmt.Errorf("filechannel: RemoveGroup: %s is the dead-letter group of %s: remove that group first",
			groupLabel(name), groupLabel(src.cfg.Name))
	}
	err = c.changeGroups(func() {
		c.groups = slices.DeleteFunc(c.groups, func(x *groupState) bool { return x == g })
		g.removed = true
		c.stopRetryTimerLocked(g) // its waiting events go with it
		if c.main == g {
			c.main = nil
		}
	})
	if err != nil {
		return err
	}
	g.gate.unbound()
	g.avail.broadcast()
	c.keepRemovedWaits(g)
	c.forgetRemovedKeys(g)
	if err := c.retireGroupCheckpoint(g); err != nil {
		c.log.Warn("close the checkpoint of a removed group", "group", name, "err", err)
	}
	c.log.Info("consumer group removed", "group", name, "id", g.id, "queued", g.queue.Size())
	return nil
}

// deadLetterUser returns, under queueMu, a group other than except that
// names the group name as its dead-letter group, or nil.
func (c *FileChannel) deadLetterUser(name string, except *groupState) *groupState {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return c.namedAsDeadLetter(name, except)
}

// keepRemovedWaits adds what the gate of g, a removed group, counted to
// removedWaits, under queueMu.
func (c *FileChannel) keepRemovedWaits(g *groupState) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	w := g.gate.putWaits()
	c.removedWaits.waits += w.waits
	c.removedWaits.time += w.time
	c.removedWaits.full += w.full
}

// forgetRemovedKeys drops the held keys and parked events of g, a removed
// group (OrderKey): its events went with it, and its take transactions end
// without releasing their keys (their commit and rollback find it
// removed), so no key of it stays held.
func (c *FileChannel) forgetRemovedKeys(g *groupState) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	g.clearOrderLocked()
}

// retireGroupCheckpoint notes the checkpoint subdir of g, a removed named
// group, as stale and closes its checkpoint. It holds ckptMu throughout: a
// checkpoint that captured the group before the change may still be
// writing its file. The checkpoint leaves g under queueMu (no slot read
// finds it afterwards) and is closed after queueMu, with no I/O under it.
func (c *FileChannel) retireGroupCheckpoint(g *groupState) error {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	if g.id == 0 {
		return nil
	}
	c.staleGroupDirs = append(c.staleGroupDirs, g.id)
	ck := c.detachCheckpoint(g)
	if ck == nil {
		return nil
	}
	return ck.Close()
}

// detachCheckpoint takes g's checkpoint away from g, under queueMu, and
// returns it (nil if it has none).
func (c *FileChannel) detachCheckpoint(g *groupState) *checkpoint.Checkpoint {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	ck := g.ckpt
	g.ckpt = nil
	return ck
}

// changeGroups applies change to the group list and makes it durable: with
// commitMu held exclusively it writes the new groups record to the first
// data dir and syncs it. If the write fails the list is left as it was.
func (c *FileChannel) changeGroups(change func()) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	old, rec := c.applyGroupChange(change)
	if err := c.writeCatalog(rec); err != nil {
		c.restoreGroups(old)
		return opErr("change consumer groups", err)
	}
	c.catalog.Store(rec)
	return nil
}

// groupsBefore is the group list as it was before a change (changeGroups).
type groupsBefore struct {
	groups []*groupState
	main   *groupState
	nextID uint32
}

// applyGroupChange runs change on a copy of the group list under queueMu,
// publishes it and returns the list as it was and the new groups record.
// The caller holds commitMu exclusively.
func (c *FileChannel) applyGroupChange(change func()) (groupsBefore, *logfile.Record) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	old := groupsBefore{c.groups, c.main, c.nextGroupID}
	c.groups = slices.Clone(old.groups) // change edits a copy: old stays as it was
	change()
	c.publishGroups()
	return old, c.catalogRecord()
}

// restoreGroups puts back, under queueMu, the group list a change whose
// record could not be written replaced. The caller holds commitMu
// exclusively.
func (c *FileChannel) restoreGroups(old groupsBefore) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	for _, g := range old.groups {
		g.removed = false
	}
	c.groups, c.main, c.nextGroupID = old.groups, old.main, old.nextID
	c.publishGroups()
}

// writeCatalog appends rec to the first data dir, twice, and syncs it; the
// file it lands in must outlive every other dir's active file. The caller
// holds commitMu exclusively.
//
// The second copy is what a full replay reads when a flipped bit damaged
// the first: without either, the replay would not know a group AddGroup
// created until the next groups record (the next log file's first), and
// would give it none of the events committed in between. Applying the
// same catalog twice changes nothing (replay's catalog).
func (c *FileChannel) writeCatalog(rec *logfile.Record) error {
	var others []uint32
	for i := range c.logs.NumDirs() {
		if w := c.logs.Active(i); w != nil {
			others = append(others, w.ID())
		}
	}
	a, err := c.writeRecords(0, []logfile.Record{*rec, *rec}, others, false)
	if err != nil {
		return err
	}
	return c.logs.Sync(a)
}

// newGroupRing makes the ring of a new group: its id, and its checkpoint
// (a group-N subdir of the checkpoint dir; the unnamed group's is the
// checkpoint dir's own file).
func (c *FileChannel) newGroupRing(gc GroupConfig) (*groupState, error) {
	id := c.newGroupID(gc.Name)
	ck, err := c.createGroupCheckpoint(id, gc.Capacity)
	if err != nil {
		return nil, err
	}
	g, err := newGroupState(ck, nil)
	if err != nil {
		return nil, errors.Join(err, ck.Close())
	}
	g.id, g.cfg = id, gc
	g.gate = newGate(gc.Capacity, 0)
	return g, nil
}

// createGroupCheckpoint creates the checkpoint file of group id's ring.
// For the unnamed group it replaces the checkpoint dir's own file (an
// empty ring of one slot while there was no unnamed group).
func (c *FileChannel) createGroupCheckpoint(id uint32, capacity int) (*checkpoint.Checkpoint, error) {
	if id != 0 {
		dir := checkpoint.GroupDir(c.cfg.CheckpointDir, id)
		if err := checkpoint.CreateGroupDir(c.fs, c.cfg.CheckpointDir, id); err != nil {
			return nil, err
		}
		return checkpoint.Create(c.fs, dir, capacity)
	}
	return nil, errors.New("the unnamed group can only be created when the channel opens (Config.Groups)")
}

// discardGroupRings undoes newGroupRing for each of gs (nil ones
// skipped), after their groups could not be added.
func (c *FileChannel) discardGroupRings(gs ...*groupState) {
	for _, g := range gs {
		if g == nil {
			continue
		}
		if g.ckpt != nil {
			g.ckpt.Close()
			g.ckpt = nil
		}
		if g.id != 0 {
			if err := checkpoint.RemoveGroupDir(c.fs, c.cfg.CheckpointDir, g.id); err != nil {
				c.log.Warn("remove the checkpoint of a group not added", "id", g.id, "err", err)
			}
		}
	}
}

// insertGroup inserts g into gs, keeping them sorted by id.
func insertGroup(gs []*groupState, g *groupState) []*groupState {
	i, _ := slices.BinarySearchFunc(gs, g.id, func(x *groupState, id uint32) int {
		switch {
		case x.id < id:
			return -1
		case x.id > id:
			return 1
		}
		return 0
	})
	return slices.Insert(gs, i, g)
}

// newGroupID returns, under queueMu, the id of a new group called name:
// the next one, or 0 for the unnamed group.
func (c *FileChannel) newGroupID(name string) uint32 {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if name == "" {
		return 0
	}
	id := c.nextGroupID
	c.nextGroupID++
	return id
}
