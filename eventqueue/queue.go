package eventqueue

import (
	"errors"
	"fmt"
	"strconv"
)

// Queue is the FlumeEventQueue: a ring of Pointers over a Slots store, with
// per-log-file reference counts of the queued pointers. It is not safe for
// concurrent use (see the package comment).
type Queue struct {
	slots    Slots
	capacity int
	head     int // ring position of logical index 0, in [0, capacity)
	size     int // queued pointers, in [0, capacity]

	// refs counts queued pointers per log file; files with no queued
	// pointer are absent.
	refs map[uint32]int

	// idx finds a pointer's physical slot for Remove. nil until the first
	// Remove and after DropIndex; while non-nil every operation maintains it.
	idx *posIndex

	// tags is the word beside each slot (tags.go): nil until the first
	// add of a non-zero tag, then one per slot, kept by every operation.
	tags []uint64
}

// New builds a queue over slots holding size pointers starting at ring
// position head (slot head). refs are the per-file counts
// of the queued pointers; they are copied, and nil means "count them by
// walking the ring" (O(size)), in which case a zero slot inside the ring is
// reported as an error wrapping ErrZeroPointer. New returns an error if slots
// is nil or too small, capacity < 1, head is not in [0, capacity), size is not
// in [0, capacity], or refs holds a negative count. New writes no slot.
func New(slots Slots, capacity, head, size int, refs map[uint32]int) (*Queue, error) {
	switch {
	case slots == nil:
		return nil, errors.New("eventqueue: new: nil slots")
	case capacity < 1:
		return nil, fmt.Errorf("eventqueue: new: capacity %d < 1", capacity)
	case head < 0 || head >= capacity:
		return nil, fmt.Errorf("eventqueue: new: head %d outside [0, %d)", head, capacity)
	case size < 0 || size > capacity:
		return nil, fmt.Errorf("eventqueue: new: size %d outside [0, %d]", size, capacity)
	}
	if l, ok := slots.(slotLen); ok && l.Len() < capacity {
		return nil, fmt.Errorf("eventqueue: new: %d slots cannot hold capacity %d", l.Len(), capacity)
	}
	q := &Queue{slots: slots, capacity: capacity, head: head, size: size}
	if refs != nil {
		q.refs = make(map[uint32]int, len(refs))
		for f, n := range refs {
			if n < 0 {
				return nil, fmt.Errorf("eventqueue: new: negative reference count %d for file %d", n, f)
			}
			if n > 0 {
				q.refs[f] = n
			}
		}
		return q, nil
	}
	q.refs = make(map[uint32]int)
	for i := 0; i < size; i++ {
		phys := q.phys(i)
		p := Pointer(slots.Slot(phys))
		if p == 0 {
			return nil, fmt.Errorf("eventqueue: new: ring position %d (slot %d): %w", i, phys, ErrZeroPointer)
		}
		q.refs[p.FileID()]++
	}
	return q, nil
}

// Capacity is the number of ring slots.
func (q *Queue) Capacity() int { return q.capacity }

// Size is the number of queued pointers.
func (q *Queue) Size() int { return q.size }

// Head is the ring position of the first queued pointer, in [0, Capacity()).
func (q *Queue) Head() int { return q.head }

// PhysicalIndex returns the slot of logical index i: (head+i) % capacity
// (Flume's getPhysicalIndex, without its header offset, which the Slots
// store adds). i must be >= 0.
func (q *Queue) PhysicalIndex(i int) int {
	return (q.head + i) % q.capacity
}

// phys is PhysicalIndex for 0 <= i <= capacity, without a division.
func (q *Queue) phys(i int) int {
	j := q.head + i
	if j >= q.capacity {
		j -= q.capacity
	}
	return j
}

// logical is the inverse of phys for a slot inside the ring.
func (q *Queue) logical(phys int) int {
	j := phys - q.head
	if j < 0 {
		j += q.capacity
	}
	return j
}

// Get returns the pointer at logical index i, 0 <= i < Size(); it panics
// otherwise, like a slice index.
func (q *Queue) Get(i int) Pointer {
	if uint(i) >= uint(q.size) {
		panic("eventqueue: Get(" + strconv.Itoa(i) + ") outside queue of size " + strconv.Itoa(q.size))
	}
	return Pointer(q.slots.Slot(q.phys(i)))
}

// AddTail appends p (a put committed). It returns ErrFull if the ring is
// full and ErrZeroPointer for the zero pointer. O(1), plus O(log n) while the
// Remove index exists. p's tag is 0 (AddTailTagged).
func (q *Queue) AddTail(p Pointer) error { return q.AddTailTagged(p, 0) }

// AddTailTagged is AddTail with p's tag (tags.go).
func (q *Queue) AddTailTagged(p Pointer, tag uint64) error {
	if q.size == q.capacity {
		return ErrFull
	}
	if p == 0 {
		return ErrZeroPointer
	}
	phys := q.phys(q.size)
	q.slots.SetSlot(phys, uint64(p))
	q.setTag(phys, tag)
	q.size++
	q.refs[p.FileID()]++
	if q.idx != nil {
		q.idx.insert(p, phys)
	}
	return nil
}

