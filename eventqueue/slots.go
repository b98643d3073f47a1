package eventqueue

// Slots is the slot store under the ring: the whole checkpoint file as an
// array of uint64 slots, header included, so ring position i of a queue lives
// at PhysicalIndex(i) = HeaderSlots + (head+i) % capacity. Package checkpoint
// implements it over an mmap with copy-on-write dirty pages; MemSlots
// implements it in memory.
//
// A Queue only calls Slot and SetSlot with indexes in
// [HeaderSlots, HeaderSlots+capacity).
type Slots interface {
	Slot(i int) uint64
	SetSlot(i int, v uint64)
}

// slotLen is implemented by slot stores that know their length; New uses it
// to reject a store too small for the capacity.
type slotLen interface {
	Len() int
}

// MemSlots is an in-memory Slots: index i is slot i.
type MemSlots []uint64

// NewMemSlots returns zeroed slots for a ring of capacity pointers:
// HeaderSlots+capacity slots in all.
func NewMemSlots(capacity int) MemSlots {
	return make(MemSlots, HeaderSlots+capacity)
}

// Slot returns slot i.
func (m MemSlots) Slot(i int) uint64 { return m[i] }

// SetSlot sets slot i to v.
func (m MemSlots) SetSlot(i int, v uint64) { m[i] = v }

// Len is the number of slots, header included.
func (m MemSlots) Len() int { return len(m) }
