package checkpoint

// On-disk formats of a checkpoint directory, version 1. Every integer is
// big-endian; every CRC is CRC32C (Castagnoli). docs/format.md is the full
// specification; this comment and the constants below are its source of truth
// for the checkpoint package.
//
// checkpoint: (HeaderSlots + capacity) slots of 8 bytes; slot i at byte i*8.
//
//	slot  byte  field
//	0     0     magic+version 0x46434350_00000001 ("FCCP", version 1)
//	1     8     write-order id W of this checkpoint
//	2     16    queue size
//	3     24    queue head (ring position of the first pointer)
//	4     32    marker: COMPLETE 0x434F4D504C455445 ("COMPLETE"); any other
//	            value, such as INCOMPLETE 0x494E434F4D504C54 ("INCOMPLT") or
//	            the 0 of a fresh file, means incomplete
//	5     40    capacity
//	6     48    time of the checkpoint, unix nanoseconds (0 = not recorded)
//	7     56    CRC32C of the 56 bytes of slots 0..6, in the low 32 bits
//	8..1028     reserved, zero
//	1029+r      ring position r (0 <= r < capacity): an event pointer
//	            fileID<<32 | offset, or stale garbage outside [head, head+size)
//
// The live ring is the size slots from ring position head, in ring order:
// physical slots 1029+head .. 1029+capacity-1, then wrapping to 1029. Its
// CRC32C over the size*8 bytes as stored (each slot big-endian) is the ring
// CRC of checkpoint.meta; slots outside the live ring are not covered.
//
// checkpoint.meta (published with write-tmp, fsync, rename, fsync-dir):
//
//	off  len  field
//	0    4    magic "FCCM"
//	4    2    version 2 (1 is read too: no spilled commits)
//	6    2    reserved, zero
//	8    8    W (equals checkpoint slot 1)
//	16   8    capacity (equals slot 5)
//	24   8    head (equals slot 3)
//	32   8    size (equals slot 2)
//	40   4    next log file id
//	44   8    max transaction id
//	52   8    time, unix nanoseconds (0 = not recorded)
//	60   4    ring CRC: CRC32C of the live ring (0 when size is 0)
//	64   4    log count n, then n entries in strictly ascending file id order:
//	          4 file id | 8 position | 8 refs | 4 completes count k |
//	          k x 4 file ids, strictly ascending |
//	          version 2: 1 index flags (bit 0: known; others zero) | 8 first
//	          commit | 8 last commit (write-order ids; both 0: no event) |
//	          8 least time | 8 greatest time (unix ns, at most 2^63-1): what
//	          the file's events span (logfile.FileIndex; all zero when not
//	          known or empty) | 4 spilled count s | s x (8 tx id, strictly
//	          ascending | 8 commit write-order id | 8 commit time, unix
//	          nanoseconds, at most 2^63-1): the commits of the spilled put
//	          transactions whose puts the file holds (logfile.SpilledCommit)
//	end  4    CRC32C of every byte before it
//
// inflightputs / inflighttakes (each published like checkpoint.meta):
//
//	off  len  field
//	0    4    magic "FCIP" (puts) or "FCIT" (takes)
//	4    2    version 1
//	6    2    reserved, zero
//	8    8    W (equals checkpoint slot 1)
//	16   4    transaction count m, then m entries, oldest transaction first:
//	          8 tx id | 4 pointer count c | c x 8 pointers (never 0)
//	end  4    CRC32C of every byte before it
//
// groups, the catalog of consumer groups (published like checkpoint.meta;
// only at the top level of a checkpoint directory):
//
//	off  len  field
//	0    4    magic "FCGR"
//	4    2    version 2 (1 is read too: no flags, no delivery counts)
//	6    2    reserved, zero
//	8    8    W (equals the W of the top-level checkpoint and of every
//	          listed group's checkpoint in group-N)
//	16   4    next group id: every id below it was handed out (never reused)
//	20   4    group count n, then n entries in strictly ascending id order,
//	          each id below the next group id:
//	          +0   4  id (0: the unnamed group, whose ring is the top-level
//	                  checkpoint; N >= 1: its ring is in group-N)
//	          +4   8  since: the write-order id when the group was created
//	          +12  8  capacity, 1..maxCapacity
//	          +20  4  max deliveries
//	          +24  1  policy: 0 block, 1 drop oldest, 2 drop newest
//	          +25  1  name length a: 0 for id 0, else 1..64; names distinct
//	          +26  1  dead-letter length b: 0..64
//	          +27  1  flags: bit 0 = a dead-letter group (no put feeds it);
//	                  the other bits zero (version 1: the whole byte zero)
//	          +28  a  name bytes, then b dead-letter bytes
//	          then, version 2 only: 4 delivery count d, then d entries in
//	          strictly ascending pointer order, each 8 pointer (never 0) |
//	          4 deliveries (>= 1): the group's events delivered and not yet
//	          taken for good, as of W
//	          then, version 3 and up: 2 filter length f (<= 4096), f filter bytes
//	          then, version 4 and up: 4 waiting count w, then w entries in
//	          strictly ascending pointer order, each 8 pointer (never 0) |
//	          8 due time (Unix nanoseconds, >= 1)
//	          then, version 5: the group's take options (catalogoptions.go):
//	          2 order key length k (<= 256), k bytes | 4 retry delay count r
//	          (<= 1024), r x 8 delays | 8 lease timeout | 8 expire-after (all
//	          nanoseconds, <= 2^63-1)
//	          (version 3 lists a group with a filter, 4 one with a waiting
//	          event, 5 one with a take option: a catalog is written in the
//	          oldest version that holds it)
//	end  4    CRC32C of every byte before it
//
// In a group's inflighttakes, two transaction ids are no transaction's:
// WaitingTx lists its events waiting for their retry delay (their due
// times are in the catalog, version 4 and up) and ParkedTx its events
// parked behind a key another open transaction holds (GroupConfig.OrderKey).
// A reader that knows neither brings them back at the head: they are never
// lost.
//
// Every file starts with its magic at byte 0 and its version at byte 4 (the
// low half of slot 0 in the checkpoint file), in every format version
// (compat.go). Decoders read them first: a version newer than this build's is
// a *corrupt.FormatError, refused rather than treated as damage, whatever
// follows. They reject (with a *corrupt.Error) bad magic, version 0, a bad
// CRC, non-zero reserved bytes, counts larger than the bytes left, trailing
// bytes, unsorted or duplicate ids, and values out of range, so decoding
// then encoding reproduces the input byte for byte. Open also recomputes the
// ring CRC from the checkpoint file and rejects a mismatch.

