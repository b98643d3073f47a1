package channel

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/flumego/filechannel/eventqueue"
)

// Order per key (GroupConfig.OrderKey). Within a keyed group, an open
// take transaction that took an event with a non-empty key value holds
// that key (keyOrder.held) until it ends. A Take that meets, at the head,
// an event whose key another transaction holds parks it in the key's lane
// (unread if its key tag told its key, else read once; never re-read while
// the key stays held) and goes on with the next event: one stuck key costs
// the other takes one map look-up per event of it (and a read if its tag
// is unknown), once. When the holder ends, its lanes' parked events go
// back to the head of the ring, behind the events a rollback returns (so a
// key's events keep their order), and are taken first.
//
// Two takers never claim a key out of the order of their pops, and a
// checkpoint's capture never lists an event popped and not yet claimed in
// flight under its taker (ahead of its key's holder's events at
// recovery). The ring keeps each queued event's key tag (keytags.go: its
// key's hash, computed at its Put), so a Take whose next event's tag is
// known pops and claims (or parks) it in one queueMu round, under the
// group's orderMu shared (popKeyedShared), and reads it after: the takes
// of a keyed group run side by side, as an unkeyed group's. An event
// whose tag is unknown (after a recovery, a reset, ...) is read to learn
// its key between its pop and its claim, as before tags, under orderMu
// exclusive (popKeyedExclusive), which the end of a take transaction and
// a checkpoint's capture (lockTakeSteps) take too: correct, serial.
//
// Parked events are queued: they keep their capacity permits, their log
// files (files) and a checkpoint lists them in flight under parkedTx,
// after every open transaction, so that recovery brings them back at the
// head behind their keys' holders' events. Recovery needs no new state.
//
// With RetryDelays (retry.go) a key waits with its event: a lane's owner
// may be waitingTx, the key's first event returned by a rollback (an
// expired lease, Transaction.Retry) waiting in the group's wait heap, and
// the key's later events parked behind it (those of the same transaction
// first, in take order, then those parked before). The Take that takes
// the waiting event when it is due takes its lane over (claimDueLocked):
// it is not parked behind its own lane. Open reads each waiting event of
// a keyed group once to learn its key (keyWaiting).
//
// A checkpoint before a crash keeps per-key order, whatever the logs after
// it commit or return (the crash enumeration's keys cases,
// crashkeys_test.go).

// parkedTx is the transaction id under which a checkpoint lists a keyed
// group's parked events (waitingTx is 1<<64-1): no transaction has it.
const parkedTx = 1<<64 - 2

// keySeed hashes key values (per process: keys are not persisted).
var keySeed = maphash.MakeSeed()

// keyOrder is a keyed group's held keys and parked events, under queueMu.
type keyOrder struct {
	held   map[uint64]*lane     // by key hash
	byTx   map[uint64][]keyTake // each open transaction's keyed takes, in take order
	files  map[uint32]int       // parked events per log file
	parked int                  // parked events, all lanes
	skips  int64                // events parked, ever (metrics)

	// Released lanes and transactions' take lists, kept for reuse: a
	// keyed take claims a lane and appends to its transaction's list
	// under queueMu, which every taker needs, so neither allocates in
	// steady state.
	freeLanes []*lane
	freeTakes [][]keyTake
}

// maxFree bounds keyOrder's free lists; a lane or take list larger than
// maxFreeCap (a stuck key's parked events) is not kept.
const (
	maxFree    = 1024
	maxFreeCap = 256
)

// newLane returns a lane owned by owner, a released one if there is one.
func (o *keyOrder) newLane(owner uint64) *lane {
	if n := len(o.freeLanes); n > 0 {
		l := o.freeLanes[n-1]
		o.freeLanes = o.freeLanes[:n-1]
		l.owner = owner
		return l
	}
	return &lane{owner: owner}
}

// freeLane keeps l, released, for newLane.
func (o *keyOrder) freeLane(l *lane) {
	if len(o.freeLanes) >= maxFree || cap(l.parked) > maxFreeCap {
		return
	}
	clear(l.parked)
	*l = lane{parked: l.parked[:0]}
	o.freeLanes = append(o.freeLanes, l)
}

// addTake appends kt to tx's keyed takes, starting a list from the free
// ones if tx has none.
func (o *keyOrder) addTake(tx uint64, kt keyTake) {
	takes, ok := o.byTx[tx]
	if !ok {
		if n := len(o.freeTakes); n > 0 {
			takes = o.freeTakes[n-1]
			o.freeTakes = o.freeTakes[:n-1]
		}
	}
	o.byTx[tx] = append(takes, kt)
}

