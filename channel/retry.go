package channel

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// Retry delays (GroupConfig.RetryDelays, Transaction.Retry). An event a
// rollback (or an expired lease, or Transaction.Retry) returns to a group
// with RetryDelays does not go back to the head of the group's ring: it
// leaves the ring for the group's waiting set, a min-heap of {pointer, due
// time} (groupState.wait, under queueMu), until its due time. A Take first
// takes a due waiting event (it is older than the ring's head), else the
// ring's head: a peek at the heap's top, O(1), and a pop, O(log n), so
// that many waiting events cost the other takes nothing. One timer per
// group, armed to the heap's top, wakes the takers blocked in Wait and
// TakeContext when it becomes due.
//
// A waiting event keeps its capacity permit (it counts against the
// group's capacity) and its log file (holds). Its due time is in the log:
// a retry record (logfile.RecordRetry) written with the deliver record of
// the rollback (unsynced: a power loss may lose it, and the event is then
// back at the head at once, never lost), or in the batch of a take commit
// (Transaction.Retry, synced with it). Replay moves the events a retry
// record names that are still queued to the waiting set
// (replay.GroupResult.Waiting). A checkpoint keeps their due times in the
// catalog (checkpoint.Group.Waiting, catalog version 4) and lists them as
// a take transaction in flight too (waitingTx), so that a reader that
// ignores the due times brings them back at the head, never loses them.
//
// The n-th redelivery of an event waits RetryDelays[min(n-1, len-1)]: n is
// its delivery count (a group with RetryDelays counts deliveries, as one
// with MaxDeliveries does). An event that reached MaxDeliveries goes to
// the dead-letter group instead of waiting. OrderKey is refused with
// RetryDelays for now (ORDERKEY-NOTES.md): its key would wait with it, and
// takeDueLocked would skip a held key.

// waitingTx is the transaction id under which a checkpoint lists a
// group's waiting events among its takes in flight: no transaction has
// it (ids count up from 1).
const waitingTx = 1<<64 - 1

// maxRetryDelays is the longest RetryDelays list a group may have.
const maxRetryDelays = 1024

// waitingEvent is an event of a group's waiting set.
type waitingEvent struct {
	p   eventqueue.Pointer
	due int64 // Unix nanoseconds (the channel's clock)
}

