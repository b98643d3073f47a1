package eventqueue

// Slots is the slot store under the ring: capacity uint64 slots, one per
// ring position, so ring position i of a queue lives at slot
// PhysicalIndex(i) = (head+i) % capacity. Package checkpoint implements it
// over its file with copy-on-write dirty pages (the file's header comes
// before the ring; the store adds its offset); MemSlots implements it in
// memory.
//
// A Queue only calls Slot and SetSlot with indexes in [0, capacity).
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

// NewMemSlots returns zeroed slots for a ring of capacity pointers.
func NewMemSlots(capacity int) MemSlots {
	return make(MemSlots, capacity)
}

// Slot returns slot i.
func (m MemSlots) Slot(i int) uint64 { return m[i] }

// SetSlot sets slot i to v.
func (m MemSlots) SetSlot(i int, v uint64) { m[i] = v }

// Len is the number of slots.
func (m MemSlots) Len() int { return len(m) }
