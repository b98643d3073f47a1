package channel

import (
	"slices"

	"github.com/flumego/filechannel/logfile"
)

// How filters meet put transactions: each Put evaluates the filter of
// every filtered group (outside any channel lock, on the headers the log
// records) and notes, per group, the indices of the transaction's puts
// (in put order) that do not match (filterMarks). A Block group takes no
// permit for an event it does not match, so a full Block group that an
// event does not match never makes its Put wait. The commit queues for
// each group only the events it matches, and writes a filter skip record
// per group that misses some, so that replay rebuilds the same queue
// without evaluating anything. A filtered group created after some of the
// transaction's Puts misses those events (their headers are no longer
// at hand): as if its filter were false for them.

// filterMark is the put indices of a transaction that group g's filter
// does not match: skip, increasing; marked is how many puts were
// evaluated for g.
type filterMark struct {
	g      *groupState
	skip   []uint32
	marked int
}

// markFilters evaluates, for put i of t (with headers h), the filter of
// every filtered group of gs.
func (t *Transaction) markFilters(gs []*groupState, h map[string]string, i int) {
	for _, g := range gs {
		if g.dlqOnly || g.cfg.Filter == "" {
			continue
		}
		m := t.filterMarkOf(g)
		for j := m.marked; j < i; j++ { // a group that appeared since: it misses them
			m.skip = append(m.skip, uint32(j))
		}
		if !g.matches(h) {
			m.skip = append(m.skip, uint32(i))
		}
		m.marked = i + 1
	}
}

// filterMarkOf returns t's marks of g, adding them if missing.
func (t *Transaction) filterMarkOf(g *groupState) *filterMark {
	for i := range t.fmarks {
		if t.fmarks[i].g == g {
			return &t.fmarks[i]
		}
	}
	t.fmarks = append(t.fmarks, filterMark{g: g})
	return &t.fmarks[len(t.fmarks)-1]
}

// unmarkFilters forgets put i (the last) of t, which failed.
func (t *Transaction) unmarkFilters(i int) {
	for k := range t.fmarks {
		m := &t.fmarks[k]
		m.skip = slices.DeleteFunc(m.skip, func(x uint32) bool { return int(x) >= i })
		m.marked = min(m.marked, i)
	}
}

// filteredOut reports whether group g's filter keeps put i of t out.
func (t *Transaction) filteredOut(g *groupState, i int) bool {
	if g.cfg.Filter == "" {
		return false
	}
	for k := range t.fmarks {
		if t.fmarks[k].g == g {
			s := t.fmarks[k].skip
			return len(s) > 0 && int(s[len(s)-1]) == i
		}
	}
	return false
}

// skipsOf returns the put indices of t that g's filter keeps out, all of
// them evaluated: those after its last mark included (a filtered group
// created since). nil for a group without filter.
func (t *Transaction) skipsOf(g *groupState) []uint32 {
	if g.cfg.Filter == "" {
		return nil
	}
	m := t.filterMarkOf(g)
	for j := m.marked; j < t.puts; j++ {
		m.skip = append(m.skip, uint32(j))
	}
	m.marked = t.puts
	return m.skip
}

// clearFilterMarks forgets t's marks (commit or rollback).
func (t *Transaction) clearFilterMarks() {
	clear(t.fmarks)
	t.fmarks = t.fmarks[:0]
}

// filterRanges returns skip (increasing indices) as a filter skip
// record's ranges: (first, count) pairs, adjacent indices merged.
func filterRanges(skip []uint32) []uint32 {
	var rs []uint32
	for _, x := range skip {
		if n := len(rs); n > 0 && rs[n-2]+rs[n-1] == x {
			rs[n-1]++
			continue
		}
		rs = append(rs, x, 1)
	}
	return rs
}

// keepMatched returns ptrs (the transaction's events, or their key tags,
// in put order) without the indices of skip (increasing).
func keepMatched[T any](ptrs []T, skip []uint32) []T {
	if len(skip) == 0 || ptrs == nil {
		return ptrs
	}
	out := make([]T, 0, len(ptrs)-len(skip))
	k := 0
	for i, p := range ptrs {
		if k < len(skip) && int(skip[k]) == i {
			k++
			continue
		}
		out = append(out, p)
	}
	return out
}

// filterRecords returns the filter skip records of put commit tx: one per
// group of d.to that misses some of its events (the groups d.skip lists
// miss them all: the skip record says so).
func (d *fanout) filterRecords(tx uint64) []logfile.Record {
	var recs []logfile.Record
	for i, g := range d.to {
		if len(d.filtered[i]) > 0 {
			recs = append(recs, logfile.Record{Type: logfile.RecordFilterSkip, TxID: tx, Group: g.id, Ranges: filterRanges(d.filtered[i])})
		}
	}
	return recs
}

// pinSpilledPuts keeps the files of t's spilled puts while commit, the
// file of its commit, stays, when the commit wrote filter skip records or
// a duplicate record (logfile.Set.Complete, the other way round from the
// commit's own): they
// name the events by their index in the whole transaction, which a full
// replay can only apply with every put of it; a spilled puts' file deleted
// once every group took its events would shift the indices onto the
// wrong events. (Called before the puts are queued: until then they hold
// their files.)
func (c *FileChannel) pinSpilledPuts(t *Transaction, d *fanout, commit uint32) {
	if !t.spilled || (len(t.dups()) == 0 && !slices.ContainsFunc(d.filtered, func(s []uint32) bool { return len(s) > 0 })) {
		return
	}
	for _, f := range t.spillFiles() {
		c.logs.Complete(f, commit)
	}
}