// waitHeap is a min-heap of waiting events by due time (container/heap).
type waitHeap []waitingEvent

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	return h[i].due < h[j].due || (h[i].due == h[j].due && h[i].p < h[j].p)
}
func (h waitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)   { *h = append(*h, x.(waitingEvent)) }
func (h *waitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// waitSet is a group's waiting events, guarded by queueMu: the heap, the
// count of them per log file (what they hold), and the timer armed to
// the top's due time (armed: that time; 0 when no timer is armed).
type waitSet struct {
	heap  waitHeap
	files map[uint32]int
	timer *time.Timer
	armed int64
	gen   uint64 // counts the timers armed: a stale one's firing changes nothing
}

// retrying reports whether g's rollbacks make events wait.
func (g *groupState) retrying() bool { return len(g.cfg.RetryDelays) > 0 }

// retryDelay is the wait before the redelivery of an event of g
// delivered n times.
func (g *groupState) retryDelay(n uint32) time.Duration {
	d := g.cfg.RetryDelays
	return d[min(int(max(n, 1))-1, len(d)-1)]
}

// waitingLen returns the number of g's waiting events; the caller holds
// queueMu.
func (g *groupState) waitingLen() int { return len(g.wait.heap) }

// addWaitingLocked makes p wait in g until due; the caller holds queueMu
// and arms the timer (armRetryLocked).
func (g *groupState) addWaitingLocked(p eventqueue.Pointer, due int64) {
	heap.Push(&g.wait.heap, waitingEvent{p: p, due: due})
	if g.wait.files == nil {
		g.wait.files = map[uint32]int{}
	}
	g.wait.files[p.FileID()]++
}

// dueLocked reports whether g's earliest waiting event is due at now.
func (g *groupState) dueLocked(now int64) bool {
	return len(g.wait.heap) > 0 && g.wait.heap[0].due <= now
}

// popWaitingLocked removes g's earliest waiting event.
func (g *groupState) popWaitingLocked() eventqueue.Pointer {
	w := heap.Pop(&g.wait.heap).(waitingEvent)
	f := w.p.FileID()
	if g.wait.files[f]--; g.wait.files[f] == 0 {
		delete(g.wait.files, f)
	}
	return w.p
}

// nowNano is the channel's clock in Unix nanoseconds.
func (c *FileChannel) nowNano() int64 { return c.now().UnixNano() }

// takeDueLocked moves g's earliest waiting event into tx's takes if it is
// due. The caller holds queueMu. (OrderKey, once allowed with
// RetryDelays, would skip a held key here.)
func (c *FileChannel) takeDueLocked(g *groupState, tx uint64) (eventqueue.Pointer, bool) {
	if len(g.wait.heap) == 0 || !g.dueLocked(c.nowNano()) {
		return 0, false
	}
	p := g.popWaitingLocked()
	g.inflight.Add(tx, p)
	c.armRetryLocked(g)
	return p, true
}

// waitTakesLocked ends tx's takes ptrs without committing them: each
// waits in g until its due time in dues. The caller holds queueMu.
func (c *FileChannel) waitTakesLocked(g *groupState, tx uint64, ptrs []eventqueue.Pointer, dues []int64) {
	for i, p := range ptrs {
		g.inflight.RemovePointer(tx, p)
		g.addWaitingLocked(p, dues[i])
	}
	c.armRetryLocked(g)
}

// retryDuesLocked returns the due time of each of ptrs, which a rollback
// returns to g (a group with RetryDelays): now plus the delay of its next
// redelivery, from its delivery count. The caller holds queueMu.
func (c *FileChannel) retryDuesLocked(g *groupState, ptrs []eventqueue.Pointer) []int64 {
	now := c.nowNano()
	dues := make([]int64, len(ptrs))
	for i, p := range ptrs {
		dues[i] = max(now+int64(g.retryDelay(g.deliveries[p])), 1)
	}
	return dues
}

// armRetryLocked arms g's timer to its earliest waiting event's due time,
// unless a timer is armed for that time or earlier (it re-arms when it
// fires). The caller holds queueMu.
func (c *FileChannel) armRetryLocked(g *groupState) {
	w := &g.wait
	if len(w.heap) == 0 || c.closed.Load() || g.removed {
		return
	}
	top := w.heap[0].due
	if w.armed != 0 && w.armed <= top {
		return
	}
	if w.timer != nil && w.timer.Stop() {
		c.retryWG.Done()
	}
	w.armed = top
	w.gen++
	gen := w.gen
	c.retryWG.Add(1)
	w.timer = time.AfterFunc(time.Duration(max(top-c.nowNano(), 0)), func() { c.retryDue(g, gen) })
}

// retryDue is g's timer: it wakes g's takers if its earliest waiting
// event is due, else re-arms for it (the clock moved less than the timer
// thought).
func (c *FileChannel) retryDue(g *groupState, gen uint64) {
	defer c.retryWG.Done()
	wake := func() bool {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		if g.wait.gen != gen {
			return false // a later timer replaced this one
		}
		g.wait.armed, g.wait.timer = 0, nil
		if g.dueLocked(c.nowNano()) {
			return true
		}
		c.armRetryLocked(g)
		return false
	}()
	if wake {
		g.avail.broadcast()
	}
}

// stopRetryTimerLocked stops g's timer; the caller holds queueMu.
func (c *FileChannel) stopRetryTimerLocked(g *groupState) {
	if g.wait.timer != nil && g.wait.timer.Stop() {
		c.retryWG.Done()
	}
	g.wait.timer, g.wait.armed = nil, 0
	g.wait.gen++
}

// clearWaitingLocked drops g's waiting events (ResetGroup replaced
// them); the caller holds queueMu.
func (c *FileChannel) clearWaitingLocked(g *groupState) {
	c.stopRetryTimerLocked(g)
	g.wait.heap, g.wait.files = nil, nil
}

// stopRetryTimers (Close, once closed is set: no timer is armed after it)
// stops every group's timer and waits for those firing.
func (c *FileChannel) stopRetryTimers() {
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		for _, g := range c.groups {
			c.stopRetryTimerLocked(g)
		}
	}()
	c.retryWG.Wait()
}

