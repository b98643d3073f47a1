package channel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// replaySeeds returns replay's group seeds from the loaded checkpoint (nil:
// an older release's checkpoint, or a full replay).
func (c *FileChannel) replaySeeds(rc *recovery) []replay.GroupSeed {
	if rc.catalog == nil || rc.st == nil {
		return nil
	}
	seeds := []replay.GroupSeed{} // not nil: a catalog without groups seeds none
	for _, g := range c.groups {
		seed := replay.GroupSeed{Info: g.info(), Queue: g.queue, Deliveries: g.deliveries, Waiting: seedWaiting(rc.catalog, g.id)}
		if g.id == 0 {
			seed.Inflight = rc.st.InflightTakes
		} else {
			seed.Inflight = rc.groupStates[g.id].InflightTakes
		}
		seeds = append(seeds, seed)
	}
	return seeds
}

// buildGroups (step 6) builds a groupState per group of the checkpoint: the
// unnamed group on the top ring (always, without a catalog), each named
// group on its own.
func (c *FileChannel) buildGroups(rc *recovery) error {
	c.top = rc.ck
	c.nextGroupID = 1
	rc.groupStates = map[uint32]*checkpoint.State{}
	if rc.catalog == nil {
		g, err := newGroupState(rc.ck, rc.st)
		if err != nil {
			return opErr("load queue from checkpoint", err)
		}
		g.cfg = GroupConfig{Capacity: rc.ck.Capacity()}
		c.groups, c.main = []*groupState{g}, g
		return nil
	}
	c.nextGroupID = max(rc.catalog.NextGroupID, 1)
	for _, cg := range rc.catalog.Groups {
		var g *groupState
		var err error
		if cg.ID == 0 {
			g, err = newGroupState(rc.ck, rc.st)
		} else {
			gc, _ := rc.set.Group(cg.ID) // OpenSet opened every group the catalog lists
			g, err = newGroupState(gc.Checkpoint, gc.State)
			rc.groupStates[cg.ID] = gc.State
		}
		if err != nil {
			return opErr(fmt.Sprintf("load the queue of %s from its checkpoint", groupLabel(cg.Name)), err)
		}
		g.id, g.cfg, g.since = cg.ID, groupConfigOf(cg.GroupInfo()), cg.Since
		g.dlqOnly, g.deliveries = cg.DeadLetterGroup, cg.DeliveryCounts()
		c.groups = append(c.groups, g)
		if cg.ID == 0 {
			c.main = g
		}
	}
	return nil
}

// newReplayQueue is replay's NewQueue for a group the logs create: the top
// ring for the unnamed group if no group uses it, else a queue in memory
// that resizeQueues moves into a checkpoint file.
func (c *FileChannel) newReplayQueue(rc *recovery) func(logfile.GroupInfo) (*eventqueue.Queue, error) {
	return func(gi logfile.GroupInfo) (*eventqueue.Queue, error) {
		capacity := int(min(gi.Capacity, MaxCapacity))
		if gi.ID == 0 && c.main == nil && c.top.Capacity() >= capacity {
			g, err := newGroupState(c.top, nil)
			if err != nil {
				return nil, err
			}
			rc.fresh[0] = g
			return g.queue, nil
		}
		g, err := newMemGroupState(max(capacity, 1))
		if err != nil {
			return nil, err
		}
		rc.fresh[gi.ID] = g
		return g.queue, nil
	}
}

// settleGroups (step 7b) takes the groups as the logs end them, then
// reconciles them with Config.Groups: a group it lists that does not exist
// is created (empty, from now on); one that exists takes its config from
// it (capacity, policy, dead letters, filter, take options), and a change
// is stored (rc.groupsChanged); one it does not list is kept with the
// config the files store, and logged. Config.Groups
// nil means the unnamed group alone, which is created if missing.
func (c *FileChannel) settleGroups(rc *recovery) error {
	byID := map[uint32]*groupState{}
	for _, g := range c.groups {
		byID[g.id] = g
	}
	var groups []*groupState
	var main *groupState
	for _, gr := range rc.res.Groups {
		g := byID[gr.Info.ID]
		if g == nil || g.queue != gr.Queue {
			g = rc.fresh[gr.Info.ID]
		}
		if g == nil {
			return fmt.Errorf("filechannel: replay: no queue for consumer group %d", gr.Info.ID)
		}
		delete(byID, gr.Info.ID)
		g.id, g.cfg, g.since = gr.Info.ID, groupConfigOf(gr.Info), gr.Info.Since
		g.dlqOnly, g.deliveries = gr.Info.DeadLetterGroup, gr.Deliveries
		if err := g.restoreWaiting(gr.Waiting); err != nil {
			return opErr(fmt.Sprintf("restore the waiting events of %s", groupLabel(g.cfg.Name)), err)
		}
		groups = append(groups, g)
		if g.id == 0 {
			main = g
		}
	}
	for _, g := range byID { // in the checkpoint, removed by the logs
		if g.ckpt != nil && g.ckpt != c.top {
			g.ckpt.Close()
		}
		// (A full replay's unnamed group is only assumed until the logs
		// say which groups there are.)
		rc.groupsChanged = rc.groupsChanged || rc.st != nil
	}
	c.groups, c.main = groups, main
	c.nextGroupID = max(c.nextGroupID, rc.res.NextGroupID, 1)
	return c.reconcileGroups(rc)
}

