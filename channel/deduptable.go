package channel

import (
	"math/bits"
	"math/rand/v2"
)

// The deduplication window's two structures (dedup.go): idTable, the
// index of the ids it remembers or reserves, and idFIFO, the committed ids
// in commit order.
//
// idTable is an open-addressing hash table of 24-byte slots (the id, its
// time) with linear probing, no Go map. An id is a SHA-256 prefix, already
// uniform: its home slot is a mix of its two words with the table's seed,
// with no hashing of the bytes. The seed is random per table (per process):
// SHA-256 is public, so without it whoever chooses the header values could
// search offline for values whose ids share a home slot and build probe
// runs that every lookup then walks (a Go map seeds its hash for the same
// reason). A lookup touches one cache line, two when its probe crosses
// a line: a Go map of the same entries touched its control word, its
// slot, and its directory (83 bytes per id with the FIFO, against about 60
// here). Deletion shifts the following entries back (no tombstones), so
// the probes of a churning window stay as short as those of a fresh one
// and the table never needs a rebuild. A time of 0 marks an empty slot: a
// commit time is at least 1 and a reservation below 0.
//
// The lookups of a commit's ids miss the caches (a full window is tens of
// megabytes): touch reads an id's home slot first, so that a loop touching
// all of a commit's ids keeps many misses in flight at once, and the
// lookups that follow find their lines in the cache.

// idSlot is a slot of an idTable: an id and its time, 0 when empty.
type idSlot struct {
	id dedupID
	t  int64
}

// idTable maps ids to times (never 0).
type idTable struct {
	slots []idSlot
	n     int // the slots in use
	// hint is the number of ids the table is expected to hold at most
	// (MaxIDs): a growth that would pass capFor(hint) stops there, so
	// that a full window is not twice as large as it needs.
	hint int
	// sink receives what touch reads, so that the reads are not
	// dropped as unused.
	sink int64
	// seed keys the home slots (see above); set by newIDTable.
	seed uint64
}

// newIDTable returns an empty table for about hint ids, with a random seed.
func newIDTable(hint int) idTable { return idTable{hint: hint, seed: rand.Uint64()} }

// capFor returns the slots a table of n ids is sized at: a load of 2/3,
// where a lookup that misses probes about 5 slots (two cache lines).
func capFor(n int) int { return n + n/2 }

// home returns the slot where a probe for id starts.
func (tb *idTable) home(id dedupID) int { return homeIn(id, len(tb.slots), tb.seed) }

// homeIn returns id's home slot in a table of n slots keyed by seed: two
// multiply-xorshift rounds, so that every bit of the id and the seed
// reaches the top bits that pick the slot.
func homeIn(id dedupID, n int, seed uint64) int {
	h := (id[0] ^ seed) * 0x9E3779B97F4A7C15
	h = (h ^ bits.RotateLeft64(id[1], 32) ^ h>>29) * 0xBF58476D1CE4E5B9
	h ^= h >> 32
	i, _ := bits.Mul64(h, uint64(n))
	return int(i)
}

// touch reads id's home slot, to have it in the cache for a lookup soon.
func (tb *idTable) touch(id dedupID) {
	if len(tb.slots) > 0 {
		tb.sink += tb.slots[tb.home(id)].t
	}
}

// touchSlots touches the ids of slots, those it has: touch in a loop that
// keeps what it reads in a register, so that no iteration waits for the
// one before it.
func (tb *idTable) touchSlots(slots []dedupSlot) {
	tab := tb.slots
	if len(tab) == 0 {
		return
	}
	var sum int64
	for _, s := range slots {
		if s.has {
			sum += tab[homeIn(s.id, len(tab), tb.seed)].t
		}
	}
	tb.sink += sum
}

// lookup returns the index of id's slot and true, or the index of the
// empty slot where it would go and false.
func (tb *idTable) lookup(id dedupID) (int, bool) {
	if len(tb.slots) == 0 {
		return -1, false
	}
	i := tb.home(id)
	for {
		s := &tb.slots[i]
		if s.t == 0 {
			return i, false
		}
		if s.id == id {
			return i, true
		}
		if i++; i == len(tb.slots) {
			i = 0
		}
	}
}

