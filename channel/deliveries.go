package channel

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"syscall"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/logfile"
)

// Where delivery counts live (groups with MaxDeliveries or RetryDelays):
//
//   - in memory, groupState.deliveries, under queueMu: the truth while the
//     channel is open;
//   - in the delivery journal (checkpoint.Journal, a file of the checkpoint
//     dir mapped into memory): every Take notes the event's new count there
//     before it returns, with a store to the mapping and no system call, so
//     that a process that crashes holding the event (killed, a panic) has
//     counted it. Never synced;
//   - in the checkpoint's catalog (as of its write-order id), and in the
//     deliver records a Rollback writes (unsynced) for the events it
//     returns: replay rebuilds counts from them.
//
// Open merges them (replay.Options.Journal): for each event still queued
// in its group, the largest count the replay or the journal has. Every count any of them holds was
// true when it was written, and a count only grows while the event stays
// in its group, so a power loss (which may lose any unsynced part) can
// only make counts smaller: an event is delivered more often, never
// dead-lettered early. The one way an event's count goes back to zero while
// it stays in a group is Redrive, which moves it out and back in: it erases
// the event's journal entries durably before its own records are written,
// and replay resets the count at the move.

// readJournal is replay's ReadJournal: the old delivery journal's
// entries, read only if a group counts deliveries, as the logs leave the
// groups or as Config sets them (a journal holds entries of no other
// group). A journal damaged beyond its torn entries (longer than its
// header allows) is none: its counts are lost, in the safe direction.
func (c *FileChannel) readJournal(groups []logfile.GroupInfo) ([]checkpoint.JournalEntry, error) {
	if !slices.ContainsFunc(groups, func(g logfile.GroupInfo) bool { return g.MaxDeliveries > 0 || len(g.RetryDelays) > 0 }) &&
		!slices.ContainsFunc(c.cfg.Groups, func(g GroupConfig) bool { return g.MaxDeliveries > 0 || len(g.RetryDelays) > 0 }) {
		return nil, nil
	}
	entries, err := checkpoint.ReadJournal(c.fs, c.cfg.CheckpointDir)
	if errors.Is(err, corrupt.ErrCorrupt) && !errors.Is(err, corrupt.ErrUnsupportedFormat) {
		c.log.Warn("the delivery journal is damaged: its delivery counts are left out (events may be delivered more often)", "err", err)
		return nil, nil
	}
	return entries, err
}

// openJournal (in Open, once the groups are settled: replay merged the
// old journal's counts, Options.Journal) starts a new delivery journal
// holding the counts; without a group that counts deliveries it removes
// the journal.
func (c *FileChannel) openJournal() error {
	if !slices.ContainsFunc(c.groups, (*groupState).counting) {
		if err := checkpoint.RemoveJournal(c.fs, c.cfg.CheckpointDir); err != nil {
			return opErr("open", err)
		}
		return nil
	}
	live := c.liveDeliveries()
	j, err := c.newJournal(live)
	if errors.Is(err, syscall.ENOSPC) && c.logs.ReleaseReserves() {
		j, err = c.newJournal(live) // on the room the data dirs' reserves held
	}
	if errors.Is(err, syscall.ENOSPC) {
		// Takes note deliveries with deliver records instead, which a
		// full dir lets take transactions write. The old journal must
		// go: no Erase reaches it now.
		c.log.Error("no room for the delivery journal: opening without it (each delivery is a log write), so that sinks can drain the disk",
			"err", err)
		if rerr := checkpoint.RemoveJournal(c.fs, c.cfg.CheckpointDir); rerr != nil {
			return opErr("open", errors.Join(err, rerr))
		}
		return nil
	}
	if err != nil {
		return opErr("open", err)
	}
	c.journal = j
	return nil
}

