package replay

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/logfile"
)

// Idempotent puts in a replay: a duplicate record (logfile.RecordDuplicate)
// lists the puts of its transaction that the commit dropped; no group
// receives them (applyFilters), and they add no id. With
// Options.DedupHeader the replay returns the id of every other committed
// put of the logs after the checkpoint that has the header
// (Result.DedupIDs), for the channel to rebuild its window: those it
// scans (an encrypted one opened with the set's keys, source.putID), and
// those of a transaction that spilled them before the checkpoint and
// committed after it (in flight at the checkpoint: before the scans'
// positions), which its commit reads by pointer (spilledIDs).
// A put that cannot be read for its id (its key missing, its record
// damaged) is logged and counted (Result.DedupUnread), and adds none.

// dedupReader reads the ids of puts by pointer: Options.DedupHeader, and
// the log set to read them from.
type dedupReader struct {
	header string
	logs   *logfile.Set
	log    *slog.Logger
}

// putID is the deduplication id of a put read: its position among its
// transaction's puts read after the checkpoint, and its time (0: its
// commit's); unread: the put did not open, its id is unknown.
type putID struct {
	pos    int
	id     [2]uint64
	t      int64
	unread bool
}

// noteID notes the id of put r, the pos-th of its transaction read (or
// that it is unread).
func (a *applier) noteID(r *logfile.Record, pos int, id [2]uint64, unread bool) {
	if a.txIDs == nil {
		a.txIDs = map[uint64][]putID{}
	}
	a.txIDs[r.TxID] = append(a.txIDs[r.TxID], putID{pos: pos, id: id, t: r.Time, unread: unread})
}

// commitIDs adds to Result.DedupIDs, in put order, the ids of put commit
// r's puts that its duplicate records do not drop, with the put's commit
// time (logfile.PutStamp's rule: its own, else its commit's): those of
// spilled, its first puts, in flight at the checkpoint (spilledIDs), then
// those the scans read.
func (a *applier) commitIDs(r *logfile.Record, spilled []eventqueue.Pointer) {
	a.spilledIDs(r, spilled)
	ids := a.txIDs[r.TxID]
	if len(ids) == 0 {
		return
	}
	delete(a.txIDs, r.TxID)
	dups, nspilled := a.txDups[r.TxID], len(spilled)
	for _, p := range ids {
		if inRanges(dups, nspilled+p.pos) {
			continue
		}
		if p.unread {
			a.res.DedupUnread++
			continue
		}
		t := p.t
		if t == 0 {
			t = r.Time
		}
		a.res.DedupIDs = append(a.res.DedupIDs, checkpoint.DedupEntry{ID: p.id, Time: t})
	}
}

// spilledIDs adds to Result.DedupIDs the ids of the puts of put commit r
// that were in flight at the checkpoint (spilled, its first puts, in put
// order) and that its duplicate records do not drop. Their records are
// before the scans' positions: each is read by its pointer, a random read
// that only transactions spanning a checkpoint cost.
func (a *applier) spilledIDs(r *logfile.Record, spilled []eventqueue.Pointer) {
	d := a.dedup
	if d.header == "" {
		return
	}
	dups := a.txDups[r.TxID]
	unread, first := 0, error(nil)
	defer func() {
		if unread > 0 {
			a.res.DedupUnread += int64(unread)
			d.log.Warn("replay: committed puts in flight at the checkpoint that cannot be read: their deduplication ids are unknown",
				"tx", r.TxID, "puts", unread, "err", first)
		}
	}()
	for i, p := range spilled {
		if inRanges(dups, i) {
			continue
		}
		rec, err := readPut(d.logs, p.FileID(), int64(p.Offset()))
		if err != nil {
			if unread++; unread == 1 {
				first = err
			}
			continue
		}
		if v := rec.Headers[d.header]; v != "" {
			t := rec.Time
			if t == 0 {
				t = r.Time
			}
			a.res.DedupIDs = append(a.res.DedupIDs, checkpoint.DedupEntry{ID: checkpoint.DedupID(v), Time: t})
		}
	}
}

// readPut reads the put record at off of log file file with the set's
// reader, which opens an encrypted put with the set's keys. A put that
// stays sealed (the set has no keys, or its file's key record is damaged)
// is ErrEncrypted (wrapped).
func readPut(logs *logfile.Set, file uint32, off int64) (logfile.Record, error) {
	r, err := logs.Reader(file)
	if err != nil {
		return logfile.Record{}, err
	}
	defer r.Release()
	rec, err := r.ReadRecord(off)
	switch {
	case err != nil:
		return logfile.Record{}, err
	case rec.Type != logfile.RecordPut:
		return logfile.Record{}, corrupt.New(logfile.LogName(file), off, "a %v record, not a put", rec.Type)
	case rec.Sealed != nil:
		return logfile.Record{}, fmt.Errorf("put at offset %d of log %d (key %q): %w", off, file, r.Framing().KeyID(), ErrEncrypted)
	}
	return rec, nil
}

// inRanges reports whether index i is in ranges rs ((first, count) pairs,
// in increasing order as the decoder checks): a binary search, so that a
// commit of many puts with many ranges costs n log r, not n r.
func inRanges(rs []uint32, i int) bool {
	k := sort.Search(len(rs)/2, func(k int) bool { return int(rs[2*k])+int(rs[2*k+1]) > i })
	return k < len(rs)/2 && int(rs[2*k]) <= i
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
