package channel

import (
	"slices"
	"time"

	"github.com/flumego/filechannel/eventqueue"
)

// Leases (GroupConfig.LeaseTimeout): a take transaction of a group with
// a LeaseTimeout gets a lease when it first takes an event of the group:
// a timer (time.AfterFunc) armed under queueMu. The transaction's commit
// (claimCommit) or end (settle) ends the lease, stopping the timer; if the
// timer fires first, expire fences the transaction (fenceLease) and
// returns its events to the group's head as a Rollback does. Which of the
// two happens is decided under queueMu, and expire holds commitMu
// exclusively, as ResetGroup does: no commit of the transaction is half
// written, and no Take of it half counted, while it decides. A lease ends
// even if the taker never calls the channel again.
//
// Every armed lease is in FileChannel.leases and counted in leaseWG until
// its timer is stopped or its expire has run: Close stops them all and
// waits for the expiries under way, so no timer or goroutine outlives it.

// leaseKey names the lease of one take transaction in one group.
type leaseKey struct {
	g  *groupState
	tx uint64
}

// lease is an armed lease: its timer.
type lease struct{ timer *time.Timer }

// armLeaseLocked gives transaction tx, which has just taken an event of
// g, a lease if g has a LeaseTimeout and tx has none yet. The caller holds
// queueMu.
func (c *FileChannel) armLeaseLocked(g *groupState, tx uint64) {
	d := g.cfg.LeaseTimeout
	k := leaseKey{g, tx}
	if d <= 0 || c.closed.Load() || c.leases[k] != nil {
		return
	}
	if c.leases == nil {
		c.leases = map[leaseKey]*lease{}
	}
	l := &lease{}
	c.leaseWG.Add(1)
	l.timer = time.AfterFunc(d, func() { c.expire(k, l) })
	c.leases[k] = l
}

// endLeaseLocked ends tx's lease in g, if it has one: its timer will not
// expire it. The caller holds queueMu.
func (c *FileChannel) endLeaseLocked(g *groupState, tx uint64) {
	k := leaseKey{g, tx}
	l := c.leases[k]
	if l == nil {
		return
	}
	delete(c.leases, k)
	if l.timer.Stop() {
		c.leaseWG.Done()
	} // else its expire runs, finds it gone, and is done
}

// stopLeases (Close, once closed is set: no lease is armed after it) ends
// every lease and waits for the expiries already running.
func (c *FileChannel) stopLeases() {
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		for k := range c.leases {
			c.endLeaseLocked(k.g, k.tx)
		}
	}()
	c.leaseWG.Wait()
}

// expire is the timer of lease l: unless the transaction's commit or end
// came first, it fences the transaction and returns the events it holds to
// the group's head in their order, as a Rollback does (with a deliver
// record of their counts in a group with MaxDeliveries: the deliveries
// stay counted; one that reached MaxDeliveries is dead-lettered by the
// Take that finds it at the head).
func (c *FileChannel) expire(k leaseKey, l *lease) {
	defer c.leaseWG.Done()
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if c.closed.Load() {
		return // the events come back at the next Open
	}
	ptrs, ok := c.fenceExpired(k, l)
	if !ok {
		return
	}
	g := k.g
	g.counts.leasesExpired.Add(1) // before the events show: Stats never has them back uncounted
	dues := c.logExpiredDeliveries(k, ptrs)
	err := c.returnExpired(k, ptrs, dues)
	c.log.Warn("take transaction's lease expired: its events went back to the group", "group", g.cfg.Name, "tx", k.tx,
		"events", len(ptrs), "lease_timeout", g.cfg.LeaseTimeout)
	if err != nil {
		c.log.Error("queue refused the events of an expired lease", "group", g.cfg.Name, "err", err)
	}
	if len(ptrs) > 0 {
		g.avail.broadcast()
	}
}

// fenceExpired decides, under queueMu, that lease l expired: unless it
// ended (the transaction committed or ended first), or its group is gone
// or was reset, it fences the transaction and returns a copy
// of the events it holds in the group, in the order it took them.
func (c *FileChannel) fenceExpired(k leaseKey, l *lease) ([]eventqueue.Pointer, bool) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.leases[k] != l {
		return nil, false
	}
	delete(c.leases, k)
	g := k.g
	if g.removed || g.fencedLocked(k.tx) != fenceNone {
		return nil, false // the events went with the group, or with its reset
	}
	g.fenceLocked(k.tx, fenceLease)
	return slices.Clone(g.inflight.Get(k.tx)), true
}

// logExpiredDeliveries writes, as Transaction.logDeliveries does for a
// rollback, a deliver record of the counts of ptrs (unsynced), which an
// expired lease returns to a group that counts deliveries, and, with
// RetryDelays, a retry record of their due times, which it returns (nil:
// back at the head). The caller holds commitMu.
func (c *FileChannel) logExpiredDeliveries(k leaseKey, ptrs []eventqueue.Pointer) []int64 {
	g := k.g
	if !g.counting() || len(ptrs) == 0 {
		return nil
	}
	words, counts, dues, removed := c.deliveryCounts(g, k.tx, ptrs, nil, nil)
	if removed {
		return nil
	}
	recs := returnRecords(k.tx, g, ptrs, words, counts, dues)
	if len(recs) == 0 {
		return nil
	}
	dir := int(k.tx % uint64(c.logs.NumDirs()))
	if _, err := c.writeRecords(dir, recs, nil, true); err != nil {
		c.log.Warn("write the delivery counts of an expired lease (the journal has them)", "group", g.cfg.Name, "err", err)
	}
	return dues
}

// returnExpired puts ptrs, the events of the transaction whose lease
// expired, back at the group's head in their order, or, with dues, makes
// them wait as after a rollback. The caller holds commitMu exclusively
// since fenceExpired: neither RemoveGroup nor Close came in between.
func (c *FileChannel) returnExpired(k leaseKey, ptrs []eventqueue.Pointer, dues []int64) error {
	defer k.g.lockOrder()()
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if dues != nil {
		c.waitTakesLocked(k.g, k.tx, ptrs, dues)
		return k.g.releaseKeysLocked(k.tx)
	}
	return k.g.returnTakes(k.tx, ptrs)
}
