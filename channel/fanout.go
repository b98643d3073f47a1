package channel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// How a put transaction's events reach the consumer groups:
//
//   - Each Put takes one capacity permit in every Block group (waiting up to
//     KeepAlive in all of them together); the transaction counts them in
//     permits. A Put refused by one group takes none.
//   - The commit plans the fan-out (planFanout, under queueMu): a Block
//     group whose permits the transaction holds receives its events; any
//     other group (DropOldest, DropNewest, or a Block group added since the
//     Puts) takes permits now if it has room. Without room a DropOldest
//     group drops its oldest queued events, whose permits pass to the new
//     ones; otherwise the group misses the transaction.
//   - The commit writes what the plan decided before its commit record: a
//     take record per DropOldest group that drops (Group, the put's TxID,
//     the pointers dropped) and a skip record naming the groups missed, so
//     that replay rebuilds every group exactly.
//   - If the write fails, undoFanout returns the dropped events to their
//     heads and the permits taken at commit; abortPuts releases the rest.

// permit is the capacity permits a put transaction holds in one group.
type permit struct {
	g *groupState
	n int
}

// acquirePermit takes one permit in every Block group for the next Put
// (put t.puts), but those whose filter keeps it out (markFilters ran),
// waiting up to KeepAlive in all of them together. It returns the group
// list it took them in (to give to addPermits or releasePut); on error it
// holds none. It allocates nothing: it runs at every Put.
func (t *Transaction) acquirePermit(ctx context.Context) ([]*groupState, error) {
	c := t.c
	var deadline time.Time // set at the first group without room: a Put with room reads no clock
	groups := c.currentGroups()
	for i, g := range groups {
		if !t.permitNeeded(g, t.puts) || g.gate.tryAcquire(1) {
			continue
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(c.cfg.KeepAlive)
		}
		if err := g.gate.acquire(ctx, 1, max(time.Until(deadline), 0), c.closing); err != nil {
			t.releasePut(groups[:i])
			if !errors.Is(err, ErrChannelFull) {
				return nil, err
			}
			if len(groups) == 1 && g.id == 0 {
				return nil, fmt.Errorf("%w: capacity %d reached and no room within %v", ErrChannelFull, g.cfg.Capacity, c.cfg.KeepAlive)
			}
			return nil, fmt.Errorf("%w: %s: capacity %d reached and no room within %v", ErrChannelFull,
				groupLabel(g.cfg.Name), g.cfg.Capacity, c.cfg.KeepAlive)
		}
	}
	return groups, nil
}

// permitNeeded reports whether put i of t takes a permit in g: g is a
// Block group that puts feed and whose filter does not keep the put out.
func (t *Transaction) permitNeeded(g *groupState, i int) bool {
	return g.fedBlock() && !t.filteredOut(g, i)
}

// releasePut gives back the permit that put t.puts (not counted yet)
// took in each group of gs.
func (t *Transaction) releasePut(gs []*groupState) {
	for _, g := range gs {
		if t.permitNeeded(g, t.puts) {
			g.gate.release(1)
		}
	}
}

// addPermits counts the permit put i took in each group of gs.
func (t *Transaction) addPermits(gs []*groupState, i int) {
next:
	for _, g := range gs {
		if !t.permitNeeded(g, i) {
			continue
		}
		for i := range t.permits {
			if t.permits[i].g == g {
				t.permits[i].n++
				continue next
			}
		}
		t.permits = append(t.permits, permit{g: g, n: 1})
	}
}

// permitsIn returns the permits t holds in g.
func (t *Transaction) permitsIn(g *groupState) int {
	for _, p := range t.permits {
		if p.g == g {
			return p.n
		}
	}
	return 0
}

// fanout is a put commit's plan: the groups that receive its events, the
// permits it took at commit, the events it drops, the groups it misses.
type fanout struct {
	to       []*groupState
	filtered [][]uint32 // per group of to: the put indices its filter keeps out
	omit     [][]uint32 // per group of to: those and the duplicates (dedupput.go)
	acquired []permit   // taken at commit (returned by undoFanout)
	drops    []drop
	skip     []*groupState
}

// drop is the oldest events of a full DropOldest group that a put commit
// drops (their permits pass to the commit's events).
type drop struct {
	g    *groupState
	ptrs []eventqueue.Pointer
}

// planFanout decides, under queueMu, which groups receive t's events
// (see the comment at the top of this file). The caller holds commitMu
// shared, so the groups do not change until the commit is queued.
func (c *FileChannel) planFanout(t *Transaction) *fanout {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	d := &fanout{}
	for _, g := range c.groups {
		if g.dlqOnly {
			continue // no put feeds a dead-letter group (replay knows it)
		}
		skip := t.skipsOf(g)
		omit := t.omitted(skip)
		want, held := t.puts-len(omit), t.permitsIn(g)
		if held >= want {
			d.feed(g, skip, omit)
			continue
		}
		need := want - held
		if g.gate.tryAcquire(need) {
			d.feed(g, skip, omit)
			d.acquired = append(d.acquired, permit{g: g, n: need})
			continue
		}
		if g.cfg.WhenFull == DropOldest && held == 0 {
			if free := g.gate.free(); need-free <= g.queue.Size() && g.gate.tryAcquire(free) {
				ptrs := make([]eventqueue.Pointer, 0, need-free)
				for range need - free {
					p, _ := g.queue.RemoveHead()
					ptrs = append(ptrs, p)
				}
				d.feed(g, skip, omit)
				d.acquired = append(d.acquired, permit{g: g, n: free})
				d.drops = append(d.drops, drop{g: g, ptrs: ptrs})
				continue
			}
		}
		d.skip = append(d.skip, g)
	}
	return d
}

