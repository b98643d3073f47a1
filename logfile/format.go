package logfile

// Log file format, version 1. All integers are big-endian. CRC is CRC32C
// (Castagnoli).
//
// File header, HeaderSize (16) bytes at offset 0:
//
//	0  4  magic "FCLG" (0x46 0x43 0x4C 0x47)
//	4  2  format version, uint16 BE = 1
//	6  2  reserved, zero
//	8  4  file id, uint32 BE
//	12 4  CRC32C of bytes 0..11, uint32 BE
//
// Records follow from offset 16 (HeaderSize). A record's *offset* (its
// pointer) is the offset of its frame.
//
// Frame:
//
//	0  4  payload length L, uint32 BE; 1 <= L <= MaxPayloadSize (64 MiB); 0 means "no record here" (end / zero fill)
//	4  4  CRC32C over bytes 0..3 (the length field) followed by the L payload bytes, uint32 BE
//	8  L  payload
//
// Payload:
//
//	0  1  record type: 1 put, 2 take, 3 rollback, 4 commit, 5 padding
//	1  8  transaction id, uint64 BE (0 for padding)
//	9  8  write-order id, uint64 BE (global, strictly increasing in append order within a file
//	      among the records that are not padding; 0 for padding)
//	17 .. type-specific body:
//	   put:      uvarint header count; per header (sorted by key, so bytes are deterministic):
//	             uvarint key len, key bytes, uvarint value len, value bytes; then uvarint body len, body bytes
//	   take:     uvarint pointer count n; n x uint64 BE pointers (fileID<<32 | offset) of the put records consumed
//	   rollback: empty
//	   commit:   1 byte: the type being committed (1 put or 2 take); uvarint count: the number of
//	             events the transaction put (all its put records) or took (all pointers of its take records),
//	             so that replay can tell a transaction whose records it saw only in part
//	   padding:  filler, zero bytes (any number, 0 included)
//
// A padding record takes the place of damaged bytes that a repair
// (channel.Repair, PadRegion) copied to a .corrupt file, so that no record
// after them moves: pointers name records by offset. It belongs to no
// transaction and has no write-order id; replay steps over it (and treats it
// as former damage), and a take of a pointer to it is a damaged event. A
// padding frame is MinPaddingSize (25) to MaxFrameSize bytes long; a longer
// region is covered by several.
//
// A payload with trailing bytes after its body, type 0, or lengths that
// overrun are corrupt. So are encodings the writer never produces, so that
// every record that decodes re-encodes to the same bytes: a uvarint in more
// bytes than needed, header keys not in strictly increasing byte order, a
// commit of a type other than put or take, padding with a non-zero
// transaction id, write-order id or filler byte.
//
// Compatibility (docs/format.md, "Compatibility"): the magic and the version
// keep offsets 0 and 4 of the header in every version, and a decoder reads
// them before anything a newer version may change (the header's length and
// CRC, the frame layout). A version above FormatVersion is a
// *corrupt.FormatError, not corruption; so is a frame whose CRC matches and
// whose type (or, for a commit, the type it commits) is above
// maxRecordType: a newer release numbers its new record types from 6 up.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/flumego/filechannel/internal/corrupt"
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
)

// Sizes and version; part of the on-disk format; never renumber.
const (
	HeaderSize      = 16       // file header
	FrameHeaderSize = 8        // payload length + CRC
	MaxPayloadSize  = 64 << 20 // largest payload a frame may carry
	FormatVersion   = 1        // version written in the file header
)

// Padding frame sizes; follow from the format.
const (
	MinPaddingSize = FrameHeaderSize + payloadHeaderSize // 25: a padding frame with no filler
	MaxFrameSize   = FrameHeaderSize + MaxPayloadSize    // the longest frame of any type
)

// Further layout constants; part of the on-disk format; never renumber.
const (
	magic             = "FCLG"
	payloadHeaderSize = 17 // type + transaction id + write-order id

	// The header's magic and version keep these offsets in every format
	// version, so that any build can tell a newer file from a damaged one.
	versionOffset = 4 // uint16 BE, after the 4-byte magic
	versionEnd    = 6 // the header bytes needed to read the magic and the version

	// maxRecordType is the highest record type of this format version; a
	// newer release numbers the types it adds above it.
	maxRecordType = RecordPadding
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
	Pointers     []uint64          // take; nil when a decoded take has none
	CommitType   RecordType        // commit: RecordPut or RecordTake
	Count        uint64            // commit: events put or taken by the transaction
	Filler       int               // padding: the number of zero bytes after the fixed fields
}

