package channel

import (
	"errors"
	"fmt"
	"slices"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// How deliveries are counted and dead letters moved (groups with
// MaxDeliveries or a DeadLetter; GroupConfig has what users see):
//
//   - A Take from a group with MaxDeliveries counts the delivery in the
//     group's deliveries map and notes the new count where a crash of the
//     process does not lose it before it returns the event: in the
//     delivery journal, else in a deliver record (deliveries.go has
//     deliver, where counts live and why losing any is safe). A power
//     loss may lose counts: the event is delivered more often, never
//     dead-lettered early.
//   - An event whose count has reached MaxDeliveries is not delivered
//     again: a Rollback that returns it, or the Take that finds it at the
//     head (after a crash), moves it instead. The move is a take
//     transaction of its own (a new transaction id): a take record of the
//     group, a move record naming the dead-letter group, and its commit,
//     in one write, synced before the event is queued in the dead-letter
//     group (so that no take commit of the dead-letter group can be
//     durable while the move it depends on is not). Replay applies it
//     whole or not at all. No copy of the event is written.
//   - Transaction.Reject (reject.go) marks a taken event; the
//     transaction's commit writes a move record for it with its take
//     record, under the commit's fsync. Redrive (redrive.go) moves events
//     out of a dead-letter group the same way, with an fsync.
//   - A dead-letter group is fed by no put. Its full policy decides what
//     a move that finds it full does (planMove).

// DeadLetter is an event moved to a dead-letter group, as
// Config.OnDeadLetter receives it.
type DeadLetter struct {
	Group      string // the group it left ("" is the unnamed group)
	DeadLetter string // the dead-letter group it went to
	Event      Event
	// Deliveries is how many times the group delivered it (its Take
	// that found it at MaxDeliveries is not one).
	Deliveries int
	Rejected   bool // moved by Transaction.Reject, not for its deliveries
	// Dropped: the dead-letter group was full and its policy
	// (DropNewest) dropped this dead letter instead of queueing it; or
	// the event expired (Reason "expired") in a group without a
	// dead-letter group (DeadLetter is then "").
	Dropped bool
	// Reason is why the event left its group, the reason label of the
	// metric group_dead_lettered_total: "max_deliveries" (delivered
	// MaxDeliveries times), "rejected" (Transaction.Reject) or "expired"
	// (queued longer than the group's ExpireAfter).
	Reason string

	ptr eventqueue.Pointer // the event, until notifyDeadLetters reads it
}

// Reasons in the reason label of group_dead_lettered_total.
const (
	deadReasonMax      = "max_deliveries" // delivered MaxDeliveries times
	deadReasonRejected = "rejected"       // Transaction.Reject
	deadReasonExpired  = "expired"        // queued longer than GroupConfig.ExpireAfter
)

// linkDeadLetters points every group at its dead-letter group. The caller
// holds queueMu (or has the channel to itself, in Open) and has made sure
// the groups exist. A group's link never changes while the channel is
// open (only Open changes a group's config), so it writes only the links
// of new groups: Take reads them without a lock.
func (c *FileChannel) linkDeadLetters() {
	byName := make(map[string]*groupState, len(c.groups))
	for _, g := range c.groups {
		byName[g.cfg.Name] = g
	}
	for _, g := range c.groups {
		var d *groupState
		if g.cfg.DeadLetter != "" {
			d = byName[g.cfg.DeadLetter]
		}
		if g.dlq != d {
			g.dlq = d
		}
		if !g.counting() && g.deliveries != nil {
			g.deliveries = nil
		}
	}
}

// deadLetterNeeds checks that the dead-letter groups the groups name can
// be theirs, and returns the names of those missing, with the config each
// would be created with (the capacity of the first group naming it).
// Missing ones that the groups list (Config.Groups at Open) are not
// returned: the caller creates them, marked as dead-letter groups.
func deadLetterNeeds(groups []*groupState, listed map[string]GroupConfig, created map[*groupState]bool) ([]GroupConfig, error) {
	byName := make(map[string]*groupState, len(groups))
	for _, g := range groups {
		byName[g.cfg.Name] = g
	}
	var missing []GroupConfig
	namedBy := map[string]*groupState{}
	for _, g := range groups {
		name := g.cfg.DeadLetter
		if name == "" {
			continue
		}
		if other := namedBy[name]; other != nil {
			return nil, fmt.Errorf("%s and %s both name %s as their dead-letter group: each needs its own",
				groupLabel(other.cfg.Name), groupLabel(g.cfg.Name), groupLabel(name))
		}
		namedBy[name] = g
		d := byName[name]
		switch {
		case d == nil:
			if slices.ContainsFunc(missing, func(m GroupConfig) bool { return m.Name == name }) {
				continue
			}
			gc := GroupConfig{Name: name, Capacity: g.cfg.Capacity}
			if l, ok := listed[name]; ok {
				gc = l
			}
			missing = append(missing, gc)
		case !d.dlqOnly && !created[d]:
			return nil, fmt.Errorf("%s cannot be the dead-letter group of %s: puts feed it (a dead-letter group must be created as one)",
				groupLabel(name), groupLabel(g.cfg.Name))
		case d.cfg.DeadLetter != "" || d.cfg.MaxDeliveries > 0:
			return nil, fmt.Errorf("%s is the dead-letter group of %s: it cannot have MaxDeliveries or a DeadLetter of its own",
				groupLabel(name), groupLabel(g.cfg.Name))
		}
	}
	for _, g := range groups {
		if g.dlqOnly && (g.cfg.DeadLetter != "" || g.cfg.MaxDeliveries > 0) {
			return nil, fmt.Errorf("%s is a dead-letter group: it cannot have MaxDeliveries or a DeadLetter of its own",
				groupLabel(g.cfg.Name))
		}
	}
	return missing, nil
}

// namedAsDeadLetter returns a group other than except that names the group
// name as its dead-letter group, or nil. No group names the unnamed group
// ("" is no dead-letter group).
func (c *FileChannel) namedAsDeadLetter(name string, except *groupState) *groupState {
	if name == "" {
		return nil
	}
	for _, g := range c.groups {
		if g != except && !g.removed && g.cfg.DeadLetter == name {
			return g
		}
	}
	return nil
}

// movePlan is how events moving into a group fit in it (planMove).
type movePlan struct {
	to       *groupState
	accept   int                  // the first accept events land in the group
	discard  int                  // the next discard are dropped instead (a full DropNewest group)
	acquired int                  // permits planMove took (undoMove returns them)
	drops    []eventqueue.Pointer // the group's oldest, dropped to make room (a full DropOldest group)
}

// moved is the number of events the plan takes out of their group.
func (m *movePlan) moved() int { return m.accept + m.discard }

// planMove decides, under queueMu, how n events moving into g fit, held of
// them with permits already taken (Reject's). With room they all land;
// without, g's full policy decides: Block takes what fits and refuses the
// rest (they stay where they are), DropOldest drops g's oldest events to
// make room (their permits pass to the new ones), DropNewest takes what
// fits and drops the rest.
func (g *groupState) planMove(n, held int) movePlan {
	m := movePlan{to: g}
	need := n - held
	if need <= 0 || g.gate.tryAcquire(need) {
		m.accept, m.acquired = n, max(need, 0)
		return m
	}
	free := min(g.gate.free(), need)
	for free > 0 && !g.gate.tryAcquire(free) {
		free = min(g.gate.free(), need) // a Put took some meanwhile
	}
	m.accept, m.acquired = held+max(free, 0), max(free, 0)
	switch g.cfg.WhenFull {
	case DropOldest:
		for m.accept < n && g.queue.Size() > 0 {
			p, _ := g.queue.RemoveHead()
			m.drops = append(m.drops, p)
			m.accept++
		}
		m.discard = n - m.accept
	case DropNewest:
		m.discard = n - m.accept
	}
	return m
}

// undoMoveQueue undoes, under queueMu, the queue part of a plan whose
// write failed: the events it dropped go back to the head. The caller
// then gives back the permits (m.release) with no lock held.
func (c *FileChannel) undoMoveQueue(m *movePlan) error {
	g := m.to
	if c.released || g.removed {
		return nil
	}
	var err error
	for i := len(m.drops) - 1; i >= 0; i-- {
		err = errors.Join(err, g.queue.AddHead(m.drops[i]))
	}
	return err
}

// release gives back the permits planMove took.
func (m *movePlan) release() { m.to.gate.release(m.acquired) }

// undoMove is undoMoveQueue then release, for a caller that holds no lock.
func (c *FileChannel) undoMove(m *movePlan) {
	var err error
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		err = c.undoMoveQueue(m)
	}()
	m.release()
	if err != nil {
		c.log.Error("queue refused an event a failed move had dropped", "group", m.to.cfg.Name, "err", err)
	}
}

