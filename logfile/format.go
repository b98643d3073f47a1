package logfile

// Log file format, versions 1 to 8: this build reads all eight and writes
// version 7, or 8 for an encrypted file. All integers are big-endian, but for the uvarints of
// record bodies. Every checksum is CRC32C (Castagnoli). docs/format.md §3 is
// the full specification.
//
// Version 3 is version 2 with consumer groups: its header and its frames
// are byte for byte version 2's, but for the version field; it is the
// version of the files that may hold the three record types version 3
// added (6 group take, 7 groups, 8 skip). This build accepts those records
// in a file of any version (no older release wrote them, and a frame is
// sealed for its file), so the version tells a reader no more than which
// release may have written the file.
//
// Version 4 is version 3 with dead letters: the same header and frames
// (but for the version field), two more record types (9 deliver, 10 move)
// and the dead-letter flag in a groups record's policy byte. A release
// that reads version 3 refuses a version-4 file as newer, so it never
// mistakes the flag for damage.
//
// Version 5 is version 4 with encryption (keys.go): the same header and
// frames, a key record (type 11: uvarint key id length, key id, 16-byte
// key-check value) as the first record, and every put's body sealed.
// Version 6, written since, is version 5 bound to the file's channel: its
// key record holds the channel's 16-byte id after the check value, and the
// file's keys are derived with it (seal.DeriveBound), so that a file copied
// from another channel with the same key does not open. A release that
// reads version 5 refuses a version-6 file as newer.
//
// Version 7 is version 4 with commit times, and version 8 version 6 with
// them: the same header and frames, but a put's body starts with the
// 8-byte time of its commit (uint64 BE Unix nanoseconds; 0 for a put of a
// transaction that spilled, whose commit has the time; in clear, before
// the sealed part, in version 8) and a commit of puts ends with it. Event
// ids and times come from them (docs/format.md §3.8). A release that
// reads up to version 6 refuses both as newer.
//
// File header, versions 2 to 8 (HeaderSize, 36 bytes, at offset 0):
//
//	0  4  magic "FCLG" (0x46 0x43 0x4C 0x47)
//	4  2  format version, uint16 BE = 7, or 8 if encrypted (2 to 6 in earlier releases)
//	6  2  reserved, zero
//	8  4  file id, uint32 BE
//	12 8  salt, uint64 BE: random (crypto/rand), drawn when the file is created
//	20 4  CRC32C of bytes 0..19, uint32 BE
//	24 8  salt again: a second copy, for a damaged header (recoverFraming)
//	32 4  CRC32C of the file id (uint32 BE) followed by bytes 24..31
//
// File header, version 1 (16 bytes; no longer written):
//
//	0  4  magic "FCLG"
//	4  2  format version, uint16 BE = 1
//	6  2  reserved, zero
//	8  4  file id, uint32 BE
//	12 4  CRC32C of bytes 0..11, uint32 BE
//
// Records follow the header (from offset 36, or 16 in version 1). A
// record's *offset* (its pointer) is the offset of its frame.
//
// Frame, versions 2 to 8 (FrameHeaderSize, 12 bytes, then the payload):
//
//	0  4  payload length L, uint32 BE; 17 <= L <= MaxPayloadSize (64 MiB); 0 means "no record here" (end / zero fill)
//	4  4  frame header checksum: CRC32C over bytes 0..3 then bytes 8..28 (the payload checksum and the
//	      payload's 17 fixed bytes: type, transaction id, write-order id), XOR the salt's high 32 bits
//	8  4  payload checksum: CRC32C over the L payload bytes, XOR the salt's low 32 bits
//	12 L  payload
//
// Frame, version 1 (8 bytes, then the payload):
//
//	0  4  payload length L, uint32 BE; 1 <= L <= MaxPayloadSize; 0 means "no record here"
//	4  4  CRC32C over bytes 0..3 (the length field) followed by the L payload bytes, uint32 BE
//	8  L  payload
//
// The salt is what makes a frame unforgeable by event content: bytes a
// producer puts in an event body form a valid salted frame only if they
// guess both halves of the salt (2^-64), so a scan that resynchronises
// after damage never takes them for records. The frame header checksum
// lets that scan reject a candidate offset in O(1) work, before it
// checksums the payload length the candidate claims (Scanner.resync).
// Version-1 frames have neither property. Framing (framing.go) holds a
// file's version and salt and does every encoding, sealing and check.
//
// Payload (the same in every version):
//
//	0  1  record type: 1 put, 2 take, 3 rollback, 4 commit, 5 padding, 6 group take, 7 groups, 8 skip,
//	      9 deliver, 10 move, 11 key, 12 synced
//	1  8  transaction id, uint64 BE (0 for padding, groups, key and synced)
//	9  8  write-order id, uint64 BE (global, strictly increasing in append order within a file
//	      among the records that are neither padding nor synced; 0 for those two)
//	17 .. type-specific body:
//	   put:        versions 7 and 8: uint64 BE commit time; then uvarint header count; per header (sorted by key, so bytes are deterministic):
//	               uvarint key len, key bytes, uvarint value len, value bytes; then uvarint body len, body bytes
//	   take:       uvarint pointer count n; n x uint64 BE pointers (fileID<<32 | offset) of the put records consumed
//	   rollback:   empty
//	   commit:     1 byte: the type being committed (1 put or 2 take); uvarint count: the number of
//	               events the transaction put (all its put records) or took (all pointers of its take records),
//	               so that replay can tell a transaction whose records it saw only in part;
//	               versions 7 and 8, a commit of puts: then uint64 BE commit time
//	   padding:    filler, zero bytes (any number, 0 included)
//	   group take: uvarint group id g >= 1; then a take's body: uvarint n, n x uint64 BE pointers
//	   groups:     uvarint next group id; uvarint entry count; per entry, in strictly increasing id order:
//	               uvarint id (< next group id), uvarint name len (<= 64), name bytes, uvarint since
//	               (a write-order id), uvarint capacity, 1 byte policy (0 block, 1 drop oldest,
//	               2 drop newest; plus 0x80 for a dead-letter group, version 4), uvarint max deliveries,
//	               uvarint dead-letter len (<= 64), dead-letter bytes
//	   skip:       uvarint count n >= 1; n uvarint group ids, strictly increasing
//	   deliver:    uvarint group id g; uvarint n >= 1; n x (uint64 BE pointer, uvarint count >= 1):
//	               the delivery counts in group g of events of take transaction TxID
//	   move:       uvarint group id g; uvarint n >= 1; n x uint64 BE pointers: at the commit of
//	               transaction TxID (a take commit), these events go to the tail of group g
//	   key:        uvarint key id len (1 to MaxKeyIDLen), key id bytes, 16-byte key check value;
//	               version 6: then the channel's 16-byte id (not all zero)
//	   synced:     uvarint s >= 1: bytes [0, s) of this file were durable (an fsync had returned)
//	               before this record was written; s <= the record's own offset
//	   filter skip (13): uvarint group id g; uvarint n >= 1; n x (uvarint first, uvarint count >= 1),
//	               first increasing, ranges not touching: the events (indices in the put order of
//	               transaction TxID) that group g's filter does not match; before the commit record
//	   filtered groups (14): a groups record whose entries each end with uvarint filter len
//	               (<= 4096) and the filter's bytes, one at least not empty; decoded as groups
//	   retry (16): uvarint group id g; uvarint n >= 1; n x (uint64 BE pointer, uint64 BE due time
//	               in Unix nanoseconds >= 1): events of take transaction TxID that wait in group g
//	               until their due time before they are delivered again (GroupConfig.RetryDelays,
//	               Transaction.Retry)
//	   option groups (17): a filtered groups record (14) whose entries each end, after the filter, with
//	               the group's take options: uvarint order key len (<= 256), order key bytes; uvarint
//	               retry delay count (<= 1024), that many uvarint delays in nanoseconds; uvarint lease
//	               timeout and uvarint expire-after in nanoseconds (each <= 2^63-1); one group at
//	               least with an option; decoded as groups
//
// A group take is a take by consumer group g, decoded as RecordTake with
// Record.Group g; a take by the unnamed group (0) is a plain take (type 2),
// so type 6 with group 0 is corrupt. A groups record (RecordGroups) lists
// every consumer group as of its write-order id: the channel writes one as
// the first record of every new log file and after every change to the
// groups. A skip record (RecordSkip) names the groups that do not receive
// a put transaction's events: it carries that transaction's id and comes
// before its commit record. A commit commits puts or takes only, a group
// take included (CommitType RecordTake). Group ids, max deliveries and the
// next group id are uint32 in memory: a larger uvarint is corrupt.
//
// A deliver record (RecordDeliver, Record.Group, Pointers and Counts) says
// how many times each event had been delivered to its group when a take
// transaction rolled back (or, when the channel's delivery journal refused
// an entry, when one Take returned it); it is applied where it stands (a
// count only grows: replay keeps the larger), is written without an
// fsync, and losing it loses counts, never adds any. A move record
// (RecordMove) belongs to a take transaction whose take records
// remove the same events from their group: applied at its commit, the
// events land at the tail of group Group, so that a dead letter, a
// rejected event or a redrive moves a pointer without copying the event.
//
// A retry record (RecordRetry, Record.Group, Pointers and Due) says that
// events of a take transaction went back to their group to wait until
// their due times: written, unsynced, with the deliver record of a
// rollback (or an expired lease), or in the batch of a take commit
// (Transaction.Retry), whose fsync makes it durable. Replay puts each
// event it names that is still queued in the group's waiting set instead
// of its queue; losing the record shortens the wait, never loses the
// event.
//
// A synced record (RecordSynced, a sync mark) is written after an fsync of
// the file returned, without an fsync of its own (the next one covers
// it). It belongs to no transaction, has no write-order id, and is read by
// the Scanner only (never returned by Next): it proves that the bytes
// before SyncedTo were acknowledged, so that a damaged frame there is
// damage to skip, never a torn write to cut (Scanner.tornOverwrite). Any
// version of file may hold it; a release that knows types up to 11
// refuses it as a newer release's record.
//
// A padding record takes the place of damaged bytes that a repair
// (channel.Repair, PadRegion) copied to a .corrupt file, so that no record
// after them moves: pointers name records by offset. It belongs to no
// transaction and has no write-order id; replay steps over it (and treats it
// as former damage), and a take of a pointer to it is a damaged event. A
// padding frame is Framing.MinPaddingSize (29; 25 in version 1) to
// Framing.MaxFrameSize bytes long; a longer region is covered by several.
//
// A payload with trailing bytes after its body, type 0, or lengths that
// overrun are corrupt. So are encodings the writer never produces, so that
// every record that decodes re-encodes to the same bytes: a uvarint in more
// bytes than needed, header keys not in strictly increasing byte order, a
// commit of a type other than put or take, padding with a non-zero
// transaction id, write-order id or filler byte, a group take of group 0,
// a groups record with a transaction id, ids out of order or out of range,
// a name or dead-letter name over 64 bytes or a policy above 2 (the
// dead-letter flag aside), a skip record listing no group or its groups
// out of order, a deliver or move record listing no pointer, and a deliver
// count of 0.
//
// Compatibility (docs/format.md, "Compatibility"): the magic and the version
// keep offsets 0 and 4 of the header in every version, and a decoder reads
// them before anything a newer version may change (the header's length and
// CRC, the frame layout). A version above FormatVersion is a
// *corrupt.FormatError, not corruption; so is a frame whose checksums match
// and whose type (or, for a commit, the type it commits) is above
// MaxRecordType: a newer release numbers its new record types from 18 up.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/seal"
	"github.com/flumego/filechannel/internal/zeros"
)

