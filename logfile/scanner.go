package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/edsrzf/mmap-go"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// scanBufSize is the Scanner's read size; it grows for frames that do not fit.
const scanBufSize = 1 << 20

// Tail says what follows the last valid record of a scanned file.
type Tail int

const (
	// TailClean: the file ends exactly at End, or only zero bytes follow it
	// (space the filesystem zero-filled after a crash).
	TailClean Tail = iota
	// TailTorn: non-zero bytes follow End that do not form a valid record: a
	// half-written last frame, or damage.
	TailTorn
	// TailLeftover: in a recycled file (Framing.Recycled), bytes follow End
	// that are not a record and that no sync mark vouches for: what the
	// file held before it was recycled, or a write a crash tore into
	// those bytes (the two cannot be told apart, and neither was
	// acknowledged). Not damage; nothing is cut.
	TailLeftover
)

func (t Tail) String() string {
	switch t {
	case TailClean:
		return "clean"
	case TailTorn:
		return "torn"
	case TailLeftover:
		return "leftover"
	}
	return fmt.Sprintf("Tail(%d)", int(t))
}

// Scanner reads a log file sequentially from a start offset (replay),
// through a large buffer.
//
// Padding records (RecordPadding, left by a repair) are returned like any
// other record, but play no part in the write-order checks below: they have
// no write-order id.
//
// At a frame that is not valid (bad checksum, zero or impossible length,
// running past the end of the file, bad payload) it looks for the next
// valid record further on: a frame that decodes, of a type other than
// padding, with a write-order id larger than that of the last good record
// that is not padding. If there is one, the bytes in
// between are damage in the middle of the file: the scanner records them as
// a Skip and goes on from that record. If there is none, the scan ends and
// Tail says whether the rest of the file is a clean end (nothing, or only
// zeros) or a torn tail (a half-written last write). Frames are checked
// with the file's Framing: from version 2 on bytes not sealed with the file's
// salt (frames a producer put in an event body) pass with probability
// 2^-64 per offset, and
// the search costs O(1) per offset unless a candidate's frame header
// checksum matches, so O(damaged bytes) in all.
//
// A frame whose checksum matches but whose record type this build does not
// know (a newer release wrote it) is not damage: the scan stops there, with
// Err a *corrupt.FormatError. A resync looks for records of this build only,
// so such a frame inside a damaged region is part of the region. A Scanner
// belongs to one goroutine.
//
//	s, err := NewScanner(fsys, path, start)
//	...
//	for s.Next() {
//		rec := s.Record() // valid until the next call to Next
//	}
//	if err := s.Err(); err != nil { ... }
//	for _, sk := range s.Skipped() { log the damage ... }
//	if s.Tail() == TailTorn { truncate to s.End() ... }
type Scanner struct {
	f    vfs.File
	id   uint32
	path string
	fr   Framing

	buf    []byte // buf[:bufLen] holds the file's bytes from offset bufOff
	bufOff int64
	bufLen int
	mm     mmap.MMap // the whole file, after MapFile; replaces buf for frames
	ahead  *checker  // after CheckAhead, until the scan leaves the frame chain

	pos      int64 // offset of the next frame: the end of the last valid record
	rec      Record
	recOff   int64
	lastWOID uint64 // write-order id of the last valid record (0 before any)
	size     int64  // file size, read when first needed (-1 before)
	sc       scratch
	skips    []Skip
	done     bool
	tail     Tail
	tailErr  error
	err      error

	// tearFrom: from this offset on, the file may be the one that was being
	// written when the process stopped, so a frame torn the way a crash
	// tears an overwrite ends the scan instead of being skipped (see
	// tornTail). math.MaxInt64 (never) unless Set.Scan sets it.
	tearFrom int64
	// syncedTo is the largest SyncedTo of the sync marks read so far (by
	// the scan, or searched for by syncedPast): the file was durable
	// that far, so nothing before it is a torn write.
	syncedTo int64

	// resyncPayload counts the payload bytes resync checksummed for
	// candidates that passed the O(1) checks: the work that would make a
	// resync quadratic if those checks let bad candidates through.
	resyncPayload int64
}

// Skip is a damaged region in the middle of a log file that a Scanner
// stepped over: Length bytes from Offset that are not valid records, followed
// by a valid one. Err is the *corrupt.Error for the frame at Offset.
type Skip struct {
	Offset int64
	Length int64
	Err    error
}

