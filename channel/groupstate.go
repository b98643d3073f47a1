package channel

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// groupState is one consumer group of the channel's log (what a Group
// handle names, and what users call a group): the ring of its
// queued events (a FlumeEventQueue over its own checkpoint file), the takes
// its transactions hold in flight, its capacity gate, and the signal that
// wakes its waiting takers. A FileChannel is a log set (logfile.Set) plus
// its consumer groups; the log set knows nothing of them but asks, when it
// deletes files, which ones they still point into (holds).
//
// queue, ckpt's slots, inflight and removed are guarded by
// FileChannel.queueMu: every method below except the gate's and avail's is
// called with it held.
type groupState struct {
	id    uint32      // 0: the unnamed group; never reused
	cfg   GroupConfig // its config, defaults filled in
	since uint64      // the write-order id of the groups record that created it
	// removed: RemoveGroup removed it; its takes fail with ErrNoGroup.
	removed bool

	queue    *eventqueue.Queue
	ckpt     *checkpoint.Checkpoint // the ring's slots and the file they live in
	inflight *eventqueue.Inflight   // takes of open transactions, per transaction
	gate     *gate                  // capacity permits; taken with no channel lock held
	avail    signal                 // wakes Wait and TakeContext; no lock held
	counts   groupCounts

	// dlqOnly: a dead-letter group, which no put feeds. dlq: the group
	// that receives this one's dead letters (cfg.DeadLetter), nil for
	// none. deliveries: the delivery counts of its events delivered and
	// not yet taken for good (groups with MaxDeliveries; nil until the
	// first).
	dlqOnly    bool
	dlq        *groupState
	deliveries map[eventqueue.Pointer]uint32

	// head caches the commit time of the event at the head (lag.go).
	head headTime

	// fenced: the take transactions that can no longer take or commit,
	// and why (fence.go): ResetGroup reset the group while they held its
	// events (ErrGroupReset), or their lease expired (ErrLeaseExpired).
	// An entry goes when its transaction ends.
	fenced map[uint64]fence

	// wait is its events waiting for their retry delay (retry.go), under
	// queueMu.
	wait waitSet

	// order is its held keys and parked events (GroupConfig.OrderKey,
	// order.go), under queueMu. orderMu orders its takes' pops and claims
	// (held before queueMu): shared by a Take whose next event's key tag
	// tells its key (pop and claim in one queueMu round), exclusive for
	// one that must read the event to learn its key, for the end of a
	// take transaction and for a checkpoint's capture.
	order   keyOrder
	orderMu sync.RWMutex

	// compiled caches the compiled cfg.Filter (filter.go).
	compiled atomic.Pointer[filter]
}

// newGroupState builds the group's state over ck's ring: head and size as the
// checkpoint recorded them (st nil: empty), with its per-file counts.
func newGroupState(ck *checkpoint.Checkpoint, st *checkpoint.State) (*groupState, error) {
	return newGroupStateOn(ck, ck.Capacity(), st)
}

// newMemGroupState builds an empty group state whose ring is in memory, until
// Open moves it into a checkpoint file (resize).
func newMemGroupState(capacity int) (*groupState, error) {
	return newGroupStateOn(eventqueue.NewMemSlots(capacity), capacity, nil)
}

func newGroupStateOn(slots eventqueue.Slots, capacity int, st *checkpoint.State) (*groupState, error) {
	refs := map[uint32]int{}
	head, size := 0, 0
	if st != nil {
		head, size = st.Head, st.Size
		for _, l := range st.Logs {
			if l.Refs > 0 {
				refs[l.FileID] = l.Refs
			}
		}
	}
	q, err := eventqueue.New(slots, capacity, head, size, refs)
	if err != nil {
		return nil, err
	}
	ck, _ := slots.(*checkpoint.Checkpoint)
	return &groupState{queue: q, ckpt: ck, inflight: eventqueue.NewInflight()}, nil
}

// groupCounts are a group's counters for its metrics (atomic: read with
// no lock): events taken by committed transactions, take rollbacks, and
// what its full policy cost it (oldest dropped, put commits missed).
type groupCounts struct {
	taken, rollbacks, oldest, newest atomic.Int64
	// Dead letters: moved out for reaching MaxDeliveries, rejected
	// (Transaction.Reject), refused by a full Block dead-letter group (and
	// delivered again), moved out by Redrive.
	deadMax, deadRejected, deadRefused, redriven atomic.Int64
	// leasesExpired: its take transactions whose lease expired.
	leasesExpired atomic.Int64
	// Expired events (GroupConfig.ExpireAfter): moved to its dead-letter
	// group (deadExpired), dropped without one (expiredDropped).
	deadExpired, expiredDropped atomic.Int64
	// filtered: events its filter kept out of it at put commit.
	filtered atomic.Int64
}

// fedBlock reports whether puts take capacity permits in g: a Block group
// that is not a dead-letter group.
func (g *groupState) fedBlock() bool { return g.cfg.WhenFull == Block && !g.dlqOnly }

// counting reports whether g counts deliveries: for MaxDeliveries, or
// for the delays of RetryDelays.
func (g *groupState) counting() bool { return g.cfg.MaxDeliveries > 0 || len(g.cfg.RetryDelays) > 0 }