import (
	"encoding/binary"
	"hash/crc32"
)

// The pseudo transaction ids of an inflighttakes file. Part of the on-disk
// format; never renumber.
const (
	// WaitingTx lists a group's events waiting for their retry delay.
	WaitingTx uint64 = 1<<64 - 1
	// ParkedTx lists a keyed group's events parked behind a held key.
	ParkedTx uint64 = 1<<64 - 2
)

// HeaderSlots is the number of 8-byte slots at the start of the checkpoint
// file that hold its header (Flume's HEADER_SIZE: slots 0..7 carry data,
// the rest are reserved); ring slot r is file slot HeaderSlots+r. Package
// eventqueue sees the ring only, from slot 0 (Checkpoint adds the offset).
// Part of the on-disk format; never renumber.
const HeaderSlots = 1029

// Checkpoint file header. Part of the on-disk format; never renumber.
const (
	slotMagic     = 0 // magic+version
	slotWriteID   = 1 // write-order id W
	slotSize      = 2 // queue size
	slotHead      = 3 // queue head
	slotMarker    = 4 // COMPLETE marker
	slotCapacity  = 5 // ring capacity
	slotTime      = 6 // unix nanoseconds
	slotHeaderCRC = 7 // CRC32C of slots 0..6
	headerUsed    = 8 // slots 0..7 carry data; 8..HeaderSlots-1 are reserved

	magicVersion     uint64 = 0x46434350_00000001 // "FCCP", version 1
	magicMask        uint64 = 0xFFFFFFFF_00000000
	markerComplete   uint64 = 0x434F4D504C455445 // "COMPLETE"
	markerIncomplete uint64 = 0x494E434F4D504C54 // "INCOMPLT"
)

