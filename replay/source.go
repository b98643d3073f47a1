package replay

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// Replay reads each open log file on its own goroutine: reading, checking
// the CRC32C of and decoding records (most of the work) runs beside the
// merge and apply on the caller's goroutine. A reader hands over records in
// batches of the few fields the replay needs (no bodies or headers), and
// stays at most sourceBatches batches ahead. A file is open (a scanner, a
// mapping on the OS filesystem, this goroutine and the scanner's checker)
// only while the merge is inside its range of write-order ids, so memory,
// descriptors and goroutines stay small however many files there are.
const (
	sourceBatch   = 1024 // records per batch
	sourceBatches = 2    // batches a reader may have queued
)

// item is the part of a record the replay uses.
type item struct {
	typ, commitType logfile.RecordType
	txID, woid      uint64
	count           uint64
	time            int64 // a put's or put commit's commit time (format version 7 on)
	off             int64
	size            int64 // encoded size
	ptrs            [2]int32
	group           uint32 // a take record's consumer group
	// dedupID is a put's deduplication id (hasID: it has one; see
	// Options.DedupHeader); unread: the put is encrypted and did not open,
	// its id unknown.
	dedupID [2]uint64
	hasID   bool
	unread  bool
	// extra holds the rare records whose fields the item has no room for:
	// a groups catalog (RecordGroups), a skip (RecordSkip, and
	// RecordFilterSkip's ranges) and a deliver's counts, copied out
	// of the scanner's buffers.
	extra *logfile.Record
}

type batch struct {
	items []item
	ptrs  []uint64 // take records' pointers: item.ptrs is a [from, to) range
	end   int64    // the scanner's End() after the batch's last record
}

// source is one log file being merged.
// timed reports whether the file records commit times (format version 7
// on).
func (s *source) timed() bool { return s.sc != nil && s.sc.Framing().Timed() }

type source struct {
	file  logfile.File
	from  int64  // where the scan starts: the checkpoint's position
	first uint64 // the write-order id of the first record after start that is not padding
	// sc is the file's scanner once open; the reader goroutine's until
	// full closes. Once closed (the file read to its end), its End,
	// Tail, Skipped... still hold the scan's result.
	sc       *logfile.Scanner
	closed   bool
	id       uint32
	path     string
	logIndex int
	pads     []logfile.Skip // padding records read: regions a repair overwrote
	// dedupHeader is Options.DedupHeader; logs opens the encrypted puts
	// for it (putID).
	dedupHeader string
	logs        *logfile.Set
	// unread counts the puts whose id putID could not read; unreadErr
	// is the first one's error, at offset unreadOff. Set by the reader
	// goroutine, read once it is done.
	unread    int
	unreadErr error
	unreadOff int64

	// dedupID is the current record's deduplication id, if hasID;
	// idUnread: its id could not be read.
	dedupID  [2]uint64
	hasID    bool
	idUnread bool

	woid uint64         // write-order id of the current record
	rec  logfile.Record // the current record (no body, no headers)
	off  int64          // its offset
	size int64          // its encoded size
	end  int64          // how far the reader had read at the current batch

	fault   error // a fault while reading the mapping (set before full closes)
	started bool
	full    chan *batch // batches read, in order; closed at the end
	free    chan *batch // batches to reuse
	quit    chan struct{}
	done    sync.WaitGroup
	cur     *batch
	next    int
}

// peek reads the file from s.from to its first record that is not padding,
// notes its write-order id (first) and the file's size, and closes the file
// again. If there is no such record, the peek was the whole scan: the
// source is closed, with its padding in pads.
func (s *source) peek(logs *logfile.Set) (start, size int64, err error) {
	sc, _, err := logs.Scan(s.file, s.from)
	if err != nil {
		return 0, 0, err
	}
	// Before its first Next, End is where the scan starts: s.from, or the
	// end of the file's header (its size depends on its version).
	start = sc.End()
	if size, err = sc.Size(); err != nil {
		return 0, 0, errors.Join(err, sc.Close())
	}
	var pads []logfile.Skip
	for sc.Next() {
		rec := sc.Record()
		if rec.Type == logfile.RecordPadding {
			pads = append(pads, logfile.Skip{Offset: sc.Offset(), Length: int64(rec.EncodedSize())})
			continue
		}
		s.first = rec.WriteOrderID
		return start, size, sc.Close()
	}
	s.sc, s.pads, s.end, s.closed = sc, pads, sc.End(), true
	return start, size, sc.Close()
}

// open opens the file's scanner at s.from, for the merge.
func (s *source) open(logs *logfile.Set) error {
	sc, _, err := logs.Scan(s.file, s.from)
	if err != nil {
		return err
	}
	s.sc = sc
	return nil
}

// finish closes the scanner of a source read to its end (or stopped), which
// releases its file and mapping; its results stay readable.
func (s *source) finish() {
	if s.closed || s.sc == nil {
		return
	}
	s.closed = true
	s.sc.Size() // read while the file is open: finishScans reports it
	s.sc.Close()
	s.full, s.free, s.cur = nil, nil, nil
}

