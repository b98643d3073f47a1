package logfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/flumego/filechannel/internal/vfs"
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
)

func (t Tail) String() string {
	switch t {
	case TailClean:
		return "clean"
	case TailTorn:
		return "torn"
	}
	return fmt.Sprintf("Tail(%d)", int(t))
}

// Scanner reads a log file sequentially from a start offset (replay),
// through a large buffer. It stops at the first frame that is not valid
// (zero length, bad checksum, running past the end of the file, bad
// payload) and then reports, through Tail, whether the rest of the file is a
// clean end or a torn tail. A Scanner belongs to one goroutine.
//
//	s, err := NewScanner(fsys, path, start)
//	...
//	for s.Next() {
//		rec := s.Record() // valid until the next call to Next
//	}
//	if err := s.Err(); err != nil { ... }
//	if s.Tail() == TailTorn { truncate to s.End() ... }
type Scanner struct {
	f    vfs.File
	id   uint32
	path string

	buf    []byte // buf[:bufLen] holds the file's bytes from offset bufOff
	bufOff int64
	bufLen int

	pos     int64 // offset of the next frame: the end of the last valid record
	rec     Record
	recOff  int64
	sc      scratch
	done    bool
	tail    Tail
	tailErr error
	err     error
}

// NewScanner opens the log file at path, validates its header (a
// *corrupt.Error if bad) and positions the scanner at start, which must be
// a record boundary. A start below HeaderSize means HeaderSize; a start past
// the end of the file yields no records and a clean tail.
func NewScanner(fsys vfs.FS, path string, start int64) (*Scanner, error) {
	f, id, err := openLog(fsys, path)
	if err != nil {
		return nil, err
	}
	start = max(start, HeaderSize)
	return &Scanner{
		f:      f,
		id:     id,
		path:   path,
		buf:    make([]byte, scanBufSize),
		bufOff: start,
		pos:    start,
		recOff: start,
	}, nil
}

// FileID returns the file id from the header.
func (s *Scanner) FileID() uint32 { return s.id }

// Next advances to the next valid record and reports whether there is one.
// After it returns false, Err reports an I/O error, if any, and otherwise
// Tail says how the file ends.
func (s *Scanner) Next() bool {
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
		s.stop(bad)
		return false
	}
	if n == 0 {
		s.done = true // EOF exactly at a record boundary
		return false
	}
	s.recOff = s.pos
	s.pos += int64(n)
	return true
}

// Record returns the current record. It and everything it refers to (Body,
// Headers, Pointers) are valid only until the next call to Next: Body
// aliases the scan buffer, and the Headers map and Pointers slice are reused.
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

// Err returns the I/O error that stopped the scan, if any. A torn or corrupt
// tail is not an error here; see Tail.
func (s *Scanner) Err() error { return s.err }

// Close closes the file.
func (s *Scanner) Close() error {
	s.done = true
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close log %d: %w", s.id, err)
	}
	return nil
}

// frameAt validates the frame at off and decodes it into rec. It returns the
// frame length (0 at EOF), or bad: why the bytes at off are not a valid
// frame, a *corrupt.Error for this file and off. err is an I/O error.
func (s *Scanner) frameAt(off int64, rec *Record) (n int, bad, err error) {
	b, err := s.window(off, FrameHeaderSize)
	if err != nil {
		return 0, nil, err
	}
	if len(b) == 0 {
		return 0, nil, nil
	}
	if len(b) >= 4 {
		if need, lerr := frameLen(b); lerr == nil && need > len(b) {
			if b, err = s.window(off, need); err != nil {
				return 0, nil, err
			}
		}
	}
	n, derr := decodeFrame(b, rec, &s.sc)
	if derr != nil {
		return 0, corruptAt(s.path, off, derr), nil
	}
	return n, nil, nil
}

// window returns the file's bytes from off on, at least need of them unless
// the file ends sooner. The slice aliases the scan buffer.
func (s *Scanner) window(off int64, need int) ([]byte, error) {
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

// stop ends the scan at the invalid frame at End and classifies the tail.
func (s *Scanner) stop(bad error) {
	s.done = true
	zero, err := s.zeroFrom(s.pos)
	switch {
	case err != nil:
		s.err = err
	case zero:
		s.tail = TailClean
	default:
		s.tail, s.tailErr = TailTorn, bad
	}
}

// zeroFrom reports whether every byte of the file from off on is zero. It
// reuses the scan buffer, so it may only run once the scan is done.
func (s *Scanner) zeroFrom(off int64) (bool, error) {
	s.bufLen = 0
	for {
		n, err := s.f.ReadAt(s.buf, off)
		if !allZero(s.buf[:n]) {
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

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