// AddHead puts p back in front of the head (a take rolled back): the head
// moves back one slot, wrapping. Rolling back takes t1..tn calls AddHead(tn)
// first and AddHead(t1) last. It returns ErrFull if the ring is full and
// ErrZeroPointer for the zero pointer. O(1), plus O(log n) while the Remove
// index exists. p's tag is 0 (AddHeadTagged).
func (q *Queue) AddHead(p Pointer) error { return q.AddHeadTagged(p, 0) }

// AddHeadTagged is AddHead with p's tag (tags.go).
func (q *Queue) AddHeadTagged(p Pointer, tag uint64) error {
	if q.size == q.capacity {
		return ErrFull
	}
	if p == 0 {
		return ErrZeroPointer
	}
	if q.head == 0 {
		q.head = q.capacity - 1
	} else {
		q.head--
	}
	phys := q.head
	q.slots.SetSlot(phys, uint64(p))
	q.setTag(phys, tag)
	q.size++
	q.refs[p.FileID()]++
	if q.idx != nil {
		q.idx.insert(p, phys)
	}
	return nil
}

// RemoveHead removes and returns the first pointer (a take); ok is false if
// the queue is empty. Only head and size move: the vacated slot is not
// written. O(1), plus O(log n) while the Remove index exists.
func (q *Queue) RemoveHead() (p Pointer, ok bool) {
	p, _, ok = q.RemoveHeadTagged()
	return p, ok
}

// RemoveHeadTagged is RemoveHead that also returns p's tag (tags.go).
func (q *Queue) RemoveHeadTagged() (p Pointer, tag uint64, ok bool) {
	if q.size == 0 {
		return 0, 0, false
	}
	phys := q.head
	p, tag = Pointer(q.slots.Slot(phys)), q.tag(phys)
	q.head++
	if q.head == q.capacity {
		q.head = 0
	}
	q.size--
	q.decRef(p)
	if q.idx != nil {
		q.idx.delete(p, phys)
	}
	return p, tag, true
}

// Remove removes p from wherever it is in the queue (replay applying a
// committed take) and reports whether it was queued. If p is queued more than
// once, the occurrence nearest the head goes. The gap is closed by shifting
// the smaller side one slot: for logical index i < size/2 the front segment
// [0, i) moves one slot towards the tail and the head advances, otherwise the
// back segment (i, size) moves one slot towards the head. Slots left outside
// the ring are not written.
//
// p is found through an ordered index built on the first Remove (one pass over
// the ring) and maintained by every operation until DropIndex, so a Remove
// costs O(log n + min(i, size-1-i)) and a Remove of an absent pointer reads
// no slot.
func (q *Queue) Remove(p Pointer) bool {
	if q.idx == nil {
		q.buildIndex()
	}
	phys, ok := q.idx.lookup(p)
	if !ok {
		return false
	}
	q.idx.delete(p, phys)
	i := q.logical(phys)
	if i < q.size/2 {
		// Front segment [0, i) one slot towards the tail, last first.
		to := phys
		for j := i - 1; j >= 0; j-- {
			from := q.phys(j)
			v := q.slots.Slot(from)
			q.slots.SetSlot(to, v)
			q.moveTag(from, to)
			q.idx.move(Pointer(v), from, to)
			to = from
		}
		q.head++
		if q.head == q.capacity {
			q.head = 0
		}
	} else {
		// Back segment (i, size) one slot towards the head, first first.
		to := phys
		for j := i + 1; j < q.size; j++ {
			from := q.phys(j)
			v := q.slots.Slot(from)
			q.slots.SetSlot(to, v)
			q.moveTag(from, to)
			q.idx.move(Pointer(v), from, to)
			to = from
		}
	}
	q.size--
	q.decRef(p)
	return true
}

// DropIndex frees the Remove index (replay is done). A later Remove builds it
// again.
func (q *Queue) DropIndex() { q.idx = nil }

// decRef decrements p's file count, deleting the file at zero.
func (q *Queue) decRef(p Pointer) {
	f := p.FileID()
	if n := q.refs[f] - 1; n > 0 {
		q.refs[f] = n
	} else {
		delete(q.refs, f)
	}
}

// FileRefs returns a copy of the per-file counts of queued pointers; only
// files with at least one queued pointer appear.
func (q *Queue) FileRefs() map[uint32]int {
	m := make(map[uint32]int, len(q.refs))
	for f, n := range q.refs {
		m[f] = n
	}
	return m
}

// FileRef returns the number of queued pointers into log file fileID.
func (q *Queue) FileRef(fileID uint32) int { return q.refs[fileID] }

// Pointers returns a copy of the queued pointers in queue order.
func (q *Queue) Pointers() []Pointer {
	ps := make([]Pointer, q.size)
	for i := range ps {
		ps[i] = Pointer(q.slots.Slot(q.phys(i)))
	}
	return ps
}
