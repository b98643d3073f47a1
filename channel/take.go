package channel

import (
	"errors"
	"fmt"
	"slices"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// Take removes the event at the head of the channel and returns it; ok is
// false when the channel is empty. The event is invisible to other takers
// until the transaction commits (it is gone) or rolls back (it returns to
// the head). A damaged event is never returned: it is logged, counted and
// consumed by this transaction, and does not count toward
// TransactionCapacity.
func (t *Transaction) Take() (Event, bool, error) {
	if err := t.enter(); err != nil {
		t.c.metrics.takeAttempts.Inc()
		t.c.metrics.takeErrors.WithLabelValues(reasonMisuse).Inc()
		return Event{}, false, err
	}
	defer t.leave()
	return t.takeCounted()
}

// takeCounted is Take, t entered, with its metrics.
func (t *Transaction) takeCounted() (Event, bool, error) {
	m := t.c.metrics
	m.takeAttempts.Inc()
	ev, ok, err := t.take()
	if err != nil {
		m.takeErrors.WithLabelValues(takeErrorReason(err)).Inc()
	}
	return ev, ok, err
}

func (t *Transaction) take() (Event, bool, error) {
	if err := t.use(txTake); err != nil {
		return Event{}, false, err
	}
	c := t.c
	for {
		if n := len(t.takes) - t.skipped; n >= c.cfg.TransactionCapacity {
			return Event{}, false, fmt.Errorf("%w: %d takes; commit more often or raise TransactionCapacity", ErrTransactionFull, n)
		}
		if len(t.takes) >= MaxTransactionCapacity {
			// The damaged events skipped count toward the take record,
			// which must fit one log record.
			return Event{}, false, fmt.Errorf("%w: %d takes, %d of them damaged events skipped: the take record is full; commit",
				ErrTransactionFull, len(t.takes), t.skipped)
		}
		t.scratch()
		if t.grp == nil {
			if t.grp = c.unnamedGroup(); t.grp == nil {
				return Event{}, false, fmt.Errorf("%w: this channel has no unnamed group: take from a named one (FileChannel.Group)", ErrNoGroup)
			}
		}
		p, ev, ok, err, rerr := t.takeNext()
		if err != nil || !ok {
			return Event{}, false, err
		}
		t.takes = append(t.takes, p)
		err = rerr
		if err == nil {
			again, err := t.deliverRead(p, &ev)
			if err != nil {
				return Event{}, false, err
			}
			if again {
				continue
			}
			t.noteBody(ev.Body)
			return ev, true, nil
		}
		if c.closed.Load() || !errors.Is(err, ErrCorrupt) {
			// Not damage but a failure to read (Close may have closed
			// the file under the read): put the event back.
			t.takes = t.takes[:len(t.takes)-1]
			uerr := c.untake(t.grp, t.id, p)
			t.grp.avail.broadcast()
			if c.closed.Load() {
				return Event{}, false, ErrClosed
			}
			return Event{}, false, opErr("take", errors.Join(err, uerr))
		}
		t.noteBody(nil)
		t.skipped++
		c.stats.corruptSkipped.Add(1)
		c.metrics.corruptSkipped.Inc()
		c.log.Error("skipping damaged event", "pointer", p.String(), "err", err)
	}
}

// takeNext moves the next event of t's group into t's takes and reads
// it: err is the take's error, rerr the read's (p is taken).
func (t *Transaction) takeNext() (p eventqueue.Pointer, ev Event, ok bool, err, rerr error) {
	if t.grp.keyed() {
		return t.takeKeyed()
	}
	p, _, _, ok, err = t.c.takeHead(t.grp, t.id)
	if err != nil || !ok {
		return 0, Event{}, false, err, nil
	}
	ev, rerr = t.c.readEvent(p)
	return p, ev, true, nil, rerr
}

// deliverRead finishes the Take of p, the last event t took, read as ev:
// an event that expired in t's group (GroupConfig.ExpireAfter) leaves t
// for the dead-letter group or is dropped (expireTaken), and a group with
// MaxDeliveries counts the delivery, or dead-letters an event at its limit
// (deliver). again: p left t, and Take goes on with the next event. After
// an error p is back at the head.
func (t *Transaction) deliverRead(p eventqueue.Pointer, ev *Event) (again bool, err error) {
	c, g := t.c, t.grp
	var notes []DeadLetter
	note := " (the event was not delivered: it expired, and could not be moved out of the group)"
	if c.expiredAt(g, ev.Time) {
		if notes, err = c.expireTaken(t, p); len(notes) > 0 {
			// Those behind it have likely expired too: one move or
			// drop (one fsync) for them rather than one per Take step.
			notes = append(notes, c.sweepGroup(g, c.cfg.TransactionCapacity)...)
		}
	}
	n := 0
	if len(notes) == 0 && err == nil && g.counting() {
		// Counted once read, before it is returned: a read that fails
		// counts nothing.
		note = " (the event was not delivered: its delivery could not be counted)"
		n, notes, err = c.deliver(t, p)
	}
	if len(notes) > 0 || err != nil {
		t.takes = t.takes[:len(t.takes)-1]
	}
	if len(notes) > 0 {
		// It expired or had reached MaxDeliveries: now a dead letter
		// (or dropped). The move is complete and t no longer holds it,
		// so a panic in OnDeadLetter leaves t as it was before this Take.
		c.dropKeyTake(g, t.id, p)
		c.notifyDeadLetters(notes)
		return true, nil
	}
	if err != nil {
		uerr := c.untake(g, t.id, p)
		g.avail.broadcast()
		if c.closed.Load() {
			return false, ErrClosed
		}
		if errors.Is(err, ErrNoGroup) || errors.Is(err, ErrGroupReset) || errors.Is(err, ErrLeaseExpired) {
			return false, err
		}
		return false, opErrNote("take", errors.Join(err, uerr), note)
	}
	if g.counting() {
		ev.Deliveries = n
	}
	return false, nil
}

func (c *FileChannel) readEvent(p eventqueue.Pointer) (Event, error) {
	r, err := c.logs.Reader(p.FileID())
	if err != nil {
		return Event{}, err
	}
	defer r.Release()
	rec, err := r.ReadRecord(int64(p.Offset()))
	if err != nil {
		return Event{}, err
	}
	if rec.Type != logfile.RecordPut {
		return Event{}, &CorruptError{File: r.Path(), Offset: int64(p.Offset()), Reason: fmt.Sprintf("event pointer refers to a record of type %d, not a put", rec.Type)}
	}
	if rec.Sealed != nil {
		// Open checked every key it could read: this file's key record is
		// damaged, so no key opens its events.
		return Event{}, &CorruptError{File: r.Path(), Offset: int64(p.Offset()),
			Reason: "an encrypted event whose key is unknown: the file's key record is damaged"}
	}
	id, at := c.eventStamp(p.FileID(), r.Framing().Timed(), &rec)
	return Event{Headers: rec.Headers, Body: rec.Body, ID: id, Time: at}, nil
}

func (t *Transaction) commitTakes() error {
	notes, err := t.writeTakeCommit()
	if err != nil {
		t.returnTakes()
		return err
	}
	g := t.grp
	waiting := len(t.retried) // they keep their permits
	g.gate.release(len(t.takes) - waiting)
	g.counts.taken.Add(int64(len(t.takes) - len(notes) - waiting))
	g.counts.deadRejected.Add(int64(len(notes)))
	if len(notes) > 0 {
		t.c.log.Warn("rejected events moved to the dead-letter group", "group", g.cfg.Name, "dead_letter", g.dlq.cfg.Name,
			"events", len(notes))
	}
	t.takes, t.rejected, t.rejectHeld, t.retried = t.takes[:0], t.rejected[:0], 0, t.retried[:0]
	t.notes = append(t.notes, notes...)
	return nil
}

// writeTakeCommit writes and syncs (syncTake) t's take and commit records (and the
// move record of the events it rejected) and ends its takes in the queue,
// all under commitMu shared. It returns the dead letters it moved. If
// RemoveGroup removed t's group it writes nothing (ErrNoGroup): RemoveGroup
// holds commitMu exclusively, so the removal is before this check or after
// the whole commit.
func (t *Transaction) writeTakeCommit() ([]DeadLetter, error) {
	c := t.c
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if c.groupRemoved(t.grp) {
		return nil, errRemoved(t.grp)
	}
	if f := c.claimCommit(t.grp, t.id); f != fenceNone {
		return nil, errFenced(t.grp, f)
	}
	var m movePlan
	var rejected []eventqueue.Pointer
	var counts []int
	if len(t.rejected) > 0 {
		var err error
		if m, rejected, counts, err = t.rejectPlan(); err != nil {
			return nil, err
		}
	}
	ptrs := t.s.words[:0]
	for i, p := range t.takes {
		if !t.isRetried(i) {
			ptrs = append(ptrs, uint64(p))
		}
	}
	t.s.words = ptrs
	recs := []logfile.Record{{Type: logfile.RecordTake, TxID: t.id, Group: t.grp.id, Pointers: ptrs}}
	retry := t.retryPlan()
	recs = append(recs, retry.recs...)
	completes := t.takeFiles()
	if len(m.drops) > 0 {
		recs = append(recs, logfile.Record{Type: logfile.RecordTake, TxID: t.id, Group: m.to.id, Pointers: pointerWords(m.drops)})
		completes = filesOf(slices.Clone(completes), m.drops)
	}
	if m.accept > 0 {
		recs = append(recs, logfile.Record{Type: logfile.RecordMove, TxID: t.id, Group: m.to.id, Pointers: pointerWords(rejected[:m.accept])})
	}
	recs = append(recs, logfile.Record{Type: logfile.RecordCommit, TxID: t.id, CommitType: logfile.RecordTake,
		Count: uint64(len(ptrs) + len(m.drops))})
	a, _, err := c.appendRecords(t, recs, nil, completes)
	if err == nil {
		err = c.syncTake(t.dir, a, m.to != nil) // at once, or within TakeSyncDelay
	}
	if err != nil {
		if m.to != nil {
			c.undoMove(&m)
		}
		return nil, opErrNote("commit", err, " (the taken events were returned to the channel)")
	}
	c.committedTakes(t.grp, t.id, t.takes, &retry)
	if m.to == nil {
		return nil, nil
	}
	moved := rejected[:m.moved()]
	var qerr error
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		qerr = c.landQueue(&m, moved)
	}()
	c.landed(&m, qerr)
	return deadLetterNotes(t.grp, moved, counts, m.accept, deadReasonRejected), nil
}

