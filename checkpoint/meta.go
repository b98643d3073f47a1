package checkpoint

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// LogState is what a checkpoint records about one data log file.
type LogState struct {
	FileID uint32
	// Position: every record of this file before Position has write-order
	// id <= W, so replay may start reading the file here.
	Position int64
	// Refs counts the queued pointers (ring only, not inflight) into this file.
	Refs int
	// Completes lists, strictly ascending, the ids of the other log files
	// holding puts that this file's records complete: the events its take
	// records take, and the spilled puts its put commits commit (see
	// logfile.Set.Complete). Log deletion keeps this file while any of
	// them exists.
	Completes []uint32
	// Spilled lists, strictly ascending by Tx, the commits of the spilled
	// put transactions whose puts this file holds (logfile.SpilledCommit):
	// their events' ids and times come from them. Empty in a version-1
	// checkpoint.meta, which did not record them.
	Spilled []SpilledTx
	// Index is what this file's events span (logfile.FileIndex): the
	// first and last put commits with an event in it and their least and
	// greatest times. Not known in a version-1 checkpoint.meta.
	Index LogIndex
}

// LogIndex is a log file's logfile.FileIndex as a checkpoint records it.
type LogIndex struct {
	Known                   bool
	FirstCommit, LastCommit uint64 // write-order ids of commit records; both 0: no event
	MinTime, MaxTime        int64  // Unix nanoseconds, >= 0
}

// SpilledTx is the commit of spilled put transaction Tx.
type SpilledTx struct {
	Tx           uint64
	WriteOrderID uint64 // the commit record's
	Time         int64  // the commit's, Unix nanoseconds (>= 0)
}

// Meta is the content of checkpoint.meta.
type Meta struct {
	WriteOrderID uint64
	Capacity     int
	Head, Size   int
	NextFileID   uint32
	MaxTxID      uint64
	Time         time.Time // the zero Time is stored as 0 and read back as the zero Time
	// RingCRC is the CRC32C of the live ring slots (see format.go); 0 when
	// Size is 0. Open returns the value it verified; Write ignores the
	// caller's value and stores the CRC it computes from the file.
	RingCRC uint32
	Logs    []LogState // strictly ascending by FileID
}

// EncodeMeta returns the checkpoint.meta bytes of m. m must be valid: Write
// checks that before calling it (see validateMeta); DecodeMeta rejects the
// bytes of an invalid Meta.
func EncodeMeta(m *Meta) []byte { return appendMeta(nil, m) }

// appendMeta appends the checkpoint.meta bytes of m to dst.
func appendMeta(dst []byte, m *Meta) []byte { return appendMetaAs(dst, m, metaVersion) }