// restoreWaiting (Open) moves the events of g's queue that the replay
// found waiting (replay.GroupResult.Waiting) out of it into g's waiting
// set, with their due times: one pass over the queue, whatever their
// number. Open arms the timer once the groups are published.
func (g *groupState) restoreWaiting(waiting map[eventqueue.Pointer]int64) error {
	if len(waiting) == 0 {
		return nil
	}
	n := g.queue.Size()
	var err error
	for range n {
		p, _ := g.queue.RemoveHead()
		if due, ok := waiting[p]; ok {
			g.addWaitingLocked(p, due)
			continue
		}
		err = errors.Join(err, g.queue.AddTail(p))
	}
	return err
}

// catalogWaiting returns g's waiting events as the checkpoint catalog
// keeps them (by pointer). The caller holds queueMu.
func (g *groupState) catalogWaiting() []checkpoint.Waiting {
	if len(g.wait.heap) == 0 {
		return nil
	}
	out := make([]checkpoint.Waiting, len(g.wait.heap))
	for i, w := range g.wait.heap {
		out[i] = checkpoint.Waiting{Pointer: uint64(w.p), Due: w.due}
	}
	slices.SortFunc(out, func(a, b checkpoint.Waiting) int { return cmp.Compare(a.Pointer, b.Pointer) })
	return out
}

// seedWaiting returns the waiting events the checkpoint's catalog lists
// for group id, for the replay's seed (they are also in flight in the
// checkpoint, under waitingTx), or nil.
func seedWaiting(cat *checkpoint.Catalog, id uint32) map[eventqueue.Pointer]int64 {
	if cat == nil {
		return nil
	}
	for _, cg := range cat.Groups {
		if cg.ID == id {
			return cg.WaitingDues()
		}
	}
	return nil
}

// retryRecord returns the retry record of transaction tx for ptrs, which
// wait in g until dues.
func retryRecord(tx uint64, g *groupState, ptrs []eventqueue.Pointer, dues []int64) logfile.Record {
	return logfile.Record{Type: logfile.RecordRetry, TxID: tx, Group: g.id, Pointers: pointerWords(ptrs), Due: dues}
}

// returnRecords returns the records of transaction tx returning ptrs to
// g: a deliver record of the counts words and counts (if any), and a retry
// record of their due times dues (if any).
func returnRecords(tx uint64, g *groupState, ptrs []eventqueue.Pointer, words []uint64, counts []uint32, dues []int64) []logfile.Record {
	recs := make([]logfile.Record, 0, 2)
	if len(words) > 0 {
		recs = append(recs, logfile.Record{Type: logfile.RecordDeliver, TxID: tx, Group: g.id, Pointers: words, Counts: counts})
	}
	if dues != nil {
		recs = append(recs, retryRecord(tx, g, ptrs, dues))
	}
	return recs
}

// checkRetryDelays checks a group's RetryDelays.
func checkRetryDelays(d []time.Duration) error {
	if len(d) > maxRetryDelays {
		return fmt.Errorf("RetryDelays has %d delays (at most %d)", len(d), maxRetryDelays)
	}
	for i, x := range d {
		if x < 0 {
			return fmt.Errorf("RetryDelays[%d] %v is negative", i, x)
		}
	}
	return nil
}
