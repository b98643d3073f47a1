package replay

import (
	"cmp"
	"slices"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// GroupSeed is a consumer group as the checkpoint recorded it.
type GroupSeed struct {
	Info logfile.GroupInfo
	// Queue is its ring, loaded from its checkpoint; Run leaves it holding
	// the group's recovered queue.
	Queue *eventqueue.Queue
	// Inflight is its take transactions in flight at the checkpoint.
	Inflight []eventqueue.InflightTx
	// Deliveries is the delivery counts of its events at the checkpoint
	// (groups with MaxDeliveries); nil for none.
	Deliveries map[eventqueue.Pointer]uint32
	// Waiting is the due times (Unix nanoseconds) of its events that
	// waited for their retry delay at the checkpoint (they are in Queue
	// or Inflight); nil for none.
	Waiting map[eventqueue.Pointer]int64
}

// GroupResult is a consumer group as the end of the logs leaves it.
type GroupResult struct {
	Info  logfile.GroupInfo
	Queue *eventqueue.Queue // its recovered queue, with no index
	// New says that the checkpoint did not have the group (it was created
	// after it, or this is a full replay): Queue came from
	// Options.NewQueue.
	New bool
	// Deliveries is the delivery counts of the events in Queue: for each,
	// the largest of the checkpoint's, the deliver records' after it and
	// the delivery journal's (Options.Journal); none for the events taken
	// for good or moved since (nil for none). Counts in deleted log files
	// are lost, in the safe direction: an event is delivered more often,
	// never dead-lettered early.
	Deliveries map[eventqueue.Pointer]uint32
	// Waiting is the due times (Unix nanoseconds) of the events in Queue
	// that wait for their retry delay: a retry record (or the seed's
	// Waiting) named them and no committed take or move took them since
	// (nil for none). The channel moves them out of Queue into its
	// waiting set. A retry record lost to a power loss leaves its events
	// in Queue only: their wait is shortened, they are not lost.
	Waiting map[eventqueue.Pointer]int64
}

// takePart is the pointers of one consumer group that a transaction's take
// records list: a take transaction has one part (two when it moves events
// into a full DropOldest group, whose oldest it drops); a put transaction
// has one per group whose oldest events its commit dropped (DropOldest).
// A take transaction's move records are parts too: the group they go to.
type takePart struct {
	group uint32
	ptrs  []eventqueue.Pointer
}

// groupState is one consumer group during the replay. Its events are the
// checkpointed ring (seeded groups) followed by the pointers of
// applier.committed from index from on, less the ranges in skips, less
// what it took. applier.committed holds the committed puts and the events
// moved into a group (which every other group skips), in write order.
type groupState struct {
	info   logfile.GroupInfo
	queue  *eventqueue.Queue // nil until finish for a group the logs created
	seeded bool
	takes  *eventqueue.Inflight // its takes in flight at the checkpoint
	// taken counts its committed takes (and drops) of events not in
	// flight at the checkpoint: a count, not a set, as an event moved
	// out and back (a dead letter redriven) is taken twice.
	taken map[eventqueue.Pointer]int
	from  int      // index in applier.committed of the first put commit it receives
	skips [][2]int // ranges of applier.committed it does not receive, ascending
	// deliveries is the delivery counts of its events (the checkpoint's,
	// then deliver records), until they are taken for good or moved.
	deliveries map[eventqueue.Pointer]uint32
	// waiting is the due times of its events that retry records (or the
	// seed) made wait, until they are taken for good or moved.
	waiting map[eventqueue.Pointer]int64
}

func newGroupState(info logfile.GroupInfo, from int) *groupState {
	return &groupState{info: info, from: from, takes: eventqueue.NewInflight(), taken: map[eventqueue.Pointer]int{}}
}

// skip adds [start, end) of applier.committed to the ranges g does not
// receive, merging it with the last one when they touch.
func (g *groupState) skip(start, end int) {
	if start >= end {
		return
	}
	if n := len(g.skips); n > 0 && g.skips[n-1][1] >= start {
		g.skips[n-1][1] = max(g.skips[n-1][1], end)
		return
	}
	g.skips = append(g.skips, [2]int{start, end})
}

// delivered records that p had been delivered n times: a count only
// grows until p leaves the group, so the larger one is kept.
func (g *groupState) delivered(p eventqueue.Pointer, n uint32) {
	if g.deliveries == nil {
		g.deliveries = map[eventqueue.Pointer]uint32{}
	}
	g.deliveries[p] = max(g.deliveries[p], n)
}

// took records a committed take (or drop, or move out) of p by g: its
// delivery count ends with it.
func (g *groupState) took(p eventqueue.Pointer) {
	g.taken[p]++
	delete(g.deliveries, p)
	delete(g.waiting, p)
}

// waitUntil records that p waits in g until due (a later retry record
// replaces an earlier one's due time).
func (g *groupState) waitUntil(p eventqueue.Pointer, due int64) {
	if g.waiting == nil {
		g.waiting = map[eventqueue.Pointer]int64{}
	}
	g.waiting[p] = due
}

// queuedWaiting returns the due times of the events g's queue holds that
// wait, or nil.
func queuedWaiting(g *groupState) map[eventqueue.Pointer]int64 {
	if len(g.waiting) == 0 {
		return nil
	}
	out := map[eventqueue.Pointer]int64{}
	for i := range g.queue.Size() {
		p := g.queue.Get(i)
		if due, ok := g.waiting[p]; ok {
			out[p] = due
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// consume reports whether p is one of g's takes still to match with an
// occurrence of p in its events, and uses it up.
func (g *groupState) consume(p eventqueue.Pointer) bool {
	n, ok := g.taken[p]
	if !ok {
		return false
	}
	if n <= 1 {
		delete(g.taken, p)
	} else {
		g.taken[p] = n - 1
	}
	return true
}

// noteDeadLetterGroups lists the current groups that receive no puts.
func (a *applier) noteDeadLetterGroups() {
	a.dlqs = a.dlqs[:0]
	for _, g := range a.sortedGroups() {
		if g.info.DeadLetterGroup {
			a.dlqs = append(a.dlqs, g)
		}
	}
}

// moveIn appends ptrs, moved into group to by a committed take
// transaction, to applier.committed as a range that only to receives.
func (a *applier) moveIn(to *groupState, ptrs []eventqueue.Pointer) {
	start := len(a.committed)
	a.committed = append(a.committed, ptrs...)
	for _, g := range a.groups {
		if g != to {
			g.skip(start, len(a.committed))
		}
	}
	for _, p := range ptrs {
		delete(to.deliveries, p)
		delete(to.waiting, p)
	}
	a.res.Moved += len(ptrs)
}

// catalog applies a groups record: the set of groups from its write-order
// id on. A group it lists that the replay does not know starts empty and
// receives the put commits that follow; a known group it does not list was
// removed, with everything it held.
func (a *applier) catalog(r *logfile.Record) {
	a.res.Catalogs++
	next := make(map[uint32]*groupState, len(r.Catalog))
	for _, info := range r.Catalog {
		g := a.groups[info.ID]
		if g == nil {
			g = newGroupState(info, len(a.committed))
			a.res.GroupsCreated++
		}
		g.info = info
		next[info.ID] = g
	}
	for id := range a.groups {
		if next[id] == nil {
			a.res.GroupsRemoved++
		}
	}
	a.groups = next
	a.nextGroupID = max(a.nextGroupID, r.NextGroupID)
	a.noteDeadLetterGroups()
}

// sortedGroups returns the current groups by id.
func (a *applier) sortedGroups() []*groupState {
	gs := make([]*groupState, 0, len(a.groups))
	for _, g := range a.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(x, y *groupState) int { return cmp.Compare(x.info.ID, y.info.ID) })
	return gs
}

// groupPuts appends to dst the committed puts g receives and did not take
// (those it took are deleted from g.taken). dst may be
// applier.committed[g.from:g.from]: the puts then overwrite
// applier.committed from g.from on (each is written at or before the
// index it is read from), which finish does for the last group, as
// nothing reads applier.committed after it. Otherwise dst grows once, to
// room for every put: a full replay of millions of events spent more
// time copying them into a doubling slice (fresh memory, faulted in page
// by page) than adding them to the queue.
func (a *applier) groupPuts(dst []eventqueue.Pointer, g *groupState) []eventqueue.Pointer {
	dst = slices.Grow(dst, len(a.committed)-g.from)
	skips := g.skips
	for i := g.from; i < len(a.committed); i++ {
		for len(skips) > 0 && i >= skips[0][1] {
			skips = skips[1:]
		}
		if len(skips) > 0 && i >= skips[0][0] {
			i = skips[0][1] - 1
			continue
		}
		p := a.committed[i]
		if g.consume(p) {
			continue
		}
		dst = append(dst, p)
	}
	return dst
}

// Group returns the recovered group with the given id, or nil.
func (r *Result) Group(id uint32) *GroupResult {
	for i := range r.Groups {
		if r.Groups[i].Info.ID == id {
			return &r.Groups[i]
		}
	}
	return nil
}
