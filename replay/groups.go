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
}

// GroupResult is a consumer group as the end of the logs leaves it.
type GroupResult struct {
	Info  logfile.GroupInfo
	Queue *eventqueue.Queue // its recovered queue, with no index
	// New says that the checkpoint did not have the group (it was created
	// after it, or this is a full replay): Queue came from
	// Options.NewQueue.
	New bool
}

// takePart is the pointers of one consumer group that a transaction's take
// records list: a take transaction has one part; a put transaction has one
// per group whose oldest events its commit dropped (DropOldest).
type takePart struct {
	group uint32
	ptrs  []eventqueue.Pointer
}

// groupState is one consumer group during the replay. Its events are the
// checkpointed ring (seeded groups) followed by the committed puts of
// applier.committed from index from on, less the ranges in skips, less
// what it took.
type groupState struct {
	info   logfile.GroupInfo
	queue  *eventqueue.Queue // nil until finish for a group the logs created
	seeded bool
	takes  *eventqueue.Inflight            // its takes in flight at the checkpoint
	taken  map[eventqueue.Pointer]struct{} // its committed takes (and drops) of events not in flight at the checkpoint
	from   int                             // index in applier.committed of the first put commit it receives
	skips  [][2]int                        // ranges of applier.committed it does not receive, ascending
}

func newGroupState(info logfile.GroupInfo, from int) *groupState {
	return &groupState{info: info, from: from, takes: eventqueue.NewInflight(), taken: map[eventqueue.Pointer]struct{}{}}
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
// (those it took are deleted from g.taken).
func (a *applier) groupPuts(dst []eventqueue.Pointer, g *groupState) []eventqueue.Pointer {
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
		if _, ok := g.taken[p]; ok {
			delete(g.taken, p)
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