// pointerWords returns ps as a take record's pointers.
func pointerWords(ps []eventqueue.Pointer) []uint64 {
	out := make([]uint64, len(ps))
	for i, p := range ps {
		out[i] = uint64(p)
	}
	return out
}

// returnTakes puts the taken events back at the head in their order. After
// Close released the queue it leaves them: they come back at the next Open
// (the last checkpoint holds them in flight, or in the queue, and no commit
// of their takes was written).
func (t *Transaction) returnTakes() {
	c := t.c
	if t.grp == nil {
		return
	}
	t.releaseRejects()
	if c.settle(t.grp, t.id) != fenceNone {
		// The reset took its events (they do not come back, and their
		// deliveries count nothing), or its expired lease returned them.
		t.takes = t.takes[:0]
		return
	}
	notes := t.deadLetterReturned()
	dues := t.logDeliveries(t.takes)
	err := c.returnTakes(t.grp, t.id, t.takes, dues)
	if len(t.takes) > 0 {
		t.grp.avail.broadcast()
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		c.log.Error("queue refused returned events", "err", err)
	}
	t.takes = t.takes[:0]
	t.notes = append(t.notes, notes...)
}

// The transactions' steps under queueMu. Each unlocks with defer, so that a
// panic never leaves queueMu held. After Close released the queue
// (released), those that would change the ring return ErrClosed and change
// nothing.

