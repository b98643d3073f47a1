package channel

import (
	"errors"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// Expiry (GroupConfig.ExpireAfter): an event whose put committed at least
// ExpireAfter ago (Event.Time, from the log; the clock is Config.now in
// tests) is not delivered by the group. It leaves the group where that
// costs nothing extra:
//
//   - at Take, once the event is read (its time is known): expireTaken
//     moves it to the dead-letter group (deadLetterTakes, as for
//     MaxDeliveries, reason "expired") or, without one, drops it
//     (dropExpired), then a sweep of up to TransactionCapacity events
//     takes the expired ones behind it, and Take goes on with the next
//     event;
//   - before each checkpoint (sweepExpired): at most expireSweepMax events
//     per group from its head while they are expired, recognised by their
//     log file's index (logfile.FileIndex: a file whose latest commit is
//     expired holds only expired events) or else by reading them, are
//     taken by a transaction of the channel's own and moved or dropped at
//     once, so that an idle group's expired events do not keep their log
//     files.
//
// A move is a take transaction with a move record, synced (deadletter.go);
// a drop is a take transaction (a take record and its commit, in one
// write) that is not synced: lost to a power loss, the events come back
// and expire again. Either is applied by replay whole or not at all. A
// full Block dead-letter group refuses the move: the event is then
// delivered, as an event at MaxDeliveries is.

// expireSweepMax bounds the events a sweep moves or drops per group (one
// take record of 512 KiB of pointers).
const expireSweepMax = 1 << 16

// now is the channel's clock (Config.now in tests).
func (c *FileChannel) now() time.Time {
	if c.cfg.now != nil {
		return c.cfg.now()
	}
	return time.Now()
}

// expiredAt reports whether an event committed at 'at' has expired in g.
// An event without a time (a log file older than format version 7) never
// expires.
func (c *FileChannel) expiredAt(g *groupState, at time.Time) bool {
	d := g.cfg.ExpireAfter
	return d > 0 && !at.IsZero() && c.now().Sub(at) >= d
}

// expireTaken moves p, the expired event t just took, out of t's group:
// to its dead-letter group, or dropped. It returns the dead letters (none
// when a full Block dead-letter group refused it: t keeps it, to deliver).
func (c *FileChannel) expireTaken(t *Transaction, p eventqueue.Pointer) ([]DeadLetter, error) {
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	g := t.grp
	if f := c.groupFenced(g, t.id); f != fenceNone {
		return nil, errFenced(g, f)
	}
	if c.groupRemoved(g) {
		return nil, errRemoved(g)
	}
	ptrs := []eventqueue.Pointer{p}
	if g.dlq != nil {
		return c.deadLetterTakes(t, ptrs, deadReasonExpired), nil
	}
	return c.dropExpired(g, t.id, t.dir, ptrs)
}

// dropExpired drops ptrs, expired events of g in flight in transaction
// owner, with a take transaction of its own written to data dir dir (not
// synced), and returns what Config.OnDeadLetter is told of them. After an
// error they are still in flight in owner. The caller holds commitMu
// shared and saw the channel open.
func (c *FileChannel) dropExpired(g *groupState, owner uint64, dir int, ptrs []eventqueue.Pointer) ([]DeadLetter, error) {
	tx := c.nextTxID.Add(1) - 1
	recs := []logfile.Record{{Type: logfile.RecordTake, TxID: tx, Group: g.id, Pointers: pointerWords(ptrs)},
		{Type: logfile.RecordCommit, TxID: tx, CommitType: logfile.RecordTake, Count: uint64(len(ptrs))}}
	if _, err := c.writeRecords(dir, recs, filesOf(nil, ptrs), true); err != nil {
		return nil, err
	}
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		for _, p := range ptrs {
			g.inflight.RemovePointer(owner, p)
		}
		g.forgetDeliveries(ptrs)
	}()
	g.gate.release(len(ptrs))
	g.counts.expiredDropped.Add(int64(len(ptrs)))
	c.log.Warn("expired events dropped (the group has no dead-letter group)", "group", g.cfg.Name, "events", len(ptrs),
		"expire_after", g.cfg.ExpireAfter)
	notes := make([]DeadLetter, len(ptrs))
	for i, p := range ptrs {
		notes[i] = DeadLetter{Group: g.cfg.Name, Dropped: true, Reason: deadReasonExpired, ptr: p}
	}
	return notes, nil
}