// get returns id's time.
func (tb *idTable) get(id dedupID) (int64, bool) {
	i, ok := tb.lookup(id)
	if !ok {
		return 0, false
	}
	return tb.slots[i].t, true
}

// setAt sets id's time to t (not 0); i and ok are lookup(id)'s answer,
// with no change to the table since.
func (tb *idTable) setAt(i int, ok bool, id dedupID, t int64) {
	if ok {
		tb.slots[i].t = t
		return
	}
	if (tb.n+1)*4 > len(tb.slots)*3 {
		tb.grow()
		i, _ = tb.lookup(id)
	}
	tb.slots[i] = idSlot{id: id, t: t}
	tb.n++
}

// set sets id's time to t (not 0), adding id if it is not there.
func (tb *idTable) set(id dedupID, t int64) {
	i, ok := tb.lookup(id)
	tb.setAt(i, ok, id, t)
}

// deleteAt empties slot i (in use), moving back the entries after it that
// their probes would no longer reach.
func (tb *idTable) deleteAt(i int) {
	c := len(tb.slots)
	for j := i; ; {
		if j++; j == c {
			j = 0
		}
		s := tb.slots[j]
		if s.t == 0 {
			break
		}
		// s stays at j if its home is cyclically in (i, j]: its probe
		// does not pass the hole.
		h := tb.home(s.id)
		if i <= j && i < h && h <= j || i > j && (i < h || h <= j) {
			continue
		}
		tb.slots[i] = s
		i = j
	}
	tb.slots[i] = idSlot{}
	tb.n--
}

// grow moves the entries to a table twice as large (at least 64 slots),
// or capFor(hint) large when that is between.
func (tb *idTable) grow() {
	size := max(64, 2*len(tb.slots))
	if full := capFor(tb.hint); len(tb.slots) < full && full < size {
		size = full
	}
	old := tb.slots
	tb.slots = make([]idSlot, size)
	for _, s := range old {
		if s.t != 0 {
			i, _ := tb.lookup(s.id)
			tb.slots[i] = s
		}
	}
}

// reset empties the table, keeping its slots.
func (tb *idTable) reset() {
	clear(tb.slots)
	tb.n = 0
}

// idFIFO is a ring of entries in commit order.
type idFIFO struct {
	buf     []dedupEntry
	head, n int
}

// at returns the k-th entry from the oldest.
func (f *idFIFO) at(k int) dedupEntry {
	i := f.head + k
	if i >= len(f.buf) {
		i -= len(f.buf)
	}
	return f.buf[i]
}

// push appends e as the newest entry. A full ring grows by the policy of
// append; one in steady state (as many entries leave as arrive) is
// reused.
func (f *idFIFO) push(e dedupEntry) {
	if f.n == len(f.buf) {
		buf := f.appendTo(make([]dedupEntry, 0, f.n))
		buf = append(buf, e)
		f.buf, f.head, f.n = buf[:cap(buf)], 0, len(buf)
		return
	}
	i := f.head + f.n
	if i >= len(f.buf) {
		i -= len(f.buf)
	}
	f.buf[i] = e
	f.n++
}

// pop removes the oldest entry.
func (f *idFIFO) pop() {
	f.buf[f.head] = dedupEntry{}
	if f.head++; f.head == len(f.buf) {
		f.head = 0
	}
	if f.n--; f.n == 0 {
		f.head = 0
	}
}

// appendTo appends the entries to dst, oldest first.
func (f *idFIFO) appendTo(dst []dedupEntry) []dedupEntry {
	end := f.head + f.n
	if end <= len(f.buf) {
		return append(dst, f.buf[f.head:end]...)
	}
	dst = append(dst, f.buf[f.head:]...)
	return append(dst, f.buf[:end-len(f.buf)]...)
}

// reset empties the ring and sizes it for n entries.
func (f *idFIFO) reset(n int) {
	f.buf, f.head, f.n = make([]dedupEntry, n), 0, 0
}
