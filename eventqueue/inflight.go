package eventqueue

import "slices"

// Inflight tracks the pointers of open transactions: for a put transaction
// the put records it has written, for a take transaction the events it has
// taken. Pointers are kept per transaction in insertion order, with per-file
// counts. A transaction exists while it holds at least one pointer. It is not
// safe for concurrent use (see the package comment).
type Inflight struct {
	txs   map[uint64]*inflightTx
	files map[uint32]int // pointers per log file; files at zero are absent
	n     int            // total pointers
	seq   uint64         // stamps transactions in order of their first Add

	// last caches the transaction of the previous Add, which is the next
	// one's in a run of puts or takes.
	lastTx uint64
	last   *inflightTx

	// free recycles transaction records (not their pointer slices, which
	// Remove hands to the caller).
	free []*inflightTx

	// sizeHint is the initial capacity of a new transaction's pointer
	// slice: the length of the last removed transaction, so that a stream
	// of equal batches allocates one slice per transaction.
	sizeHint int
}

type inflightTx struct {
	ptrs []Pointer
	seq  uint64
}

// maxFreeTx bounds Inflight's recycled transaction records.
const maxFreeTx = 64

// Bounds of Inflight.sizeHint.
const (
	minSizeHint = 4
	maxSizeHint = 1024
)

// InflightTx is one transaction's pointers, as saved in and loaded from a
// checkpoint.
type InflightTx struct {
	Tx       uint64
	Pointers []Pointer
}

// NewInflight returns an empty Inflight.
func NewInflight() *Inflight {
	return &Inflight{txs: make(map[uint64]*inflightTx), files: make(map[uint32]int), sizeHint: minSizeHint}
}

// Add appends p to transaction tx, creating the transaction on its first
// pointer.
func (f *Inflight) Add(tx uint64, p Pointer) {
	t := f.last
	if t == nil || f.lastTx != tx {
		t = f.txs[tx]
		if t == nil {
			if k := len(f.free); k > 0 {
				t = f.free[k-1]
				f.free = f.free[:k-1]
			} else {
				t = new(inflightTx)
			}
			t.ptrs = make([]Pointer, 0, f.sizeHint)
			f.seq++
			t.seq = f.seq
			f.txs[tx] = t
		}
		f.lastTx, f.last = tx, t
	}
	t.ptrs = append(t.ptrs, p)
	f.files[p.FileID()]++
	f.n++
}

// Get returns tx's pointers in insertion order, nil if tx holds none. The
// slice belongs to f: do not modify it, and do not keep it across a later
// RemovePointer on tx.
func (f *Inflight) Get(tx uint64) []Pointer {
	if t := f.txs[tx]; t != nil {
		return t.ptrs
	}
	return nil
}

// Remove removes transaction tx (it committed or rolled back) and returns its
// pointers in insertion order; the caller owns the slice. It returns nil if
// tx holds no pointer.
func (f *Inflight) Remove(tx uint64) []Pointer {
	t := f.txs[tx]
	if t == nil {
		return nil
	}
	ptrs := t.ptrs
	for _, p := range ptrs {
		f.decFile(p)
	}
	f.n -= len(ptrs)
	f.sizeHint = min(max(len(ptrs), minSizeHint), maxSizeHint)
	f.dropTx(tx, t)
	return ptrs
}

// RemovePointer removes the first occurrence of p from transaction tx,
// keeping the order of the others, and reports whether it was there. A
// transaction left with no pointer is removed. O(pointers of tx).
func (f *Inflight) RemovePointer(tx uint64, p Pointer) bool {
	t := f.txs[tx]
	if t == nil {
		return false
	}
	i := slices.Index(t.ptrs, p)
	if i < 0 {
		return false
	}
	t.ptrs = slices.Delete(t.ptrs, i, i+1)
	f.decFile(p)
	f.n--
	if len(t.ptrs) == 0 {
		t.ptrs = nil
		f.dropTx(tx, t)
	}
	return true
}

func (f *Inflight) dropTx(tx uint64, t *inflightTx) {
	delete(f.txs, tx)
	if f.last == t {
		f.last = nil
	}
	t.ptrs = nil
	if len(f.free) < maxFreeTx {
		f.free = append(f.free, t)
	}
}

func (f *Inflight) decFile(p Pointer) {
	id := p.FileID()
	if n := f.files[id] - 1; n > 0 {
		f.files[id] = n
	} else {
		delete(f.files, id)
	}
}

// Len is the total number of pointers over all transactions.
func (f *Inflight) Len() int { return f.n }

// TxCount is the number of transactions holding pointers.
func (f *Inflight) TxCount() int { return len(f.txs) }

// Files returns a copy of the per-file pointer counts; only files with at
// least one inflight pointer appear.
func (f *Inflight) Files() map[uint32]int {
	m := make(map[uint32]int, len(f.files))
	for id, n := range f.files {
		m[id] = n
	}
	return m
}

// Entries returns a deep copy of every transaction, oldest first (in order of
// the Add that created it), each with its pointers in insertion order.
func (f *Inflight) Entries() []InflightTx {
	type txSeq struct {
		tx  uint64
		seq uint64
	}
	order := make([]txSeq, 0, len(f.txs))
	for tx, t := range f.txs {
		order = append(order, txSeq{tx, t.seq})
	}
	slices.SortFunc(order, func(a, b txSeq) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	all := make([]Pointer, 0, f.n) // one backing array for every copy
	out := make([]InflightTx, len(order))
	for i, o := range order {
		start := len(all)
		all = append(all, f.txs[o.tx].ptrs...)
		out[i] = InflightTx{Tx: o.tx, Pointers: all[start:len(all):len(all)]}
	}
	return out
}

// Load replaces the contents of f with entries (read from a checkpoint),
// keeping their order as the order of first Add. The pointers are copied.
// Entries without pointers are skipped; a transaction listed twice gets the
// pointers of both entries, in order.
func (f *Inflight) Load(entries []InflightTx) {
	clear(f.txs)
	clear(f.files)
	f.n = 0
	f.last = nil
	for _, e := range entries {
		for _, p := range e.Pointers {
			f.Add(e.Tx, p)
		}
	}
}
