package logfile

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// dir is one data dir of a Set and its active writer.
type dir struct {
	path string

	// mu guards w and rollErr; it serialises appends to w and rolls
	// (which replace w).
	mu sync.Mutex
	w  *Writer
	// start is where the records appended to w begin: after its header
	// and the FileStart records. A file no longer than start is empty.
	start int64
	// rollErr is why the last roll could not create a new log file (nil
	// once one succeeds): commits to the dir fail until then.
	rollErr error

	// The free-space cache of SpaceOK: refreshed from the filesystem at
	// most once per second, and after the set deletes or cuts a file in
	// the dir; decremented by each append.
	free        atomic.Int64
	freeChecked atomic.Int64 // unix nanos of the last refresh
	// lowSpace is set while the dir is short of space: from a SpaceOK
	// that refuses until the free space counted reaches roomAt (see
	// SpaceOK), each transition logged once. spaceMu serialises the
	// transitions (a leaf: nothing else is taken, nor logged, under it).
	spaceMu  sync.Mutex
	lowSpace atomic.Bool
	roomAt   atomic.Int64 // stored under spaceMu

	// full: the dir is without its space reserve (setreserve.go).
	// reserveMu serialises the reserve's writes and removals and the
	// changes of full (taken under mu by Append and Roll, and alone).
	reserveMu sync.Mutex
	full      atomic.Bool

	// retained counts the dir's retained log files (Set.retained; stored
	// under Set.mu).
	retained atomic.Int64

	// poolMu guards pool, the ids of the consumed files waiting to be
	// recycled (RecycleName, recycle.go), oldest first, and pending, the
	// pool places taken by renames whose dir fsync has not returned. A
	// leaf lock.
	poolMu  sync.Mutex
	pool    []uint32
	pending int
	// listedPool: the pool files OpenSet found (adoptPool).
	listedPool []uint32

	// pendMu guards pend, held and holds: the put batches whose Append
	// waits for mu, which the next holder of mu writes in one write, and
	// while fsyncs of the dir's writers are in flight (holds of them), a
	// channel closed when the last ends, which those Appends wait for
	// first (setmerge.go). A leaf, taken under mu or alone.
	pendMu sync.Mutex
	pend   []*Batch
	held   chan struct{}
	holds  int
	// spare and mergeBuf are the memory of the last merged write, kept for
	// the next (under mu): the pend slice it took, and the bytes.
	spare    []*Batch
	mergeBuf []byte
}

// Recovered is what recovery learned that the live set needs: where the
// ids continue and how far each file's valid records go.
type Recovered struct {
	// MaxWriteOrderID and MaxFileID are the largest ids seen or recorded;
	// the set hands out ids above them.
	MaxWriteOrderID uint64
	MaxFileID       uint32
	// Ends maps each file to the end of its valid records.
	Ends map[uint32]int64
	// Completes is the commit dependencies between files (see Complete).
	Completes map[uint32][]uint32
	// Spilled is the commits of spilled put transactions, by the file
	// holding their puts and tx id (see NoteSpilledCommit).
	Spilled map[uint32]map[uint64]SpilledCommit
	// Index is each file's FileIndex (a file missing: known and empty).
	Index map[uint32]FileIndex
}

// Start turns the catalog into the live log: it records the valid lengths
// and dependencies, and continues the ids after rec's (and after those of
// NotRegular entries, whose names are taken). Roll must then give every
// data dir its first writer. Readers are opened when takes need them
// (Reader), at most SetOptions.MaxOpenReaders at a time.
func (s *Set) Start(rec Recovered) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, f := range s.files {
		// Without an end: no record starts before the smallest header (a
		// scan from there starts at the file's own header end).
		f.size = max(rec.Ends[id], headerSizeV1)
		if s.opts.Retention.on() {
			f.written = s.fileTime(f.Path, now)
		}
	}
	s.spillMu.Lock()
	for file, m := range rec.Spilled {
		if s.files[file] != nil { // of a file that exists
			s.spilled[file] = maps.Clone(m)
		}
	}
	for file, x := range rec.Index {
		if s.files[file] != nil && x != (FileIndex{Known: true}) { // known and empty: as absent
			s.index[file] = x
		}
	}
	s.spillMu.Unlock()
	for file, of := range rec.Completes {
		for _, g := range of {
			s.Complete(file, g)
		}
	}
	s.nextWOID.Store(rec.MaxWriteOrderID + 1)
	maxID := rec.MaxFileID
	for _, n := range s.notRegular { // a name taken, though not by a log file
		maxID = max(maxID, n.ID)
	}
	s.nextFileID.Store(maxID + 1)
	s.adoptPools()
	s.startReserves()
	s.startLayouter()
	return nil
}

