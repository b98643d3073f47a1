package channel

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// retryMark is a take Transaction.Retry marked: its index in t.takes and
// its delay.
type retryMark struct {
	take  int
	after time.Duration
}

// retryPlan is what a take commit does for its retried takes: the records
// it adds to its batch (a deliver record of their counts in a group that
// counts deliveries, and the retry record of their due times), and the
// events that wait until then once it is durable.
type retryPlan struct {
	recs []logfile.Record
	ptrs []eventqueue.Pointer
	dues []int64
}

// Retry marks e, an event t took, to come back after `after`: when t
// commits, the transaction's other events are taken for good and e waits
// in its group, out of the way (the group's other events are taken
// meanwhile), then is delivered again. That delivery counts toward
// MaxDeliveries as after a rollback. The wait is in the log, written and
// synced with the commit: it survives Close, a crash and a full replay.
// If t rolls back instead, e returns as every take does (and RetryDelays,
// if the group has them, apply). In a group with OrderKey, e's key waits
// with it: the key's later events are held back until e is taken again;
// t's other events of e's key that it commits are committed (Retry them
// too to keep them behind e: they wait behind it, and e waits for the
// longest of their delays).
//
// e is found as Reject finds it (by its Body, else by its content); an
// event the transaction did not take, or marked already (Reject or
// Retry), is ErrNotTaken. A negative after is an error. After RemoveGroup
// removed the group, Retry returns an error matching ErrNoGroup.
func (t *Transaction) Retry(e Event, after time.Duration) error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	if err := t.checkMark("Retry"); err != nil {
		return err
	}
	if after < 0 {
		return fmt.Errorf("filechannel: Retry: negative delay %v", after)
	}
	i := t.findTake(e)
	if i < 0 {
		return fmt.Errorf("%w: Retry: no such event among its %d takes", ErrNotTaken, len(t.takes)-t.skipped-len(t.rejected)-len(t.retried))
	}
	t.retried = append(t.retried, retryMark{take: i, after: after})
	return nil
}

// isRetried reports whether Retry marked take i of t.
func (t *Transaction) isRetried(i int) bool {
	for _, r := range t.retried {
		if r.take == i {
			return true
		}
	}
	return false
}

// retryPlan plans t's retried takes for its commit record batch: their
// due times from now, and their records.
func (t *Transaction) retryPlan() retryPlan {
	if len(t.retried) == 0 {
		return retryPlan{}
	}
	c, g := t.c, t.grp
	now := c.nowNano()
	var rp retryPlan
	marks := slices.SortedFunc(slices.Values(t.retried), func(a, b retryMark) int { return cmp.Compare(a.take, b.take) })
	for _, r := range marks { // in take order
		rp.ptrs = append(rp.ptrs, t.takes[r.take])
		rp.dues = append(rp.dues, max(now+int64(r.after), 1))
	}
	if g.keyed() {
		c.keyedDues(g, t.id, rp.ptrs, rp.dues)
	}
	var words []uint64
	var counts []uint32
	if g.counting() {
		words, counts, _, _ = c.deliveryCounts(g, t.id, rp.ptrs, nil, nil)
	}
	rp.recs = returnRecords(t.id, g, rp.ptrs, words, counts, rp.dues)
	return rp
}

// keyedDues is keyedDuesLocked under queueMu: in a keyed group the first
// of a key waits for the key's events, the others are parked behind it.
func (c *FileChannel) keyedDues(g *groupState, tx uint64, ptrs []eventqueue.Pointer, dues []int64) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	g.keyedDuesLocked(tx, ptrs, dues)
}
