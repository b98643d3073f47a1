package eventqueue

// Pointer layout (part of the on-disk format: pointers are stored in
// checkpoint ring slots, inflight files and take records):
//
//	 63                   32 31                    0
//	+-----------------------+-----------------------+
//	|   log file id (u32)   |  record offset (u32)  |
//	+-----------------------+-----------------------+
//
// The offset is the byte offset of the record's frame in log file "file id".
// File ids start at 1, so the zero pointer never names a record; a zero slot
// inside the ring means corruption.
//
// Ring layout seen through Slots (one uint64 per slot): a queue of capacity
// slots uses slots 0 .. capacity-1, and ring position i of a queue with head
// h is at slot (h+i)%capacity. Where those slots live on disk is the store's
// business (package checkpoint places them after its file header).

// Part of the on-disk format; never renumber.
const (
	// pointerFileShift is the bit position of the file id in a Pointer.
	pointerFileShift = 32
)
