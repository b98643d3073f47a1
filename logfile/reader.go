package logfile

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// readGuess is how many bytes ReadRecord reads first; a frame longer than
// this costs a second read.
const readGuess = 4 << 10

var readBufPool = sync.Pool{New: func() any { b := make([]byte, readGuess); return &b }}

// readAhead is how far ahead of a stream of reads in order (a block's) the
// Reader asks the kernel to read the file (vfs.WillNeed), renewed each time
// the stream passes half of it.
const readAhead = 8 << 20

// Reader reads records by offset (takes). It is safe for concurrent use: it
// only uses ReadAt.
type Reader struct {
	f    vfs.File
	id   uint32
	path string
	fr   Framing

	// willNeed, if not nil, replaces vfs.WillNeed (tests).
	willNeed func(off, n int64)
	// hints counts the vfs.WillNeed calls under way (readAhead): Close
	// waits for them.
	hints sync.WaitGroup

	// blkMu guards blks and uses: the blocks of the takers reading the
	// file in order (one per consumer group at its own position).
	blkMu sync.Mutex
	blks  [readStreams]readBlock
	uses  uint64 // a clock for the blocks' last use
}

// blockSize is the read of a Reader whose records are read in order: one
// pread serves the records of a block. readStreams is how many readers in
// order (takers at different positions of the file, such as consumer
// groups) a Reader keeps a block for: at most readStreams × blockSize of
// memory per Reader, allocated as they are used.
const (
	blockSize   = 64 << 10
	readStreams = 4
)

// readBlock is the last block one taker read in order.
type readBlock struct {
	buf  []byte // allocated at the first read in order
	off  int64  // the file offset of buf[0]
	n    int    // bytes of buf read (0: none)
	next int64  // where the frame read last ends: the next read in order (0: none)
	used uint64 // Reader.uses at its last use
	// advised is the end of the range last handed to vfs.WillNeed for the
	// reads in order this block serves (readAheadLocked).
	advised int64
}

// OpenReader opens the log file at path and validates its header: a bad
// header, or a header whose file id disagrees with a log file name, is a
// *corrupt.Error; a header of a newer format version is a
// *corrupt.FormatError.
func OpenReader(fsys vfs.FS, path string) (*Reader, error) {
	f, id, fr, err := openLog(fsys, path)
	if err != nil {
		return nil, err
	}
	if err := readKeyRecord(f, &fr); err != nil {
		return nil, errors.Join(fmt.Errorf("read the key record of %s: %w", path, err), f.Close())
	}
	return &Reader{f: f, id: id, path: path, fr: fr}, nil
}

// OpenSalvageReader is OpenReader for a log file whose header may be
// damaged: the file id comes from the file's name (a LogName). A valid header
// naming another id is still an error, and so is a header of a newer format
// version (a *corrupt.FormatError: the file is not damaged, and its records
// may not be this version's). Records carry their own checksums, so reading
// them does not depend on the header, except for the salt of a version-2
// or 3 file, which recoverFraming finds again (from its second copy, or from the
// file's first records); when it cannot, no record of the file reads back.
func OpenSalvageReader(fsys vfs.FS, path string) (*Reader, error) {
	f, id, fr, _, err := openSalvage(fsys, path)
	if err != nil {
		return nil, err
	}
	if err := readKeyRecord(f, &fr); err != nil {
		return nil, errors.Join(fmt.Errorf("read the key record of %s: %w", path, err), f.Close())
	}
	return &Reader{f: f, id: id, path: path, fr: fr}, nil
}

// openSalvage opens path read-only, taking the file id from its name, and
// returns the framing of its frames. herr is the *corrupt.Error of a
// damaged header, which does not stop it (the framing is then
// recoverFraming's); a valid header naming another file id does, as do a
// header of a newer version and an I/O error.
func openSalvage(fsys vfs.FS, path string) (f vfs.File, id uint32, fr Framing, herr, err error) {
	id, ok := ParseLogName(filepath.Base(path))
	if !ok {
		return nil, 0, Framing{}, nil, fmt.Errorf("open %s: not a log file name", path)
	}
	if f, err = fsys.Open(path); err != nil {
		return nil, 0, Framing{}, nil, fmt.Errorf("open log: %w", err)
	}
	fail := func(err error) (vfs.File, uint32, Framing, error, error) {
		return nil, 0, Framing{}, nil, errors.Join(err, f.Close())
	}
	hdr, err := readHeaderBytes(f, path)
	if err != nil {
		return fail(err)
	}
	hid, fr, derr := decodeFileHeader(hdr)
	switch {
	case errors.Is(derr, corrupt.ErrUnsupportedFormat):
		return fail(inFile(derr, path))
	case derr != nil:
		if fr, err = recoverFraming(f, id, hdr); err != nil {
			return fail(fmt.Errorf("read %s: %w", path, err))
		}
		return f, id, fr, corruptAt(path, 0, derr), nil
	case hid != id:
		return fail(corrupt.New(path, 0, "header names file id %d, file name says %d", hid, id))
	}
	return f, id, fr, nil, nil
}