// appendMetaAs is appendMeta in format version v: 1 leaves the spilled
// commits out (for the tests of files older releases wrote).
func appendMetaAs(dst []byte, m *Meta, v uint16) []byte {
	start := len(dst)
	dst = append(dst, metaMagic...)
	dst = binary.BigEndian.AppendUint16(dst, v)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, m.WriteOrderID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Capacity))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Head))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Size))
	dst = binary.BigEndian.AppendUint32(dst, m.NextFileID)
	dst = binary.BigEndian.AppendUint64(dst, m.MaxTxID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(timeToNanos(m.Time)))
	dst = binary.BigEndian.AppendUint32(dst, m.RingCRC)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Logs)))
	for i := range m.Logs {
		l := &m.Logs[i]
		dst = binary.BigEndian.AppendUint32(dst, l.FileID)
		dst = binary.BigEndian.AppendUint64(dst, uint64(l.Position))
		dst = binary.BigEndian.AppendUint64(dst, uint64(l.Refs))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(l.Completes)))
		for _, id := range l.Completes {
			dst = binary.BigEndian.AppendUint32(dst, id)
		}
		if v < 2 {
			continue
		}
		dst = appendLogIndex(dst, l.Index)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(l.Spilled)))
		for _, s := range l.Spilled {
			dst = binary.BigEndian.AppendUint64(dst, s.Tx)
			dst = binary.BigEndian.AppendUint64(dst, s.WriteOrderID)
			dst = binary.BigEndian.AppendUint64(dst, uint64(s.Time))
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// DecodeMeta parses checkpoint.meta bytes. Bad bytes give a *corrupt.Error
// naming the file "checkpoint.meta" and the offset of the bad field; a
// newer format version gives a *corrupt.FormatError.
func DecodeMeta(b []byte) (Meta, error) { return decodeMeta(MetaName, b) }

// ReadMeta reads and decodes dir's checkpoint.meta, with bounded memory
// (readFramed): bad bytes, an impossible length included, give a
// *corrupt.Error naming its path.
func ReadMeta(fsys vfs.FS, dir string) (Meta, error) {
	name := path(dir, MetaName)
	b, err := readFramed(fsys, name, metaMagic, metaVersion)
	if err != nil {
		return Meta{}, fmt.Errorf("read checkpoint meta: %w", err)
	}
	m, err := decodeMeta(name, b)
	if err != nil {
		return Meta{}, fmt.Errorf("read checkpoint meta: %w", err)
	}
	return m, nil
}

func decodeMeta(file string, b []byte) (Meta, error) {
	var m Meta
	body, v, err := checkFrameUpTo(file, b, metaMagic, metaFixedLen, metaVersion)
	if err != nil {
		return m, err
	}
	be := binary.BigEndian
	m.WriteOrderID = be.Uint64(body[metaOffWriteID:])
	capacity := be.Uint64(body[metaOffCapacity:])
	if capacity < 1 || capacity > maxCapacity {
		return m, corrupt.New(file, metaOffCapacity, "capacity %d out of range", capacity)
	}
	head, size := be.Uint64(body[metaOffHead:]), be.Uint64(body[metaOffSize:])
	if head >= capacity {
		return m, corrupt.New(file, metaOffHead, "head %d not below capacity %d", head, capacity)
	}
	if size > capacity {
		return m, corrupt.New(file, metaOffSize, "size %d above capacity %d", size, capacity)
	}
	m.Capacity, m.Head, m.Size = int(capacity), int(head), int(size)
	m.NextFileID = be.Uint32(body[metaOffNextFile:])
	m.MaxTxID = be.Uint64(body[metaOffMaxTxID:])
	ns := be.Uint64(body[metaOffTime:])
	if ns > math.MaxInt64 {
		return m, corrupt.New(file, metaOffTime, "time %d out of range", ns)
	}
	m.Time = nanosToTime(int64(ns))
	m.RingCRC = be.Uint32(body[metaOffRingCRC:])
	if m.Size == 0 && m.RingCRC != 0 {
		return m, corrupt.New(file, metaOffRingCRC, "ring checksum %#08x for an empty queue", m.RingCRC)
	}
	n := be.Uint32(body[metaOffLogCount:])
	off := metaFixedLen
	if uint64(n) > uint64(len(body)-off)/metaLogFixedLen {
		return m, corrupt.New(file, metaOffLogCount, "log count %d exceeds the %d bytes left", n, len(body)-off)
	}
	if n > 0 {
		m.Logs = make([]LogState, n)
	}
	for i := range m.Logs {
		var prev *LogState
		if i > 0 {
			prev = &m.Logs[i-1]
		}
		if off, err = decodeLogState(file, body, off, v, i, &m.Logs[i], prev); err != nil {
			return m, err
		}
	}
	if off != len(body) {
		return m, corrupt.New(file, int64(off), "%d trailing bytes", len(body)-off)
	}
	return m, nil
}

// decodeLogState decodes log entry i, l, of a checkpoint.meta of version
// v from body at off (prev: the entry before it, nil for the first) and
// returns the offset after it.
func decodeLogState(file string, body []byte, off int, v uint16, i int, l, prev *LogState) (int, error) {
	be := binary.BigEndian
	if len(body)-off < metaLogFixedLen {
		return off, corrupt.New(file, int64(off), "log entry %d truncated", i)
	}
	l.FileID = be.Uint32(body[off:])
	if prev != nil && l.FileID <= prev.FileID {
		return off, corrupt.New(file, int64(off), "log file id %d not above %d", l.FileID, prev.FileID)
	}
	pos, refs := be.Uint64(body[off+4:]), be.Uint64(body[off+12:])
	if pos > math.MaxInt64 {
		return off, corrupt.New(file, int64(off+4), "log %d position %d out of range", l.FileID, pos)
	}
	if refs > math.MaxInt {
		return off, corrupt.New(file, int64(off+12), "log %d refs %d out of range", l.FileID, refs)
	}
	l.Position, l.Refs = int64(pos), int(refs)
	k := be.Uint32(body[off+20:])
	off += metaLogFixedLen
	if uint64(k) > uint64(len(body)-off)/4 {
		return off, corrupt.New(file, int64(off-4), "log %d completes count %d exceeds the %d bytes left", l.FileID, k, len(body)-off)
	}
	if k > 0 {
		l.Completes = make([]uint32, k)
	}
	for j := range l.Completes {
		id := be.Uint32(body[off:])
		if j > 0 && id <= l.Completes[j-1] {
			return off, corrupt.New(file, int64(off), "log %d completes id %d not above %d", l.FileID, id, l.Completes[j-1])
		}
		l.Completes[j] = id
		off += 4
	}
	if v < 2 {
		return off, nil
	}
	if len(body)-off < metaIndexLen {
		return off, corrupt.New(file, int64(off), "log %d index truncated", l.FileID)
	}
	var ok bool
	if l.Index, ok = decodeLogIndex(body[off:]); !ok {
		return off, corrupt.New(file, int64(off), "log %d index out of range", l.FileID)
	}
	return decodeSpilled(file, body, off+metaIndexLen, l)
}

// appendLogIndex appends x: a flags byte (bit 0: known), the first and
// last commits, the least and greatest times.
func appendLogIndex(dst []byte, x LogIndex) []byte {
	var flags byte
	if x.Known {
		flags = 1
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, x.FirstCommit)
	dst = binary.BigEndian.AppendUint64(dst, x.LastCommit)
	dst = binary.BigEndian.AppendUint64(dst, uint64(x.MinTime))
	return binary.BigEndian.AppendUint64(dst, uint64(x.MaxTime))
}

// decodeLogIndex decodes an index appendLogIndex wrote (b holds at least
// metaIndexLen bytes); false if it is not one (validLogIndex).
func decodeLogIndex(b []byte) (LogIndex, bool) {
	be := binary.BigEndian
	if b[0] > 1 {
		return LogIndex{}, false
	}
	lo, hi := be.Uint64(b[17:]), be.Uint64(b[25:])
	if lo > math.MaxInt64 || hi > math.MaxInt64 {
		return LogIndex{}, false
	}
	x := LogIndex{Known: b[0] == 1, FirstCommit: be.Uint64(b[1:]), LastCommit: be.Uint64(b[9:]), MinTime: int64(lo), MaxTime: int64(hi)}
	return x, validLogIndex(x)
}

// validLogIndex reports whether x is an index the channel records: an
// unknown one all zero; a known one empty (all zero) or with its first
// commit at or before its last and its least time at or before its
// greatest.
func validLogIndex(x LogIndex) bool {
	switch {
	case !x.Known || x.FirstCommit == 0:
		return x.FirstCommit == 0 && x.LastCommit == 0 && x.MinTime == 0 && x.MaxTime == 0
	default:
		return x.FirstCommit <= x.LastCommit && 0 <= x.MinTime && x.MinTime <= x.MaxTime
	}
}

// decodeSpilled decodes the spilled commits of log entry l (version 2)
// from body at off and returns the offset after them.
func decodeSpilled(file string, body []byte, off int, l *LogState) (int, error) {
	be := binary.BigEndian
	if len(body)-off < 4 {
		return off, corrupt.New(file, int64(off), "log %d spilled count truncated", l.FileID)
	}
	k := be.Uint32(body[off:])
	off += 4
	if uint64(k) > uint64(len(body)-off)/metaSpilledLen {
		return off, corrupt.New(file, int64(off-4), "log %d spilled count %d exceeds the %d bytes left", l.FileID, k, len(body)-off)
	}
	if k > 0 {
		l.Spilled = make([]SpilledTx, k)
	}
	for j := range l.Spilled {
		s := SpilledTx{Tx: be.Uint64(body[off:]), WriteOrderID: be.Uint64(body[off+8:])}
		ns := be.Uint64(body[off+16:])
		switch {
		case j > 0 && s.Tx <= l.Spilled[j-1].Tx:
			return off, corrupt.New(file, int64(off), "log %d spilled tx %d not above %d", l.FileID, s.Tx, l.Spilled[j-1].Tx)
		case ns > math.MaxInt64:
			return off, corrupt.New(file, int64(off+16), "log %d spilled commit time %d out of range", l.FileID, ns)
		}
		s.Time = int64(ns)
		l.Spilled[j] = s
		off += metaSpilledLen
	}
	return off, nil
}

// checkFrame checks what checkpoint.meta and the inflight files share: the
// magic, then the version (a newer one is a *corrupt.FormatError, before
// anything a newer version may change), then a length of at least fixedLen
// plus the CRC, the CRC over everything before it and zero reserved bytes.
// It returns the bytes before the CRC.
func checkFrame(file string, b []byte, magic string, fixedLen int) ([]byte, error) {
	body, _, err := checkFrameUpTo(file, b, magic, fixedLen, formatVersion)
	return body, err
}

// checkFrameUpTo is checkFrame for a file whose versions 1 to newest this
// build reads; it returns the version too.
func checkFrameUpTo(file string, b []byte, magic string, fixedLen int, newest uint16) ([]byte, uint16, error) {
	tooShort := func() error {
		return corrupt.New(file, int64(len(b)), "file too short: %d bytes, want at least %d", len(b), fixedLen+crcLen)
	}
	if len(b) < versionEnd {
		return nil, 0, tooShort()
	}
	v, err := checkFramePrefix(file, b, magic, newest)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < fixedLen+crcLen {
		return nil, 0, tooShort()
	}
	body := b[:len(b)-crcLen]
	if want, got := binary.BigEndian.Uint32(b[len(body):]), crc32.Checksum(body, crcTable); want != got {
		return nil, 0, checksumMismatch(file, int64(len(body)), want, got)
	}
	if r := binary.BigEndian.Uint16(body[6:]); r != 0 {
		return nil, 0, corrupt.New(file, 6, "reserved bytes %#04x not zero", r)
	}
	return body, v, nil
}

// checkFramePrefix checks the magic and then the version of a framed file
// from b, its first versionEnd or more bytes, and returns the version.
func checkFramePrefix(file string, b []byte, magic string, newest uint16) (uint16, error) {
	if string(b[:4]) != magic {
		return 0, corrupt.New(file, 0, "bad magic %q, want %q", b[:4], magic)
	}
	if err := newerFileThan(file, b, magic, newest); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint16(b[versionOffset:])
	if v < MinFormatVersion || v > newest {
		return 0, corrupt.New(file, versionOffset, "unsupported version %d", v)
	}
	return v, nil
}

// checksumMismatch is the error of a framed file whose CRC, stored at off,
// is not the one computed.
func checksumMismatch(file string, off int64, stored, computed uint32) error {
	return corrupt.New(file, off, "checksum mismatch: stored %#08x, computed %#08x", stored, computed)
}

// timeToNanos stores the zero Time as 0 (its UnixNano is undefined).
func timeToNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nanosToTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// validateMeta reports why m cannot be encoded into a checkpoint.meta that
// DecodeMeta accepts, or nil.
func validateMeta(m *Meta) error {
	switch {
	case m.Capacity < 1 || m.Capacity > maxCapacity:
		return fmt.Errorf("capacity %d out of range", m.Capacity)
	case m.Head < 0 || m.Head >= m.Capacity:
		return fmt.Errorf("head %d out of range for capacity %d", m.Head, m.Capacity)
	case m.Size < 0 || m.Size > m.Capacity:
		return fmt.Errorf("size %d out of range for capacity %d", m.Size, m.Capacity)
	case timeToNanos(m.Time) < 0:
		return fmt.Errorf("time %v before 1970", m.Time)
	case m.Size == 0 && m.RingCRC != 0:
		return fmt.Errorf("ring checksum %#08x for an empty queue", m.RingCRC)
	case uint64(len(m.Logs)) > math.MaxUint32:
		return fmt.Errorf("%d log states", len(m.Logs))
	}
	for i := range m.Logs {
		l := &m.Logs[i]
		switch {
		case i > 0 && l.FileID <= m.Logs[i-1].FileID:
			return fmt.Errorf("log file ids not strictly ascending: %d after %d", l.FileID, m.Logs[i-1].FileID)
		case l.Position < 0:
			return fmt.Errorf("log %d: negative position %d", l.FileID, l.Position)
		case l.Refs < 0:
			return fmt.Errorf("log %d: negative refs %d", l.FileID, l.Refs)
		case uint64(len(l.Completes)) > math.MaxUint32:
			return fmt.Errorf("log %d: %d completes ids", l.FileID, len(l.Completes))
		case uint64(len(l.Spilled)) > math.MaxUint32:
			return fmt.Errorf("log %d: %d spilled commits", l.FileID, len(l.Spilled))
		case !validLogIndex(l.Index):
			return fmt.Errorf("log %d: index %+v out of range", l.FileID, l.Index)
		}
		for j, s := range l.Spilled {
			if s.Time < 0 || (j > 0 && s.Tx <= l.Spilled[j-1].Tx) {
				return fmt.Errorf("log %d: spilled commits not strictly ascending by tx, or a negative time: tx %d at %d", l.FileID, s.Tx, s.Time)
			}
		}
		for j := 1; j < len(l.Completes); j++ {
			if l.Completes[j] <= l.Completes[j-1] {
				return fmt.Errorf("log %d: completes not strictly ascending: %d after %d", l.FileID, l.Completes[j], l.Completes[j-1])
			}
		}
	}
	return nil
}