// newJournal writes a new delivery journal holding live: room for the
// last max(JournalEntries, 4 x TransactionCapacity) deliveries, so that a
// crash of even the largest take transaction finds every take counted.
func (c *FileChannel) newJournal(live []checkpoint.JournalEntry) (*checkpoint.Journal, error) {
	var salt [8]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, fmt.Errorf("delivery journal salt: %w", err)
	}
	n := min(max(checkpoint.JournalEntries, 4*c.cfg.TransactionCapacity), checkpoint.JournalMaxEntries)
	j, err := checkpoint.CreateJournal(c.fs, c.cfg.CheckpointDir, n, binary.BigEndian.Uint64(salt[:]), live)
	if err != nil {
		return nil, err
	}
	if j.Entries() != n {
		c.log.Warn("no room for a delivery journal of the size wanted: the old file is reused at its own size",
			"entries", j.Entries(), "want_entries", n)
	}
	j.OnFault(func(err error) {
		c.log.Error("the delivery journal's memory mapping faulted (a full copy-on-write filesystem?): each delivery is now a write(2)",
			"err", err)
	})
	if !j.Mapped() {
		c.log.Debug("the delivery journal is not mapped into memory: each delivery is a write(2)")
	}
	return j, nil
}

// liveDeliveries returns every counting group's counts as journal
// entries.
func (c *FileChannel) liveDeliveries() []checkpoint.JournalEntry {
	var out []checkpoint.JournalEntry
	for _, g := range c.groups {
		if !g.counting() {
			continue
		}
		for p, n := range g.deliveries {
			out = append(out, checkpoint.JournalEntry{Pointer: uint64(p), Group: g.id, Count: n})
		}
	}
	return out
}

// noteDelivery makes p's new count n in group g survive a crash of the
// process before Take returns: a journal entry, or, if the journal cannot
// take it, a deliver record in the log (a system call). The caller holds
// commitMu shared and saw the channel open.
func (c *FileChannel) noteDelivery(t *Transaction, g *groupState, p eventqueue.Pointer, n uint32) error {
	if j := c.journal; j != nil {
		err := j.Add(checkpoint.JournalEntry{Pointer: uint64(p), Group: g.id, Count: n})
		if err == nil {
			return nil
		}
		c.log.Warn("delivery journal refused an entry: writing a deliver record instead", "err", err)
	}
	t.s.words = append(t.s.words[:0], uint64(p))
	t.s.counts = append(t.s.counts[:0], n)
	recs := [1]logfile.Record{{Type: logfile.RecordDeliver, TxID: t.id, Group: g.id, Pointers: t.s.words, Counts: t.s.counts}}
	_, _, err := c.appendRecords(t, recs[:], nil, nil)
	return err
}

// logDeliveries writes a deliver record of the counts of ptrs (taken by t
// from a group that counts deliveries), which t is returning to the group,
// without an fsync: replay then finds them in the logs (the next fsync of
// the file makes them durable), not only in the journal. In a group with
// RetryDelays it returns the due time of each of ptrs, written in a retry
// record after the deliver record (the caller makes them wait until
// then; nil: back at the head).
func (t *Transaction) logDeliveries(ptrs []eventqueue.Pointer) []int64 {
	c, g := t.c, t.grp
	if g == nil || !g.counting() || len(ptrs) == 0 {
		return nil
	}
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return nil
	}
	words, counts, dues, removed := c.deliveryCounts(g, t.id, ptrs, t.s.words[:0], t.s.counts[:0])
	if removed {
		return nil // its counts went with it
	}
	t.s.words, t.s.counts = words, counts
	recs := returnRecords(t.id, g, ptrs, words, counts, dues)
	if len(recs) == 0 {
		return nil
	}
	if _, _, err := c.appendRecords(t, recs, nil, nil); err != nil {
		c.log.Warn("write the delivery counts and retry due times of a rollback (the journal has the counts; the events wait in memory)",
			"group", g.cfg.Name, "err", err)
	}
	return dues
}