// reconcileGroups is settleGroups' second half: Config.Groups against the
// groups the channel has.
func (c *FileChannel) reconcileGroups(rc *recovery) error {
	want := c.cfg.Groups
	if want == nil {
		want = []GroupConfig{{Capacity: c.cfg.Capacity}}
	}
	if c.cfg.keepGroups {
		want = want[:0:0]
		for _, g := range c.groups {
			want = append(want, g.cfg)
		}
	}
	if rc.catalog == nil && rc.res.Catalogs == 0 && c.main != nil && c.main.queue.Size() == 0 &&
		!slices.ContainsFunc(want, func(g GroupConfig) bool { return g.Name == "" }) {
		// Neither the checkpoint nor the logs name the groups: a new
		// channel (or an older release's, empty) that Config gives named
		// groups only. The unnamed group replay assumed is not one.
		c.groups = slices.DeleteFunc(c.groups, func(g *groupState) bool { return g == c.main })
		c.main = nil
		rc.groupsChanged = true
	}
	listed := map[string]GroupConfig{}
	created := map[*groupState]bool{}
	for _, gc := range want {
		listed[gc.Name] = gc
		var g *groupState
		for _, x := range c.groups {
			if x.cfg.Name == gc.Name {
				g = x
			}
		}
		if g == nil {
			var err error
			if g, err = c.newOpenGroup(gc); err != nil {
				return err
			}
			created[g] = true
			rc.groupsChanged = true
			if !gc.StartAt.latest() {
				c.startAt = append(c.startAt, gc)
			}
		} else if g.cfg.Capacity != gc.Capacity || g.cfg.WhenFull != gc.WhenFull ||
			g.cfg.MaxDeliveries != gc.MaxDeliveries || g.cfg.DeadLetter != gc.DeadLetter || g.cfg.Filter != gc.Filter ||
			!sameTakeOptions(g.cfg, gc) {
			rc.groupsChanged = true
		}
		g.cfg = gc
	}
	// Dead-letter groups: a group Config lists and creates now that a
	// group names is one; those missing are created as one.
	for g := range created {
		if c.namedAsDeadLetter(g.cfg.Name, g) != nil {
			g.dlqOnly = true
		}
	}
	missing, err := deadLetterNeeds(c.groups, listed, created)
	if err != nil {
		return fmt.Errorf("filechannel: Config.Groups: %w", err)
	}
	for _, gc := range missing {
		g, err := c.newOpenGroup(gc)
		if err != nil {
			return err
		}
		g.dlqOnly = true
		rc.groupsChanged = true
	}
	for _, g := range c.groups {
		if err := c.keptGroup(g, listed); err != nil {
			return err
		}
	}
	c.linkDeadLetters()
	c.catalog.Store(c.catalogRecord())
	return nil
}

// keptGroup checks g, a group of the files, against listed (the groups
// Config lists): one Config does not list is kept as the files have it
// (logged, but for a dead-letter group a listed group names), and so is
// its filter, which Open refuses (ErrBadFilter) if this build's CEL does
// not compile it (a newer release's CEL, or changed files): its events
// would otherwise be lost to it, no filter matching. A listed group's
// filter was checked with Config.
func (c *FileChannel) keptGroup(g *groupState, listed map[string]GroupConfig) error {
	if _, ok := listed[g.cfg.Name]; ok {
		return nil
	}
	if !(g.dlqOnly && c.namedAsDeadLetter(g.cfg.Name, nil) != nil) {
		c.log.Warn("consumer group not in Config.Groups: kept (only RemoveGroup removes a group)",
			"group", g.cfg.Name, "queued", g.queue.Size())
	}
	if err := checkFilter(g.cfg); err != nil {
		return fmt.Errorf("%w (the filter stored with the group, which this build refuses: pass the group in Config.Groups with a filter this build accepts, which replaces the stored one, then RemoveGroup it if it is not wanted)", err)
	}
	return nil
}

