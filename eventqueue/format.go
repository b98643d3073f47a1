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
// Checkpoint slot layout seen through Slots (one uint64 per slot):
//
//	slot 0 .. HeaderSlots-1             checkpoint header (package checkpoint)
//	slot HeaderSlots .. +capacity-1     the ring; ring position i of a queue
//	                                    with head h is at HeaderSlots+(h+i)%capacity

// Part of the on-disk format; never renumber.
const (
	// HeaderSlots is the number of uint64 slots at the start of the checkpoint
	// file that hold its header; the ring follows. Flume's HEADER_SIZE.
	HeaderSlots = 1029

	// pointerFileShift is the bit position of the file id in a Pointer.
	pointerFileShift = 32
)