// NewScanner opens the log file at path, validates its header (a
// *corrupt.Error if bad, a *corrupt.FormatError if of a newer format
// version) and positions the scanner at start, which must be a record
// boundary. A start inside the header means the end of the header (36
// bytes, 16 in version 1); a start past the end of the file yields no
// records and a clean tail.
func NewScanner(fsys vfs.FS, path string, start int64) (*Scanner, error) {
	f, id, fr, err := openLog(fsys, path)
	if err != nil {
		return nil, err
	}
	return newScanner(f, id, path, start, fr), nil
}

// NewSalvageScanner is NewScanner for a log file whose header may be damaged:
// it takes the file id from the file's name (which must be a LogName) instead
// of the header, and if the header is not valid it records it as a Skip of
// the header's bytes at offset 0 (Framing().HeaderSize() of them) and scans
// the records after it, with the framing recoverFraming finds. A header
// that is valid but names another file id is still an error, as are a
// header of a newer format version and I/O errors.
func NewSalvageScanner(fsys vfs.FS, path string, start int64) (*Scanner, error) {
	f, id, fr, herr, err := openSalvage(fsys, path)
	if err != nil {
		return nil, err
	}
	s := newScanner(f, id, path, start, fr)
	if herr != nil {
		s.skips = append(s.skips, Skip{Offset: 0, Length: fr.HeaderSize(), Err: herr})
	}
	return s, nil
}

// OpenScanner opens a scanner on the log file at path from start, as
// recovery reads a file: NewScanner, and if the header is damaged,
// NewSalvageScanner (the name still says which file this is, and every
// record has its own checksum); salvaged says which. A valid header naming
// another file id is still an error wrapping ErrCorrupt; a header of a newer
// format version is a *corrupt.FormatError, never salvaged.
func OpenScanner(fsys vfs.FS, path string, start int64) (sc *Scanner, salvaged bool, err error) {
	sc, err = NewScanner(fsys, path, start)
	if errors.Is(err, corrupt.ErrCorrupt) {
		salvaged = true
		sc, err = NewSalvageScanner(fsys, path, start)
	}
	return sc, salvaged, err
}

func newScanner(f vfs.File, id uint32, path string, start int64, fr Framing) *Scanner {
	start = max(start, fr.HeaderSize())
	bufSize := int64(scanBufSize)
	if fi, err := f.Stat(); err == nil {
		// Small files (and fuzz inputs) need no megabyte of buffer; the
		// buffer still grows for longer frames.
		bufSize = min(bufSize, max(fi.Size()-start, 4096))
	}
	return &Scanner{
		f:        f,
		id:       id,
		path:     path,
		fr:       fr,
		buf:      make([]byte, bufSize),
		bufOff:   start,
		pos:      start,
		recOff:   start,
		size:     -1,
		tearFrom: math.MaxInt64,
	}
}

// MapFile makes the scanner read the file through a read-only memory
// mapping of its current length instead of copying it into a buffer: no
// read system calls and no copy, which makes a scan of a file in the page
// cache about twice as fast. It reports whether it mapped the file (only an
// OS file of more than a header can be).
//
// Use it only for a file that does not change while it is scanned (the
// mapping does not grow with it, and a truncation would fault), and only on
// a goroutine that has called debug.SetPanicOnFault(true) and recovers: an
// I/O error reading a mapped page is a fault (SIGBUS), not an error return.
// Record().Body then aliases the mapping and is valid until Close.
func (s *Scanner) MapFile() bool {
	osf, ok := s.f.(vfs.OSFile)
	if !ok || s.mm != nil {
		return false
	}
	size, err := s.Size()
	if err != nil || size <= s.fr.HeaderSize() || size > math.MaxInt {
		return false
	}
	m, err := mmap.MapRegion(osf.OSFile(), int(size), mmap.RDONLY, 0, 0)
	if err != nil {
		return false // the buffered reads still work
	}
	s.mm = m
	s.buf, s.bufLen = nil, 0
	return true
}