// RecordType says what a record is. Part of the on-disk format.
type RecordType uint8

// Record types; part of the on-disk format; never renumber.
const (
	RecordPut      RecordType = 1
	RecordTake     RecordType = 2
	RecordRollback RecordType = 3
	RecordCommit   RecordType = 4
	RecordPadding  RecordType = 5
	RecordGroups   RecordType = 7 // version 3: the consumer groups catalog
	RecordSkip     RecordType = 8 // version 3: the groups a put transaction's events skip
	RecordDeliver  RecordType = 9 // version 4: events a Take returned to a group (delivery counts)
	RecordMove     RecordType = 10
	// RecordMove (version 4): events a take transaction moves to another
	// group's tail at its commit (dead letters, rejects, redrives).
	RecordKey RecordType = 11
	// RecordKey (version 5): the first record of an encrypted file: the
	// id of the key its put bodies are sealed with, and that key's check
	// value (internal/seal); from version 6 on, also the id of the channel
	// the file's keys are bound to.
	RecordSynced RecordType = 12
	// RecordSynced (a file of any version): a sync mark, written after an
	// fsync of its file returned: bytes [0, SyncedTo) of the file were
	// durable before the mark was written. It tells recovery that damage
	// before SyncedTo is damage, not a torn write (Scanner.tornOverwrite).
	RecordFilterSkip RecordType = 13
	// RecordFilterSkip (a file of any version, groups.go): the events of a
	// put transaction that group Group's filter does not match, as ranges
	// of their indices in the transaction's put order (Record.Ranges).
	RecordDuplicate RecordType = 15
	// RecordDuplicate (a file of any version, groups.go): the events of a
	// put transaction that its commit dropped as duplicates (Config.Dedup):
	// ranges of their indices in the transaction's put order
	// (Record.Ranges). No group receives them.
	RecordRetry RecordType = 16
	// RecordRetry (a file of any version, groups.go): events of a take
	// transaction that wait in group Group until their due times
	// (Record.Due) before they are delivered again.
)

