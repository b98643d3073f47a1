package replay

import (
	"time"

	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// Verify per consumer group. The recovery (queue A) and the full replay
// (queue B) each end with a set of groups, every one with its queue; check
// 3 compares them group by group (a group's events against the same
// group's, matched by id), check 4 reads back every group's queued and
// in-flight pointers, check 5 checks every group's checkpoint.

// groupQueue is one consumer group's queue as a recovery, a full replay or
// a checkpoint leaves it.
type groupQueue struct {
	info logfile.GroupInfo
	ptrs []eventqueue.Pointer
	// deliveries is a replay's delivery counts of ptrs (nil for a
	// checkpointed ring).
	deliveries map[eventqueue.Pointer]uint32
	// waiting is a replay's due times of those of ptrs that wait for
	// their retry delay (GroupResult.Waiting).
	waiting map[eventqueue.Pointer]int64
}

// ckptGroup is one consumer group's part of the checkpoint set used.
type ckptGroup struct {
	info logfile.GroupInfo
	meta string // its checkpoint.meta, for problems
	st   *checkpoint.State
	q    *eventqueue.Queue    // over its ring: the replay's seed
	ring []eventqueue.Pointer // its ring as checkpointed
}

// recovery is the result of the recovery the channel would do.
type recovery struct {
	// groups is every group's recovered queue, by id; its checkpointed
	// ring when the replay failed (res nil).
	groups   []groupQueue
	res      *Result
	inflight []rolePointer // the checkpoint's in-flight pointers
	ckpt     []ckptGroup
}

// ref returns the GroupRef of g, one per group id for the whole Verify (so
// that every problem about a group shares it).
func (v *verifier) ref(g logfile.GroupInfo) *GroupRef {
	if r := v.refs[g.ID]; r != nil {
		return r
	}
	if v.refs == nil {
		v.refs = map[uint32]*GroupRef{}
	}
	r := &GroupRef{ID: g.ID, Name: g.Name}
	v.refs[g.ID] = r
	return r
}

// checkpointGroups returns the consumer groups of the checkpoint set c,
// each on a queue over its ring, and the options of the replay that
// recovers them as the channel does: the catalog's groups (GroupSeeds), or
// without a catalog the unnamed group alone on the top-level ring.
func (v *verifier) checkpointGroups(c *checkpoint.Set) ([]ckptGroup, Options, error) {
	opts := Options{Checkpoint: c.State}
	topMeta := filepath.Join(c.Dir, checkpoint.MetaName)
	seeds, err := GroupSeeds(c)
	if err != nil {
		return nil, opts, err // Open checked every head and size
	}
	if seeds == nil {
		q, err := ringQueue(c.Top, c.State)
		if err != nil {
			return nil, opts, err
		}
		opts.Queue = q
		info := logfile.GroupInfo{Capacity: uint64(q.Capacity())} // as Run seeds it
		return []ckptGroup{{info: info, meta: topMeta, st: c.State, q: q, ring: q.Pointers()}}, opts, nil
	}
	opts.Groups, opts.NextGroupID = seeds, c.Catalog.NextGroupID
	groups := make([]ckptGroup, 0, len(seeds))
	for _, s := range seeds {
		g := ckptGroup{info: s.Info, meta: topMeta, st: c.State, q: s.Queue, ring: s.Queue.Pointers()}
		if gc, ok := c.Group(s.Info.ID); ok {
			g.meta, g.st = filepath.Join(gc.Dir, checkpoint.MetaName), gc.State
		}
		groups = append(groups, g)
	}
	return groups, opts, nil
}

// recoverFrom runs the recovery from the checkpoint set c (queue A), after
// checking each of its checkpoints' bookkeeping (check 5).
func (v *verifier) recoverFrom(c *checkpoint.Set) (recovery, error) {
	var rec recovery
	var puts []rolePointer
	for _, tx := range c.State.InflightPuts {
		for _, p := range tx.Pointers {
			puts = append(puts, rolePointer{p: p, role: roleInflightPut})
		}
	}
	v.rep.InflightPuts = countPointers(c.State.InflightPuts)
	groups, opts, err := v.checkpointGroups(c)
	if err != nil {
		return rec, err
	}
	topIsGroup := false
	for _, g := range groups {
		var takes []rolePointer
		for _, tx := range g.st.InflightTakes {
			for _, p := range tx.Pointers {
				takes = append(takes, rolePointer{p: p, role: roleInflightTake, group: g.info.ID})
			}
		}
		v.rep.InflightTakes += len(takes)
		// The top level's log states count the puts in flight too.
		check := takes
		if g.st == c.State {
			check, topIsGroup = append(slices.Clone(puts), takes...), true
		}
		v.checkRefs(g.meta, v.ref(g.info), g.st, g.ring, check)
		rec.inflight = append(rec.inflight, takes...)
	}
	if !topIsGroup {
		// No unnamed group: the top level holds an empty ring, and the
		// puts in flight.
		q, err := ringQueue(c.Top, c.State)
		if err != nil {
			return rec, err
		}
		v.checkRefs(filepath.Join(c.Dir, checkpoint.MetaName), nil, c.State, q.Pointers(), puts)
	}
	rec.inflight = append(rec.inflight, puts...)
	rec.ckpt = groups
	if rec.res, err = v.replay(v.rep.RecoveredFrom, opts); err != nil {
		return rec, err
	}
	if rec.res != nil {
		rec.groups = groupQueues(rec.res.Groups)
		return rec, nil
	}
	// Check what the checkpoint holds at least.
	for _, g := range groups {
		rec.groups = append(rec.groups, groupQueue{info: g.info, ptrs: g.ring})
	}
	return rec, nil
}

// fullReplay replays every log (queue B) into in-memory queues large enough
// for every put record, so that no group's capacity fails it. It returns
// nil groups when it fails on the files' contents (a problem).
func (v *verifier) fullReplay() ([]groupQueue, *Result, error) {
	n := int(v.puts)
	q, err := emptyQueue(n)
	if err != nil {
		return nil, nil, err
	}
	opts := Options{Queue: q, NewQueue: func(logfile.GroupInfo) (*eventqueue.Queue, error) { return emptyQueue(n) }}
	res, err := v.replay(FromFullReplay, opts)
	if err != nil || res == nil {
		return nil, nil, err
	}
	full := groupQueues(res.Groups)
	for i := range full {
		v.ref(full[i].info)
		if res.Catalogs == 0 && full[i].info.ID == 0 {
			// No groups record: the unnamed group Run assumes, on a queue
			// of Verify's capacity.
			full[i].info.Capacity = 0
		}
	}
	n = 0
	for _, g := range full {
		n += len(g.ptrs)
	}
	v.replayed = make(map[eventqueue.Pointer]bool, n)
	for _, g := range full {
		for _, p := range g.ptrs {
			v.replayed[p] = true
		}
	}
	return full, res, nil
}

// groupQueues returns the pointers of every group's queue.
func groupQueues(gs []GroupResult) []groupQueue {
	out := make([]groupQueue, 0, len(gs))
	for _, g := range gs {
		out = append(out, groupQueue{info: g.Info, ptrs: g.Queue.Pointers(), deliveries: g.Deliveries, waiting: g.Waiting})
	}
	return out
}

// queuedLen is the number of events FileChannel.Len gives for groups: the
// unnamed group's, else the largest group's.
func queuedLen(groups []groupQueue) int {
	n := 0
	for _, g := range groups {
		if g.info.ID == 0 {
			return len(g.ptrs)
		}
		n = max(n, len(g.ptrs))
	}
	return n
}

// compareGroups fills in the report's groups and compares each group's
// recovered queue with a full replay's (check 3). used is nil when the
// recovery is the full replay.
func (v *verifier) compareGroups(rec recovery, full []groupQueue, fullRes *Result, used *checkpoint.Set) {
	recOK := rec.res != nil
	v.rep.Queued, v.rep.FullReplayQueued = -1, -1
	if recOK {
		v.rep.Queued = queuedLen(rec.groups)
	}
	if fullRes != nil {
		v.rep.FullReplayQueued = queuedLen(full)
	}
	inflight := map[uint32][3]int{} // all, waiting, parked
	for _, g := range rec.ckpt {
		inflight[g.info.ID] = [3]int{countPointers(g.st.InflightTakes),
			countTx(g.st.InflightTakes, checkpoint.WaitingTx), countTx(g.st.InflightTakes, checkpoint.ParkedTx)}
	}
	byID := func(gs []groupQueue) map[uint32]*groupQueue {
		m := make(map[uint32]*groupQueue, len(gs))
		for i := range gs {
			m[gs[i].info.ID] = &gs[i]
		}
		return m
	}
	recBy, fullBy := byID(rec.groups), byID(full)
	ids := make([]uint32, 0, len(recBy)+len(fullBy))
	for id := range recBy {
		ids = append(ids, id)
	}
	for id := range fullBy {
		if recBy[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	// Whether each side knows the set of groups: a catalog or a groups
	// record says it. Otherwise Run assumed the unnamed group alone, and
	// a group only the other side has is no disagreement.
	setKnown := used != nil && fullRes != nil && recOK &&
		(used.Catalog != nil || rec.res.Catalogs > 0) && fullRes.Catalogs > 0
	for _, id := range ids {
		r, f := recBy[id], fullBy[id]
		n := inflight[id]
		gr := GroupReport{Queued: -1, FullReplayQueued: -1, InflightTakes: n[0], InflightWaiting: n[1], InflightParked: n[2]}
		if r != nil {
			gr.Info = r.info
			if recOK {
				gr.Queued, gr.Deliveries, gr.Waiting = len(r.ptrs), r.deliveries, r.waiting
				gr.HeadID, gr.Oldest = v.headStamp(r.ptrs, rec.res.Spilled)
			}
		} else {
			gr.Info = f.info
		}
		if f != nil {
			gr.FullReplayQueued = len(f.ptrs)
		}
		ref := v.ref(gr.Info)
		switch {
		case used == nil || fullRes == nil || !recOK:
		case r != nil && f != nil:
			v.compare(ref, &gr.Diff, r.ptrs, f.ptrs)
		case !setKnown:
		case r != nil:
			v.disagrees[id] = v.rep.addGroup(ref, ProblemCheckpointDisagrees, "", -1,
				"recovery from the %s has the group, with %d events; a full replay of the logs does not (no groups record lists it at their end)",
				v.rep.RecoveredFrom, len(r.ptrs))
		default:
			v.disagrees[id] = v.rep.addGroup(ref, ProblemCheckpointDisagrees, "", -1,
				"a full replay of the logs has the group, with %d events; recovery from the %s does not",
				len(f.ptrs), v.rep.RecoveredFrom)
		}
		v.rep.Groups = append(v.rep.Groups, gr)
	}
	if g := v.rep.Group(0); g != nil {
		v.rep.Diff = g.Diff
	}
}

// headStamp is the id and commit time of the first of ptrs (a recovered
// queue; spilled: the recovery's spilled commits); "" and zero when there
// is none or it does not read.
func (v *verifier) headStamp(ptrs []eventqueue.Pointer, spilled map[uint32]map[uint64]logfile.SpilledCommit) (string, time.Time) {
	if len(ptrs) == 0 || v.logs == nil {
		return "", time.Time{}
	}
	rec, timed, _ := v.readEvent(ptrs[0])
	if rec.WriteOrderID == 0 {
		return "", time.Time{}
	}
	return stamp(ptrs[0].FileID(), timed, &rec, spilled)
}

// nameGroups leaves the group of each problem and note named only in a
// channel with named groups: a channel whose only group is the unnamed one
// reports as before groups.
func (v *verifier) nameGroups() {
	for id := range v.refs {
		if id != 0 {
			return
		}
	}
	for _, ps := range [][]Problem{v.rep.Problems, v.rep.Notes} {
		for i := range ps {
			ps[i].Group = nil
		}
	}
}

// groupsOf names the groups of ids in a problem's detail: " of group "a"
// and the unnamed group", or "" for at most one group (the problem's Group
// names it).
func (v *verifier) groupsOf(ids []uint32) string {
	if len(ids) < 2 {
		return ""
	}
	slices.SortFunc(ids, cmp.Compare)
	s := " of "
	for i, id := range ids {
		switch {
		case i == len(ids)-1:
			s += " and "
		case i > 0:
			s += ", "
		}
		s += v.refOf(id).String()
	}
	return s
}

// refOf returns the GroupRef of group id (one with no name if the group is
// not known).
func (v *verifier) refOf(id uint32) *GroupRef {
	if r := v.refs[id]; r != nil {
		return r
	}
	return v.ref(logfile.GroupInfo{ID: id, Name: fmt.Sprint(id)})
}