// CheckAhead starts a goroutine that verifies the CRC32C of the frames
// ahead of the scanner in the mapped file, so that Next only decodes what
// it has verified: the two halves of a scan's work run on two cores. It
// needs MapFile (and its caveats: the goroutine recovers from a fault on
// the mapping and stops, leaving the fault to the scan) and must be called
// before the first Next; it reports whether it started. The checker follows
// the chain of frame lengths from the scanner's start and stops at the
// first frame that does not check out; the scanner stops trusting it at its
// first bad frame (a resync may leave the chain). A scanner that catches up
// with the checker (on a cold file, the checker waits for the disk at each
// page it is the first to touch) verifies frames itself; the checker then
// goes on from where the scanner is instead of verifying them again.
// Close stops it.
func (s *Scanner) CheckAhead() bool {
	if s.mm == nil || s.ahead != nil || s.done || s.recOff != s.pos {
		return false
	}
	c := &checker{fr: s.fr}
	c.to.Store(s.pos)
	s.ahead = c
	c.wg.Add(1)
	go c.run(s.mm, s.pos)
	return true
}

// checker verifies frames ahead of a Scanner (CheckAhead).
type checker struct {
	fr Framing
	to atomic.Int64 // every frame of the chain ending at or before to has valid checksums
	// passed is the end of the last frame of the chain the scanner
	// verified itself, having caught up with the checker: the checker
	// resumes there rather than verify those frames a second time.
	passed atomic.Int64
	quit   atomic.Bool
	wg     sync.WaitGroup
}

func (c *checker) run(m []byte, off int64) {
	defer c.wg.Done()
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			// The scan meets the same fault and reports it.
		}
	}()
	for i := 0; ; i++ {
		if i&63 == 0 && c.quit.Load() {
			return
		}
		if p := c.passed.Load(); p > off {
			off = p
		}
		if off >= int64(len(m)) {
			return
		}
		b := m[off:]
		if len(b) < c.fr.FrameHeaderSize() {
			return
		}
		n, err := c.fr.frameLen(b)
		if err != nil || n > len(b) {
			return
		}
		if c.fr.check(b[:n]) != nil {
			return
		}
		off += int64(n)
		c.to.Store(off)
	}
}

// stopAhead stops the checker, if any, and waits for it.
func (s *Scanner) stopAhead() {
	if s.ahead == nil {
		return
	}
	s.ahead.quit.Store(true)
	s.ahead.wg.Wait()
	s.ahead = nil
}

// FileID returns the file id from the header.
func (s *Scanner) FileID() uint32 { return s.id }

// Framing returns the framing of the file's frames (its version and salt;
// for a salvage scanner, the one recoverFraming found).
func (s *Scanner) Framing() Framing { return s.fr }

// Next advances to the next valid record and reports whether there is one.
// After it returns false, Err reports an I/O error or a record of a newer
// release, if any, and otherwise Tail says how the file ends.
func (s *Scanner) Next() bool {
	for {
		if s.done {
			return false
		}
		n, bad, err := s.frameAt(s.pos, &s.rec)
		if err != nil {
			s.err = err
			s.done = true
			return false
		}
		if bad != nil {
			// Off the chain of frames the checker follows: check every CRC
			// from here on.
			s.stopAhead()
			torn, err := s.tornTail(s.pos)
			if err != nil {
				s.err = err
				s.done = true
				return false
			}
			if torn {
				s.stop(bad, s.fr.recycled)
				return false
			}
			next, m, err := s.resync(bad)
			if err != nil {
				s.err = err
				s.done = true
				return false
			}
			if m == 0 {
				s.stop(bad, false)
				return false
			}
			n = m
			s.skips = append(s.skips, Skip{Offset: s.pos, Length: next - s.pos, Err: bad})
			s.pos = next
		}
		if n == 0 {
			s.done = true // EOF exactly at a record boundary
			return false
		}
		if s.rec.Type == RecordSynced {
			// A sync mark is the scanner's alone. One claiming more
			// than was written before it is not trusted.
			if s.rec.SyncedTo <= s.pos {
				s.syncedTo = max(s.syncedTo, s.rec.SyncedTo)
			}
			s.pos += int64(n)
			continue
		}
		s.recOff = s.pos
		s.pos += int64(n)
		if s.rec.Type != RecordPadding { // padding has no write-order id
			s.lastWOID = s.rec.WriteOrderID
		}
		return true
	}
}