// typeGroupTake is the on-disk type of a take by a consumer group other
// than the unnamed one, Record{Type: RecordTake, Group: g} with g >= 1: it
// is never a Record's Type. Part of the on-disk format; never renumber.
const typeGroupTake RecordType = 6

// typeFilteredGroups is the on-disk type of a groups record in which a
// group has a filter (GroupInfo.Filter): decoded as RecordGroups. A groups
// record without filters keeps type 7, which older builds read. Part of
// the on-disk format; never renumber.
const typeFilteredGroups RecordType = 14

// typeOptionGroups is the on-disk type of a groups record in which a group
// has a take option (GroupInfo.HasOptions): each entry ends with its
// filter and its options (groupoptions.go); decoded as RecordGroups. A
// groups record without options keeps type 7 or 14. Part of the on-disk
// format; never renumber.
const typeOptionGroups RecordType = 17

// Sizes and version; part of the on-disk format; never renumber. The
// sizes are those of the version this build writes (FormatVersion); a
// Framing gives those of any file.
const (
	HeaderSize      = 36           // file header (versions 2 to 8)
	FrameHeaderSize = 12           // payload length + frame header checksum + payload checksum (versions 2 to 8)
	MaxPayloadSize  = 64 << 20     // largest payload a frame may carry (every version)
	FormatVersion   = TimedVersion // version written in the header of a file without encryption
	// EncryptedVersion is the first version of a file whose put bodies are
	// encrypted (SetOptions.Keys): version 4 with a key record first and
	// sealed put bodies. ChannelBoundVersion, what this build writes with
	// keys, is version 5 with the channel's id in the key record and in
	// the derivation of the file's keys (SetOptions.ChannelID): a file
	// copied from another channel with the same key does not open.
	// MinFormatVersion and MaxFormatVersion are the oldest and the newest
	// version read.
	EncryptedVersion    = 5
	ChannelBoundVersion = 6
	// TimedVersion (7) is version 4 with commit times: a put's body starts
	// with its commit's time, and a commit of puts ends with it.
	// TimedBoundVersion (8) is version 6 with the same. They are what this
	// build writes: FormatVersion, and TimedBoundVersion with keys.
	TimedVersion      = 7
	TimedBoundVersion = 8
	MinFormatVersion  = 1
	// RecycledVersion (9) and RecycledBoundVersion (10) are versions 7 and
	// 8 in a recycled file (SetOptions.RecycleLogFiles, recycle.go): the
	// same header, frames and records, but the bytes after the file's last
	// record may be another file's leftovers, so the first invalid frame no
	// sync mark vouches for ends the file, in any data dir position
	// (Scanner.tornTail), and is no torn tail (TailLeftover). A release
	// that reads up to version 8 refuses them as newer rather than cut the
	// leftovers as a torn tail.
	RecycledVersion      = 9
	RecycledBoundVersion = 10
	MaxFormatVersion     = RecycledBoundVersion
	// MaxRecordType is the highest record type of this format version
	// (typeOptionGroups, a groups record with take options); a newer
	// release numbers the types it adds above it.
	MaxRecordType = typeOptionGroups
	// MaxKeyIDLen is the longest key id a key record holds.
	MaxKeyIDLen = 64
)

