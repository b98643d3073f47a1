package eventqueue

import "strconv"

// Tags. A queue can keep a word beside each slot, its tag, that moves
// with the slot's pointer (AddTailTagged, AddHeadTagged,
// RemoveHeadTagged; Remove shifts it with its pointer). Package channel
// keeps there the key hash of each queued event of a group with
// OrderKey, so that a take knows its event's key without reading it.
//
// Tag 0 means "none": AddTail and AddHead add tag 0, a queue built by New
// has tag 0 in every slot, and a queue that never had a non-zero tag
// keeps no tags at all (nothing allocated, nothing written). The first
// non-zero tag allocates them: 8 bytes per slot of the ring (capacity),
// in memory only (the checkpoint does not store them).

// setTag sets the tag of slot phys.
func (q *Queue) setTag(phys int, tag uint64) {
	if q.tags == nil {
		if tag == 0 {
			return
		}
		q.tags = make([]uint64, q.capacity)
	}
	q.tags[phys] = tag
}

// tag returns the tag of slot phys.
func (q *Queue) tag(phys int) uint64 {
	if q.tags == nil {
		return 0
	}
	return q.tags[phys]
}

// moveTag copies the tag of slot from to slot to (Remove's shift).
func (q *Queue) moveTag(from, to int) {
	if q.tags != nil {
		q.tags[to] = q.tags[from]
	}
}

// Tag returns the tag of the pointer at logical index i, 0 <= i < Size();
// it panics otherwise, like Get. It reads no slot of the Slots store.
func (q *Queue) Tag(i int) uint64 {
	if uint(i) >= uint(q.size) {
		panic("eventqueue: Tag(" + strconv.Itoa(i) + ") outside queue of size " + strconv.Itoa(q.size))
	}
	return q.tag(q.phys(i))
}

// TagBytes is the memory the queue's tags take: 0 until the first
// non-zero tag, then 8 bytes per slot.
func (q *Queue) TagBytes() int { return 8 * len(q.tags) }