// tornTail reports whether the invalid frame at off ends the scan as a
// torn write: in a file that may have been written unsynced when the
// process stopped (tearFrom), a frame torn the way a crash tears an
// overwrite (tornOverwrite) at an offset no sync mark vouches for
// (syncedPast). A frame before a mark's SyncedTo was acknowledged: its
// damage is damage, and the records after it are kept.
//
// In a recycled file every invalid frame no mark vouches for ends the
// scan, in any file of a dir and without the zero-sector test: the bytes
// after the file's records are another file's (never zeros), and a crash
// tears an unsynced overwrite into them, so a record after a tear would
// read back valid (docs/format.md §3.4 step 0r).
func (s *Scanner) tornTail(off int64) (bool, error) {
	if s.fr.recycled {
		synced, err := s.syncedPast(off)
		return !synced, err
	}
	if off < s.tearFrom {
		return false, nil
	}
	torn, err := s.tornOverwrite(off)
	if err != nil || !torn {
		return false, err
	}
	synced, err := s.syncedPast(off)
	return !synced, err
}

// resync looks for the first valid record after the invalid frame at s.pos
// whose write-order id is larger than the last good record's. Padding is
// never a resync point (it has no write-order id): a padding frame after
// damage is stepped over with it, so a region a repair overwrote only in
// part is found again from the same start. It returns its
// offset and length, with the record decoded into s.rec, or n == 0 if the
// rest of the file holds none (a clean or torn end). Only zeros after s.pos
// is a clean end, decided without searching.
//
// Each candidate offset costs O(1) unless it passes every check that reads
// only its first MinPaddingSize bytes: the length bounds, the type, the
// write-order id and, from version 2 on, the frame header checksum (salted:
// bytes a producer wrote pass it with probability 2^-32, random bytes too).
// Only then is the payload checksummed, so a resync over d damaged bytes
// costs O(d) from version 2 on. Version 1 frames have no header checksum: a
// candidate whose claimed length fits costs that length.
func (s *Scanner) resync(bad error) (next int64, n int, err error) {
	if zero, err := s.zeroFrom(s.pos); err != nil || zero {
		return 0, 0, err
	}
	if _, err := s.Size(); err != nil {
		return 0, 0, err
	}
	fhs, minFrame := int64(s.fr.FrameHeaderSize()), s.fr.MinPaddingSize()
	for off := s.pos + 1; off+int64(minFrame) <= s.size; off++ {
		b, err := s.window(off, minFrame)
		if err != nil {
			return 0, 0, err
		}
		if len(b) < minFrame {
			break // the file shrank under us
		}
		// Cheap rejections first: the length must fit in the file, the
		// type exist (a record type of this build, not padding), the write-order
		// id move forward and (from version 2 on) the
		// frame header checksum match.
		l := int64(binary.BigEndian.Uint32(b))
		if l < payloadHeaderSize || l > MaxPayloadSize || off+fhs+l > s.size {
			continue
		}
		p := b[fhs:]
		if t := RecordType(p[0]); t < RecordPut || t > MaxRecordType || t == RecordPadding {
			continue
		}
		if binary.BigEndian.Uint64(p[9:17]) <= s.lastWOID {
			continue
		}
		if !s.fr.headerOK(b) {
			continue
		}
		s.resyncPayload += l
		n, bad, err := s.frameAt(off, &s.rec)
		if errors.Is(err, corrupt.ErrUnsupportedFormat) {
			continue // a commit of a newer type: damage is searched for this build's records only
		}
		if err != nil {
			return 0, 0, err
		}
		if bad == nil && n > 0 {
			return off, n, nil
		}
	}
	return 0, 0, nil
}

// tornOverwrite reports whether the invalid frame at off looks like a write
// that a crash tore in space that was laid out (zeros) before: its length
// reads 0, or some sector of what it claims to cover (a 512-byte sector cut
// to the frame) is all zero. A disk persists each sector of an overwrite
// whole, old or new, in any order, so such a frame is one whose write had
// not been made durable, and so is every record after it: they were written
// after it, and an fdatasync that returned would have covered it too. A
// frame damaged otherwise (no zero sector) is left to resync. A length
// beyond the maximum (a length field across two sectors, one of them old)
// is checked for its first MiB.
func (s *Scanner) tornOverwrite(off int64) (bool, error) {
	fhs := int64(s.fr.FrameHeaderSize())
	b, err := s.window(off, int(fhs))
	if err != nil || len(b) < 4 {
		return false, err
	}
	l := int64(binary.BigEndian.Uint32(b))
	if l == 0 {
		return true, nil
	}
	size, err := s.Size()
	if err != nil {
		return false, err
	}
	end := off + fhs + l
	if l > MaxPayloadSize {
		end = off + fhs + 1<<20
	}
	end = min(end, size)
	for a := off; a < end; {
		e := min((a/sectorSize+1)*sectorSize, end)
		b, err := s.window(a, int(e-a))
		if err != nil {
			return false, err
		}
		if int64(len(b)) < e-a {
			return false, nil // the file shrank under us
		}
		if zeros.All(b[:e-a]) {
			return true, nil
		}
		a = e
	}
	return false, nil
}