// moveRecords returns the records of take transaction tx that move ptrs
// (taken from group from; the first m.accept land in m.to) and drop
// m.drops, and its commit.
func moveRecords(tx uint64, from *groupState, ptrs []eventqueue.Pointer, m *movePlan) []logfile.Record {
	words := make([]uint64, 0, len(ptrs)+len(m.drops))
	for _, p := range ptrs {
		words = append(words, uint64(p))
	}
	for _, p := range m.drops {
		words = append(words, uint64(p))
	}
	taken, dropped := words[:len(ptrs):len(ptrs)], words[len(ptrs):]
	recs := []logfile.Record{{Type: logfile.RecordTake, TxID: tx, Group: from.id, Pointers: taken}}
	if len(dropped) > 0 {
		recs = append(recs, logfile.Record{Type: logfile.RecordTake, TxID: tx, Group: m.to.id, Pointers: dropped})
	}
	if m.accept > 0 {
		recs = append(recs, logfile.Record{Type: logfile.RecordMove, TxID: tx, Group: m.to.id, Pointers: taken[:m.accept]})
	}
	return append(recs, logfile.Record{Type: logfile.RecordCommit, TxID: tx, CommitType: logfile.RecordTake,
		Count: uint64(len(ptrs) + len(m.drops))})
}