// NumDirs returns the number of data dirs; Append and Roll take an index
// below it.
func (s *Set) NumDirs() int { return len(s.dirs) }

// DirPath returns the path of data dir i.
func (s *Set) DirPath(i int) string { return s.dirs[i].path }

// LastWriteOrderID returns the last write-order id handed out.
func (s *Set) LastWriteOrderID() uint64 { return s.nextWOID.Load() - 1 }

// NextFileID returns the id the next new log file gets.
func (s *Set) NextFileID() uint32 { return s.nextFileID.Load() }

// Roll gives data dir i a new log file to append to. The old one is synced
// and closed first, so that a transaction whose records straddle the roll
// finds its earlier records durable. A roll that fails for lack of space
// (ENOSPC) leaves the dir full (its space reserve removed: see Full).
func (s *Set) Roll(i int) error {
	d := s.dirs[i]
	d.mu.Lock()
	defer d.mu.Unlock()
	err := s.rollLocked(d)
	if errors.Is(err, syscall.ENOSPC) {
		s.releaseReserve(d)
	}
	return err
}

// rollLocked is Roll with d.mu held.
func (s *Set) rollLocked(d *dir) error {
	if d.w != nil {
		// Sync the old file before the new one exists: recovery counts on
		// every file of a dir but the last being synced to its end (a crash
		// tears an unsynced overwrite sector by sector; Set.Scan). A
		// failure is the writer's, sticky: Close below reports it.
		if d.w.Sync() == nil && d.w.fr.recycled {
			// A last mark, made durable by Close's fsync: in a recycled
			// file an invalid frame no mark vouches for ends the file.
			s.markSyncedLocked(d, d.w)
		}
	}
	id := s.nextFileID.Add(1) - 1
	w, err := s.newLog(d, id)
	if err != nil {
		if d.rollErr == nil {
			s.log.Error("cannot start a new log file: commits to this data dir fail until one can be created",
				"dir", d.path, "err", err)
		}
		d.rollErr = err
		return err
	}
	if s.opts.OnCreate != nil {
		s.opts.OnCreate(w)
	}
	if err := s.writeFileStart(w); err != nil {
		// The file holds a header and perhaps part of a record that no
		// replay applies (nothing after it is synced): a later roll
		// starts another.
		err = errors.Join(err, w.Close())
		if d.rollErr == nil {
			s.log.Error("cannot start a new log file: commits to this data dir fail until one can be created",
				"dir", d.path, "err", err)
		}
		d.rollErr = err
		return err
	}
	if d.rollErr != nil {
		s.log.Info("started a new log file again", "dir", d.path, "file", filepath.Base(w.Path()))
		d.rollErr = nil
	}
	old := d.w
	size := int64(0)
	if old != nil {
		size = old.Size()
		err := old.Close()
		s.layouter.retire(old)
		if err != nil || old.Err() != nil {
			// What the old file did not sync may be lost; the commits of
			// it have not returned (they sync after writing and see the
			// same sticky error). The file is valid only as far as its
			// last good fsync: a checkpoint must not cover the rest.
			size = old.Synced()
			s.log.Error("close rolled log file", "file", old.Path(), "err", errors.Join(err, old.Err()))
		}
	}
	var written time.Time
	if old != nil && s.opts.Retention.on() {
		written = s.fileTime(old.Path(), s.now())
	}
	s.mu.Lock()
	s.files[id] = &setFile{File: File{ID: id, Dir: d.path, Path: w.Path()}}
	if old != nil {
		if f := s.files[old.ID()]; f != nil {
			f.size, f.written = size, written
		}
	}
	s.mu.Unlock()
	d.w, d.start = w, w.Size()
	s.layouter.kick()
	if old != nil {
		s.log.Info("rolled log file", "dir", d.path, "old", filepath.Base(old.Path()), "new", filepath.Base(w.Path()))
	}
	return nil
}

