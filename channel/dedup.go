package channel

import (
	"cmp"
	"github.com/flumego/filechannel/checkpoint"
	"slices"
	"sync"
	"sync/atomic"
)

// Idempotent puts (Config.Dedup): the deduplication window.
//
// Each Put of an event whose Dedup.Header value is not empty computes the
// value's id (dedupIDOf: SHA-256 truncated to 128 bits, stable across
// processes, so that it can be persisted), outside any lock. The put
// commit, under commitMu shared, asks the window (check) which of its puts
// are duplicates: an id committed within Window, or the id of an earlier
// put of the same transaction. It reserves the others (pendingMark, in the
// map); once its sync succeeded it makes them committed with its commit
// time (commit), and if its write or sync failed it releases them
// (release). A commit that meets an id another commit in flight reserved
// keeps its event: that commit may still fail, so dropping would risk a
// loss; both are kept (a possible duplicate, never a loss).
//
// The window is an index (idTable, deduptable.go: id -> commit time, or a
// reservation) and a FIFO of (id, time) in commit order: expired entries
// leave from its front, and so do the oldest when it holds more than
// MaxIDs (counted as forgotten when still inside the window). An older
// FIFO entry never removes a newer time of its id. The lookups of a
// commit's ids go in two passes, the first touching each id's slot (see
// deduptable.go): a full window is larger than the caches, and the first
// pass keeps their misses in flight together instead of one after another.
// It is rebuilt at Open from the snapshot file (dedupfile.go) and the ids
// of the puts that replay reads.

// dedupID is an event's deduplication id: its Dedup.Header value's SHA-256
// truncated to 128 bits.
type dedupID = [2]uint64

// dedupIDOf returns the id of header value v.
func dedupIDOf(v string) dedupID { return checkpoint.DedupID(v) }

// dedupEntry is an id the window remembers and its commit time (Unix
// nanoseconds): an entry of the snapshot file.
type dedupEntry = checkpoint.DedupEntry

// dedupWindow is the ids of the events committed within the window.
type dedupWindow struct {
	window int64 // nanoseconds
	maxIDs int

	// mu (dedupMu) guards the fields below. It is taken under commitMu
	// shared, never with queueMu.
	mu sync.Mutex
	// ids maps each id to its latest commit time (> 0), or to
	// pendingMark(tx) while the commit of tx, in flight, reserves it.
	ids      idTable
	reserved int    // the ids of ids that are reservations
	fifo     idFIFO // committed ids in commit order
	// gen counts the changes; persisted is gen when the snapshot file was
	// last written.
	gen, persisted uint64
	// trimNow is the latest commit time: the ids to forget are those
	// trimLocked(trimNow) removes. Commits leave them to the trimmer
	// (dedupTrimLoop, woken by trimKick); whatever reads the window
	// (check, size, the snapshot) trims first what it has not done yet.
	trimNow  int64
	trimKick chan struct{}

	// fileMu serialises the writes of the snapshot file (dedupfile.go),
	// and guards the buffers they reuse. Taken before mu.
	fileMu      sync.Mutex
	fileEntries []dedupEntry
	fileBuf     []byte

	duplicates atomic.Int64 // events dropped as duplicates
	forgotten  atomic.Int64 // ids evicted for MaxIDs while still inside the window
}

// newDedupWindow returns an empty window.
func newDedupWindow(d Dedup) *dedupWindow {
	return &dedupWindow{window: int64(d.Window), maxIDs: d.MaxIDs, ids: newIDTable(d.MaxIDs),
		trimKick: make(chan struct{}, 1)}
}

// pendingMark is the value of an id reserved by the commit of transaction
// tx in the window's map: below 0, never a commit time.
func pendingMark(tx uint64) int64 { return -int64(tx&(1<<62-1)) - 1 }

// dedupSlot is what a Put noted of its event: its id, if it has one.
type dedupSlot struct {
	id  dedupID
	has bool
}

// check decides, for the puts of transaction tx (slots, in put order)
// committed at now, which are duplicates: it appends their indices to
// dups, and to keep the ids the commit adds, reserving those no commit in
// flight holds. A reservation is the id's entry in the index (one lookup
// per put, after a pass touching them all; its commit then updates an
// entry it just touched). seen is the caller's scratch set, empty: only
// the ids another commit reserved go in it, to tell a second put of one
// in this transaction.
func (w *dedupWindow) check(tx uint64, now int64, slots []dedupSlot, seen map[dedupID]struct{},
	dups []uint32, keep []dedupID) ([]uint32, []dedupID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trimLocked(w.trimNow) // what the trimmer has not done yet
	w.ids.touchSlots(slots)
	cut, mine := now-w.window, pendingMark(tx)
	for i, s := range slots {
		if !s.has {
			continue
		}
		j, ok := w.ids.lookup(s.id)
		var t int64
		if ok {
			t = w.ids.slots[j].t
		}
		switch {
		case ok && t == mine: // an earlier put of this transaction
			dups = append(dups, uint32(i))
		case ok && t < 0: // another commit in flight holds it: kept
			if _, twice := seen[s.id]; twice {
				dups = append(dups, uint32(i))
				continue
			}
			seen[s.id] = struct{}{}
			keep = append(keep, s.id)
		case ok && t >= cut:
			dups = append(dups, uint32(i))
		default:
			w.ids.setAt(j, ok, s.id, mine)
			w.reserved++
			keep = append(keep, s.id)
		}
	}
	return dups, keep
}