// checkpoint.meta and inflight files. Part of the on-disk format; never
// renumber.
const (
	metaMagic     = "FCCM"
	putsMagic     = "FCIP"
	takesMagic    = "FCIT"
	formatVersion = 1 // inflightputs and inflighttakes
	metaVersion   = 2 // checkpoint.meta: 2 adds spilled commits to each log entry

	metaFixedLen     = 68 // through the log count
	metaLogFixedLen  = 24 // file id, position, refs, completes count
	metaSpilledLen   = 24 // tx id, commit write-order id, commit time
	metaIndexLen     = 33 // flags, first and last commit, least and greatest time
	inflightFixedLen = 20 // through the transaction count
	inflightTxLen    = 12 // tx id, pointer count
	crcLen           = 4

	// Offsets of checkpoint.meta fields, for corruption reports.
	metaOffWriteID  = 8
	metaOffCapacity = 16
	metaOffHead     = 24
	metaOffSize     = 32
	metaOffNextFile = 40
	metaOffMaxTxID  = 44
	metaOffTime     = 52
	metaOffRingCRC  = 60
	metaOffLogCount = 64
	// Offset of W in an inflight file.
	inflightOffWriteID = 8
)

// The groups file. Part of the on-disk format; never renumber.
const (
	catalogMagic = "FCGR"

	catalogFixedLen = 24 // through the group count
	groupFixedLen   = 28 // an entry's fields before its name

	// MaxGroupNameLen bounds the bytes of a Group's Name and DeadLetter.
	MaxGroupNameLen = 64
	// maxPolicy is the largest Group.Policy (2, drop newest).
	maxPolicy = 2

	// Offsets of groups fields, for corruption reports.
	catalogOffWriteID   = 8
	catalogOffNextGroup = 16
	catalogOffCount     = 20
	// Offsets inside an entry.
	groupOffSince         = 4
	groupOffCapacity      = 12
	groupOffMaxDeliveries = 20
	groupOffPolicy        = 24
	groupOffNameLen       = 25
	groupOffDeadLetterLen = 26
	groupOffFlags         = 27

	// catalogVersion is the newest version of the groups file this
	// build reads (1 to 5) and writes: version 5, whose entries end with
	// the group's filter, its waiting events and its take options
	// (catalogoptions.go), only when a group has a take option; else
	// version 4, whose entries end with the group's filter and its
	// waiting events, only when a group has waiting events
	// (catalogWaitingVersion); else version 3, whose entries end with the
	// group's filter, only when a group has one (catalogFilteredVersion);
	// 2 otherwise (catalogUnfilteredVersion), which builds before filters
	// read.
	catalogVersion           = 5
	catalogWaitingVersion    = 4
	catalogFilteredVersion   = 3
	catalogUnfilteredVersion = 2
	// waitingLen is the size of a waiting event of a version 4 entry:
	// uint64 BE pointer, uint64 BE due time (Unix nanoseconds, >= 1).
	waitingLen = 16
	// maxFilterLen is the longest filter of a catalog entry, in bytes
	// (logfile.MaxFilterLen).
	maxFilterLen = 4096
	// groupFlagDeadLetter marks a dead-letter group in an entry's flags.
	groupFlagDeadLetter = 1
	deliveryLen         = 12 // a delivery count entry: pointer, count
)

// crcTable is the CRC32C (Castagnoli) table used by every checksum here.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// maxCapacity is the largest ring whose file length, (HeaderSlots+capacity)*8
// bytes, fits in an int on this platform.
const maxCapacity = (1<<(intBits-1)-1)/8 - HeaderSlots

const intBits = 32 << (^uint(0) >> 63)

// headerCRC is the CRC32C of the big-endian bytes of header slots 0..6.
func headerCRC(h *[headerUsed]uint64) uint32 {
	var b [slotHeaderCRC * 8]byte
	for i := 0; i < slotHeaderCRC; i++ {
		binary.BigEndian.PutUint64(b[i*8:], h[i])
	}
	return crc32.Checksum(b[:], crcTable)
}

// ringCRC is the CRC32C of the live ring of a checkpoint with capacity, head
// and size, read from s: size slots from ring position head, in ring order,
// each as its 8 stored bytes. The caller has checked head < capacity and size
// <= capacity.
func ringCRC(s slotStore, capacity, head, size int) (uint32, error) {
	first := min(size, capacity-head) // up to the end of the file
	crc, err := s.checksum(0, HeaderSlots+head, first)
	if err != nil || first == size {
		return crc, err
	}
	return s.checksum(crc, HeaderSlots, size-first) // wrapped
}