// EncodedSize returns the size of the whole frame AppendRecord writes for r:
// FrameHeaderSize + payload.
func (r *Record) EncodedSize() int {
	return FrameHeaderSize + r.payloadSize()
}

func (r *Record) payloadSize() int {
	n := payloadHeaderSize
	switch r.Type {
	case RecordPut:
		n += uvarintLen(uint64(len(r.Headers)))
		for k, v := range r.Headers {
			n += uvarintLen(uint64(len(k))) + len(k) + uvarintLen(uint64(len(v))) + len(v)
		}
		n += uvarintLen(uint64(len(r.Body))) + len(r.Body)
	case RecordTake:
		n += uvarintLen(uint64(len(r.Pointers))) + 8*len(r.Pointers)
	case RecordCommit:
		n += 1 + uvarintLen(r.Count)
	case RecordPadding:
		n += max(r.Filler, 0)
	}
	return n
}

// uvarintLen is the number of bytes binary.AppendUvarint uses for x.
func uvarintLen(x uint64) int {
	return (bits.Len64(x|1) + 6) / 7
}

// AppendRecord appends r's frame to dst and returns the extended slice. It
// returns ErrTooLarge if the payload would exceed MaxPayloadSize, and
// ErrInvalidRecord for an unknown Type, a commit of a type other than put
// or take, or padding with a transaction id, a write-order id or a negative
// Filler; dst is returned unchanged with an error. With a dst of enough
// capacity it does not allocate (unless a put has more than 16 headers).
func AppendRecord(dst []byte, r *Record) ([]byte, error) {
	start := len(dst)
	dst, err := AppendUnsealed(dst, r)
	if err != nil {
		return dst, err
	}
	frame := dst[start:]
	binary.BigEndian.PutUint32(frame[4:8], frameCRC(frame[0:4], frame[FrameHeaderSize:]))
	return dst, nil
}

// AppendUnsealed is AppendRecord without the checksum: the frame's CRC
// field is left zero, and the frame is not valid until SetWriteOrderID
// seals it. The channel encodes puts this way and seals them at commit,
// once their write-order ids are known, so each record's CRC32C is
// computed once.
func AppendUnsealed(dst []byte, r *Record) ([]byte, error) {
	switch r.Type {
	case RecordPut, RecordTake, RecordRollback:
	case RecordCommit:
		if r.CommitType != RecordPut && r.CommitType != RecordTake {
			return dst, fmt.Errorf("%w: commit of %v", ErrInvalidRecord, r.CommitType)
		}
	case RecordPadding:
		if r.TxID != 0 || r.WriteOrderID != 0 || r.Filler < 0 {
			return dst, fmt.Errorf("%w: padding with transaction id %d, write-order id %d, filler %d", ErrInvalidRecord, r.TxID, r.WriteOrderID, r.Filler)
		}
	default:
		return dst, fmt.Errorf("%w: unknown type %v", ErrInvalidRecord, r.Type)
	}
	n := r.payloadSize()
	if n > MaxPayloadSize {
		return dst, fmt.Errorf("%w: payload of %d bytes, limit %d", ErrTooLarge, n, MaxPayloadSize)
	}
	dst = slices.Grow(dst, FrameHeaderSize+n)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, 0, 0, 0, 0) // CRC, filled in below
	dst = append(dst, byte(r.Type))
	dst = binary.BigEndian.AppendUint64(dst, r.TxID)
	dst = binary.BigEndian.AppendUint64(dst, r.WriteOrderID)
	switch r.Type {
	case RecordPut:
		dst = appendHeaders(dst, r.Headers)
		dst = binary.AppendUvarint(dst, uint64(len(r.Body)))
		dst = append(dst, r.Body...)
	case RecordTake:
		dst = binary.AppendUvarint(dst, uint64(len(r.Pointers)))
		for _, p := range r.Pointers {
			dst = binary.BigEndian.AppendUint64(dst, p)
		}
	case RecordCommit:
		dst = append(dst, byte(r.CommitType))
		dst = binary.AppendUvarint(dst, r.Count)
	case RecordPadding:
		dst = dst[:len(dst)+r.Filler] // capacity grown above
		clear(dst[len(dst)-r.Filler:])
	}
	return dst, nil
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

