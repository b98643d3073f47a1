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
// the dead-letter group instead of waiting.
//
// In a group with OrderKey a key waits with its event (order.go): of the
// events a rollback returns, the first of each key (in take order) waits
// in the heap, until the latest due time of the key's events it returns,
// and holds its key (its lane's owner is waitingTx); the key's later
// events are parked behind it. The retry record names only the events
// that wait in the heap: the parked ones come back at recovery at the
// head (the logs never took them; a checkpoint lists them under
// parkedTx) and are parked again behind the waiting one.

// waitingTx is the transaction id under which a checkpoint lists a
// group's waiting events among its takes in flight: no transaction has
// it (ids count up from 1).
const waitingTx = 1<<64 - 1

// maxRetryDelays is the longest RetryDelays list a group may have.
const maxRetryDelays = 1024

// waitingEvent is an event of a group's waiting set; in a group with
// OrderKey, keyed tells whether it holds a key, and key is its hash.
type waitingEvent struct {
	p     eventqueue.Pointer
	due   int64 // Unix nanoseconds (the channel's clock)
	key   uint64
	keyed bool
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

// addWaitingLocked makes w.p wait in g until w.due; the caller holds
// queueMu and arms the timer (armRetryLocked).
func (g *groupState) addWaitingLocked(w waitingEvent) {
	heap.Push(&g.wait.heap, w)
	if g.wait.files == nil {
		g.wait.files = map[uint32]int{}
	}
	g.wait.files[w.p.FileID()]++
}

// dueLocked reports whether g's earliest waiting event is due at now.
func (g *groupState) dueLocked(now int64) bool {
	return len(g.wait.heap) > 0 && g.wait.heap[0].due <= now
}

// popWaitingLocked removes g's earliest waiting event.
func (g *groupState) popWaitingLocked() waitingEvent {
	w := heap.Pop(&g.wait.heap).(waitingEvent)
	f := w.p.FileID()
	if g.wait.files[f]--; g.wait.files[f] == 0 {
		delete(g.wait.files, f)
	}
	return w
}

// nowNano is the channel's clock in Unix nanoseconds.
func (c *FileChannel) nowNano() int64 { return c.now().UnixNano() }

// takeDueLocked moves g's earliest waiting event into tx's takes if it is
// due at now. A keyed one (OrderKey) gives tx its key (claimed: the caller
// claims nothing more for it). The caller holds queueMu.
func (c *FileChannel) takeDueLocked(g *groupState, tx uint64, now int64) (p eventqueue.Pointer, claimed, ok bool) {
	if len(g.wait.heap) == 0 || !g.dueLocked(now) {
		return 0, false, false
	}
	w := g.popWaitingLocked()
	c.armRetryLocked(g)
	if w.keyed && !g.claimDueLocked(tx, w) {
		return 0, false, false // parked behind the key's holder
	}
	g.inflight.Add(tx, w.p)
	return w.p, w.keyed, true
}

// waitTakesLocked ends tx's takes ptrs (in take order) without committing
// them: each waits in g until its due time in dues. In a keyed group the
// first of each key waits and holds the key; the key's others are parked
// behind it (keyLeadsLocked). The caller holds queueMu and then releases
// the keys tx still holds (releaseKeysLocked).
func (c *FileChannel) waitTakesLocked(g *groupState, tx uint64, ptrs []eventqueue.Pointer, dues []int64) {
	lead, keys := g.keyLeadsLocked(tx, ptrs)
	now := c.nowNano()
	for i, p := range ptrs {
		g.inflight.RemovePointer(tx, p)
		if lead == nil || lead[i] == i {
			w := waitingEvent{p: p, due: dues[i]}
			if lead != nil {
				w.key, w.keyed = keys[i].key, keys[i].has
			}
			if w.due <= 0 {
				w.due = now
			}
			g.addWaitingLocked(w)
		}
	}
	if lead != nil {
		g.waitKeysLocked(tx, ptrs, lead, keys)
	}
	c.armRetryLocked(g)
}

// waitKey is the key of an event that is to wait (keyLeadsLocked): has
// false for a keyless one.
type waitKey struct {
	key uint64
	has bool
}

// keyLeadsLocked returns, for ptrs (takes of tx in take order, which are
// to wait) in a keyed group, lead[i]: the index of the first of ptrs[i]'s
// key (i for a keyless event, and for the first of its key), and keys[i]:
// ptrs[i]'s key. nil, nil outside a keyed group. The caller holds
// queueMu.
func (g *groupState) keyLeadsLocked(tx uint64, ptrs []eventqueue.Pointer) (lead []int, keys []waitKey) {
	if !g.keyed() {
		return nil, nil
	}
	byP := make(map[eventqueue.Pointer]uint64, len(g.order.byTx[tx]))
	for _, kt := range g.order.byTx[tx] {
		byP[kt.p] = kt.key
	}
	first := map[uint64]int{}
	lead, keys = make([]int, len(ptrs)), make([]waitKey, len(ptrs))
	for i, p := range ptrs {
		lead[i] = i
		k, ok := byP[p]
		if !ok {
			continue
		}
		keys[i] = waitKey{k, true}
		if j, seen := first[k]; seen {
			lead[i] = j
		} else {
			first[k] = i
		}
	}
	return lead, keys
}

// waitKeysLocked hands the keys of the waiting leads of ptrs (lead,
// keys: keyLeadsLocked) over from tx to waitingTx: each key's later events
// of ptrs go to the front of its lane, before the events parked behind it
// already. The caller holds queueMu.
func (g *groupState) waitKeysLocked(tx uint64, ptrs []eventqueue.Pointer, lead []int, keys []waitKey) {
	o := &g.order
	o.init()
	mates := map[uint64][]eventqueue.Pointer{}
	for i, kt := range keys {
		if !kt.has {
			continue
		}
		if lead[i] == i {
			mates[kt.key] = mates[kt.key][:0:0]
		} else {
			mates[kt.key] = append(mates[kt.key], ptrs[i])
		}
	}
	for k, ms := range mates {
		l := o.held[k]
		if l == nil {
			l = o.newLane(waitingTx)
			o.held[k] = l
		}
		l.owner = waitingTx
		l.parked = append(ms, l.parked...)
		o.countParked(ms, 1)
	}
	takes := slices.DeleteFunc(o.byTx[tx], func(kt keyTake) bool { _, ok := mates[kt.key]; return ok })
	if len(takes) == 0 {
		delete(o.byTx, tx)
	} else {
		o.byTx[tx] = takes
	}
}

// retryDuesLocked returns the due time of each of ptrs, takes of tx which
// a rollback returns to g (a group with RetryDelays): now plus the delay
// of its next redelivery, from its delivery count (keyedDuesLocked then
// adjusts them in a keyed group). The caller holds queueMu.
func (c *FileChannel) retryDuesLocked(g *groupState, tx uint64, ptrs []eventqueue.Pointer) []int64 {
	now := c.nowNano()
	dues := make([]int64, len(ptrs))
	for i, p := range ptrs {
		dues[i] = max(now+int64(g.retryDelay(g.deliveries[p])), 1)
	}
	g.keyedDuesLocked(tx, ptrs, dues)
	return dues
}

// keyedDuesLocked adjusts dues, the due times of ptrs (takes of tx in
// take order, which are to wait), in a keyed group: the first of each key
// waits until the latest due time of the key's events (none is delivered
// before its own), and the others have due time 0 (they are parked
// behind it: the retry record does not name them). The caller holds
// queueMu.
func (g *groupState) keyedDuesLocked(tx uint64, ptrs []eventqueue.Pointer, dues []int64) {
	lead, _ := g.keyLeadsLocked(tx, ptrs)
	for i, j := range lead {
		dues[j] = max(dues[j], dues[i])
	}
	for i, j := range lead {
		if j != i {
			dues[i] = 0
		}
	}
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
			g.addWaitingLocked(waitingEvent{p: p, due: due})
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

// retryRecord returns the retry record of transaction tx for those of
// ptrs that wait in g until dues (a due time 0: parked behind its key's
// first, not named).
func retryRecord(tx uint64, g *groupState, ptrs []eventqueue.Pointer, dues []int64) logfile.Record {
	words := make([]uint64, 0, len(ptrs))
	named := make([]int64, 0, len(dues))
	for i, p := range ptrs {
		if dues[i] != 0 {
			words, named = append(words, uint64(p)), append(named, dues[i])
		}
	}
	return logfile.Record{Type: logfile.RecordRetry, TxID: tx, Group: g.id, Pointers: words, Due: named}
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
