// Package eventqueue is the FlumeEventQueue: the ordered set of events that
// are in the channel, kept as a ring of 64-bit event pointers, plus the
// pointers held by transactions that have not committed yet.
//
// # The ring
//
// A Queue is a circular array of capacity slots laid over a Slots store of
// capacity uint64 slots, one per ring position: ring position i of the queue
// lives at slot
//
//	PhysicalIndex(i) = (head+i) % capacity
//
// The package knows nothing of the file the slots are kept in: package
// checkpoint stores them after its own header and adds its offset.
//
// head and size are kept in memory and persisted by the checkpoint. The four
// ring operations are Flume's:
//
//   - AddTail: a put transaction committed; O(1).
//   - RemoveHead: a take; O(1); the vacated slot is not written.
//   - AddHead: a take rolled back; the pointer goes back in front of the
//     head; O(1). Rolling back several takes calls AddHead in reverse take
//     order, which restores the original order.
//   - Remove: replay saw a committed take of a pointer that may be anywhere in
//     the ring. The pointer is found through an ordered index (a
//     github.com/google/btree of pointer → physical slot) that is built on the
//     first Remove and maintained by every later operation until DropIndex;
//     the smaller side of the ring is then shifted one slot to close the gap,
//     so a removal costs O(log n + min(i, size-1-i)) instead of Flume's scan.
//
// A queue can keep a tag beside each slot, a word that moves with the
// slot's pointer (tags.go: the channel keeps a keyed group's key hashes
// there); it costs nothing until the first non-zero tag, then 8 bytes per
// slot, in memory only.
//
// Every queued pointer counts towards a per-log-file reference count
// (FileRefs); a log file with no queued pointer, no inflight put and no
// inflight take can be deleted by the channel.
//
// # Inflight transactions
//
// Inflight holds, per transaction id, the pointers a put transaction has
// written or a take transaction has taken, in insertion order, with per-file
// counts. The checkpoint saves it (Entries) and reload restores it (Load).
//
// # Files
//
// The package creates no files and does no I/O of its own: it reads and writes
// slots of the Slots store it is given (MemSlots in memory, the checkpoint's
// mmap in the channel).
//
// # Concurrency
//
// Queue and Inflight are NOT safe for concurrent use. The channel serialises
// every call under its queue lock; a Slots implementation sees calls only from
// the goroutine holding that lock.
package eventqueue