// takeHead moves the event at the head into tx's in-flight takes, and
// returns its key tag (keytags.go).
func (g *groupState) takeHead(tx uint64) (eventqueue.Pointer, uint64, bool) {
	p, tag, ok := g.queue.RemoveHeadTagged()
	if ok {
		g.inflight.Add(tx, p)
	}
	return p, tag, ok
}

// untake puts p, the last event tx took, back at the head: before the
// events parked behind its key if tx held the key for p alone (OrderKey),
// with its key's hash if tx held it for p.
func (g *groupState) untake(tx uint64, p eventqueue.Pointer) error {
	g.inflight.RemovePointer(tx, p)
	tag, err := g.dropKeyTakeLocked(tx, p)
	return errors.Join(err, g.queue.AddHeadTagged(p, tag))
}

// returnTakes ends tx's takes without committing them: the events go back
// to the head in their original order, before the events parked behind
// the keys tx held (OrderKey), with their keys' hashes.
func (g *groupState) returnTakes(tx uint64, takes []eventqueue.Pointer) error {
	g.inflight.Remove(tx)
	tags := g.takeTags(tx, takes)
	err := g.releaseKeysLocked(tx)
	for i := len(takes) - 1; i >= 0; i-- {
		err = errors.Join(err, g.queue.AddHeadTagged(takes[i], tagAt(tags, i)))
	}
	return err
}

// committed ends tx's takes after their commit: the events are gone, and
// so are their delivery counts. The events parked behind the keys tx
// held go back to the head (OrderKey).
func (g *groupState) committed(tx uint64, takes []eventqueue.Pointer) error {
	g.inflight.Remove(tx)
	g.forgetDeliveries(takes)
	return g.releaseKeysLocked(tx)
}

// forgetDeliveries drops the delivery counts of ps, which left the group.
func (g *groupState) forgetDeliveries(ps []eventqueue.Pointer) {
	if len(g.deliveries) == 0 {
		return
	}
	for _, p := range ps {
		delete(g.deliveries, p)
	}
}

// add appends committed events at the tail, with their key tags
// (keytags.go; nil: tagUnknown).
func (g *groupState) add(ps []eventqueue.Pointer, tags []uint64) error {
	var err error
	for i, p := range ps {
		err = errors.Join(err, g.queue.AddTailTagged(p, tagAt(tags, i)))
	}
	return err
}

// capture fills in the group's part of a checkpoint: its ring's
// capacity, head and size, its in-flight takes and each file's count of
// queued events; and tells the log snapshot which files it points into.
func (g *groupState) capture(st *checkpoint.State, sn *logfile.Snapshot) {
	st.Capacity, st.Head, st.Size = g.queue.Capacity(), g.queue.Head(), g.queue.Size()
	st.InflightTakes = g.inflight.Entries()
	for i := range st.Logs {
		st.Logs[i].Refs = g.queue.FileRef(st.Logs[i].FileID)
	}
	for id := range g.queue.FileRefs() {
		sn.Keep(id)
	}
	for id := range g.inflight.Files() {
		sn.Keep(id)
	}
	if len(g.wait.heap) > 0 {
		// Waiting events come back at the head at recovery (in flight
		// under waitingTx), unless the logs make them wait again.
		ps := make([]eventqueue.Pointer, len(g.wait.heap))
		for i, w := range g.wait.heap {
			ps[i] = w.p
		}
		st.InflightTakes = append(st.InflightTakes, eventqueue.InflightTx{Tx: waitingTx, Pointers: ps})
		for id := range g.wait.files {
			sn.Keep(id)
		}
	}
	if ps := g.parkedPointers(); len(ps) > 0 {
		// Parked events (OrderKey) come back at the head at recovery,
		// after every open transaction's: behind their keys' holders.
		st.InflightTakes = append(st.InflightTakes, eventqueue.InflightTx{Tx: parkedTx, Pointers: ps})
		for id := range g.order.files {
			sn.Keep(id)
		}
	}
}

// holds reports whether the group points into log file id now.
func (g *groupState) holds(id uint32, inflightFiles map[uint32]int) bool {
	return g.queue.FileRef(id) > 0 || inflightFiles[id] > 0 || g.wait.files[id] > 0 || g.order.files[id] > 0
}

// resize moves the queue into a new checkpoint of the given capacity (the
// configured one, when the checkpoint recorded another). If it crashes
// midway the logs still hold every event: the next open finds no complete
// checkpoint and replays them.
func (g *groupState) resize(create func(capacity int) (*checkpoint.Checkpoint, error), capacity int) error {
	ptrs := g.queue.Pointers()
	if n := len(ptrs) + g.waitingLen() + g.order.parked; n > capacity { // waiting and parked events count against it
		return fmt.Errorf("the channel holds %d events, more than the configured Capacity %d; reopen with Capacity >= %d (nothing was changed)",
			n, capacity, n)
	}
	if g.ckpt != nil {
		if err := g.ckpt.Close(); err != nil {
			return fmt.Errorf("close checkpoint: %w", err)
		}
		g.ckpt = nil
	}
	ck, err := create(capacity)
	if err != nil {
		return err
	}
	g.ckpt = ck
	nq, err := eventqueue.New(ck, capacity, 0, 0, nil)
	if err != nil {
		return err
	}
	g.queue = nq
	return g.add(ptrs, nil)
}