// deliveryCounts appends to words and counts, under queueMu, each of ptrs
// (takes of tx) that g counted a delivery of, and its count; with RetryDelays, dues is
// the due time of each of ptrs (retryDuesLocked); removed is true when g
// is gone (and its counts with it).
func (c *FileChannel) deliveryCounts(g *groupState, tx uint64, ptrs []eventqueue.Pointer, words []uint64, counts []uint32) ([]uint64, []uint32, []int64, bool) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if g.removed {
		return words, counts, nil, true
	}
	for _, p := range ptrs {
		if n := g.deliveries[p]; n > 0 {
			words, counts = append(words, uint64(p)), append(counts, n)
		}
	}
	var dues []int64
	if g.retrying() {
		dues = c.retryDuesLocked(g, tx, ptrs)
	}
	return words, counts, dues, false
}

// deliveryCount returns, under queueMu, whether g is removed and the
// delivery count of p in g.
func (c *FileChannel) deliveryCount(g *groupState, p eventqueue.Pointer) (removed bool, count uint32) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return g.removed, g.deliveries[p]
}

// eraseDeliveries erases the journal entries of ptrs in group g, durably,
// before a redrive brings them back into g with their counts reset.
func (c *FileChannel) eraseDeliveries(g *groupState, ptrs iter.Seq[eventqueue.Pointer]) error {
	if c.journal == nil || !g.counting() {
		return nil
	}
	set := map[uint64]bool{}
	for p := range ptrs {
		set[uint64(p)] = true
	}
	if err := c.journal.Erase(g.id, set); err != nil {
		return fmt.Errorf("erase delivery counts: %w", err)
	}
	return nil
}

// deliver counts one delivery of p, which t just took from its group (one
// with MaxDeliveries), and returns the count, noted where a crash of the
// process does not lose it (noteDelivery). An event that had reached
// MaxDeliveries is moved to the dead-letter group instead (notes: its
// dead letter, for the caller to notify once t no longer holds it; Take
// goes on with the next one), unless that group is full and blocks: then
// it is delivered once more. A group RemoveGroup removed since the take
// counts nothing (ErrNoGroup).
func (c *FileChannel) deliver(t *Transaction, p eventqueue.Pointer) (n int, notes []DeadLetter, err error) {
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return 0, nil, ErrClosed
	}
	g := t.grp
	if f := c.groupFenced(g, t.id); f != fenceNone {
		return 0, nil, errFenced(g, f) // ResetGroup or the expired lease took p with t's other events
	}
	removed, count := c.deliveryCount(g, p)
	if removed {
		// RemoveGroup holds commitMu exclusively: it cannot happen
		// before this Take's own writes below are done.
		return 0, nil, errRemoved(g)
	}
	if g.cfg.MaxDeliveries > 0 && int64(count) >= int64(g.cfg.MaxDeliveries) {
		if notes = c.deadLetterTakes(t, []eventqueue.Pointer{p}, deadReasonMax); len(notes) > 0 {
			return 0, notes, nil
		}
	}
	// t holds p: no one else changes its count meanwhile.
	count++
	if err := c.noteDelivery(t, g, p, count); err != nil {
		return 0, nil, err
	}
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if g.deliveries == nil {
		g.deliveries = map[eventqueue.Pointer]uint32{}
	}
	g.deliveries[p] = count
	return int(count), nil, nil
}

// catalogDeliveries returns g's delivery counts as the checkpoint catalog
// keeps them. The caller holds queueMu.
func (g *groupState) catalogDeliveries() []checkpoint.Delivery {
	if !g.counting() || len(g.deliveries) == 0 {
		return nil
	}
	out := make([]checkpoint.Delivery, 0, len(g.deliveries))
	for p, n := range g.deliveries {
		out = append(out, checkpoint.Delivery{Pointer: uint64(p), Count: n})
	}
	slices.SortFunc(out, func(a, b checkpoint.Delivery) int { return cmp.Compare(a.Pointer, b.Pointer) })
	return out
}