// Padding frame sizes of the version this build writes; follow from the
// format (Framing.MinPaddingSize and MaxFrameSize give any file's).
const (
	MinPaddingSize = FrameHeaderSize + payloadHeaderSize // 29: a padding frame with no filler
	MaxFrameSize   = FrameHeaderSize + MaxPayloadSize    // the longest frame of any type
)

// Version 1; part of the on-disk format; never renumber.
const (
	headerSizeV1      = 16 // file header; no record of any version starts before it
	frameHeaderSizeV1 = 8  // payload length + CRC
)

// Further layout constants; part of the on-disk format; never renumber.
const (
	magic             = "FCLG"
	payloadHeaderSize = 17 // type + transaction id + write-order id
	timeSize          = 8  // a commit time (versions 7 and 8), uint64 BE Unix nanoseconds

	// The header's magic and version keep these offsets in every format
	// version, so that any build can tell a newer file from a damaged one.
	versionOffset = 4 // uint16 BE, after the 4-byte magic
	versionEnd    = 6 // the header bytes needed to read the magic and the version
)

// MaxFileSize is the largest size a log file may reach: every record offset
// must fit in the low 32 bits of a pointer. Writer.Write refuses to go past
// it with ErrFileFull.
const MaxFileSize int64 = math.MaxUint32

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (t RecordType) String() string {
	switch t {
	case RecordPut:
		return "put"
	case RecordTake:
		return "take"
	case RecordRollback:
		return "rollback"
	case RecordCommit:
		return "commit"
	case RecordPadding:
		return "padding"
	case RecordGroups:
		return "groups"
	case RecordSkip:
		return "skip"
	case RecordDeliver:
		return "deliver"
	case RecordMove:
		return "move"
	case RecordKey:
		return "key"
	case RecordSynced:
		return "synced"
	case RecordFilterSkip:
		return "filter skip"
	case RecordDuplicate:
		return "duplicate"
	case RecordRetry:
		return "retry"
	case typeFilteredGroups:
		return "filtered groups" // an on-disk type, decoded as RecordGroups
	case typeOptionGroups:
		return "option groups" // an on-disk type, decoded as RecordGroups
	}
	return fmt.Sprintf("RecordType(%d)", uint8(t))
}

// Record is one decoded (or to be encoded) log record. Only the fields of its
// Type are encoded; the others are ignored by AppendRecord and left zero by
// the decoders.
type Record struct {
	Type         RecordType
	TxID         uint64
	WriteOrderID uint64
	Headers      map[string]string // put; nil when a decoded put has none
	Body         []byte            // put; nil when a decoded put has none; a decoded Body may alias the buffer it was decoded from
	Pointers     []uint64          // take, deliver, move; nil when a decoded take has none
	Counts       []uint32          // deliver: the delivery count of each of Pointers, >= 1
	Due          []int64           // retry: the due time of each of Pointers, Unix nanoseconds >= 1
	Group        uint32            // take: the consumer group that took (0, the unnamed group: a plain take); deliver: the group delivered to; move: the group moved to
	CommitType   RecordType        // commit: RecordPut or RecordTake
	Count        uint64            // commit: events put or taken by the transaction
	// Time is a put's and a put commit's commit time, in Unix nanoseconds
	// (versions 7 and 8): in a commit of puts, its time (the channel
	// writes >= 1; 0 means unknown); in a put, its commit's time, or 0
	// for a put of a transaction that spilled (written before its commit:
	// the commit record has the time). Always 0 in an older file's
	// records and in other types.
	Time        int64
	Filler      int                  // padding: the number of zero bytes after the fixed fields
	NextGroupID uint32               // groups: the id the next consumer group created gets; above every Catalog ID
	Catalog     []GroupInfo          // groups: every consumer group, in strictly increasing ID order; nil when a decoded record lists none
	Skip        []uint32             // skip: the groups that do not receive the transaction's events, strictly increasing, at least one
	Ranges      []uint32             // filter skip, duplicate: (first index, count >= 1) pairs, in increasing order, not touching
	KeyID       string               // key: the id of the key the file's put bodies are sealed with, 1 to MaxKeyIDLen bytes
	KeyCheck    [seal.CheckSize]byte // key: that key's check value for this file
	SyncedTo    int64                // synced: the file's durable extent when the mark was written, at most the mark's own offset
	// ChannelID is a key record's channel (version 6): the id of the
	// channel (channel.id) the file's keys are bound to, never zero; zero
	// in a version-5 file's key record, which names none.
	ChannelID [seal.ChannelIDSize]byte
	// Sealed is a put of an encrypted file (version 5) decoded without its
	// key: its body sealed (ciphertext and tag), Headers and Body nil. It
	// aliases the buffer it was decoded from.
	Sealed []byte
}

// EncodedSize returns the size of the whole frame r takes in the version
// this build writes: FrameHeaderSize + payload (Framing.EncodedSize for
// another version).
func (r *Record) EncodedSize() int {
	return FrameHeaderSize + r.payloadSize(true)
}

