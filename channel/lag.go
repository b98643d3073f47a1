package channel

import (
	"sync"
	"time"

	"github.com/flumego/filechannel/eventqueue"
)

// A group's lag is the age of its oldest queued event: the time since the
// put commit of its oldest undelivered event (Event.Time). It is what a
// dashboard shows first of a consumer: how far behind the producers the
// group's takers are, in seconds, whatever the event rate.
//
// Its oldest queued event is the one at the head of its ring or, in a
// group with OrderKey, the first event parked in the lane of a key another
// open take transaction holds (order.go): while a key is stuck (its
// holder's transaction hangs) its events are the oldest undelivered ones,
// out of the ring. Each lane's parked events are in order, oldest first,
// so the lag is the oldest of the ring's head and each lane's first
// parked event. Events waiting for their retry delay (retry.go) are
// scheduled, not late: they are not in it.

// headTime caches the commit times of the events a group's lag is read
// from (lagHeads), so that a scrape reads a log record only when the head
// moved, or a lane got a new first parked event.
type headTime struct {
	mu   sync.Mutex
	ptr  eventqueue.Pointer
	ok   bool      // ptr's time was read
	time time.Time // zero: unknown (a file older than format version 7)

	// lanes: the times read of lane heads (keyed groups), each marked
	// with the last scrape that met it; scrape counts the scrapes that
	// met lane heads. An entry not met by a scrape goes.
	lanes  map[eventqueue.Pointer]laneTime
	scrape uint64
}

// laneTime is the commit time of a lane's first parked event (zero:
// unknown) and the last scrape that met it there.
type laneTime struct {
	time   time.Time
	scrape uint64
}

// lagHeads is what a group's lag is read from, captured under queueMu:
// the pointer at the head of its ring (has: the ring is not empty) and
// the first parked event of each of its lanes that has parked events (a
// keyed group; their number is bounded by the keys its open take
// transactions hold).
type lagHeads struct {
	head  eventqueue.Pointer
	has   bool
	lanes []eventqueue.Pointer
}

// queued reports whether the group had an event queued: in its ring or
// parked.
func (h *lagHeads) queued() bool { return h.has || len(h.lanes) > 0 }

// lagHeadsLocked captures g's lagHeads; the caller holds queueMu. After
// Close it is empty (the ring's slots are gone).
func (c *FileChannel) lagHeadsLocked(g *groupState) lagHeads {
	var h lagHeads
	if c.released {
		return h
	}
	h.head, h.has = g.headOf()
	if g.order.parked > 0 {
		for _, l := range g.order.held {
			if len(l.parked) > 0 {
				h.lanes = append(h.lanes, l.parked[0])
			}
		}
	}
	return h
}

// oldestTime returns the commit time of g's oldest queued event, of those
// h (lagHeadsLocked) points to, reading each record once while it stays
// where it is; zero when nothing is queued, or no time is known (a file
// older than format version 7, a record that does not read).
func (c *FileChannel) oldestTime(g *groupState, h lagHeads) time.Time {
	keyed := g.keyed() // its config's: fixed while it is open
	if !h.queued() && !keyed {
		return time.Time{}
	}
	ht := &g.head
	ht.mu.Lock()
	defer ht.mu.Unlock()
	var oldest time.Time
	if h.has {
		oldest = ht.headLocked(c, h.head)
	}
	if keyed {
		oldest = ht.lanesLocked(c, h.lanes, oldest)
	}
	return oldest
}

// headLocked returns the commit time of the event at the head, p; the
// caller holds ht.mu.
func (ht *headTime) headLocked(c *FileChannel, p eventqueue.Pointer) time.Time {
	if ht.ok && ht.ptr == p {
		return ht.time
	}
	t, err := c.eventTime(p)
	if err != nil {
		return time.Time{} // damaged, or its file gone since: the next scrape looks again
	}
	ht.ptr, ht.ok, ht.time = p, true, t
	return t
}

// lanesLocked returns the oldest of oldest and the commit times of the
// lane heads ps, reading those not cached, and forgets the cached ones
// no longer lane heads; the caller holds ht.mu.
func (ht *headTime) lanesLocked(c *FileChannel, ps []eventqueue.Pointer, oldest time.Time) time.Time {
	if len(ps) == 0 {
		ht.lanes = nil
		return oldest
	}
	if ht.lanes == nil {
		ht.lanes = make(map[eventqueue.Pointer]laneTime, len(ps))
	}
	ht.scrape++
	for _, p := range ps {
		lt, ok := ht.lanes[p]
		if !ok {
			t, err := c.eventTime(p)
			if err != nil {
				continue // as for the head: the next scrape looks again
			}
			lt.time = t
		}
		lt.scrape = ht.scrape
		ht.lanes[p] = lt
		if !lt.time.IsZero() && (oldest.IsZero() || lt.time.Before(oldest)) {
			oldest = lt.time
		}
	}
	for p, lt := range ht.lanes {
		if lt.scrape != ht.scrape {
			delete(ht.lanes, p)
		}
	}
	return oldest
}

// eventTime reads the commit time of the event p points to.
func (c *FileChannel) eventTime(p eventqueue.Pointer) (time.Time, error) {
	r, err := c.logs.Reader(p.FileID())
	if err != nil {
		return time.Time{}, err
	}
	defer r.Release()
	rec, err := r.ReadRecord(int64(p.Offset()))
	if err != nil {
		return time.Time{}, err
	}
	_, t := c.eventStamp(p.FileID(), r.Framing().Timed(), &rec)
	return t, nil
}

// headOf returns the pointer at the head of g's queue; the caller holds
// queueMu.
func (g *groupState) headOf() (eventqueue.Pointer, bool) {
	if g.queue.Size() == 0 {
		return 0, false
	}
	return g.queue.Get(0), true
}