// filesOf appends the log files of ptrs to dst, sorted and without
// duplicates.
func filesOf(dst []uint32, ptrs ...[]eventqueue.Pointer) []uint32 {
	for _, ps := range ptrs {
		for _, p := range ps {
			dst = append(dst, p.FileID())
		}
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// deadLetterTakes moves ptrs, in flight in t (taken from t.grp), to t.grp's
// dead-letter group for reason (deadReasonMax or deadReasonExpired), as
// much of it as the group takes (planMove), with a take transaction of its
// own, synced (see the top of this file). It returns the dead letters
// moved, the first of ptrs; those it does not move stay in flight. The
// caller holds commitMu shared and saw the channel open.
func (c *FileChannel) deadLetterTakes(t *Transaction, ptrs []eventqueue.Pointer, reason string) []DeadLetter {
	g := t.grp
	m, counts, ok := c.planDeadLetters(g, ptrs)
	if !ok {
		return nil
	}
	if refused := len(ptrs) - m.moved(); refused > 0 {
		g.counts.deadRefused.Add(int64(refused))
		c.log.Warn("dead-letter group full: the events are delivered again", "reason", reason,
			"group", g.cfg.Name, "dead_letter", g.dlq.cfg.Name, "events", refused)
	}
	if m.moved() == 0 {
		c.undoMove(&m)
		return nil
	}
	moved := ptrs[:m.moved()]
	tx := c.nextTxID.Add(1) - 1
	a, err := c.writeRecords(t.dir, moveRecords(tx, g, moved, &m), filesOf(nil, moved, m.drops), true)
	if err == nil {
		err = c.sync(a)
	}
	if err != nil {
		c.undoMove(&m)
		c.log.Error("move events to the dead-letter group; they stay in their group", "group", g.cfg.Name, "err", err)
		return nil
	}
	var qerr error
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		for _, p := range moved {
			g.inflight.RemovePointer(t.id, p)
		}
		g.forgetDeliveries(moved)
		qerr = c.landQueue(&m, moved)
	}()
	c.landed(&m, qerr)
	g.gate.release(len(moved))
	if reason == deadReasonExpired {
		g.counts.deadExpired.Add(int64(len(moved)))
		c.log.Warn("expired events moved to the dead-letter group", "group", g.cfg.Name,
			"dead_letter", g.dlq.cfg.Name, "events", len(moved), "expire_after", g.cfg.ExpireAfter)
	} else {
		g.counts.deadMax.Add(int64(len(moved)))
		c.log.Warn("events reached MaxDeliveries: moved to the dead-letter group", "group", g.cfg.Name,
			"dead_letter", g.dlq.cfg.Name, "events", len(moved), "max_deliveries", g.cfg.MaxDeliveries)
	}
	return deadLetterNotes(g, moved, counts, m.accept, reason)
}

// planDeadLetters plans, under queueMu, the move of ptrs from g to its
// dead-letter group and reads their delivery counts; ok is false when
// either group is gone.
func (c *FileChannel) planDeadLetters(g *groupState, ptrs []eventqueue.Pointer) (m movePlan, counts []int, ok bool) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if g.removed || g.dlq == nil || g.dlq.removed {
		return movePlan{}, nil, false
	}
	m = g.dlq.planMove(len(ptrs), 0)
	counts = make([]int, len(ptrs))
	for i, p := range ptrs {
		counts[i] = int(g.deliveries[p])
	}
	return m, counts, true
}