// payloadSize is the size of r's payload in a file of a version with
// commit times (timed: 7 or 8) or without.
func (r *Record) payloadSize(timed bool) int {
	n := payloadHeaderSize
	if timed && r.timed() {
		n += timeSize
	}
	switch r.Type {
	case RecordPut:
		n += uvarintLen(uint64(len(r.Headers)))
		for k, v := range r.Headers {
			n += uvarintLen(uint64(len(k))) + len(k) + uvarintLen(uint64(len(v))) + len(v)
		}
		n += uvarintLen(uint64(len(r.Body))) + len(r.Body)
	case RecordTake:
		if r.Group != 0 {
			n += uvarintLen(uint64(r.Group))
		}
		n += uvarintLen(uint64(len(r.Pointers))) + 8*len(r.Pointers)
	case RecordCommit:
		n += 1 + uvarintLen(r.Count)
	case RecordPadding:
		n += max(r.Filler, 0)
	case RecordGroups:
		n += groupsSize(r)
	case RecordSkip:
		n += skipSize(r.Skip)
	case RecordFilterSkip:
		n += uvarintLen(uint64(r.Group)) + rangesSize(r.Ranges)
	case RecordDuplicate:
		n += rangesSize(r.Ranges)
	case RecordMove:
		n += uvarintLen(uint64(r.Group)) + uvarintLen(uint64(len(r.Pointers))) + 8*len(r.Pointers)
	case RecordKey:
		n += uvarintLen(uint64(len(r.KeyID))) + len(r.KeyID) + seal.CheckSize
		if r.ChannelID != ([seal.ChannelIDSize]byte{}) {
			n += seal.ChannelIDSize
		}
	case RecordSynced:
		n += uvarintLen(uint64(max(r.SyncedTo, 0)))
	case RecordRetry:
		n += uvarintLen(uint64(r.Group)) + uvarintLen(uint64(len(r.Pointers))) + 16*len(r.Pointers)
	case RecordDeliver:
		n += uvarintLen(uint64(r.Group)) + uvarintLen(uint64(len(r.Pointers))) + 8*len(r.Pointers)
		for _, c := range r.Counts {
			n += uvarintLen(uint64(c))
		}
	}
	return n
}

// timed reports whether r carries a commit time in versions 7 and 8: a
// put, or a commit of puts.
func (r *Record) timed() bool {
	return r.Type == RecordPut || (r.Type == RecordCommit && r.CommitType == RecordPut)
}

// uvarintLen is the number of bytes binary.AppendUvarint uses for x.
func uvarintLen(x uint64) int {
	return (bits.Len64(x|1) + 6) / 7
}

// AppendUnsealed is Framing.AppendRecord without the checksums, in the
// frame layout of the version this build writes (FormatVersion): the
// checksum fields are left zero, and the frame is not valid until the file
// it goes to seals it with its salt (Set.Append). A Batch encodes records
// this way before it knows which file they go to, and each record's
// checksums are computed once, when its write-order id is known. Errors are
// those of Framing.AppendRecord; dst is then unchanged.
func AppendUnsealed(dst []byte, r *Record) ([]byte, error) {
	return appendUnsealed(dst, r, FrameHeaderSize, true)
}

// SetPutTime sets the commit time ns (Unix nanoseconds, >= 1) of the put
// frame at the start of frame, encoded by AppendUnsealed or
// AppendUnsealedEncrypted and not yet sealed: the channel learns a put's
// commit time only when it commits, and patches its buffered puts then,
// before Set.Append seals them.
func SetPutTime(frame []byte, ns int64) {
	binary.BigEndian.PutUint64(frame[FrameHeaderSize+payloadHeaderSize:], uint64(ns))
}

// AppendUnsealedEncrypted is AppendUnsealed for a file whose put bodies are
// encrypted (EncryptedVersion): a put's frame has room for the seal's tag
// (seal.Overhead zero bytes after its body, counted in its length), which
// Set.Append fills when it seals the body in place. Other records are
// AppendUnsealed's. Batch.Add picks between the two as its set needs.
func AppendUnsealedEncrypted(dst []byte, r *Record) ([]byte, error) {
	return appendUnsealedEncrypted(dst, r, true)
}

// appendUnsealedEncrypted is AppendUnsealedEncrypted with commit times
// (version 8) or without (5 and 6).
func appendUnsealedEncrypted(dst []byte, r *Record, timed bool) ([]byte, error) {
	start := len(dst)
	dst, err := appendUnsealed(dst, r, FrameHeaderSize, timed)
	if err != nil || r.Type != RecordPut {
		return dst, err
	}
	n := binary.BigEndian.Uint32(dst[start:]) + seal.Overhead
	if n > MaxPayloadSize {
		return dst[:start], fmt.Errorf("%w: payload of %d bytes, limit %d", ErrTooLarge, n, MaxPayloadSize)
	}
	binary.BigEndian.PutUint32(dst[start:], n)
	return append(dst, make([]byte, seal.Overhead)...), nil
}

// appendUnsealed appends r's frame with a frame header of fhs bytes (8 in
// version 1, 12 from version 2 on) whose checksum fields are zero, with
// commit times (versions 7 and 8) if timed.
func appendUnsealed(dst []byte, r *Record, fhs int, timed bool) ([]byte, error) {
	typ, err := frameType(r)
	if err != nil {
		return dst, err
	}
	if timed && r.timed() && r.Time < 0 {
		return dst, fmt.Errorf("%w: %v record with commit time %d", ErrInvalidRecord, r.Type, r.Time)
	}
	n := r.payloadSize(timed)
	if n > MaxPayloadSize {
		return dst, fmt.Errorf("%w: payload of %d bytes, limit %d", ErrTooLarge, n, MaxPayloadSize)
	}
	dst = slices.Grow(dst, fhs+n)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, make([]byte, fhs-4)...) // checksums, filled in by sealing
	dst = append(dst, byte(typ))
	dst = binary.BigEndian.AppendUint64(dst, r.TxID)
	dst = binary.BigEndian.AppendUint64(dst, r.WriteOrderID)
	if timed && r.Type == RecordPut {
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Time))
	}
	dst = appendBody(dst, r)
	if timed && r.Type == RecordCommit && r.CommitType == RecordPut {
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Time))
	}
	return dst, nil
}

