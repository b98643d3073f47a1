package channel

import (
	"github.com/flumego/filechannel/logfile"
)

// How idempotent puts meet put transactions (see dedup.go for the window):
// each Put notes its event's id (noteDedup, no lock held) in the
// transaction's scratch, in put order. The commit asks the window which
// puts are duplicates (checkDups) before it plans the fan-out: no group
// receives them (planFanout leaves them out as it leaves out what a filter
// misses), their capacity permits are given back (queuePuts), and a
// duplicate record lists them before the commit record, so that replay and
// the history drop the same events. Once the commit is durable its ids
// join the window (commitDups); if it fails, its reservations are released
// (releaseDups).

// noteDedup notes the id of the event with headers h, put i of t (the
// next), when the channel deduplicates. It allocates nothing once the
// scratch is warm.
func (t *Transaction) noteDedup(h map[string]string, i int) {
	w := t.c.dedup
	if w == nil {
		return
	}
	s := t.scratch()
	s.dslots = s.dslots[:i]
	var slot dedupSlot
	if v := h[t.c.cfg.Dedup.Header]; v != "" {
		slot = dedupSlot{id: dedupIDOf(v), has: true}
	}
	s.dslots = append(s.dslots, slot)
}

// checkDups asks the window which of t's puts are duplicates at now:
// t.s.dups (put indices, increasing) and t.s.dkeep (the ids the commit
// reserved or keeps).
func (t *Transaction) checkDups(now int64) {
	w := t.c.dedup
	if w == nil {
		return
	}
	s := t.scratch()
	if s.seen == nil {
		s.seen = map[dedupID]struct{}{}
	}
	clear(s.seen)
	s.dups, s.dkeep = w.check(t.id, now, s.dslots[:min(len(s.dslots), t.puts)], s.seen, s.dups[:0], s.dkeep[:0])
}

// dups returns the put indices of t its commit drops as duplicates
// (checkDups ran), increasing.
func (t *Transaction) dups() []uint32 {
	if t.c.dedup == nil || t.s == nil {
		return nil
	}
	return t.s.dups
}

// dupRecord appends to recs the duplicate record of t's commit, if it
// drops some puts.
func (t *Transaction) dupRecord(recs []logfile.Record) []logfile.Record {
	if d := t.dups(); len(d) > 0 {
		recs = append(recs, logfile.Record{Type: logfile.RecordDuplicate, TxID: t.id, Ranges: filterRanges(d)})
	}
	return recs
}

// commitDups adds t's kept ids to the window once its commit (at now) is
// durable, and counts its duplicates.
func (t *Transaction) commitDups(now int64) {
	if w := t.c.dedup; w != nil {
		w.commit(t.id, now, t.s.dkeep, len(t.s.dups))
		t.clearDedup()
	}
}

// releaseDups releases t's reservations after its commit failed.
func (t *Transaction) releaseDups() {
	if w := t.c.dedup; w != nil && t.s != nil {
		w.release(t.id, t.s.dkeep)
		t.clearDedup()
	}
}

// clearDedup forgets t's notes (commit, failed commit or rollback).
func (t *Transaction) clearDedup() {
	if s := t.s; s != nil {
		s.dslots, s.dups, s.dkeep = s.dslots[:0], s.dups[:0], s.dkeep[:0]
	}
}

// omitted returns the put indices of t that group g does not receive:
// those its filter keeps out (skip) and the duplicates, increasing. It
// returns skip itself when t drops no duplicate.
func (t *Transaction) omitted(skip []uint32) []uint32 {
	d := t.dups()
	if len(d) == 0 {
		return skip
	}
	if len(skip) == 0 {
		return d
	}
	out := make([]uint32, 0, len(skip)+len(d))
	i, j := 0, 0
	for i < len(skip) || j < len(d) {
		switch {
		case j == len(d) || (i < len(skip) && skip[i] < d[j]):
			out = append(out, skip[i])
			i++
		case i == len(skip) || d[j] < skip[i]:
			out = append(out, d[j])
			j++
		default:
			out = append(out, skip[i])
			i, j = i+1, j+1
		}
	}
	return out
}
