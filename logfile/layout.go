package logfile

import (
	"fmt"
	"io"
	"sync"
)

// Laying log files out ahead of the writes.
//
// An fdatasync after an append must also commit the file's new size (and
// its new blocks) through the filesystem's journal; an fdatasync after an
// overwrite of blocks that are already allocated and durable flushes only
// the data. So the live set lays each active file out ahead of its write
// position (SetOptions.Preallocate): a background goroutine writes zeros
// there, a chunk at a time, and fdatasyncs them, off the commit path. The
// records then overwrite zeros.
//
// Recovery needs nothing new for zeros: an all-zero rest of a file is a
// clean end (Tail). What is new is how a crash tears an overwrite: each
// sector holds its old bytes (zeros) or its new ones, in any mix, so a
// record written after the last fsync can read back while one before it is
// torn. The scanner stops at the first torn frame of the file that was
// being written (Set.Scan, Scanner.tearFrom), so no such record, never
// acknowledged, is replayed.

// layState is a writer's laid-out space and the zero-fill in flight.
type layState struct {
	mu   sync.Mutex
	done *sync.Cond // on mu; broadcast when a zero-fill ends
	// reserved is the end of the bytes Write has claimed: written, or
	// being written. A zero-fill never starts below it.
	reserved int64
	// laidTo: the file's size is durable up to here (zeros written and
	// fdatasynced, or records). 0 before any zero-fill.
	laidTo int64
	// [from, to) is being zero-filled when to > from; a Write reaching
	// into it waits.
	from, to int64
	stopped  bool  // no more zero-fills: the writer failed or is closing
	waits    int64 // Writes that waited for a zero-fill
}

// claim marks [.., end) as Write's, waiting for a zero-fill in flight that
// it reaches into, and returns where the write should end, padded with
// zeros: end, or the end of end's page (writePage) when the file is laid
// out that far (zeros, or a recycled file's old bytes, which no record
// needs).
//
// The padding saves a read. A write that ends inside a page the page
// cache does not hold makes the kernel read that page from disk first, to
// keep the bytes after the write; a recycled file's pages, or an active
// file's after a restart, are usually not cached, and then every commit
// whose write starts a new page waited for a read, behind whatever the
// disk was doing (take commits in a cold drain: 79 us each, mostly that;
// docs/benchmarks.md, Performance III, target 3). A write padded to the
// end of its page needs no read, and the next write starts in a cached
// page. The padding stays below laidTo, so it never grows the file: in
// laid-out bytes it takes no space, and in a hole a caught-up layouter
// left (layOut) it fills the rest of a page whose first bytes, the
// record's, allocate it anyway (with blocks of a page or more).
func (w *Writer) claim(end int64) int64 {
	l := &w.lay
	l.mu.Lock()
	if l.to > l.from && end > l.from {
		l.waits++
		for l.to > l.from && end > l.from {
			l.done.Wait()
		}
	}
	// The padding stays below laidTo, and a zero-fill never starts below
	// laidTo, so none is in flight there. reserved stays the write's end:
	// the layouter keeps Preallocate bytes laid out past the records, not
	// past the padding (which would lay out a chunk more at times).
	padded := max(end, min((end+writePage-1)&^(writePage-1), l.laidTo))
	l.reserved = max(l.reserved, end)
	l.mu.Unlock()
	return padded
}

// writePage is the page size Write pads its writes to (claim): the common
// one. Where the page cache's pages are larger, a padded write saves fewer
// reads; where smaller, none is lost.
const writePage = 4096

// stopLayout ends the zero-fills of w, waiting for one in flight: the file
// is about to be truncated or closed.
func (w *Writer) stopLayout() {
	l := &w.lay
	l.mu.Lock()
	l.stopped = true
	for l.to > l.from {
		l.done.Wait()
	}
	l.mu.Unlock()
}

// layOut zero-fills and fdatasyncs the next chunk of w's file (at most
// chunk bytes, never past limit) if less than ahead bytes are laid out
// ahead of the writes. It returns the bytes laid out (0: nothing to do).
// The first chunk of a file starts at the sector after its writes; when
// the writes have caught up with the laid-out space later, the chunk starts
// one chunk past them, leaving the writes room to go on (into a hole)
// without waiting. A failure (a full disk, an I/O error) stops the
// zero-fills of this file: the writes go on as appends, and report their
// own errors. zero is a buffer of zeros.
func (w *Writer) layOut(ahead, chunk, limit int64, zero []byte) (int64, error) {
	l := &w.lay
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return 0, nil
	}
	from := l.laidTo
	if l.reserved >= from {
		from = l.reserved
		if l.laidTo > 0 {
			from += chunk
		}
	}
	from = (from + sectorSize - 1) &^ (sectorSize - 1)
	to := min(from+chunk, limit)
	if from-l.reserved >= ahead || to <= from {
		l.mu.Unlock()
		return 0, nil
	}
	l.from, l.to = from, to
	l.mu.Unlock()

	err := writeZeros(w.f, from, to, zero)
	if err == nil {
		err = w.f.Sync()
	}

	l.mu.Lock()
	l.from, l.to = 0, 0
	l.done.Broadcast()
	if err != nil {
		l.stopped = true
		l.mu.Unlock()
		return 0, fmt.Errorf("lay out log %d at offset %d: %w", w.id, from, err)
	}
	l.laidTo = max(l.laidTo, to)
	l.mu.Unlock()
	return to - from, nil
}