// createLog creates log file id in dir: encrypted with the active key,
// bound to the set's channel, if the set has Keys.
func (s *Set) createLog(dir string, id uint32) (*Writer, error) {
	fr, err := s.framingFor(id)
	if err != nil {
		return nil, fmt.Errorf("create log %d in %s: %w", id, dir, err)
	}
	return create(s.fs, dir, id, fr)
}

// framingFor returns the framing of new log file id: a fresh salt, and
// with Keys, the active key bound to the set's channel.
func (s *Set) framingFor(id uint32) (Framing, error) {
	if s.opts.Keys == nil {
		return newFraming(), nil
	}
	return encryptedFraming(s.opts.Keys, id, s.opts.ChannelID)
}

// writeFileStart writes the FileStart records to w, a new file, not
// synced: they become durable with the first batch appended after them.
// An encrypted file's key record comes first.
func (s *Set) writeFileStart(w *Writer) error {
	var recs []Record
	if w.fr.Encrypted() {
		recs = append(recs, Record{Type: RecordKey, KeyID: w.fr.keyID, KeyCheck: w.fr.keyCheck, ChannelID: w.fr.channel})
	}
	if s.opts.FileStart != nil {
		recs = append(recs, s.opts.FileStart()...)
	}
	if len(recs) == 0 {
		return nil
	}
	b := s.NewBatch()
	for i := range recs {
		if err := b.Add(&recs[i]); err != nil {
			return fmt.Errorf("encode the first records of %s: %w", w.Path(), err)
		}
	}
	n := uint64(b.Len())
	first := s.nextWOID.Add(n) - n
	base := w.Size()
	for k, off := range b.frames {
		if err := w.fr.sealFrame(b.buf[off:], base+int64(off), first+uint64(k)); err != nil {
			return fmt.Errorf("seal the first records of %s: %w", w.Path(), err)
		}
	}
	if _, err := w.Write(b.buf); err != nil {
		return fmt.Errorf("write %s: %w", w.Path(), err)
	}
	return nil
}

// Mark is where a write ended in a writer's file.
type Mark struct {
	W   *Writer
	End int64
}

// Appended says where Append wrote a batch.
type Appended struct {
	W    *Writer // the writer of the file written to
	Base int64   // the file offset of the batch's first byte
	End  int64   // the file offset just past the batch: sync to here
	// FirstWOID is the write-order id of the batch's first frame; frame i
	// has FirstWOID+i.
	FirstWOID uint64

	dir *dir // the data dir written to (Sync marks it)
}

// Append writes b to data dir i's active log in one write, rolling first
// when the dir has no writer, its writer failed, or a non-empty file would
// pass MaxFileSize. Write-order ids are handed out under the dir's lock,
// so they increase within every file. Append does not sync: the caller
// syncs to Appended.End (group commit). b's records are sealed in place;
// if Append fails, b is as it was (its puts' bodies in clear again), ready
// for another Append. A batch that s did not make (NewBatch), or that an
// Append wrote and no Reset emptied since, is refused.
//
// A roll or write that fails for lack of space (ENOSPC) makes the dir full:
// its space reserve is removed, and a draining batch (b.Drain) is written
// again on the room it freed. While the dir is full, only draining batches
// are written, and only while a quarter of the reserve stays free.
//
// Appends to one dir that wait for each other are merged: whoever gets the
// dir next writes every put batch waiting, in one write (setmerge.go).
func (s *Set) Append(i int, b *Batch) (Appended, error) {
	d := s.dirs[i]
	if !mergeable(s, b) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return s.appendOneLocked(d, b)
	}
	d.pendMu.Lock()
	d.pend = append(d.pend, b)
	held := d.held
	d.pendMu.Unlock()
	if held != nil {
		<-held // the fsync in flight could not cover b: write it after, with the others
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !b.merged.done {
		s.appendPendingLocked(d)
	}
	a, err := b.merged.a, b.merged.err
	b.merged = mergeResult{}
	return a, err
}

// appendOneLocked is Append of b alone, with d.mu held: a write that
// finds the disk full releases the reserve, and a draining batch is
// written again on the room it freed.
func (s *Set) appendOneLocked(d *dir, b *Batch) (Appended, error) {
	a, err := s.appendLocked(d, b)
	if errors.Is(err, syscall.ENOSPC) && s.releaseReserve(d) && b.Drain {
		a, err = s.appendLocked(d, b)
	}
	return a, err
}

