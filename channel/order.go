package channel

import (
	"errors"
	"hash/maphash"

	"github.com/flumego/filechannel/eventqueue"
)

// Order per key (GroupConfig.OrderKey). Within a keyed group, an open
// take transaction that took an event with a non-empty key value holds
// that key (keyOrder.held) until it ends. A Take that meets, at the head,
// an event whose key another transaction holds parks it in the key's lane
// (read once, never re-read while the key stays held) and goes on with
// the next event: one stuck key costs the other takes one read and one
// map look-up per event of it, once. When the holder ends, its lanes'
// parked events go back to the head of the ring, behind the events a
// rollback returns (so a key's events keep their order), and are taken
// first.
//
// The key of an event is known only once it is read, after the pop from
// the ring: a keyed group's Take holds the group's orderMu from the pop
// to the claim (or park), so that two takers never claim a key out of the
// order of their pops, and a checkpoint's capture takes it too
// (lockTakeSteps), so that it never lists an event popped and not yet
// claimed in flight under its taker, ahead of its key's holder's events at
// recovery. The reads of a keyed group's takes are serial.
//
// Parked events are queued: they keep their capacity permits, their log
// files (files) and a checkpoint lists them in flight under parkedTx,
// after every open transaction, so that recovery brings them back at the
// head behind their keys' holders' events. Recovery needs no new state.
//
// Not yet (ORDERKEY-NOTES.md): OrderKey with RetryDelays (refused). A
// checkpoint before a crash keeps per-key order, whatever the logs after it
// commit or return (the crash enumeration's keys cases, crashkeys_test.go).

// parkedTx is the transaction id under which a checkpoint lists a keyed
// group's parked events (waitingTx is 1<<64-1): no transaction has it.
const parkedTx = 1<<64 - 2

// keySeed hashes key values (per process: keys are not persisted).
var keySeed = maphash.MakeSeed()

// keyOrder is a keyed group's held keys and parked events, under queueMu.
type keyOrder struct {
	held   map[uint64]*lane    // by key hash
	byTx   map[uint64][]uint64 // the keys each transaction holds
	files  map[uint32]int      // parked events per log file
	parked int                 // parked events, all lanes
	skips  int64               // events parked, ever (metrics)
}

// lane is a held key: its owner and the events parked behind it, oldest
// first.
type lane struct {
	owner  uint64
	parked []eventqueue.Pointer
}

// keyed reports whether g orders its takes per key.
func (g *groupState) keyed() bool { return g.cfg.OrderKey != "" }

// orderKeyOf returns the hash of ev's key in g, and false for an event
// without one (free).
func (g *groupState) orderKeyOf(ev *Event) (uint64, bool) {
	v := ev.Headers[g.cfg.OrderKey]
	if v == "" {
		return 0, false
	}
	return maphash.String(keySeed, v), true
}

// claimOrParkLocked claims key k for tx, or, if another transaction holds
// it, parks p (tx's last take) in k's lane: parked reports that. The
// holder itself takes more of its key only while none is parked (those
// are older than p); else p is parked behind them. The caller holds
// queueMu.
func (g *groupState) claimOrParkLocked(tx uint64, k uint64, p eventqueue.Pointer) (parked bool) {
	o := &g.order
	if o.held == nil {
		o.held, o.byTx, o.files = map[uint64]*lane{}, map[uint64][]uint64{}, map[uint32]int{}
	}
	l := o.held[k]
	if l == nil {
		o.held[k] = &lane{owner: tx}
		o.byTx[tx] = append(o.byTx[tx], k)
		return false
	}
	if l.owner == tx && len(l.parked) == 0 {
		return false // its own key, nothing of it skipped: in order
	}
	g.inflight.RemovePointer(tx, p)
	l.parked = append(l.parked, p)
	o.files[p.FileID()]++
	o.parked++
	o.skips++
	return true
}

// releaseKeysLocked ends tx's hold of its keys: their parked events go
// back to the head of the ring (before what is there, in their order).
// The caller holds queueMu and puts a rollback's events back after this.
func (g *groupState) releaseKeysLocked(tx uint64) error {
	o := &g.order
	keys := o.byTx[tx]
	if len(keys) == 0 {
		return nil
	}
	delete(o.byTx, tx)
	var err error
	for _, k := range keys {
		l := o.held[k]
		delete(o.held, k)
		for i := len(l.parked) - 1; i >= 0; i-- {
			p := l.parked[i]
			err = errors.Join(err, g.queue.AddHead(p))
			if o.files[p.FileID()]--; o.files[p.FileID()] == 0 {
				delete(o.files, p.FileID())
			}
		}
		o.parked -= len(l.parked)
	}
	return err
}

// clearOrderLocked drops g's held keys and parked events (a reset
// replaced them); the caller holds queueMu.
func (g *groupState) clearOrderLocked() {
	skips := g.order.skips
	g.order = keyOrder{skips: skips}
}

// parkedPointers returns g's parked events, lane by lane (each in
// order); the caller holds queueMu.
func (g *groupState) parkedPointers() []eventqueue.Pointer {
	if g.order.parked == 0 {
		return nil
	}
	out := make([]eventqueue.Pointer, 0, g.order.parked)
	for _, l := range g.order.held {
		out = append(out, l.parked...)
	}
	return out
}

// takeKeyed is a keyed group's step of Take: the pop of the next event
// and its read, then the claim of its key for t, under g's orderMu. An
// event whose key another transaction holds is parked and the step goes
// on with the next one. ok false: the group is empty (or holds only
// parked events). After a read error p is in t's takes, as takeHead
// leaves it.
func (t *Transaction) takeKeyed() (p eventqueue.Pointer, ev Event, ok bool, err, rerr error) {
	c, g := t.c, t.grp
	g.orderMu.Lock()
	defer g.orderMu.Unlock()
	for {
		p, ok, err = c.takeHead(g, t.id)
		if err != nil || !ok {
			return 0, Event{}, false, err, nil
		}
		ev, rerr = c.readEvent(p)
		if rerr != nil {
			return p, Event{}, true, nil, rerr // damaged or unreadable: holds no key
		}
		k, has := g.orderKeyOf(&ev)
		if !has {
			return p, ev, true, nil, nil
		}
		if !c.claimOrPark(g, t.id, k, p) {
			return p, ev, true, nil, nil
		}
	}
}

// claimOrPark is claimOrParkLocked under queueMu. A transaction fenced
// since its pop (a reset, an expired lease) or a removed group claims
// nothing: p is not the group's any more, and the take fails after.
func (c *FileChannel) claimOrPark(g *groupState, tx, k uint64, p eventqueue.Pointer) bool {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released || g.removed || g.fencedLocked(tx) != fenceNone {
		return false
	}
	return g.claimOrParkLocked(tx, k, p)
}

// lockOrder takes g's orderMu if g is keyed, for the end of a take
// transaction (commit, rollback, expired lease), which puts a key's
// earlier events back at the head: a taker that popped a later event of
// the key before that must not claim the key after it. It returns the
// unlock. Lock order: commitMu, orderMu, queueMu.
func (g *groupState) lockOrder() func() {
	if !g.keyed() {
		return func() {}
	}
	g.orderMu.Lock()
	return g.orderMu.Unlock
}