// start runs the reader goroutine.
func (s *source) start() {
	s.started = true
	s.full = make(chan *batch, sourceBatches)
	s.free = make(chan *batch, sourceBatches+2)
	s.quit = make(chan struct{})
	s.done.Add(1)
	go s.read()
}

func (s *source) read() {
	defer s.done.Done()
	defer close(s.full)
	// The scanner reads the file through a memory mapping; an I/O error
	// there is a fault, which this turns into the scan's error.
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			s.fault = fmt.Errorf("read %s: fault at address %#x reading the mapped file (an I/O error?): %v", s.path, fault.Addr(), r)
		}
	}()
	if s.sc.MapFile() {
		s.sc.CheckAhead() // CRCs on a second core
	}
	b := &batch{}
	for s.sc.Next() {
		r := s.sc.Record()
		it := item{typ: r.Type, commitType: r.CommitType, txID: r.TxID, woid: r.WriteOrderID, count: r.Count,
			time: r.Time, off: s.sc.Offset(), size: s.sc.End() - s.sc.Offset(), group: r.Group}
		switch r.Type {
		case logfile.RecordPut:
			if s.dedupHeader != "" {
				it.dedupID, it.hasID, it.unread = s.putID(r, it.off)
			}
		case logfile.RecordGroups, logfile.RecordSkip, logfile.RecordDeliver, logfile.RecordFilterSkip, logfile.RecordDuplicate, logfile.RecordRetry:
			it.extra = &logfile.Record{Type: r.Type, NextGroupID: r.NextGroupID, Catalog: slices.Clone(r.Catalog),
				Skip: slices.Clone(r.Skip), Counts: slices.Clone(r.Counts), Ranges: slices.Clone(r.Ranges), Due: slices.Clone(r.Due)}
		}
		if len(r.Pointers) > 0 {
			it.ptrs = [2]int32{int32(len(b.ptrs)), int32(len(b.ptrs) + len(r.Pointers))}
			b.ptrs = append(b.ptrs, r.Pointers...)
		}
		b.items = append(b.items, it)
		if len(b.items) == sourceBatch {
			b.end = s.sc.End()
			select {
			case s.full <- b:
			case <-s.quit:
				return
			}
			select {
			case b = <-s.free:
				b.items, b.ptrs = b.items[:0], b.ptrs[:0]
			default:
				b = &batch{}
			}
		}
	}
	if len(b.items) > 0 {
		b.end = s.sc.End()
		select {
		case s.full <- b:
		case <-s.quit:
		}
	}
}

// putID returns the deduplication id of put r at off, if it has one (its
// Options.DedupHeader value's). An encrypted put is opened first: read
// again by its offset with the set's reader, which has the keys. One that
// does not open (no keys, its file's key record damaged, its body changed)
// is unread, counted; its id is unknown.
func (s *source) putID(r *logfile.Record, off int64) (id [2]uint64, has, unread bool) {
	h := r.Headers
	if r.Sealed != nil {
		rec, err := readPut(s.logs, s.id, off)
		if err != nil {
			if s.unread++; s.unread == 1 {
				s.unreadErr, s.unreadOff = err, off
			}
			return id, false, true
		}
		h = rec.Headers
	}
	if v := h[s.dedupHeader]; v != "" {
		return checkpoint.DedupID(v), true, false
	}
	return id, false, false
}

// advance moves to the next record; false at the end of the file (then the
// scanner is the caller's again: Err, End, Tail, Skipped).
func (s *source) advance() bool {
	if !s.started {
		s.start()
	}
	if s.cur == nil || s.next == len(s.cur.items) {
		if s.cur != nil {
			select {
			case s.free <- s.cur:
			default:
			}
		}
		b, ok := <-s.full
		if !ok {
			s.cur = nil
			s.done.Wait()
			return false
		}
		s.cur, s.next, s.end = b, 0, b.end
	}
	it := &s.cur.items[s.next]
	s.next++
	s.rec = logfile.Record{Type: it.typ, CommitType: it.commitType, TxID: it.txID, WriteOrderID: it.woid, Count: it.count, Time: it.time,
		Group: it.group}
	if x := it.extra; x != nil {
		s.rec.NextGroupID, s.rec.Catalog, s.rec.Skip, s.rec.Counts = x.NextGroupID, x.Catalog, x.Skip, x.Counts
		s.rec.Ranges, s.rec.Due = x.Ranges, x.Due
	}
	if it.ptrs[1] > it.ptrs[0] {
		s.rec.Pointers = s.cur.ptrs[it.ptrs[0]:it.ptrs[1]]
	}
	s.woid, s.off, s.size = it.woid, it.off, it.size
	s.dedupID, s.hasID, s.idUnread = it.dedupID, it.hasID, it.unread
	return true
}

// stop ends the reader goroutine early (Run returning on an error) and
// waits for it, so the scanner can be closed.
func (s *source) stop() {
	if !s.started {
		return
	}
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	s.done.Wait()
}