// commit makes the ids of keep committed at now (tx's commit is durable),
// ending tx's reservations, and counts dropped duplicates.
func (w *dedupWindow) commit(tx uint64, now int64, keep []dedupID, dropped int) {
	w.duplicates.Add(int64(dropped))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range keep {
		w.ids.touch(id) // evicted during the commit's fsync, perhaps
	}
	for _, id := range keep {
		j, ok := w.ids.lookup(id)
		var t int64
		if ok {
			t = w.ids.slots[j].t
		}
		if ok && t < 0 {
			// tx's reservation, or another's: this commit made it an
			// id.
			w.reserved--
		}
		if !ok || t < now {
			w.ids.setAt(j, ok, id, now)
			w.fifo.push(dedupEntry{ID: id, Time: now})
		}
	}
	w.gen++
	w.trimNow = max(w.trimNow, now)
	select {
	case w.trimKick <- struct{}{}:
	default: // the trimmer is awake already
	}
}

// release drops tx's reservations of keep (its commit failed).
func (w *dedupWindow) release(tx uint64, keep []dedupID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	mine := pendingMark(tx)
	for _, id := range keep {
		if j, ok := w.ids.lookup(id); ok && w.ids.slots[j].t == mine {
			w.ids.deleteAt(j)
			w.reserved--
		}
	}
}

// addLocked remembers id committed at t. An id already remembered at t or
// later (a rebuild meeting the snapshot's copy) is not added again.
func (w *dedupWindow) addLocked(id dedupID, t int64) {
	j, ok := w.ids.lookup(id)
	if ok && w.ids.slots[j].t >= t {
		return
	}
	w.ids.setAt(j, ok, id, t)
	w.fifo.push(dedupEntry{ID: id, Time: t})
}

// trimBatch is the number of FIFO entries a trim touches, then removes,
// at a time.
const trimBatch = 64

// trimLocked forgets the entries older than the window at now, then the
// oldest while more than maxIDs are remembered.
func (w *dedupWindow) trimLocked(now int64) {
	for w.trimBatchLocked(now) > 0 {
	}
}

// trim is the trimmer's trimLocked(trimNow): in batches, mu taken for
// each, so that a commit waits for one batch at most.
func (w *dedupWindow) trim() {
	for {
		w.mu.Lock()
		n := w.trimBatchLocked(w.trimNow)
		w.mu.Unlock()
		if n == 0 {
			return
		}
	}
}

// trimBatchLocked forgets at most trimBatch entries as trimLocked does:
// it touches their slots, then removes them. It returns how many entries
// left the FIFO.
func (w *dedupWindow) trimBatchLocked(now int64) int {
	cut := now - w.window
	k := 0
	for k < min(w.fifo.n, trimBatch) {
		e := w.fifo.at(k)
		if e.Time >= cut && w.fifo.n-k <= w.maxIDs {
			break
		}
		w.ids.touch(e.ID)
		k++
	}
	var forgotten int64
	for range k {
		e := w.fifo.at(0)
		w.fifo.pop()
		if j, ok := w.ids.lookup(e.ID); ok && w.ids.slots[j].t == e.Time {
			w.ids.deleteAt(j)
			if e.Time >= cut {
				forgotten++
			}
		}
	}
	if forgotten > 0 {
		w.forgotten.Add(forgotten)
	}
	return k
}

// dedupTrimLoop is the trimmer: it forgets the ids the commits left past
// the window or past MaxIDs, off their path (while the next commit writes,
// syncs or puts), until Close.
func (c *FileChannel) dedupTrimLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.closing:
			return
		case <-c.dedup.trimKick:
			c.dedup.trim()
		}
	}
}

// size returns the number of ids remembered, once the trim due is done.
func (w *dedupWindow) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trimLocked(w.trimNow)
	return w.ids.n - w.reserved
}

// entriesLocked appends the remembered entries to dst in commit order: the
// FIFO as it is, copied without a lookup (a checkpoint holds mu for a
// copy of 24 bytes per id, not for a million lookups). An entry a later
// one of its id superseded may be among them: load keeps the latest.
func (w *dedupWindow) entriesLocked(dst []dedupEntry) []dedupEntry {
	w.trimLocked(w.trimNow)
	return w.fifo.appendTo(dst)
}

// load replaces the window's contents with entries (any order), keeping
// those inside the window at now, the newest maxIDs of them.
func (w *dedupWindow) load(entries []dedupEntry, now int64) {
	slices.SortStableFunc(entries, func(a, b dedupEntry) int { return cmp.Compare(a.Time, b.Time) })
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids.reset()
	w.reserved = 0
	w.fifo.reset(len(entries))
	for _, e := range entries {
		w.addLocked(e.ID, e.Time)
	}
	w.trimNow = now
	w.trimLocked(now)
	w.gen++
}
