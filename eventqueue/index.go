package eventqueue

import "github.com/google/btree"

// indexDegree is the B-tree degree of the Remove index: nodes of up to 63
// 16-byte entries, about 1 KiB.
const indexDegree = 32

// indexEntry says pointer p is queued at physical slot phys. Keys are the
// pair, so a pointer queued twice (which a correct channel never does) has
// two entries and neither hides the other.
type indexEntry struct {
	p    Pointer
	phys int
}

func indexLess(a, b indexEntry) bool {
	if a.p != b.p {
		return a.p < b.p
	}
	return a.phys < b.phys
}

// posIndex maps queued pointers to their physical slots for Queue.Remove.
type posIndex struct {
	q    *Queue
	tree *btree.BTreeG[indexEntry]

	// Lookup state for visit; visitFn is the method value q.visit made once
	// so that a lookup does not allocate a closure.
	visitFn   btree.ItemIteratorG[indexEntry]
	want      Pointer
	found     bool
	bestPhys  int
	bestLogic int
}

// buildIndex indexes every queued pointer: one pass over the ring.
func (q *Queue) buildIndex() {
	x := &posIndex{q: q, tree: btree.NewG(indexDegree, indexLess)}
	x.visitFn = x.visit
	for i := 0; i < q.size; i++ {
		phys := q.phys(i)
		x.tree.ReplaceOrInsert(indexEntry{p: Pointer(q.slots.Slot(phys)), phys: phys})
	}
	q.idx = x
}

func (x *posIndex) insert(p Pointer, phys int) {
	x.tree.ReplaceOrInsert(indexEntry{p: p, phys: phys})
}

func (x *posIndex) delete(p Pointer, phys int) {
	x.tree.Delete(indexEntry{p: p, phys: phys})
}

// move records that p went from slot from to slot to.
func (x *posIndex) move(p Pointer, from, to int) {
	x.tree.Delete(indexEntry{p: p, phys: from})
	x.tree.ReplaceOrInsert(indexEntry{p: p, phys: to})
}

// lookup returns the slot of the occurrence of p nearest the head.
func (x *posIndex) lookup(p Pointer) (phys int, ok bool) {
	x.want, x.found = p, false
	x.tree.AscendGreaterOrEqual(indexEntry{p: p}, x.visitFn)
	return x.bestPhys, x.found
}

func (x *posIndex) visit(e indexEntry) bool {
	if e.p != x.want {
		return false
	}
	l := x.q.logical(e.phys)
	if !x.found || l < x.bestLogic {
		x.found, x.bestPhys, x.bestLogic = true, e.phys, l
	}
	return true
}

func (x *posIndex) has(p Pointer, phys int) bool {
	return x.tree.Has(indexEntry{p: p, phys: phys})
}

func (x *posIndex) len() int { return x.tree.Len() }