// landQueue queues, under queueMu, the events a move plan accepts at its
// group's tail (their counts there start at zero). The caller then calls
// landed with no lock held.
func (c *FileChannel) landQueue(m *movePlan, moved []eventqueue.Pointer) error {
	to := m.to
	to.forgetDeliveries(moved[:m.accept])
	to.forgetDeliveries(m.drops)
	return to.add(moved[:m.accept], nil)
}

// landed counts and logs what a move did to its group (drops, dead
// letters dropped, qerr: the queue's refusal) and wakes its takers. The
// caller holds no lock.
func (c *FileChannel) landed(m *movePlan, qerr error) {
	to := m.to
	if qerr != nil {
		c.log.Error("queue refused moved events", "group", to.cfg.Name, "err", qerr)
	}
	if len(m.drops) > 0 {
		to.counts.oldest.Add(int64(len(m.drops)))
		c.log.Warn("consumer group full: dropped its oldest events", "group", to.cfg.Name, "events", len(m.drops))
	}
	if m.discard > 0 {
		to.counts.newest.Add(int64(m.discard))
		c.log.Warn("dead-letter group full: dead letters dropped", "group", to.cfg.Name, "policy", to.cfg.WhenFull.String(),
			"events", m.discard)
	}
	to.avail.broadcast()
}

// deadLetterNotes returns what Config.OnDeadLetter is told of ptrs, moved
// from g, whose delivery counts were counts; notifyDeadLetters reads their
// events.
func deadLetterNotes(g *groupState, ptrs []eventqueue.Pointer, counts []int, accepted int, reason string) []DeadLetter {
	out := make([]DeadLetter, len(ptrs))
	for i, p := range ptrs {
		out[i] = DeadLetter{Group: g.cfg.Name, DeadLetter: g.dlq.cfg.Name, Deliveries: counts[i], Rejected: reason == deadReasonRejected,
			Dropped: i >= accepted, Reason: reason, ptr: p}
	}
	return out
}

// notifyDeadLetters reads the dead letters' events and calls
// Config.OnDeadLetter with each. The caller holds no lock and has
// finished the move and its own work: a panic in the callback goes up
// from here (see Config.OnDeadLetter).
func (c *FileChannel) notifyDeadLetters(notes []DeadLetter) {
	f := c.cfg.OnDeadLetter
	if f == nil || len(notes) == 0 {
		return
	}
	for _, n := range notes {
		ev, err := c.readEvent(n.ptr)
		if err != nil {
			c.log.Warn("read a dead letter for OnDeadLetter", "pointer", n.ptr.String(), "err", err)
		}
		n.Event = ev
		f(n)
	}
}

// deadLetterReturned is the first step of returning t's takes in a group
// with MaxDeliveries: the events that reached it move to the dead-letter
// group instead of going back to the head (see the top of this file), and
// leave t.takes. It returns the dead letters moved.
func (t *Transaction) deadLetterReturned() []DeadLetter {
	c, g := t.c, t.grp
	if g == nil || !g.counting() || g.dlq == nil || len(t.takes) == 0 {
		return nil
	}
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return nil
	}
	over := c.atDeliveryLimit(g, t.takes)
	if len(over) == 0 {
		return nil
	}
	notes := c.deadLetterTakes(t, over, deadReasonMax)
	if len(notes) > 0 {
		gone := make(map[eventqueue.Pointer]bool, len(notes))
		for _, p := range over[:len(notes)] {
			gone[p] = true
		}
		t.takes = slices.DeleteFunc(t.takes, func(p eventqueue.Pointer) bool { return gone[p] })
	}
	return notes
}

// atDeliveryLimit returns those of ptrs whose delivery count in g reached
// its MaxDeliveries, reading the counts under queueMu.
func (c *FileChannel) atDeliveryLimit(g *groupState, ptrs []eventqueue.Pointer) []eventqueue.Pointer {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	var over []eventqueue.Pointer
	for _, p := range ptrs {
		if g.cfg.MaxDeliveries > 0 && int64(g.deliveries[p]) >= int64(g.cfg.MaxDeliveries) {
			over = append(over, p)
		}
	}
	return over
}