// takeHead moves g's due waiting event, else the event at g's head, into
// tx's in-flight takes. tag: the key tag of an event from the head
// (keytags.go). claimed: a keyed waiting event whose key tx now holds
// (takeDueLocked).
func (c *FileChannel) takeHead(g *groupState, tx uint64) (p eventqueue.Pointer, tag uint64, claimed, ok bool, err error) {
	now := c.nowNano() // before queueMu, which every taker needs
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return c.takeHeadLocked(g, tx, now)
}

// takeHeadLocked is takeHead, a waiting event due if it is at now; the
// caller holds queueMu.
func (c *FileChannel) takeHeadLocked(g *groupState, tx uint64, now int64) (p eventqueue.Pointer, tag uint64, claimed, ok bool, err error) {
	if err := c.takeCheckLocked(g, tx); err != nil {
		return 0, 0, false, false, err
	}
	p, claimed, ok = c.takeDueLocked(g, tx, now)
	if !ok {
		p, tag, ok = g.takeHead(tx)
	}
	if ok {
		c.armLeaseLocked(g, tx)
	}
	return p, tag, claimed, ok, nil
}

// takeCheckLocked returns why tx cannot take from g (a closed channel, a
// removed group, a fenced transaction), or nil. The caller holds queueMu.
func (c *FileChannel) takeCheckLocked(g *groupState, tx uint64) error {
	if c.released {
		return ErrClosed
	}
	if g.removed {
		return errRemoved(g)
	}
	if f := g.fencedLocked(tx); f != fenceNone {
		return errFenced(g, f)
	}
	return nil
}