// freeTakeList keeps takes, a list no transaction has any more, for
// addTake.
func (o *keyOrder) freeTakeList(takes []keyTake) {
	if len(o.freeTakes) >= maxFree || cap(takes) > maxFreeCap {
		return
	}
	o.freeTakes = append(o.freeTakes, takes[:0])
}

// keyTake is a keyed take of an open transaction: the key's hash and the
// event. A transaction holds the keys of its keyTakes.
type keyTake struct {
	key uint64
	p   eventqueue.Pointer
}

// init makes o's maps.
func (o *keyOrder) init() {
	if o.held == nil {
		o.held, o.byTx, o.files = map[uint64]*lane{}, map[uint64][]keyTake{}, map[uint32]int{}
	}
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
	o.init()
	l := o.held[k]
	if l == nil {
		o.held[k] = o.newLane(tx)
		o.addTake(tx, keyTake{k, p})
		return false
	}
	if l.owner == tx && len(l.parked) == 0 {
		// its own key, nothing of it skipped: in order
		o.addTake(tx, keyTake{k, p})
		return false
	}
	g.inflight.RemovePointer(tx, p)
	g.parkLocked(l, p)
	o.skips++
	return true
}

// parkLocked appends ps to l's parked events; the caller holds queueMu.
func (g *groupState) parkLocked(l *lane, ps ...eventqueue.Pointer) {
	l.parked = append(l.parked, ps...)
	g.order.countParked(ps, 1)
}

// countParked adds sign to the count of each of ps parked, per file and
// in all.
func (o *keyOrder) countParked(ps []eventqueue.Pointer, sign int) {
	for _, p := range ps {
		if o.files[p.FileID()] += sign; o.files[p.FileID()] == 0 {
			delete(o.files, p.FileID())
		}
	}
	o.parked += sign * len(ps)
}

// claimDueLocked gives tx the key of w, a keyed waiting event tx takes
// from the wait heap (takeDueLocked): the lane its key waits in
// (owner waitingTx) becomes tx's, and w is not parked behind the lane's
// parked events (they are the key's later events). It reports false,
// and parks w at the front of the lane, if an open transaction holds the
// key (a waiting event holds its key: only a group whose OrderKey was
// added while events waited can meet that). The caller holds queueMu.
func (g *groupState) claimDueLocked(tx uint64, w waitingEvent) bool {
	o := &g.order
	o.init()
	l := o.held[w.key]
	if l == nil {
		l = o.newLane(0)
		o.held[w.key] = l
	} else if l.owner != waitingTx && l.owner != tx {
		l.parked = append([]eventqueue.Pointer{w.p}, l.parked...)
		o.countParked([]eventqueue.Pointer{w.p}, 1)
		return false
	}
	l.owner = tx
	o.addTake(tx, keyTake{w.key, w.p})
	return true
}

// releaseLaneLocked ends the hold of key k, held by l: its parked events
// go back to the head of the ring (before what is there, in their
// order). The caller holds queueMu.
func (g *groupState) releaseLaneLocked(k uint64, l *lane) error {
	o := &g.order
	delete(o.held, k)
	var err error
	for i := len(l.parked) - 1; i >= 0; i-- {
		err = errors.Join(err, g.queue.AddHeadTagged(l.parked[i], keyTag(k)))
	}
	o.countParked(l.parked, -1)
	o.freeLane(l)
	return err
}

// dropKeyTakeLocked forgets p, a take of tx that leaves it (a failed read
// put back at the head, a dead letter): if it was tx's last take of its
// key, tx holds the key no more and the key's parked events go back to
// the head (before p, if the caller puts p back after). It returns p's
// key tag (tagUnknown if tx held no key for p). The caller holds queueMu
// (and orderMu).
func (g *groupState) dropKeyTakeLocked(tx uint64, p eventqueue.Pointer) (uint64, error) {
	o := &g.order
	takes := o.byTx[tx]
	i := slices.IndexFunc(takes, func(kt keyTake) bool { return kt.p == p })
	if i < 0 {
		return tagUnknown, nil
	}
	k := takes[i].key
	takes = slices.Delete(takes, i, i+1)
	if len(takes) == 0 {
		delete(o.byTx, tx)
	} else {
		o.byTx[tx] = takes
	}
	if slices.ContainsFunc(takes, func(kt keyTake) bool { return kt.key == k }) {
		return keyTag(k), nil
	}
	if l := o.held[k]; l != nil && l.owner == tx {
		return keyTag(k), g.releaseLaneLocked(k, l)
	}
	return keyTag(k), nil
}

// parkedBehindLocked reports whether an event is parked behind a key tx
// holds; the caller holds queueMu.
func (g *groupState) parkedBehindLocked(tx uint64) bool {
	for _, kt := range g.order.byTx[tx] {
		if l := g.order.held[kt.key]; l != nil && l.owner == tx && len(l.parked) > 0 {
			return true
		}
	}
	return false
}