// maxZeroWrite bounds the bytes of one write of a zero-fill. A write holds
// the file's inode lock for its whole length, and a commit's write to the
// same file waits for it: with 1 MiB writes, 64 small committers used about
// a third more CPU per commit and had twice the p99 commit latency than
// with 64 KiB writes, which let commits in between (docs/benchmarks.md,
// Performance III, target 2; the extra CPU looks like the kernel spinning
// on the lock, not measured directly).
const maxZeroWrite = 64 << 10

// writeZeros writes zeros over [from, to) of f, len(zero) bytes at a time.
func writeZeros(f io.WriterAt, from, to int64, zero []byte) error {
	for off := from; off < to; {
		n := min(int64(len(zero)), to-off)
		m, err := f.WriteAt(zero[:n], off)
		if err == nil && int64(m) != n {
			err = io.ErrShortWrite
		}
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// LayoutWaits returns how many Writes waited for a zero-fill to end (the
// set totals the bytes laid out: LayoutStats).
func (w *Writer) LayoutWaits() int64 {
	w.lay.mu.Lock()
	defer w.lay.mu.Unlock()
	return w.lay.waits
}

// beyondLaidOut returns how many bytes of [from, to) lie past the laid-out
// space: the part of a write that takes new disk space.
func (w *Writer) beyondLaidOut(from, to int64) int64 {
	w.lay.mu.Lock()
	defer w.lay.mu.Unlock()
	return to - max(from, min(to, w.lay.laidTo))
}

// laidAhead returns the bytes laid out past the file's writes.
func (w *Writer) laidAhead() int64 {
	w.lay.mu.Lock()
	defer w.lay.mu.Unlock()
	return max(w.lay.laidTo-w.size.Load(), 0)
}

// trim shrinks the file back to its writes when zeros were laid out
// past them (Close): the rest of the laid-out space goes back to the
// filesystem. Zeros left by a failed trim (or a crash before the next
// fdatasync) are a clean end all the same.
func (w *Writer) trim() {
	w.lay.mu.Lock()
	laid := w.lay.laidTo
	w.lay.mu.Unlock()
	if size := w.size.Load(); laid > size {
		_ = w.f.Truncate(size)
	}
}

// layouter is the live set's goroutine that lays out the active files.
type layouter struct {
	wake chan struct{} // cap 1: Append and Roll kick it
	quit chan struct{}
	done sync.WaitGroup
	once sync.Once
	// laid totals the zeros laid out, waits the Write waits of writers no
	// longer active (retire), failed the zero-fills that failed.
	mu                  sync.Mutex
	laid, waits, failed int64
}

// kick wakes the layouter, if it runs, without waiting.
func (l *layouter) kick() {
	if l.wake == nil {
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// stop ends the layouter and waits for it (a zero-fill in flight ends
// first). It is a no-op if it never started.
func (l *layouter) stop() {
	if l.quit == nil {
		return
	}
	l.once.Do(func() { close(l.quit) })
	l.done.Wait()
}

// startLayouter starts the layouter if SetOptions.Preallocate asks for one.
func (s *Set) startLayouter() {
	if s.opts.Preallocate <= 0 || s.layouter.quit != nil {
		return
	}
	l := &s.layouter
	l.wake = make(chan struct{}, 1)
	l.quit = make(chan struct{})
	l.done.Add(1)
	go s.layOutLoop()
}

func (s *Set) layOutLoop() {
	l := &s.layouter
	defer l.done.Done()
	ahead := s.opts.Preallocate
	chunk := max(ahead/4, 4096)
	zero := make([]byte, min(chunk, maxZeroWrite))
	limit := s.opts.MaxFileSize
	if limit <= 0 {
		limit = MaxFileSize
	}
	for {
		select {
		case <-l.quit:
			return
		case <-l.wake:
		}
		for busy := true; busy; {
			busy = false
			for _, d := range s.dirs {
				select {
				case <-l.quit:
					return
				default:
				}
				d.mu.Lock()
				w := d.w
				d.mu.Unlock()
				if w == nil || d.full.Load() {
					continue
				}
				if free, err := s.freeSpace(d); err != nil || free-chunk < s.opts.PreallocateMinFree {
					continue
				}
				n, err := w.layOut(ahead, chunk, limit, zero)
				if err != nil { // the writer lays out no more
					l.mu.Lock()
					l.failed++
					l.mu.Unlock()
					s.log.Warn("cannot lay out a log file ahead of its writes: they go on as appends", "file", w.Path(), "err", err)
					continue
				}
				if n > 0 {
					d.free.Add(-n)
					l.mu.Lock()
					l.laid += n
					l.mu.Unlock()
					busy = true
				}
			}
		}
	}
}

// retire adds the Write waits of w, a writer the set no longer appends to,
// to the set's total.
func (l *layouter) retire(w *Writer) {
	waits := w.LayoutWaits()
	l.mu.Lock()
	l.waits += waits
	l.mu.Unlock()
}

// LayoutStats is what the live set's zero-fills did (SetOptions.Preallocate).
type LayoutStats struct {
	LaidOut int64 // bytes of zeros written and synced ahead of the writes
	Waits   int64 // appends that waited for a zero-fill to end
	Failed  int64 // zero-fills that failed (a full disk, an I/O error)
}

// LayoutStats returns the totals of the set's zero-fills.
func (s *Set) LayoutStats() LayoutStats {
	l := &s.layouter
	l.mu.Lock()
	st := LayoutStats{LaidOut: l.laid, Waits: l.waits, Failed: l.failed}
	l.mu.Unlock()
	for _, d := range s.dirs {
		d.mu.Lock()
		if d.w != nil {
			st.Waits += d.w.LayoutWaits()
		}
		d.mu.Unlock()
	}
	return st
}
