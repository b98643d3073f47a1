package channel

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"unsafe"

	"github.com/flumego/filechannel/eventqueue"
)

// Reject marks e, an event t took, as a dead letter: when t commits, e
// moves to the dead-letter group of the group t takes from (which needs
// MaxDeliveries or DeadLetter) instead of being taken for good; a sink
// that took 100 events and can deliver 99 commits the 99 and rejects one.
// If t rolls back, e returns to the head with the others: Rollback
// dead-letters nothing it rejected. With a Block dead-letter group Reject
// takes room in it at once, and returns ErrChannelFull if there is none;
// with the other policies the commit applies the policy.
//
// e is found by its Body (the slice Take returned), else by its content.
// An event the transaction did not take, or rejected already, is
// ErrNotTaken. After RemoveGroup removed the group, Reject returns an
// error matching ErrNoGroup.
func (t *Transaction) Reject(e Event) error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	if err := t.checkMark("Reject"); err != nil {
		return err
	}
	c, g := t.c, t.grp
	if g.dlq == nil {
		return fmt.Errorf("%w: %s has no dead-letter group (set MaxDeliveries or DeadLetter)", ErrNoGroup, groupLabel(g.cfg.Name))
	}
	i := t.findTake(e)
	if i < 0 {
		return fmt.Errorf("%w: Reject: no such event among its %d takes", ErrNotTaken, len(t.takes)-t.skipped-len(t.rejected))
	}
	if g.dlq.cfg.WhenFull == Block {
		if !c.holdDeadLetterPermit(g.dlq) {
			return fmt.Errorf("%w: dead-letter %s: capacity %d reached", ErrChannelFull, groupLabel(g.dlq.cfg.Name), g.dlq.cfg.Capacity)
		}
		t.rejectHeld++
	}
	t.rejected = append(t.rejected, i)
	return nil
}

// checkMark checks, for Reject or Retry (op), that t is an open take
// transaction that took events of a group still there.
func (t *Transaction) checkMark(op string) error {
	switch {
	case t.done:
		return ErrTransactionDone
	case t.c.closed.Load():
		return ErrClosed
	case t.kind != txTake || t.grp == nil:
		return fmt.Errorf("%w: %s: the transaction took nothing", ErrNotTaken, op)
	case t.c.groupRemoved(t.grp):
		return errRemoved(t.grp)
	}
	return nil
}

// findTake returns the index in t.takes of e, not rejected or retried
// yet: the take whose Body is e's slice, else the first whose content
// equals e's, or -1.
func (t *Transaction) findTake(e Event) int {
	if len(e.Body) > 0 {
		want := unsafe.Pointer(unsafe.SliceData(e.Body))
		for i, b := range t.bodies {
			if b == want && !t.marked(i) {
				return i
			}
		}
	}
	for i, p := range t.takes {
		if t.marked(i) {
			continue
		}
		ev, err := t.c.readEvent(p)
		if err == nil && bytes.Equal(ev.Body, e.Body) && maps.Equal(ev.Headers, e.Headers) {
			return i
		}
	}
	return -1
}

// noteBody records the Body of the event t's last take returned, for
// Reject and Retry (only in a group with a dead-letter group or
// RetryDelays: elsewhere they compare contents); nil for a damaged event
// skipped.
func (t *Transaction) noteBody(body []byte) {
	if t.grp.dlq == nil && !t.grp.retrying() {
		return
	}
	var b unsafe.Pointer
	if len(body) > 0 {
		b = unsafe.Pointer(unsafe.SliceData(body))
	}
	t.bodies = append(t.bodies, b)
}

// rejectPlan plans the move of t's rejected takes into the dead-letter
// group at its commit, under queueMu: which land there, which its policy
// drops. It returns the rejected pointers in take order.
func (t *Transaction) rejectPlan() (movePlan, []eventqueue.Pointer, []int, error) {
	c, g := t.c, t.grp
	idx := slices.Clone(t.rejected)
	slices.Sort(idx)
	ptrs := make([]eventqueue.Pointer, len(idx))
	for i, j := range idx {
		ptrs[i] = t.takes[j]
	}
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if g.dlq == nil || g.dlq.removed {
		return movePlan{}, nil, nil, fmt.Errorf("%w: the dead-letter group of %s was removed", ErrNoGroup, groupLabel(g.cfg.Name))
	}
	counts := make([]int, len(ptrs))
	for i, p := range ptrs {
		counts[i] = int(g.deliveries[p])
	}
	m := g.dlq.planMove(len(ptrs), t.rejectHeld)
	return m, ptrs, counts, nil
}

// releaseRejects gives back the permits t's rejects hold in the
// dead-letter group (a rollback, or a failed commit).
func (t *Transaction) releaseRejects() {
	if t.rejectHeld > 0 && t.grp != nil && t.grp.dlq != nil {
		t.grp.dlq.gate.release(t.rejectHeld)
	}
	t.rejectHeld, t.rejected = 0, t.rejected[:0]
	t.retried = t.retried[:0]
}

// marked reports whether Reject or Retry marked take i of t.
func (t *Transaction) marked(i int) bool {
	return slices.Contains(t.rejected, i) || t.isRetried(i)
}

// holdDeadLetterPermit takes one permit of dead-letter group dlq, under
// queueMu (so that RemoveGroup cannot remove it meanwhile); false when dlq
// is removed or full.
func (c *FileChannel) holdDeadLetterPermit(dlq *groupState) bool {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return !dlq.removed && dlq.gate.tryAcquire(1)
}