// releaseKeysLocked ends tx's hold of its keys: their parked events go
// back to the head of the ring (before what is there, in their order).
// The caller holds queueMu and puts a rollback's events back after this.
func (g *groupState) releaseKeysLocked(tx uint64) error {
	o := &g.order
	takes := o.byTx[tx]
	if len(takes) == 0 {
		return nil
	}
	delete(o.byTx, tx)
	var err error
	for _, kt := range takes {
		if l := o.held[kt.key]; l != nil && l.owner == tx {
			err = errors.Join(err, g.releaseLaneLocked(kt.key, l))
		}
	}
	o.freeTakeList(takes)
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
// and the claim of its key for t under g's orderMu (popKeyed), and its
// read, after orderMu is released if its key tag told its key. An event
// whose key another transaction holds is parked and the step goes on
// with the next one. ok false: the group is empty (or holds only parked
// events). After a read error p is in t's takes, as takeHead leaves it,
// and holds no key if it is damaged (unless it waited holding it: then
// until it leaves t); if it failed to read, untake puts it back with its
// key.
func (t *Transaction) takeKeyed() (p eventqueue.Pointer, ev Event, ok bool, err, rerr error) {
	k, ok, err := t.popKeyed()
	if err != nil || !ok || k.how == popRead {
		return k.p, k.ev, ok, err, k.rerr
	}
	ev, rerr = t.c.readEvent(k.p)
	switch {
	case rerr == nil:
		t.c.checkKeyTag(t.grp, &k, &ev)
	case k.how == popClaimed && errors.Is(rerr, ErrCorrupt):
		t.c.dropKeyTake(t.grp, t.id, k.p)
	}
	return k.p, ev, true, nil, rerr
}

// keyedPop is the event popKeyed popped: p, its key tag, and how it left
// it; ev and rerr are its read under orderMu (popRead).
type keyedPop struct {
	p    eventqueue.Pointer
	tag  uint64
	how  popHow
	ev   Event
	rerr error
}

// popHow is how popKeyed left the event it popped.
type popHow uint8

const (
	popRead    popHow = iota // read under orderMu: its key tag was unknown
	popFree                  // not read: keyless, or a due waiting event that holds its key
	popClaimed               // not read: its key, told by its key tag, claimed for t
)

// popKeyed pops the next event of t's keyed group into t's takes and
// claims its key. Either way below the claims of a key are in the order
// of the pops.
func (t *Transaction) popKeyed() (keyedPop, bool, error) {
	if k, ok, err, done := t.popKeyedShared(); done {
		return k, ok, err
	}
	return t.popKeyedExclusive()
}

// popKeyedShared is popKeyed while the next event's key tag tells its
// key: under orderMu shared, each pop and claim (or park) is one queueMu
// round (takeHeadKeyed), which no other taker's claim can come between;
// an exclusive holder of orderMu (a Take reading an event to learn its
// key, the end of a take transaction) waits for it, and it for them.
// done false: the next event's key is not known, and it popped nothing.
func (t *Transaction) popKeyedShared() (k keyedPop, ok bool, err error, done bool) {
	c, g := t.c, t.grp
	g.orderMu.RLock()
	defer g.orderMu.RUnlock()
	for {
		var parked, unknown bool
		k, parked, unknown, ok, err = c.takeHeadKeyed(g, t.id, true)
		switch {
		case unknown:
			return k, false, nil, false
		case err != nil || !ok:
			return k, false, err, true
		case !parked:
			return k, true, nil, true
		}
	}
}

// popKeyedExclusive is popKeyed under orderMu exclusive: an event whose
// key tag is unknown is read to learn its key, then claimed (or parked),
// with no other taker's pop in between.
func (t *Transaction) popKeyedExclusive() (k keyedPop, ok bool, err error) {
	c, g := t.c, t.grp
	g.orderMu.Lock()
	defer g.orderMu.Unlock()
	for {
		var parked bool
		k, parked, _, ok, err = c.takeHeadKeyed(g, t.id, false)
		if err != nil || !ok {
			return k, false, err
		}
		if parked {
			continue // unread
		}
		if k.how != popRead {
			return k, true, nil
		}
		if k.ev, k.rerr = c.readEvent(k.p); k.rerr != nil {
			return k, true, nil
		}
		key, has := g.orderKeyOf(&k.ev)
		if !has || !c.claimOrPark(g, t.id, key, k.p) {
			return k, true, nil
		}
	}
}

// takeHeadKeyed is takeHead for popKeyed: under the same queueMu, it
// claims for tx the key of an event whose key tag tells it, or parks the
// event (parked: popKeyed pops the next). shared (orderMu held shared):
// if the next event's key is not known it pops nothing (unknown).
func (c *FileChannel) takeHeadKeyed(g *groupState, tx uint64, shared bool) (k keyedPop, parked, unknown, ok bool, err error) {
	now := c.nowNano() // the same for the look and the pop; read before queueMu, which every taker needs
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if shared && g.nextKeyUnknownLocked(now) {
		return k, false, true, false, nil
	}
	var claimed bool
	if k.p, k.tag, claimed, ok, err = c.takeHeadLocked(g, tx, now); err != nil || !ok {
		return k, false, false, ok, err
	}
	switch {
	case claimed || k.tag == tagNoKey:
		k.how = popFree
	case k.tag != tagUnknown:
		k.how = popClaimed
		parked = g.claimOrParkLocked(tx, k.tag, k.p)
	}
	return k, parked, false, true, nil
}

// nextKeyUnknownLocked reports whether a take of g at now may pop next an
// event whose key only a read tells: a due waiting event without its key,
// or the head's event with its key tag unknown (checked even when a due
// waiting event comes first: it may be parked). It reads no slot (Close
// may have released them: the exclusive pop then fails). The caller holds
// queueMu.
func (g *groupState) nextKeyUnknownLocked(now int64) bool {
	if g.dueLocked(now) && !g.wait.heap[0].keyed {
		return true
	}
	return g.queue.Size() > 0 && g.queue.Tag(0) == tagUnknown
}

// checkKeyTag (tests: Config.checkKeyTags) panics if ev, popped as k
// with its key tag, has headers that give another tag: the tag computed
// at its put (or kept since) is wrong.
func (c *FileChannel) checkKeyTag(g *groupState, k *keyedPop, ev *Event) {
	if !c.cfg.checkKeyTags || k.tag == tagUnknown {
		return
	}
	if got := g.keyTagOf(ev.Headers); got != k.tag {
		panic(fmt.Sprintf("filechannel: group %q: event %s was queued with key tag %#x, its headers give %#x",
			g.cfg.Name, k.p, k.tag, got))
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

// dropKeyTake is dropKeyTakeLocked for p, a take of tx that left it as a
// dead letter: if tx held p's key for p alone, the key is free and its
// parked events are back at the head.
func (c *FileChannel) dropKeyTake(g *groupState, tx uint64, p eventqueue.Pointer) {
	if !g.keyed() {
		return
	}
	unparked, err := func() (bool, error) {
		defer g.lockOrder()()
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		if c.released || g.removed || g.fencedLocked(tx) != fenceNone {
			return false, nil
		}
		parked := g.order.parked
		_, err := g.dropKeyTakeLocked(tx, p)
		return g.order.parked < parked, err
	}()
	if unparked {
		g.avail.broadcast()
	}
	if err != nil {
		c.log.Error("queue refused parked events", "group", g.cfg.Name, "err", err)
	}
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

// keyWaiting (Open, step 11b) gives the waiting events of each keyed group
// their keys (recovery knows only their pointers and due times): it reads
// each once, and its key waits with it (a lane held by waitingTx); the
// key's events in the ring are parked behind it when a Take meets them.
func (c *FileChannel) keyWaiting(*recovery) error {
	for _, g := range c.groups {
		if g.keyed() && len(g.wait.heap) > 0 {
			c.keyWaitingGroup(g)
		}
	}
	return nil
}

// keyWaitingGroup is keyWaiting for g. Of two waiting events of one key
// (a group given its OrderKey while events waited) the one due first
// holds the key and the other is parked behind it. An event that does not
// read waits keyless (logged): Take deals with it when it is due.
func (c *FileChannel) keyWaitingGroup(g *groupState) {
	ws := slices.Clone(g.wait.heap)
	slices.SortFunc(ws, func(a, b waitingEvent) int { return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.p, b.p)) })
	o := &g.order
	o.init()
	keep := ws[:0]
	for _, w := range ws {
		ev, err := c.readEvent(w.p)
		if err != nil {
			c.log.Warn("a waiting event does not read: it waits without its key", "group", g.cfg.Name, "pointer", w.p.String(), "err", err)
			keep = append(keep, w)
			continue
		}
		k, has := g.orderKeyOf(&ev)
		if !has {
			keep = append(keep, w)
			continue
		}
		if l := o.held[k]; l != nil {
			g.parkLocked(l, w.p)
			if g.wait.files[w.p.FileID()]--; g.wait.files[w.p.FileID()] == 0 {
				delete(g.wait.files, w.p.FileID())
			}
			continue
		}
		o.held[k] = o.newLane(waitingTx)
		w.key, w.keyed = k, true
		keep = append(keep, w)
	}
	g.wait.heap = keep
	heap.Init(&g.wait.heap)
}