// appendLocked is Append with d.mu held, once.
func (s *Set) appendLocked(d *dir, b *Batch) (Appended, error) {
	switch {
	case b.set != s:
		return Appended{}, fmt.Errorf("append to %s: %w", d.path, errForeignBatch)
	case b.written:
		return Appended{}, fmt.Errorf("append to %s: %w", d.path, errBatchWritten)
	}
	if d.full.Load() {
		if err := s.roomForDrainLocked(d, int64(len(b.buf)), b.Drain); err != nil {
			return Appended{}, err
		}
	}
	if d.w == nil || d.w.Err() != nil ||
		(s.opts.MaxFileSize > 0 && d.w.Size() > d.start && d.w.Size()+int64(len(b.buf)) > s.opts.MaxFileSize) {
		if err := s.rollLocked(d); err != nil {
			return Appended{}, fmt.Errorf("start a new log file: %w", err)
		}
	}
	w := d.w
	if enc := s.Encrypted(); enc != w.fr.Encrypted() { // the set's files all share its encoding
		return Appended{}, fmt.Errorf("write %s: a batch encoded for encryption %v to a file with encryption %v", w.Path(), enc, w.fr.Encrypted())
	}
	for _, m := range b.After {
		if m.W != w {
			// That file was synced when it was rolled, unless its writer
			// failed and cut the records off.
			if err := m.W.SyncTo(m.End); err != nil {
				return Appended{}, fmt.Errorf("spilled puts in %s were lost: %w", m.W.Path(), err)
			}
		}
	}
	// The sync mark due, if any, goes in front of the batch, in one write.
	mark, marked := s.appendSyncMarkLocked(d, w, d.mergeBuf[:0])
	base := w.Size() + int64(len(mark))
	if base+int64(len(b.buf)) > math.MaxUint32 {
		return Appended{}, fmt.Errorf("records of %d bytes do not fit a log file", len(b.buf))
	}
	n := uint64(len(b.frames))
	first := s.nextWOID.Add(n) - n
	for k, off := range b.frames {
		if err := w.fr.sealFrame(b.buf[off:], base+int64(off), first+uint64(k)); err != nil {
			return Appended{}, errors.Join(fmt.Errorf("write %s: %w", w.Path(), err), w.fr.unsealFrames(b, k, base))
		}
	}
	for _, g := range b.Completes {
		s.Complete(w.ID(), g)
	}
	p := b.buf
	if marked > 0 {
		p = append(mark, b.buf...)
		d.mergeBuf = p[:0]
	}
	off, err := w.Write(p)
	if err != nil {
		return Appended{}, errors.Join(fmt.Errorf("write %s: %w", w.Path(), err), w.fr.unsealFrames(b, len(b.frames), base))
	}
	if marked > 0 {
		w.markedTo.Store(marked)
	}
	// Bytes written over laid-out zeros take no more space: the
	// layouter counted them.
	d.free.Add(-w.beyondLaidOut(off, off+int64(len(p))))
	s.layouter.kick()
	b.written = true
	return Appended{W: w, Base: base, End: off + int64(len(p)), FirstWOID: first, dir: d}, nil
}

// Sync makes a's records durable: Writer.SyncTo(a.End), whose fsync
// concurrent committers share. Then, if that fsync made more of the file
// durable than the last sync mark says, a new mark is due: when put
// batches wait to be written to the dir, the next write carries it in
// front of them (appendSyncMarkLocked); else Sync writes it
// (markSynced).
func (s *Set) Sync(a Appended) error {
	var gate syncGate
	if a.dir != nil {
		gate = a.dir
	}
	if err := a.W.syncTo(a.End, gate); err != nil {
		return err
	}
	if a.dir != nil && a.W.Synced() > a.W.markedTo.Load() && !a.dir.appendsPending() {
		s.markSynced(a.dir, a.W)
	}
	return nil
}

// appendsPending reports whether put batches wait to be written to d:
// the write of them carries the sync mark due, if any.
func (d *dir) appendsPending() bool {
	d.pendMu.Lock()
	defer d.pendMu.Unlock()
	return len(d.pend) > 0
}

// markSynced appends a sync mark (RecordSynced) to w, d's active writer,
// saying how far the file was durable when it was written: that is the
// proof recovery needs to tell damage before that offset from a torn
// write, and to keep the acknowledged records after it (Scanner). The mark
// is not synced: the next fsync of the file covers it, and so does the
// page cache after a killed process. It is best effort, written only when
// it says more than the last mark, w is still d's active writer, healthy,
// holds records past its FileStart ones, and the dir is not full. A mark
// that cannot be written is left out (a failed write is the writer's, as
// any other: the next append rolls).
func (s *Set) markSynced(d *dir, w *Writer) {
	if w.Synced() <= w.markedTo.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.markSyncedLocked(d, w)
}