// sectorSize is the unit a disk persists whole: an overwrite torn by a
// crash leaves each sector old or new (tornOverwrite).
const sectorSize = 512

// syncedPast reports whether the file was durable past off when some
// sync mark (RecordSynced) after off was written: then the bytes at off
// had been acknowledged, and whatever is wrong with them is not a torn
// write. It searches the file after off for a valid mark whose SyncedTo
// is above off, one offset at a time, as resync searches (the salted frame
// header checksum rejects a candidate in O(1); runs of zeros are stepped
// over whole), and stops at the first; a mark found is remembered for
// later frames (syncedTo), so a scan's searches cost O(file) together:
// each ends at the first mark after its frame, and a search that finds
// none ends the scan. Version-1 files have no marks (and no salt: an event
// body could forge one).
func (s *Scanner) syncedPast(off int64) (bool, error) {
	if s.syncedTo > off {
		return true, nil
	}
	if s.fr.version == 1 {
		return false, nil
	}
	size, err := s.Size()
	if err != nil {
		return false, err
	}
	fhs := s.fr.FrameHeaderSize()
	need := fhs + payloadHeaderSize + 1 // the shortest mark
	for q := off + 1; q+int64(need) <= size; {
		b, err := s.window(q, need)
		if err != nil {
			return false, err
		}
		if len(b) < need {
			break // the file shrank under us
		}
		if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i < 0 || i > 3 {
			// No frame starts where its length would read 0.
			if i < 0 {
				i = len(b)
			}
			q += int64(max(i-3, 1))
			continue
		}
		l := binary.BigEndian.Uint32(b)
		if l < payloadHeaderSize+1 || l > payloadHeaderSize+binary.MaxVarintLen32 ||
			RecordType(b[fhs]) != RecordSynced || !s.fr.headerOK(b) {
			q++
			continue
		}
		var rec Record
		n, bad, err := s.frameAt(q, &rec)
		if err != nil && !errors.Is(err, corrupt.ErrUnsupportedFormat) {
			return false, err
		}
		if err == nil && bad == nil && n > 0 && rec.SyncedTo <= q {
			s.syncedTo = max(s.syncedTo, rec.SyncedTo)
			if rec.SyncedTo > off {
				return true, nil
			}
		}
		q++
	}
	return false, nil
}

// Size returns the size of the file, read once: the end of a torn tail.
func (s *Scanner) Size() (int64, error) {
	if s.size < 0 {
		fi, err := s.f.Stat()
		if err != nil {
			return 0, fmt.Errorf("stat log %d: %w", s.id, err)
		}
		s.size = fi.Size()
	}
	return s.size, nil
}

// Skipped returns the damaged regions in the middle of the file stepped over
// so far, in file order (see Skip). A damaged header read by a salvage
// scanner is the first.
func (s *Scanner) Skipped() []Skip { return s.skips }

// Record returns the current record. It and everything it refers to (Body,
// Headers, Pointers, Skip) are valid only until the next call to Next: Body
// aliases the scan buffer, and the Headers map and the Pointers and Skip
// slices are reused. A groups record's Catalog is its own.
func (s *Scanner) Record() *Record { return &s.rec }

// Offset returns the frame offset of the current record (its pointer's
// offset).
func (s *Scanner) Offset() int64 { return s.recOff }

// End returns the offset just past the last valid record read so far (the
// start offset before any): the valid end of the file.
func (s *Scanner) End() int64 { return s.pos }

// Tail reports, after Next returned false without an I/O error, what
// follows End.
func (s *Scanner) Tail() Tail { return s.tail }

// TailError describes why the frame at End is not valid when Tail is
// TailTorn: a *corrupt.Error naming the file and End. It is nil for a clean
// tail.
func (s *Scanner) TailError() error { return s.tailErr }

// Err returns the error that stopped the scan, if any: an I/O error, or a
// *corrupt.FormatError for a record of a type a newer release added (at
// Offset of the error; the file is not damaged there, this build cannot
// read it). A torn or corrupt tail is not an error here; see Tail.
func (s *Scanner) Err() error { return s.err }