// frameType checks that r can be encoded and returns the type its frame
// carries (typeGroupTake for a group's take, r.Type otherwise).
func frameType(r *Record) (RecordType, error) {
	switch r.Type {
	case RecordPut, RecordRollback:
	case RecordTake:
		if r.Group != 0 {
			return typeGroupTake, nil
		}
	case RecordCommit:
		if r.CommitType != RecordPut && r.CommitType != RecordTake {
			return 0, fmt.Errorf("%w: commit of %v", ErrInvalidRecord, r.CommitType)
		}
	case RecordPadding:
		if r.TxID != 0 || r.WriteOrderID != 0 || r.Filler < 0 {
			return 0, fmt.Errorf("%w: padding with transaction id %d, write-order id %d, filler %d", ErrInvalidRecord, r.TxID, r.WriteOrderID, r.Filler)
		}
	case RecordGroups:
		if err := checkGroups(r); err != nil {
			return 0, err
		}
		return typeOfLevel(levelOf(r.Catalog)), nil
	case RecordSkip:
		if err := checkSkip(r.Skip); err != nil {
			return 0, err
		}
	case RecordFilterSkip, RecordDuplicate:
		if err := checkRanges(r.Ranges); err != nil {
			return 0, err
		}
	case RecordMove:
		if len(r.Pointers) == 0 {
			return 0, fmt.Errorf("%w: %v record without pointers", ErrInvalidRecord, r.Type)
		}
	case RecordKey:
		if r.TxID != 0 || len(r.KeyID) == 0 || len(r.KeyID) > MaxKeyIDLen {
			return 0, fmt.Errorf("%w: key record with transaction id %d and a key id of %d bytes (1 to %d)", ErrInvalidRecord,
				r.TxID, len(r.KeyID), MaxKeyIDLen)
		}
	case RecordSynced:
		if r.TxID != 0 || r.WriteOrderID != 0 || r.SyncedTo <= 0 || r.SyncedTo > MaxFileSize {
			return 0, fmt.Errorf("%w: synced record with transaction id %d, write-order id %d, synced to %d", ErrInvalidRecord,
				r.TxID, r.WriteOrderID, r.SyncedTo)
		}
	case RecordRetry:
		if len(r.Pointers) == 0 || len(r.Due) != len(r.Pointers) || slices.ContainsFunc(r.Due, func(d int64) bool { return d <= 0 }) {
			return 0, fmt.Errorf("%w: retry record of %d pointers and %d due times (all > 0, at least one)", ErrInvalidRecord,
				len(r.Pointers), len(r.Due))
		}
	case RecordDeliver:
		if len(r.Pointers) == 0 || len(r.Counts) != len(r.Pointers) || slices.Contains(r.Counts, 0) {
			return 0, fmt.Errorf("%w: deliver record of %d pointers and %d counts (none zero, at least one)", ErrInvalidRecord,
				len(r.Pointers), len(r.Counts))
		}
	default:
		return 0, fmt.Errorf("%w: unknown type %v", ErrInvalidRecord, r.Type)
	}
	return r.Type, nil
}

// appendBody appends the type-specific part of r's payload (what follows
// the payload header). dst has capacity for it (padding relies on that).
func appendBody(dst []byte, r *Record) []byte {
	switch r.Type {
	case RecordPut:
		dst = appendHeaders(dst, r.Headers)
		dst = binary.AppendUvarint(dst, uint64(len(r.Body)))
		dst = append(dst, r.Body...)
	case RecordTake:
		if r.Group != 0 {
			dst = binary.AppendUvarint(dst, uint64(r.Group))
		}
		dst = appendPointers(dst, r.Pointers)
	case RecordCommit:
		dst = append(dst, byte(r.CommitType))
		dst = binary.AppendUvarint(dst, r.Count)
	case RecordPadding:
		dst = dst[:len(dst)+r.Filler] // capacity grown by appendUnsealed
		clear(dst[len(dst)-r.Filler:])
	case RecordGroups:
		dst = appendGroups(dst, r)
	case RecordSkip:
		dst = appendSkip(dst, r.Skip)
	case RecordFilterSkip:
		dst = binary.AppendUvarint(dst, uint64(r.Group))
		dst = appendRanges(dst, r.Ranges)
	case RecordDuplicate:
		dst = appendRanges(dst, r.Ranges)
	case RecordMove:
		dst = binary.AppendUvarint(dst, uint64(r.Group))
		dst = appendPointers(dst, r.Pointers)
	case RecordRetry:
		dst = appendRetry(dst, r)
	case RecordDeliver:
		dst = binary.AppendUvarint(dst, uint64(r.Group))
		dst = binary.AppendUvarint(dst, uint64(len(r.Pointers)))
		for i, p := range r.Pointers {
			dst = binary.BigEndian.AppendUint64(dst, p)
			dst = binary.AppendUvarint(dst, uint64(r.Counts[i]))
		}
	case RecordKey:
		dst = binary.AppendUvarint(dst, uint64(len(r.KeyID)))
		dst = append(dst, r.KeyID...)
		dst = append(dst, r.KeyCheck[:]...)
		if r.ChannelID != ([seal.ChannelIDSize]byte{}) {
			dst = append(dst, r.ChannelID[:]...)
		}
	case RecordSynced:
		dst = binary.AppendUvarint(dst, uint64(r.SyncedTo))
	}
	return dst
}