// markSyncedLocked is markSynced with d.mu held.
func (s *Set) markSyncedLocked(d *dir, w *Writer) {
	var stack [32]byte
	buf, synced := s.appendSyncMarkLocked(d, w, stack[:0])
	if synced == 0 {
		return
	}
	off, err := w.Write(buf)
	if err != nil {
		if !errors.Is(err, ErrFileFull) {
			s.log.Warn("write a sync mark", "file", w.Path(), "err", err)
		}
		return
	}
	w.markedTo.Store(synced)
	d.free.Add(-w.beyondLaidOut(off, off+int64(len(buf))))
}

// appendSyncMarkLocked appends to buf, bytes to be written to w at
// w.Size(), a sync mark sealed for its place after them, if one is due
// (see markSynced), and returns the SyncedTo it says (0: none appended).
// The caller stores that in w.markedTo once the write succeeds. d.mu is
// held.
func (s *Set) appendSyncMarkLocked(d *dir, w *Writer, buf []byte) ([]byte, int64) {
	synced := w.Synced()
	if d.w != w || synced <= w.markedTo.Load() || w.Size() <= d.start || d.full.Load() || w.Err() != nil {
		return buf, 0
	}
	n := len(buf)
	buf, err := AppendUnsealed(buf, &Record{Type: RecordSynced, SyncedTo: synced})
	if err == nil {
		err = w.fr.sealFrame(buf[n:], w.Size()+int64(n), 0)
	}
	if err != nil {
		s.log.Error("encode a sync mark", "file", w.Path(), "err", err)
		return buf[:n], 0
	}
	return buf, synced
}

// SpaceOK reports whether data dir i can take n more bytes and keep min
// bytes free (min < 0 disables the check), with the free space it counted.
//
// It also keeps the dir's low-space state (DirState.LowSpace, what Health
// reports), with hysteresis so that one continuous shortage is one pair
// of log lines however puts of different sizes (and Health's n = 0) come
// and go: a refusal makes the dir short (logged at Error when it starts);
// it has room again (logged at Info) only once its free space reaches min
// plus the largest n refused meanwhile plus LowSpaceMargin(min). Calls in
// between that fit (a smaller put) say ok, and the dir stays short.
func (s *Set) SpaceOK(i int, n, min int64) (ok bool, free int64, err error) {
	if min < 0 {
		return true, 0, nil
	}
	d := s.dirs[i]
	free, err = s.freeSpace(d)
	if err != nil {
		return false, 0, err
	}
	ok = free-n >= min
	switch {
	case !ok:
		s.shortOfSpace(d, free, n, min)
	case d.lowSpace.Load() && free >= d.roomAt.Load():
		s.roomAgain(d, free)
	}
	return ok, free, nil
}

// freeSpace returns d's free space from the cache, refreshed from the
// filesystem when it is a second old or was forgotten.
func (s *Set) freeSpace(d *dir) (int64, error) {
	now := time.Now().UnixNano()
	if now-d.freeChecked.Load() > int64(time.Second) {
		f, err := s.fs.FreeSpace(d.path)
		if err != nil {
			return 0, fmt.Errorf("free space of %s: %w", d.path, err)
		}
		d.free.Store(f)
		d.freeChecked.Store(now)
	}
	return d.free.Load(), nil
}

// LowSpaceMargin is how far above min plus the refused bytes a dir's free
// space must come back before SpaceOK says it has room again: min/16, at
// least 1 MiB. It keeps a dir whose free space hovers around the limit (each
// append takes some, each deletion gives some back) from flapping.
func LowSpaceMargin(min int64) int64 { return max(min/16, 1<<20) }

// shortOfSpace records that d refused n bytes with free counted: it becomes
// short of space, or stays short with the bar for room raised to fit n.
func (s *Set) shortOfSpace(d *dir, free, n, min int64) {
	need := min + n + LowSpaceMargin(min)
	d.spaceMu.Lock()
	started := !d.lowSpace.Load()
	if started || need > d.roomAt.Load() {
		d.roomAt.Store(need)
	}
	d.lowSpace.Store(true)
	d.spaceMu.Unlock()
	if started {
		s.log.Error("data dir is short of space: puts fail until room is made", "dir", d.path,
			"free_bytes", free, "minimum_required_space", min, "room_again_at", need)
	}
}