// Close closes the file (and unmaps it) and drops the scan buffer. The
// scan's results (End, Tail, TailError, Skipped, Err, and Size if it was
// read before) stay.
func (s *Scanner) Close() error {
	s.done = true
	s.stopAhead()
	s.buf, s.bufLen, s.rec, s.sc = nil, 0, Record{}, scratch{}
	if s.mm != nil {
		if err := s.mm.Unmap(); err != nil {
			return errors.Join(fmt.Errorf("unmap log %d: %w", s.id, err), s.f.Close())
		}
		s.mm = nil
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close log %d: %w", s.id, err)
	}
	return nil
}

// frameAt validates the frame at off and decodes it into rec. It returns the
// frame length (0 at EOF), or bad: why the bytes at off are not a valid
// frame, a *corrupt.Error for this file and off. err is an I/O error, or a
// *corrupt.FormatError for a valid frame of a newer record type.
func (s *Scanner) frameAt(off int64, rec *Record) (n int, bad, err error) {
	b, err := s.window(off, s.fr.FrameHeaderSize())
	if err != nil {
		return 0, nil, err
	}
	if len(b) == 0 {
		return 0, nil, nil
	}
	if len(b) >= 4 {
		if need, lerr := s.fr.frameLen(b); lerr == nil && need > len(b) {
			if b, err = s.window(off, need); err != nil {
				return 0, nil, err
			}
		}
	}
	var checked int64
	if s.ahead != nil {
		checked = s.ahead.to.Load() - off
	}
	n, derr := decodeFrame(b, rec, &s.sc, checked, s.fr)
	if fe := newerAt(s.path, off, derr); fe != nil {
		return 0, nil, fe
	}
	if derr != nil {
		return 0, corruptAt(s.path, off, derr), nil
	}
	if s.ahead != nil && int64(n) > checked {
		s.ahead.passed.Store(off + int64(n)) // verified here: the checker skips it
	}
	return n, nil, nil
}

// window returns the file's bytes from off on, at least need of them unless
// the file ends sooner. The slice aliases the scan buffer.
func (s *Scanner) window(off int64, need int) ([]byte, error) {
	if s.mm != nil {
		if off >= int64(len(s.mm)) {
			return nil, nil
		}
		return s.mm[off:], nil
	}
	start := off - s.bufOff
	if start >= 0 && start <= int64(s.bufLen) && s.bufLen-int(start) >= need {
		return s.buf[start:s.bufLen], nil
	}
	// Move what is buffered from off on to the front, then read more.
	if start >= 0 && start < int64(s.bufLen) {
		s.bufLen = copy(s.buf, s.buf[start:s.bufLen])
	} else {
		s.bufLen = 0
	}
	s.bufOff = off
	if need > len(s.buf) {
		nb := make([]byte, need)
		copy(nb, s.buf[:s.bufLen])
		s.buf = nb
	}
	for s.bufLen < need {
		n, err := s.f.ReadAt(s.buf[s.bufLen:], s.bufOff+int64(s.bufLen))
		s.bufLen += n
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read log %d at offset %d: %w", s.id, s.bufOff+int64(s.bufLen), err)
		}
	}
	return s.buf[:s.bufLen], nil
}

// stop ends the scan at the invalid frame at End, after which no valid record
// follows, and classifies the tail; leftover: non-zero bytes there are a
// recycled file's leftovers (TailLeftover), not a torn tail.
func (s *Scanner) stop(bad error, leftover bool) {
	s.done = true
	zero, err := s.zeroFrom(s.pos)
	switch {
	case err != nil:
		s.err = err
	case zero:
		s.tail = TailClean
	case leftover:
		s.tail = TailLeftover
	default:
		s.tail, s.tailErr = TailTorn, bad
	}
}

// zeroFrom reports whether every byte of the file from off on is zero. It
// runs where the scan stops (stop) and at the start of each resync, before
// the search for the next record. Without a mapping it reads through the
// scan buffer and empties it (bufLen = 0), so the next window is read from
// the file again.
func (s *Scanner) zeroFrom(off int64) (bool, error) {
	if s.mm != nil {
		return zeros.All(s.mm[min(off, int64(len(s.mm))):]), nil
	}
	s.bufLen = 0
	for {
		n, err := s.f.ReadAt(s.buf, off)
		if !zeros.All(s.buf[:n]) {
			return false, nil
		}
		off += int64(n)
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read log %d at offset %d: %w", s.id, off, err)
		}
	}
}