// appendPointers appends a pointer count and the pointers, 8 bytes each.
func appendPointers(dst []byte, ptrs []uint64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ptrs)))
	for _, p := range ptrs {
		dst = binary.BigEndian.AppendUint64(dst, p)
	}
	return dst
}

// appendHeaders appends the header count and the headers sorted by key.
func appendHeaders(dst []byte, h map[string]string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(h)))
	if len(h) == 0 {
		return dst
	}
	var stack [16]string // keeps the common case free of allocations
	keys := stack[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := h[k]
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// scratch holds a decoder's reusable allocations (the Scanner's), so that
// records decode without allocating once it has warmed up.
type scratch struct {
	headers  map[string]string
	pointers []uint64
	skip     []uint32          // a skip record's groups
	strs     map[string]string // interned header keys and values
}

// Interning limits: header keys and many values repeat from event to event;
// the table stops growing once full so unique values cannot bloat it.
const (
	maxInterned    = 4096
	maxInternedLen = 64
)

// str returns b as a string, from the intern table when s is not nil.
func (s *scratch) str(b []byte) string {
	if s == nil || len(b) > maxInternedLen {
		return string(b)
	}
	if v, ok := s.strs[string(b)]; ok { // no allocation for the lookup
		return v
	}
	v := string(b)
	if s.strs == nil {
		s.strs = make(map[string]string)
	}
	if len(s.strs) < maxInterned {
		s.strs[v] = v
	}
	return v
}

// newerType returns the record type above MaxRecordType that the
// checksummed payload p carries, as its own type or as the type a commit
// commits: a record a newer release wrote. It returns 0 when there is none.
func newerType(p []byte) RecordType {
	switch {
	case len(p) == 0:
		return 0
	case RecordType(p[0]) > MaxRecordType:
		return RecordType(p[0])
	case RecordType(p[0]) == RecordCommit && len(p) > payloadHeaderSize && RecordType(p[payloadHeaderSize]) > MaxRecordType:
		return RecordType(p[payloadHeaderSize])
	}
	return 0
}

// decodeSynced decodes the body of a synced record into r.
func decodeSynced(p []byte, r *Record) string {
	if r.TxID != 0 || r.WriteOrderID != 0 {
		return "synced record with a transaction or write-order id"
	}
	to, rest, ok := readUvarint(p)
	if !ok || to == 0 || to > uint64(MaxFileSize) {
		return "bad synced offset"
	}
	if len(rest) != 0 {
		return "trailing bytes after synced record"
	}
	r.SyncedTo = int64(to)
	return ""
}

// decodePayloadOf decodes a checksummed payload of a file of format
// version v into r. It returns a reason for the corruption, or "" if the
// payload is valid. From EncryptedVersion on, a put's body is sealed and
// kept in r.Sealed, undecoded (its tag, checked when it is opened, covers
// it); from ChannelBoundVersion on, a key record names a channel.
func decodePayloadOf(p []byte, r *Record, s *scratch, v uint16) string {
	sealed := encryptedVersion(v)
	if len(p) < payloadHeaderSize {
		return "payload shorter than its fixed fields"
	}
	*r = Record{
		Type:         RecordType(p[0]),
		TxID:         binary.BigEndian.Uint64(p[1:9]),
		WriteOrderID: binary.BigEndian.Uint64(p[9:17]),
	}
	p = p[payloadHeaderSize:]
	switch r.Type {
	case RecordPut:
		if timedVersion(v) {
			var ok bool
			if r.Time, p, ok = readTime(p); !ok {
				return "put shorter than its commit time, or a time out of range"
			}
		}
		if sealed {
			if len(p) < seal.Overhead {
				return "sealed put body shorter than its tag"
			}
			r.Sealed = p
			return ""
		}
		return decodePut(p, r, s)
	case RecordKey:
		return decodeKey(p, r, boundVersion(v))
	case RecordTake:
		return decodeTake(p, r, s)
	case typeGroupTake:
		return decodeGroupTake(p, r, s)
	case RecordGroups:
		return decodeGroupsOf(p, r, plainGroups)
	case RecordSkip:
		return decodeSkip(p, r, s)
	case RecordFilterSkip:
		return decodeFilterSkip(p, r)
	case RecordDuplicate:
		return decodeDuplicate(p, r)
	case typeFilteredGroups:
		r.Type = RecordGroups
		return decodeGroupsOf(p, r, filteredGroups)
	case typeOptionGroups:
		r.Type = RecordGroups
		return decodeGroupsOf(p, r, optionGroups)
	case RecordMove:
		return decodeGroupPointers(p, r, s)
	case RecordDeliver:
		return decodeDeliver(p, r, s)
	case RecordRetry:
		return decodeRetry(p, r, s)
	case RecordRollback:
		if len(p) != 0 {
			return "trailing bytes after rollback"
		}
	case RecordCommit:
		return decodeCommit(p, r, timedVersion(v))
	case RecordSynced:
		return decodeSynced(p, r)
	case RecordPadding:
		if r.TxID != 0 || r.WriteOrderID != 0 {
			return "padding with a transaction or write-order id"
		}
		if !zeros.All(p) {
			return "padding filler not zero"
		}
		r.Filler = len(p)
	default:
		return "unknown record type"
	}
	return ""
}

// decodeCommit decodes a commit record's body; timed: a commit of puts
// ends with its time (versions 7 and 8).
func decodeCommit(p []byte, r *Record, timed bool) string {
	if len(p) < 1 {
		return "commit body is empty"
	}
	r.CommitType = RecordType(p[0])
	if r.CommitType != RecordPut && r.CommitType != RecordTake {
		return "commit of unknown type"
	}
	count, rest, ok := readUvarint(p[1:])
	if !ok {
		return "bad commit count"
	}
	r.Count = count
	if timed && r.CommitType == RecordPut {
		if r.Time, rest, ok = readTime(rest); !ok {
			return "bad commit time"
		}
	}
	if len(rest) != 0 {
		return "trailing bytes after commit"
	}
	return ""
}

// readTime reads a commit time (timeSize bytes, at most math.MaxInt64)
// from the start of b.
func readTime(b []byte) (int64, []byte, bool) {
	if len(b) < timeSize {
		return 0, b, false
	}
	t := binary.BigEndian.Uint64(b)
	if t > math.MaxInt64 {
		return 0, b, false
	}
	return int64(t), b[timeSize:], true
}

// encryptedVersion reports whether a file of version v seals its puts'
// bodies: 5, 6 and 8.
func encryptedVersion(v uint16) bool {
	return v == EncryptedVersion || v == ChannelBoundVersion || v == TimedBoundVersion
}

// boundVersion reports whether a file of version v is bound to its
// channel (its key record names it): 6 and 8.
func boundVersion(v uint16) bool { return v == ChannelBoundVersion || v == TimedBoundVersion }

// timedVersion reports whether a file of version v records commit times:
// 7 and 8.
func timedVersion(v uint16) bool { return v >= TimedVersion }

func decodePut(p []byte, r *Record, s *scratch) string {
	count, p, ok := readUvarint(p)
	if !ok {
		return "bad header count"
	}
	// Each header takes at least two bytes, and the body length one more.
	if count > uint64(len(p))/2 {
		return "header count overruns payload"
	}
	if count > 0 {
		if s != nil {
			if s.headers == nil {
				s.headers = make(map[string]string, min(count, 64))
			}
			clear(s.headers)
			r.Headers = s.headers
		} else {
			r.Headers = make(map[string]string, min(count, 64))
		}
		var prev []byte
		for i := uint64(0); i < count; i++ {
			var k, v []byte
			if k, p, ok = readBytes(p); !ok {
				return "header key overruns payload"
			}
			if i > 0 && bytes.Compare(prev, k) >= 0 {
				return "header keys not in increasing order"
			}
			if v, p, ok = readBytes(p); !ok {
				return "header value overruns payload"
			}
			r.Headers[s.str(k)] = s.str(v)
			prev = k
		}
	}
	body, p, ok := readBytes(p)
	if !ok {
		return "body overruns payload"
	}
	if len(p) != 0 {
		return "trailing bytes after put body"
	}
	if len(body) > 0 {
		r.Body = body[:len(body):len(body)]
	}
	return ""
}

func decodeTake(p []byte, r *Record, s *scratch) string {
	count, p, ok := readUvarint(p)
	if !ok {
		return "bad pointer count"
	}
	if count > uint64(len(p))/8 {
		return "pointer count overruns payload"
	}
	if uint64(len(p)) != 8*count {
		return "trailing bytes after take pointers"
	}
	if count == 0 {
		return ""
	}
	var ptrs []uint64
	if s != nil {
		ptrs = slices.Grow(s.pointers[:0], int(count))[:count]
		s.pointers = ptrs
	} else {
		ptrs = make([]uint64, count)
	}
	for i := range ptrs {
		ptrs[i] = binary.BigEndian.Uint64(p[8*i:])
	}
	r.Pointers = ptrs
	return ""
}

// readUvarint reads a minimally encoded uvarint (the only form
// binary.AppendUvarint writes) from the start of b.
func readUvarint(b []byte) (uint64, []byte, bool) {
	x, n := binary.Uvarint(b)
	if n <= 0 || (n > 1 && b[n-1] == 0) {
		return 0, b, false
	}
	return x, b[n:], true
}

// readBytes reads a uvarint length and that many bytes from the start of b.
func readBytes(b []byte) ([]byte, []byte, bool) {
	l, b, ok := readUvarint(b)
	if !ok || l > uint64(len(b)) {
		return nil, b, false
	}
	return b[:l], b[l:], true
}

// decodeKey decodes a key record's body: the key id, its check value and,
// in a file bound to its channel (bound, version 6), the channel id.
func decodeKey(p []byte, r *Record, bound bool) string {
	if r.TxID != 0 {
		return "key record with a transaction id"
	}
	want := uint64(seal.CheckSize)
	if bound {
		want += seal.ChannelIDSize
	}
	n, p, ok := readUvarint(p)
	if !ok || n == 0 || n > MaxKeyIDLen || uint64(len(p)) != n+want {
		return "bad key record"
	}
	r.KeyID = string(p[:n])
	p = p[n:]
	copy(r.KeyCheck[:], p)
	if bound {
		copy(r.ChannelID[:], p[seal.CheckSize:])
		if r.ChannelID == ([seal.ChannelIDSize]byte{}) {
			return "key record with a zero channel id"
		}
	}
	return ""
}

// DecodePutBody decodes the body of a put (its headers and event body, as
// an encrypted file's put holds them once opened) into r, whose fixed fields
// are set. Body aliases b.
func DecodePutBody(b []byte, r *Record) error {
	if reason := decodePut(b, r, nil); reason != "" {
		return &corrupt.Error{Offset: -1, Reason: reason}
	}
	return nil
}