// openLog opens path read-only and checks its header.
func openLog(fsys vfs.FS, path string) (vfs.File, uint32, Framing, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, 0, Framing{}, fmt.Errorf("open log: %w", err)
	}
	id, fr, err := readFileHeader(f, path)
	if err != nil {
		return nil, 0, Framing{}, errors.Join(err, f.Close())
	}
	return f, id, fr, nil
}

func readFileHeader(f vfs.File, path string) (uint32, Framing, error) {
	hdr, err := readHeaderBytes(f, path)
	if err != nil {
		return 0, Framing{}, err
	}
	id, fr, err := decodeFileHeader(hdr)
	if err != nil {
		return 0, Framing{}, inFile(err, path)
	}
	if nameID, ok := ParseLogName(filepath.Base(path)); ok && nameID != id {
		return 0, Framing{}, corrupt.New(path, 0, "header names file id %d, file name says %d", id, nameID)
	}
	return id, fr, nil
}

// readHeaderBytes reads the first bytes of f, up to HeaderSize (fewer if
// the file is shorter).
func readHeaderBytes(f io.ReaderAt, path string) ([]byte, error) {
	hdr := make([]byte, HeaderSize)
	n, err := f.ReadAt(hdr, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read header of %s: %w", path, err)
	}
	return hdr[:n], nil
}

// ID returns the file id from the header.
func (r *Reader) ID() uint32 { return r.id }

// Framing returns the framing of the file's frames (its version and salt).
func (r *Reader) Framing() Framing { return r.fr }

// ReadRecord reads the record whose frame starts at off, checked with the
// file's framing. It reads a guessed size first and a second time only if
// the frame is longer. Any bad frame, including an off inside the file
// header, a zero length and a frame running past the end of the file, is a
// *corrupt.Error{File: path, Offset: off}; a frame whose checksums match but
// whose record type a newer release added is a *corrupt.FormatError for
// path and off. The returned Body (and every other
// field) is owned by the caller.
func (r *Reader) ReadRecord(off int64) (Record, error) {
	if off < r.fr.HeaderSize() {
		return Record{}, corrupt.New(r.path, off, "record offset before the end of the file header")
	}
	if rec, ok := r.readInBlock(off); ok {
		return rec, nil
	}
	bp := readBufPool.Get().(*[]byte)
	defer readBufPool.Put(bp)
	buf := *bp
	n, err := r.f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return Record{}, fmt.Errorf("read log %d at offset %d: %w", r.id, off, err)
	}
	frame := buf[:n]
	owned := false // frame is a fresh buffer, not the pooled one
	if n >= r.fr.FrameHeaderSize() {
		if need, err := r.fr.frameLen(frame); err == nil && need > n && n == len(buf) {
			frame = make([]byte, need)
			copy(frame, buf)
			m, err := r.f.ReadAt(frame[n:], off+int64(n))
			if err != nil && !errors.Is(err, io.EOF) {
				return Record{}, fmt.Errorf("read log %d at offset %d: %w", r.id, off, err)
			}
			frame = frame[:n+m]
			owned = true
		}
	}
	var rec Record
	n, err = decodeFrame(frame, &rec, nil, 0, r.fr)
	if err != nil {
		if fe := newerAt(r.path, off, err); fe != nil {
			return Record{}, fe
		}
		return Record{}, corruptAt(r.path, off, err)
	}
	if err := r.own(&rec, frame[:n], off, !owned); err != nil {
		return Record{}, corruptAt(r.path, off, err)
	}
	r.setNext(off, off+int64(n))
	return rec, nil
}

// readInBlock reads the record at off from the reader's block when the
// reads go in order: off is in the block, or is where the last frame read
// ended (then the block is read from off). ok is false when it could not:
// not in order, a frame longer than a block, or a frame that does not check
// out even in a block read from off. The block may be stale where the file
// was written after it was read (a record appended since, over zeros laid
// out ahead), so a bad frame in it is never reported: the block is read
// again from off, and if the frame is still bad, ReadRecord reads it from
// the file the usual way, which decides.
func (r *Reader) readInBlock(off int64) (rec Record, ok bool) {
	r.blkMu.Lock()
	defer r.blkMu.Unlock()
	var b *readBlock
	inBlock := false
	for i := range r.blks {
		c := &r.blks[i]
		if c.n > 0 && off >= c.off && off < c.off+int64(c.n) {
			b, inBlock = c, true
			break
		}
		if c.next == off && off > 0 {
			b = c
		}
	}
	if b == nil {
		return Record{}, false
	}
	r.uses++
	b.used = r.uses
	for {
		if !inBlock {
			r.readAheadLocked(b, off)
			if b.buf == nil {
				b.buf = make([]byte, blockSize)
			}
			m, err := r.f.ReadAt(b.buf, off)
			if err != nil && !errors.Is(err, io.EOF) {
				b.n = 0
				return Record{}, false
			}
			b.off, b.n = off, m
		}
		frame := b.buf[off-b.off : b.n]
		need := 0
		if len(frame) >= r.fr.FrameHeaderSize() {
			need, _ = r.fr.frameLen(frame)
		}
		if need > 0 && need <= len(frame) {
			if _, err := decodeFrame(frame[:need], &rec, nil, 0, r.fr); err == nil && r.own(&rec, frame[:need], off, true) == nil {
				b.next = off + int64(need)
				return rec, true
			}
		}
		b.n = 0
		if b.off == off || need > blockSize {
			return Record{}, false
		}
		inBlock = false
	}
}

