package logfile

import (
	"errors"
	"fmt"
	"math"
	"syscall"
)

// Merged appends: many committers each appending a small batch to one dir
// (a server that makes every request durable) would each pay a write call
// while holding the dir's mu, one after another. Instead, a put batch's
// Append first adds it to the dir's pending list, then takes mu; whoever
// holds mu next writes every batch pending, sealed for consecutive places
// in the file, in one write, and hands each its Appended. The fsync that
// follows (Writer.SyncTo) is shared already: merging the writes is what
// lets one fsync cover many commits without many write calls.
//
// While a commit's fsync of the dir's writer is in flight (Set.Sync's
// leader holds the dir: holdAppends), put batches wait on the pending
// list until it ends (releaseAppends): written during it, they could not
// be covered by it anyway (an fsync covers what was written before it
// started), and written after it, they are one write. The fsync that
// covers them is the next, which their own Set.Sync starts once Append
// returns, as before: a commit still returns only after an fsync that
// started after its write.
//
// Nothing changes for a batch alone, and whatever would make a merged
// write differ from the same batches written one after another (a roll,
// a full dir, a failure) makes the holder write them one after another
// instead.

// maxMergedWrite bounds the bytes of a merged write (and of the buffer a
// dir keeps for it): larger groups are written one batch at a time.
const maxMergedWrite = 1 << 20

// mergeResult is a merged batch's Appended, or why it was not written.
type mergeResult struct {
	a    Appended
	err  error
	done bool
}

// mergeable reports whether b may wait to be written with others: a put
// batch (not draining: the reserve's retry is per batch) that counts no
// earlier writes, of s, not written, and small enough to share a merged
// write (a large one, a spill, is written at once: waiting would only
// delay it).
func mergeable(s *Set, b *Batch) bool {
	return b.set == s && !b.written && !b.Drain && len(b.After) == 0 && len(b.buf) <= maxMergedWrite/2
}

// appendPendingLocked writes every batch pending in d, merged when they
// fit one write (appendMergedLocked), else one after another. d.mu is
// held.
func (s *Set) appendPendingLocked(d *dir) {
	d.pendMu.Lock()
	group := d.pend
	d.pend = d.spare[:0]
	d.pendMu.Unlock()
	if len(group) < 2 || !s.appendMergedLocked(d, group) {
		s.appendEachLocked(d, group)
	}
	clear(group)
	d.spare = group[:0]
}

// appendEachLocked writes the batches of group that have no result yet
// (one a failed merge left lost has its error) one after another, as
// Append alone does. d.mu is held.
func (s *Set) appendEachLocked(d *dir, group []*Batch) {
	for _, b := range group {
		if !b.merged.done {
			b.merged.a, b.merged.err = s.appendOneLocked(d, b)
			b.merged.done = true
		}
	}
}

// mergeFits reports whether group, of total bytes, goes to d's writer in
// one write as the same batches one after another would: d has a healthy
// writer with room for them all, and is not full.
func (s *Set) mergeFits(d *dir, total int64) bool {
	w := d.w
	switch {
	case total > maxMergedWrite, d.full.Load(), w == nil, w.Err() != nil:
		return false
	case s.opts.MaxFileSize > 0 && w.Size()+total > s.opts.MaxFileSize:
		return false
	case w.Size()+total > math.MaxUint32, s.Encrypted() != w.fr.Encrypted():
		return false
	}
	return true
}