// untake puts p, the last event tx took, back at g's head (before the
// events parked behind its key, if tx held the key for p alone).
func (c *FileChannel) untake(g *groupState, tx uint64, p eventqueue.Pointer) error {
	defer g.lockOrder()()
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released {
		return ErrClosed
	}
	if g.removed || g.fencedLocked(tx) != fenceNone {
		return nil // p went with the group, its reset or the expired lease
	}
	return g.untake(tx, p)
}

// returnTakes puts tx's takes back at g's head in their order, or, with
// dues (a group with RetryDelays), makes each wait until its due time.
func (c *FileChannel) returnTakes(g *groupState, tx uint64, takes []eventqueue.Pointer, dues []int64) error {
	defer g.lockOrder()()
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released {
		return ErrClosed
	}
	if g.removed {
		return nil
	}
	if dues != nil {
		c.waitTakesLocked(g, tx, takes, dues)
		g.inflight.Remove(tx)
		return g.releaseKeysLocked(tx)
	}
	return g.returnTakes(tx, takes)
}

// committedTakes ends tx's takes after their commit: those retry names
// wait in g (Transaction.Retry), the others are gone. The caller holds
// commitMu shared and saw the channel open, so the queue is not released.
func (c *FileChannel) committedTakes(g *groupState, tx uint64, takes []eventqueue.Pointer, retry *retryPlan) {
	var unparked bool // events parked behind tx's keys are back (OrderKey)
	err := func() error {
		if len(retry.ptrs) == 0 && c.committedUnparked(g, tx, takes) {
			return nil
		}
		defer g.lockOrder()()
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		parked := g.order.parked
		defer func() { unparked = g.order.parked < parked }()
		if len(retry.ptrs) == 0 {
			return g.committed(tx, takes)
		}
		c.waitTakesLocked(g, tx, retry.ptrs, retry.dues)
		return g.committed(tx, slices.DeleteFunc(slices.Clone(takes), func(p eventqueue.Pointer) bool { return slices.Contains(retry.ptrs, p) }))
	}()
	if unparked {
		g.avail.broadcast()
	}
	if err != nil {
		// They left the ring for their keys' lanes: the room is theirs.
		c.log.Error("queue refused parked events", "group", g.cfg.Name, "err", err)
	}
}

// committedUnparked ends tx's takes after their commit without g's
// orderMu if g is keyed and no event is parked behind a key tx holds,
// and reports whether it did. Nothing then goes back to the head, so no
// taker can claim a key out of its order; the check and the end are one
// step under queueMu, which a Take's park takes too. Most commits of a
// keyed group over many keys are such: they no longer wait for the
// takers' serial reads (orderMu).
func (c *FileChannel) committedUnparked(g *groupState, tx uint64, takes []eventqueue.Pointer) bool {
	if !g.keyed() {
		return false
	}
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if g.parkedBehindLocked(tx) {
		return false
	}
	// Nothing parked behind tx's keys: releasing them puts nothing back
	// at the head, and so cannot fail.
	_ = g.committed(tx, takes)
	return true
}

// unnamedGroup returns the unnamed group, or nil.
func (c *FileChannel) unnamedGroup() *groupState {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return c.main
}