// roomAgain ends d's shortage if free has reached its bar.
func (s *Set) roomAgain(d *dir, free int64) {
	d.spaceMu.Lock()
	ended := d.lowSpace.Load() && free >= d.roomAt.Load()
	if ended {
		d.lowSpace.Store(false)
	}
	d.spaceMu.Unlock()
	if ended {
		s.log.Info("data dir has room again", "dir", d.path, "free_bytes", free)
	}
}

// ForgetFreeSpace makes the next SpaceOK of every dir ask the filesystem.
func (s *Set) ForgetFreeSpace() {
	for _, d := range s.dirs {
		d.freeChecked.Store(0)
	}
}

// forgetFreeSpaceOf makes the next SpaceOK of the data dir at path ask the
// filesystem: the set deleted or cut a file there, and the room it freed
// must count at once (a put refused for space just before a checkpoint
// deleted logs is not refused again for up to a second).
func (s *Set) forgetFreeSpaceOf(path string) {
	for _, d := range s.dirs {
		if d.path == path {
			d.freeChecked.Store(0)
		}
	}
}

// DirState is what Health reports about one data dir.
type DirState struct {
	Path      string
	LowSpace  bool  // short of space: a SpaceOK refused, and the room has not come back (see SpaceOK)
	Full      bool  // without its space reserve: only take commits are written there (see Full)
	WriterErr error // its active writer failed (the next Append rolls)
	Size      int64 // its active file's size: its records, not the zeros laid out past them
	// LaidOut is the zeros laid out in the active file past its records
	// (SetOptions.Preallocate): disk space the file holds beyond Size.
	LaidOut  int64
	ActiveID uint32
	Active   bool // it has an active writer
	// RollErr: the last roll could not create a new log file (too many
	// open files, a full disk...); every Append tries again, and fails
	// until one succeeds.
	RollErr error
}

// DirStates returns the state of every data dir.
func (s *Set) DirStates() []DirState {
	out := make([]DirState, len(s.dirs))
	for i, d := range s.dirs {
		out[i] = DirState{Path: d.path, LowSpace: d.lowSpace.Load(), Full: d.full.Load()}
		d.mu.Lock()
		out[i].RollErr = d.rollErr
		if d.w != nil {
			out[i].WriterErr, out[i].Size = d.w.Err(), d.w.Size()
			out[i].ActiveID, out[i].Active = d.w.ID(), true
			out[i].LaidOut = d.w.laidAhead()
		}
		d.mu.Unlock()
	}
	return out
}

// RemoveEmptyActive closes every data dir's active writer whose file holds
// nothing but its header and FileStart records, and deletes that file (as Reclaim deletes):
// what a failed Open undoes of its rolls, so that Opens retried on a full
// disk do not pile up empty log files. The dirs then have no writer.
func (s *Set) RemoveEmptyActive() error {
	var ids []uint32
	var errs []error
	for _, d := range s.dirs {
		d.mu.Lock()
		if w := d.w; w != nil && w.Size() <= d.start {
			errs = append(errs, w.Close())
			d.w = nil
			ids = append(ids, w.ID())
		}
		d.mu.Unlock()
	}
	_, _, err := s.deleteRound(ids, false)
	return errors.Join(append(errs, err)...)
}

// Len returns the number of log files in the set.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.files)
}

// Bytes returns the size of the set's log files: the valid length of each
// rolled file and the current size of each active one.
func (s *Set) Bytes() int64 {
	var n int64
	s.mu.RLock()
	for _, f := range s.files {
		n += f.size
	}
	s.mu.RUnlock()
	for _, st := range s.DirStates() {
		n += st.Size
	}
	return n
}

// Active returns data dir i's active writer (nil before the first Roll).
func (s *Set) Active(i int) *Writer {
	d := s.dirs[i]
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.w
}

// Abandon forgets every active writer without syncing or closing it, as a
// killed process leaves its files: crash tests use it to check that what
// was not synced is not counted on. The set must not be appended to after.
func (s *Set) Abandon() {
	s.layouter.stop()
	for _, d := range s.dirs {
		d.mu.Lock()
		d.w = nil
		d.mu.Unlock()
	}
}