// feed adds g to the groups d feeds, without the puts omit (skip: those
// of them its filter keeps out).
func (d *fanout) feed(g *groupState, skip, omit []uint32) {
	d.to = append(d.to, g)
	d.filtered = append(d.filtered, skip)
	d.omit = append(d.omit, omit)
}

// records returns the drop and skip records of the plan, for put
// transaction tx.
func (d *fanout) records(tx uint64) []logfile.Record {
	var recs []logfile.Record
	for _, dr := range d.drops {
		recs = append(recs, logfile.Record{Type: logfile.RecordTake, TxID: tx, Group: dr.g.id, Pointers: pointerWords(dr.ptrs)})
	}
	if len(d.skip) > 0 {
		ids := make([]uint32, len(d.skip))
		for i, g := range d.skip {
			ids[i] = g.id
		}
		recs = append(recs, logfile.Record{Type: logfile.RecordSkip, TxID: tx, Skip: ids})
	}
	return append(recs, d.filterRecords(tx)...)
}

// dropFiles appends to dst the log files of the events the plan drops.
func (d *fanout) dropFiles(dst []uint32) []uint32 {
	for _, dr := range d.drops {
		dst = filesOf(dst, dr.ptrs)
	}
	return dst
}

// undoFanout undoes a plan whose commit failed: the dropped events go
// back to their groups' heads, the permits taken at commit are returned.
func (c *FileChannel) undoFanout(d *fanout) {
	for _, r := range c.requeueDrops(d) {
		c.log.Error("queue refused an event a failed commit had dropped", "group", r.g.cfg.Name, "err", r.err)
	}
	for _, p := range d.acquired {
		p.g.gate.release(p.n)
	}
	for _, dr := range d.drops {
		dr.g.gate.release(len(dr.ptrs))
		dr.g.avail.broadcast()
	}
}

// refusal is a queue's refusal of one event, logged once queueMu is
// released.
type refusal struct {
	g   *groupState
	err error
}

// requeueDrops puts the events d dropped back at their groups' heads, under
// queueMu, and returns the queues' refusals.
func (c *FileChannel) requeueDrops(d *fanout) []refusal {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	var refused []refusal
	for _, dr := range d.drops {
		if c.released || dr.g.removed {
			continue
		}
		for i := len(dr.ptrs) - 1; i >= 0; i-- {
			if err := dr.g.queue.AddHead(dr.ptrs[i]); err != nil {
				refused = append(refused, refusal{dr.g, err})
			}
		}
	}
	return refused
}

// queuePuts appends a put commit's events at the tail of every group the
// plan feeds: tx's spilled puts, then ptrs. The caller holds commitMu
// shared and saw the channel open. It gives back the permits t holds in
// the groups the plan skipped, counts the drops and wakes the takers.
func (c *FileChannel) queuePuts(t *Transaction, d *fanout, ptrs []eventqueue.Pointer) error {
	var err error
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		spilled := c.inflightPuts.Remove(t.id)
		var all []eventqueue.Pointer // in put order, for the filtered groups
		for i, g := range d.to {
			tags := t.keyTagsOf(g) // nil unless keyed
			if len(d.omit[i]) == 0 && tags == nil {
				err = errors.Join(err, g.add(spilled, nil), g.add(ptrs, nil))
				continue
			}
			if all == nil {
				all = append(slices.Clone(spilled), ptrs...)
			}
			err = errors.Join(err, g.add(keepMatched(all, d.omit[i]), keepMatched(tags, d.omit[i])))
		}
		for _, dr := range d.drops {
			dr.g.forgetDeliveries(dr.ptrs)
		}
	}()
	for _, g := range d.skip {
		if n := t.permitsIn(g); n > 0 {
			g.gate.release(n)
		}
		want := t.puts - len(t.omitted(t.skipsOf(g)))
		g.counts.newest.Add(int64(want))
		c.log.Warn("consumer group full: it misses a put transaction's events", "group", g.cfg.Name,
			"policy", g.cfg.WhenFull.String(), "events", want)
	}
	for i, g := range d.to {
		if n := len(d.filtered[i]); n > 0 {
			g.counts.filtered.Add(int64(n))
		}
		// A duplicate's permit (taken at its Put) is not an event's.
		if n := t.permitsIn(g) - (t.puts - len(d.omit[i])); n > 0 {
			g.gate.release(n)
		}
	}
	for _, dr := range d.drops {
		dr.g.counts.oldest.Add(int64(len(dr.ptrs)))
		c.log.Warn("consumer group full: dropped its oldest events", "group", dr.g.cfg.Name, "events", len(dr.ptrs))
	}
	// The Block groups' permits now belong to the queued events.
	t.permits = t.permits[:0]
	t.clearFilterMarks()
	t.clearKeyMarks()
	for _, g := range d.to {
		g.avail.broadcast()
	}
	return err
}