// appendMergedLocked writes group, two or more batches, to d's writer in
// one write, in order, and sets each one's merged result. It returns
// false, having written nothing, if they do not fit one write (mergeFits)
// or one cannot be sealed. If the write fails, the first batch gets the
// error (as the first of them written alone would) and the others are
// written one after another (rolling to a new file, as they would have).
func (s *Set) appendMergedLocked(d *dir, group []*Batch) bool {
	var total int64
	var frames uint64
	for _, b := range group {
		total += int64(len(b.buf))
		frames += uint64(len(b.frames))
	}
	if !s.mergeFits(d, total) {
		return false
	}
	w := d.w
	// The sync mark due, if any, goes first, in the same write.
	buf, marked := s.appendSyncMarkLocked(d, w, d.mergeBuf[:0])
	base := w.Size() + int64(len(buf)) // where the first batch goes
	first := s.nextWOID.Add(frames) - frames
	buf, ok := s.sealMerged(w, group, base, first, buf)
	if !ok {
		return false
	}
	d.mergeBuf = buf[:0]
	for _, b := range group {
		for _, g := range b.Completes {
			s.Complete(w.ID(), g)
		}
	}
	off, err := w.Write(buf)
	if err != nil {
		s.mergedWriteFailed(d, w, group, base, err)
		return true
	}
	if marked > 0 {
		w.markedTo.Store(marked)
	}
	d.free.Add(-w.beyondLaidOut(off, off+int64(len(buf))))
	s.layouter.kick()
	at, woid := base, first
	for _, b := range group {
		b.written = true
		b.merged = mergeResult{done: true,
			a: Appended{W: w, Base: at, End: at + int64(len(b.buf)), FirstWOID: woid, dir: d}}
		at += int64(len(b.buf))
		woid += uint64(len(b.frames))
	}
	return true
}

// sealMerged seals each batch of group for its place in w (the first at
// base, each after the one before; write-order ids from first on) and
// appends its bytes to buf (whatever buf holds already goes before base). If one cannot be sealed, it unseals what it
// sealed and returns false: the batches are then written one at a time,
// and that one fails again alone. A batch that cannot be unsealed (its
// puts' bodies lost) gets that error as its result.
func (s *Set) sealMerged(w *Writer, group []*Batch, base int64, first uint64, buf []byte) ([]byte, bool) {
	start := len(buf)
	for j, b := range group {
		at := base + int64(len(buf)-start)
		for k, off := range b.frames {
			if err := w.fr.sealFrame(b.buf[off:], at+int64(off), first+uint64(k)); err != nil {
				if uerr := w.fr.unsealFrames(b, k, at); uerr != nil {
					b.merged = mergeResult{err: fmt.Errorf("write %s: %w", w.Path(), errors.Join(err, uerr)), done: true}
				}
				s.unsealMerged(w, group[:j], base)
				return buf, false
			}
		}
		first += uint64(len(b.frames))
		buf = append(buf, b.buf...)
	}
	return buf, true
}

// unsealMerged unseals the batches of group, sealed for consecutive places
// from base; a batch that cannot be unsealed gets the error as its result.
func (s *Set) unsealMerged(w *Writer, group []*Batch, base int64) {
	at := base
	for _, b := range group {
		if uerr := w.fr.unsealFrames(b, len(b.frames), at); uerr != nil {
			b.merged = mergeResult{err: fmt.Errorf("write %s: %w", w.Path(), uerr), done: true}
		}
		at += int64(len(b.buf))
	}
}

// mergedWriteFailed handles the failed merged write of group at base:
// every batch is unsealed; the first gets err (and a full disk releases
// the reserve, as for a batch alone); the others are written one after
// another, as they would have been after the first one failed.
func (s *Set) mergedWriteFailed(d *dir, w *Writer, group []*Batch, base int64, err error) {
	err = fmt.Errorf("write %s: %w", w.Path(), err)
	at := base
	for j, b := range group {
		uerr := w.fr.unsealFrames(b, len(b.frames), at)
		at += int64(len(b.buf))
		if j == 0 || uerr != nil {
			b.merged = mergeResult{err: errors.Join(err, uerr), done: true}
		}
	}
	if errors.Is(err, syscall.ENOSPC) {
		s.releaseReserve(d)
	}
	s.appendEachLocked(d, group[1:])
}

// holdAppends: an fsync of one of d's writers is starting (the leader of
// a Set.Sync): merged appends wait until it ends.
func (d *dir) holdAppends() {
	d.pendMu.Lock()
	defer d.pendMu.Unlock()
	if d.held == nil {
		d.held = make(chan struct{})
	}
	d.holds++
}

// releaseAppends: an fsync holdAppends announced ended; after the last,
// the appends waiting go on.
func (d *dir) releaseAppends() {
	d.pendMu.Lock()
	defer d.pendMu.Unlock()
	d.holds--
	if d.holds == 0 {
		close(d.held)
		d.held = nil
	}
}