// own makes rec, decoded from frame (at off, in a buffer the reader
// reuses), the caller's: an encrypted put opened with the file's keys (its
// body then a fresh buffer; an error if it does not authenticate), else
// its sealed bytes, or its body when copyBody, copied out.
func (r *Reader) own(rec *Record, frame []byte, off int64, copyBody bool) error {
	switch {
	case rec.Sealed != nil && r.fr.keys != nil:
		return r.fr.openPut(rec, frame, off)
	case rec.Sealed != nil:
		rec.Sealed = append([]byte(nil), rec.Sealed...)
	case copyBody && rec.Body != nil:
		rec.Body = append([]byte(nil), rec.Body...)
	}
	return nil
}

// setNext records where a frame read alone (not from a block) at off ends,
// in the block used least recently: a taker reading in order gets a block
// at its next read. It asks for the read ahead of that stream as a block
// read does (a stream of frames longer than a block reads them all alone).
func (r *Reader) setNext(off, end int64) {
	r.blkMu.Lock()
	defer r.blkMu.Unlock()
	lru := &r.blks[0]
	for i := range r.blks {
		c := &r.blks[i]
		if c.next == end {
			r.readAheadLocked(c, off)
			return // already someone's next read
		}
		if c.used < lru.used {
			lru = c
		}
	}
	r.uses++
	lru.next, lru.n, lru.used = end, 0, r.uses
	r.readAheadLocked(lru, off)
}

// readAheadLocked asks the kernel to read the file ahead of b's stream of
// reads in order (one per consumer group reading the file), about to read
// at off: takes read a file's records in order, one small read each, which
// from a cold file would each wait for the disk. It asks when off nears
// the end of the range asked for last, or is far from it (the block went
// to another stream); a range another block asked for counts. The hint is
// made only when a block is read (or a frame longer than one is), and a
// read a little behind the stream (an event a rollback or a released key
// put back) asks for nothing. r.blkMu is held.
func (r *Reader) readAheadLocked(b *readBlock, off int64) {
	inside := func(a int64) bool { return off+readAhead/2 <= a && off+2*readAhead >= a }
	a := b.advised
	if inside(a) {
		return // inside the range asked for, not near its end
	}
	for i := range r.blks {
		if c := &r.blks[i]; inside(c.advised) {
			b.advised = c.advised // a stream that moved to another block
			return
		}
	}
	from := off
	if a > off && a < off+readAhead {
		from = a // the part before a was asked for already
	}
	b.advised = off + readAhead
	// On its own goroutine: fadvise can take a millisecond on a range in
	// the page cache (it looks up each page), and the reader holds blkMu.
	r.hints.Add(1)
	go func() {
		defer r.hints.Done()
		if r.willNeed != nil {
			r.willNeed(from, off+readAhead-from)
			return
		}
		vfs.WillNeed(r.f, from, off+readAhead-from)
	}()
}

// corruptAt turns a decodeFrame error for the frame at off in path into a
// corruption error naming both.
func corruptAt(path string, off int64, err error) *corrupt.Error {
	var ce *corrupt.Error
	if errors.As(err, &ce) {
		ce.File, ce.Offset = path, off
		return ce
	}
	return &corrupt.Error{File: path, Offset: off, Reason: "frame runs past the end of the file", Err: err}
}

// newerAt returns err, a decodeFrame error for the frame at off in path, as
// a *corrupt.FormatError naming both, or nil if it is not one.
func newerAt(path string, off int64, err error) *corrupt.FormatError {
	if err == nil {
		return nil // before fe, which escapes: no allocation per frame scanned
	}
	var fe *corrupt.FormatError
	if !errors.As(err, &fe) {
		return nil
	}
	fe.File, fe.Offset = path, off
	return fe
}

// inFile fills in path as the file of err, a DecodeFileHeader error (a
// *corrupt.Error or *corrupt.FormatError), and returns it.
func inFile(err error, path string) error {
	var ce *corrupt.Error
	var fe *corrupt.FormatError
	switch {
	case errors.As(err, &fe):
		fe.File = path
	case errors.As(err, &ce):
		ce.File = path
	}
	return err
}

// Close closes the file.
func (r *Reader) Close() error {
	r.hints.Wait()
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("close log %d: %w", r.id, err)
	}
	return nil
}

// Path returns the file's path.
func (r *Reader) Path() string { return r.path }