// newOpenGroup creates the group gc at Open (its ring in memory until
// resizeGroups) and adds it to the groups.
func (c *FileChannel) newOpenGroup(gc GroupConfig) (*groupState, error) {
	id := uint32(0)
	if gc.Name != "" {
		id = c.nextGroupID
		c.nextGroupID++
	}
	g, err := newMemGroupState(gc.Capacity)
	if err != nil {
		return nil, opErr("add consumer group", err)
	}
	g.id, g.cfg, g.since = id, gc, c.logs.LastWriteOrderID()+1
	c.groups = insertGroup(c.groups, g)
	if id == 0 {
		c.main = g
	}
	c.log.Info("consumer group created", "group", gc.Name, "id", id, "capacity", gc.Capacity)
	return g, nil
}

// resizeGroups (step 12) moves each group's queue into a checkpoint file of
// its capacity: a group whose ring is in memory (the logs or Config created
// it) or whose checkpoint recorded another capacity. Then it starts the
// capacity gates.
func (c *FileChannel) resizeGroups(rc *recovery) error {
	for _, g := range c.groups {
		if g.ckpt != nil && g.ckpt.Capacity() == g.cfg.Capacity {
			continue
		}
		if g.ckpt == nil {
			rc.inMemory = append(rc.inMemory, g)
		}
		old := g.queue.Capacity()
		id := g.id
		create := func(capacity int) (*checkpoint.Checkpoint, error) {
			if id == 0 {
				// Create replaces the checkpoint dir's own files only,
				// not the named groups' subdirs.
				c.top = nil
				ck, err := checkpoint.Create(c.fs, c.cfg.CheckpointDir, capacity)
				rc.created = rc.created || err == nil
				c.top = ck
				return ck, err
			}
			if err := checkpoint.CreateGroupDir(c.fs, c.cfg.CheckpointDir, id); err != nil {
				return nil, err
			}
			return checkpoint.Create(c.fs, checkpoint.GroupDir(c.cfg.CheckpointDir, id), capacity)
		}
		if id == 0 && g.ckpt == nil && c.top != nil {
			c.top.Close() // the empty ring of a channel that had no unnamed group
			c.top = nil
		}
		if err := g.resize(create, g.cfg.Capacity); err != nil {
			return opErr(fmt.Sprintf("%s: change capacity from %d to %d", groupLabel(g.cfg.Name), old, g.cfg.Capacity), err)
		}
		if old != g.cfg.Capacity && !rc.fromMemory(g) {
			c.log.Info("capacity changed", "group", g.cfg.Name, "old", old, "new", g.cfg.Capacity, "queued", g.queue.Size())
			if !strings.Contains(c.stats.recoveredFrom, "capacity changed") {
				c.stats.recoveredFrom += ", capacity changed"
			}
		}
	}
	if c.main == nil && (c.top == nil || c.top.Capacity() != 1) {
		// No unnamed group: the checkpoint dir's file is an empty ring
		// of one slot (not a ring of Capacity that nothing uses).
		if c.top != nil {
			if err := c.top.Close(); err != nil {
				return opErr("close checkpoint", err)
			}
			c.top = nil
		}
		ck, err := checkpoint.Create(c.fs, c.cfg.CheckpointDir, 1)
		if err != nil {
			return opErr("create checkpoint", err)
		}
		c.top, rc.created = ck, true
	}
	for _, g := range c.groups {
		g.gate = newGate(g.cfg.Capacity, g.queue.Size()+g.waitingLen()+g.order.parked)
	}
	c.publishOpenedGroups()
	return nil
}

// publishOpenedGroups publishes the groups Open recovered, under queueMu.
func (c *FileChannel) publishOpenedGroups() {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	c.publishGroups()
	for _, g := range c.groups {
		c.armRetryLocked(g)
	}
}

// findStaleGroupDirs notes the group-N subdirs of the checkpoint dir that
// belong to no group (removed groups, or a group whose AddGroup a crash
// interrupted): the next checkpoint deletes them.
func (c *FileChannel) findStaleGroupDirs() error {
	live := make([]uint32, 0, len(c.groups))
	for _, g := range c.groups {
		live = append(live, g.id)
	}
	stale, err := checkpoint.StaleGroupDirs(c.fs, c.cfg.CheckpointDir, live)
	if err != nil {
		return opErr("list group checkpoints", err)
	}
	c.staleGroupDirs = append(c.staleGroupDirs, stale...)
	return nil
}

// fromMemory reports whether g's ring was in memory (created by the logs
// or the config), not in a checkpoint of another capacity.
func (rc *recovery) fromMemory(g *groupState) bool { return slices.Contains(rc.inMemory, g) }
