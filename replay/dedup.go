package replay

import (
	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// Idempotent puts in a replay: a duplicate record (logfile.RecordDuplicate)
// lists the puts of its transaction that the commit dropped; no group
// receives them (applyFilters), and they add no id. With
// Options.DedupHeader the replay returns the id of every other committed
// put it reads that has the header (Result.DedupIDs), for the channel to
// rebuild its window.

// putID is the deduplication id of a put read: its position among its
// transaction's puts read after the checkpoint, and its time (0: its
// commit's).
type putID struct {
	pos int
	id  [2]uint64
	t   int64
}

// noteID notes the id of put r, the pos-th of its transaction read.
func (a *applier) noteID(r *logfile.Record, pos int, id [2]uint64) {
	if a.txIDs == nil {
		a.txIDs = map[uint64][]putID{}
	}
	a.txIDs[r.TxID] = append(a.txIDs[r.TxID], putID{pos: pos, id: id, t: r.Time})
}

// commitIDs adds to Result.DedupIDs the ids of put commit r's puts read
// (after the nspilled puts in flight at the checkpoint, whose ids the
// replay does not read) that its duplicate records do not drop, with the
// put's commit time (logfile.PutStamp's rule: its own, else its commit's).
func (a *applier) commitIDs(r *logfile.Record, nspilled int) {
	ids := a.txIDs[r.TxID]
	if len(ids) == 0 {
		return
	}
	delete(a.txIDs, r.TxID)
	dups := a.txDups[r.TxID]
	for _, p := range ids {
		if inRanges(dups, nspilled+p.pos) {
			continue
		}
		t := p.t
		if t == 0 {
			t = r.Time
		}
		a.res.DedupIDs = append(a.res.DedupIDs, checkpoint.DedupEntry{ID: p.id, Time: t})
	}
}

// inRanges reports whether index i is in ranges rs ((first, count) pairs).
func inRanges(rs []uint32, i int) bool {
	for k := 0; k+1 < len(rs); k += 2 {
		if first := int(rs[k]); i >= first && i < first+int(rs[k+1]) {
			return true
		}
	}
	return false
}

// countRanges returns how many of the n indices [0, n) ranges rs cover.
func countRanges(rs []uint32, n int) int {
	c := 0
	for k := 0; k+1 < len(rs); k += 2 {
		from := int(rs[k])
		c += max(min(from+int(rs[k+1]), n)-from, 0)
	}
	return c
}

// unionRanges returns the union of ranges a and b (each increasing, not
// overlapping) as increasing ranges that may touch.
func unionRanges(a, b []uint32) []uint32 {
	out := make([]uint32, 0, len(a)+len(b))
	add := func(first, n uint32) {
		if k := len(out); k > 0 && out[k-2]+out[k-1] >= first {
			out[k-1] = max(out[k-2]+out[k-1], first+n) - out[k-2]
			return
		}
		out = append(out, first, n)
	}
	i, j := 0, 0
	for i+1 < len(a) || j+1 < len(b) {
		if j+1 >= len(b) || (i+1 < len(a) && a[i] <= b[j]) {
			add(a[i], a[i+1])
			i += 2
		} else {
			add(b[j], b[j+1])
			j += 2
		}
	}
	return out
}