// sweepExpired moves or drops the expired events at the head of every
// group with an ExpireAfter, at most expireSweepMax per group, and returns
// the dead letters for the caller to notify once it has done the rest.
func (c *FileChannel) sweepExpired() []DeadLetter {
	var notes []DeadLetter
	for _, g := range c.currentGroups() {
		if g.cfg.ExpireAfter > 0 {
			notes = append(notes, c.sweepGroup(g, expireSweepMax)...)
		}
	}
	return notes
}

// sweepGroup moves or drops up to max expired events from g's head, as one
// take transaction of the channel's own, and returns their dead letters.
func (c *FileChannel) sweepGroup(g *groupState, max int) []DeadLetter {
	if c.expiredPrefix(g, c.headPointers(g, 1)) == 0 {
		return nil // the usual case, for the cost of one read
	}
	head := c.headPointers(g, max)
	head = head[:c.expiredPrefix(g, head)]
	if len(head) == 0 {
		return nil
	}
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return nil
	}
	tx := c.nextTxID.Add(1) - 1
	t := &Transaction{c: c, id: tx, dir: int(tx % uint64(c.logs.NumDirs())), kind: txTake, grp: g}
	taken := c.takeExpiredHead(g, tx, head)
	if len(taken) == 0 {
		return nil
	}
	var notes []DeadLetter
	var err error
	if g.dlq != nil {
		notes = c.deadLetterTakes(t, taken, deadReasonExpired)
	} else if notes, err = c.dropExpired(g, tx, t.dir, taken); err != nil {
		c.log.Error("drop expired events; they stay queued", "group", g.cfg.Name, "err", err)
	}
	if rest := taken[len(notes):]; len(rest) > 0 {
		// Refused by a full Block dead-letter group, or not written:
		// back at the head, in order.
		if err := c.returnTakes(g, tx, rest, nil); err != nil && !errors.Is(err, ErrClosed) {
			c.log.Error("queue refused expired events returned", "group", g.cfg.Name, "err", err)
		}
		g.avail.broadcast()
	}
	return notes
}

// headPointers returns up to max pointers from g's head, in order.
func (c *FileChannel) headPointers(g *groupState, max int) []eventqueue.Pointer {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released || g.removed {
		return nil
	}
	out := make([]eventqueue.Pointer, min(g.queue.Size(), max))
	for i := range out {
		out[i] = g.queue.Get(i)
	}
	return out
}

// expiredPrefix returns how many of ptrs, from the first, have expired in
// g: those of a log file whose index says its latest commit expired count
// without a read; the others are read, up to the first that has not
// expired (or does not read: Take deals with damage).
func (c *FileChannel) expiredPrefix(g *groupState, ptrs []eventqueue.Pointer) int {
	limit := c.now().Add(-g.cfg.ExpireAfter).UnixNano()
	whole := map[uint32]bool{}
	for i, p := range ptrs {
		all, seen := whole[p.FileID()]
		if !seen {
			x, ok := c.logs.FileIndex(p.FileID())
			all = ok && x.Known && x.MinTime > 0 && x.MaxTime <= limit
			whole[p.FileID()] = all
		}
		if all {
			continue
		}
		at, err := c.eventTime(p)
		if err != nil || at.IsZero() || at.UnixNano() > limit {
			return i
		}
	}
	return len(ptrs)
}

// takeExpiredHead takes into transaction tx the events of g's head while
// they are, in order, those of want (expired events; another taker may
// have taken some since), and returns them.
func (c *FileChannel) takeExpiredHead(g *groupState, tx uint64, want []eventqueue.Pointer) []eventqueue.Pointer {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released || g.removed {
		return nil
	}
	var taken []eventqueue.Pointer
	for _, p := range want {
		if h, ok := g.headOf(); !ok || h != p {
			break
		}
		g.takeHead(tx)
		taken = append(taken, p)
	}
	return taken
}