// frameCRC is the frame checksum: CRC32C of the length field, then the payload.
func frameCRC(length, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(length, castagnoli), castagnoli, payload)
}

// DecodeRecord decodes one frame at the start of b and returns the record
// and the frame length. The record's Body aliases b. It returns
// io.ErrUnexpectedEOF if b is shorter than the frame claims, a
// *corrupt.FormatError for a frame whose checksum matches but whose record
// type a newer release added, and a *corrupt.Error for a bad length,
// checksum or payload; both with File "" and Offset -1 (callers fill them
// in). It never panics.
func DecodeRecord(b []byte) (Record, int, error) {
	var r Record
	n, err := decodeFrame(b, &r, nil, 0)
	if err != nil {
		return Record{}, 0, err
	}
	return r, n, nil
}

// scratch holds a decoder's reusable allocations (the Scanner's), so that
// records decode without allocating once it has warmed up.
type scratch struct {
	headers  map[string]string
	pointers []uint64
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

// frameLen reads the length field at the start of b (len(b) >= 4) and
// returns the whole frame length, or a corruption error for a zero or too
// large length.
func frameLen(b []byte) (int, error) {
	l := binary.BigEndian.Uint32(b)
	if l == 0 {
		return 0, corrupt.New("", -1, "zero payload length")
	}
	if l > MaxPayloadSize {
		return 0, corrupt.New("", -1, "payload length %d exceeds limit %d", l, MaxPayloadSize)
	}
	return FrameHeaderSize + int(l), nil
}

// decodeFrame validates the frame at the start of b and decodes it into r
// (using s's allocations when s is not nil). It returns the frame length.
// Errors are io.ErrUnexpectedEOF when b is too short, a *corrupt.FormatError
// for a checksummed frame of a newer record type (newerType), and corruption
// errors otherwise, with File "" and Offset -1: a fresh value callers may
// fill in.
//
// A frame no longer than checked is taken to have a valid CRC (a Scanner's
// CheckAhead verified it); pass 0 to check every frame.
func decodeFrame(b []byte, r *Record, s *scratch, checked int64) (int, error) {
	if len(b) < FrameHeaderSize {
		if len(b) >= 4 {
			if _, err := frameLen(b); err != nil {
				return 0, err
			}
		}
		return 0, io.ErrUnexpectedEOF
	}
	n, err := frameLen(b)
	if err != nil {
		return 0, err
	}
	if len(b) < n {
		return 0, io.ErrUnexpectedEOF
	}
	payload := b[FrameHeaderSize:n]
	if int64(n) > checked {
		if got, want := frameCRC(b[0:4], payload), binary.BigEndian.Uint32(b[4:8]); got != want {
			return 0, corrupt.New("", -1, "checksum mismatch: stored %#08x, computed %#08x", want, got)
		}
	}
	if t := newerType(payload); t != 0 {
		return 0, &corrupt.FormatError{Offset: -1, Version: FormatVersion, Supported: FormatVersion, RecordType: uint8(t)}
	}
	if reason := decodePayload(payload, r, s); reason != "" {
		return 0, &corrupt.Error{Offset: -1, Reason: reason}
	}
	return n, nil
}

// newerType returns the record type above maxRecordType that the
// checksummed payload p carries, as its own type or as the type a commit
// commits: a record a newer release wrote. It returns 0 when there is none.
func newerType(p []byte) RecordType {
	switch {
	case len(p) == 0:
		return 0
	case RecordType(p[0]) > maxRecordType:
		return RecordType(p[0])
	case RecordType(p[0]) == RecordCommit && len(p) > payloadHeaderSize && RecordType(p[payloadHeaderSize]) > maxRecordType:
		return RecordType(p[payloadHeaderSize])
	}
	return 0
}

// decodePayload decodes a checksummed payload into r. It returns a reason
// for the corruption, or "" if the payload is valid.
func decodePayload(p []byte, r *Record, s *scratch) string {
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
		return decodePut(p, r, s)
	case RecordTake:
		return decodeTake(p, r, s)
	case RecordRollback:
		if len(p) != 0 {
			return "trailing bytes after rollback"
		}
	case RecordCommit:
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
		if len(rest) != 0 {
			return "trailing bytes after commit"
		}
		r.Count = count
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

// AppendPadding appends a padding frame (type RecordPadding) of exactly size
// bytes to dst: MinPaddingSize <= size <= MaxFrameSize, else ErrInvalidRecord
// and dst unchanged. Use PaddingSizes to cover a longer region.
func AppendPadding(dst []byte, size int) ([]byte, error) {
	if size < MinPaddingSize || size > MaxFrameSize {
		return dst, fmt.Errorf("%w: padding frame of %d bytes, want %d to %d", ErrInvalidRecord, size, MinPaddingSize, MaxFrameSize)
	}
	return AppendRecord(dst, &Record{Type: RecordPadding, Filler: size - MinPaddingSize})
}

// PaddingSizes splits a region of n bytes into the sizes of the padding
// frames that cover it exactly, in order: one frame up to MaxFrameSize, else
// frames of MaxFrameSize and a last one of at least MinPaddingSize. It
// returns nil for n < MinPaddingSize, which no padding can cover.
func PaddingSizes(n int64) []int {
	if n < MinPaddingSize {
		return nil
	}
	var sizes []int
	for n > MaxFrameSize {
		s := MaxFrameSize
		if n-MaxFrameSize < MinPaddingSize {
			s = MaxFrameSize - MinPaddingSize // leaves between 25 and 50 bytes
		}
		sizes = append(sizes, s)
		n -= int64(s)
	}
	return append(sizes, int(n))
}

// AppendFileHeader appends the HeaderSize-byte header of log file fileID.
func AppendFileHeader(dst []byte, fileID uint32) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, FormatVersion)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, fileID)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeFileHeader checks the file header at the start of b and returns the
// file id. It reads the magic and the version first: a version above
// FormatVersion is a *corrupt.FormatError (File "", Offset 4), whatever
// follows. Other errors are *corrupt.Error with File "" and Offset 0
// (callers fill in the file): short header, bad magic, version 0, checksum
// mismatch, non-zero reserved bytes.
func DecodeFileHeader(b []byte) (fileID uint32, err error) {
	if len(b) < versionEnd {
		return 0, corrupt.New("", 0, "file header is %d bytes, want %d", len(b), HeaderSize)
	}
	if string(b[0:4]) != magic {
		return 0, corrupt.New("", 0, "bad magic %q, not a log file", b[0:4])
	}
	switch v := binary.BigEndian.Uint16(b[versionOffset:versionEnd]); {
	case v > FormatVersion:
		return 0, &corrupt.FormatError{Offset: versionOffset, Version: uint64(v), Supported: FormatVersion}
	case v != FormatVersion:
		return 0, corrupt.New("", 0, "unsupported format version %d", v)
	}
	if len(b) < HeaderSize {
		return 0, corrupt.New("", 0, "file header is %d bytes, want %d", len(b), HeaderSize)
	}
	b = b[:HeaderSize]
	if got, want := crc32.Checksum(b[0:12], castagnoli), binary.BigEndian.Uint32(b[12:16]); got != want {
		return 0, corrupt.New("", 0, "file header checksum mismatch: stored %#08x, computed %#08x", want, got)
	}
	if binary.BigEndian.Uint16(b[6:8]) != 0 {
		return 0, corrupt.New("", 0, "reserved header bytes not zero")
	}
	return binary.BigEndian.Uint32(b[8:12]), nil
}

// SetWriteOrderID rewrites the write-order id of the encoded frame at the
// start of frame and (re)computes its CRC, sealing a frame of
// AppendUnsealed. The channel encodes records when they are put and assigns
// write-order ids only when it appends them, so the ids follow the order of
// the file. frame must hold a whole frame of AppendRecord or AppendUnsealed.
func SetWriteOrderID(frame []byte, woid uint64) {
	n := int(binary.BigEndian.Uint32(frame[0:4]))
	payload := frame[FrameHeaderSize : FrameHeaderSize+n]
	binary.BigEndian.PutUint64(payload[9:17], woid)
	binary.BigEndian.PutUint32(frame[4:8], frameCRC(frame[0:4], payload))
}
