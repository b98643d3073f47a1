package logfile

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// dir is one data dir of a Set and its active writer.
type dir struct {
	path string

	// mu guards w; it serialises appends to w and rolls (which replace w).
	mu sync.Mutex
	w  *Writer

	// The free-space cache of SpaceOK: refreshed from the filesystem at
	// most once per second and decremented by each append.
	free        atomic.Int64
	freeChecked atomic.Int64 // unix nanos of the last refresh
	// lowSpace is set while the dir is short of space (logged once when
	// it starts and once when it ends).
	lowSpace atomic.Bool
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
}

// Start turns the catalog into the live log: it opens a reader on every
// file (a damaged header is stepped over, as the scanner did), records the
// valid lengths and dependencies, and continues the ids after rec's. Roll
// must then give every data dir its first writer.
func (s *Set) Start(rec Recovered) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, f := range s.files {
		if f.r == nil {
			r, err := openReader(s.fs, f.Path)
			if err != nil {
				return fmt.Errorf("open reader: %w", err)
			}
			f.r, f.rerr = r, nil
		}
		// Without an end: no record starts before the smallest header (a
		// scan from there starts at the file's own header end).
		f.size = max(rec.Ends[id], headerSizeV1)
	}
	for file, of := range rec.Completes {
		for _, g := range of {
			s.Complete(file, g)
		}
	}
	s.nextWOID.Store(rec.MaxWriteOrderID + 1)
	s.nextFileID.Store(rec.MaxFileID + 1)
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
// finds its earlier records durable.
func (s *Set) Roll(i int) error {
	d := s.dirs[i]
	d.mu.Lock()
	defer d.mu.Unlock()
	return s.rollLocked(d)
}

// rollLocked is Roll with d.mu held.
func (s *Set) rollLocked(d *dir) error {
	id := s.nextFileID.Add(1) - 1
	w, err := Create(s.fs, d.path, id)
	if err != nil {
		return err
	}
	if s.opts.OnCreate != nil {
		s.opts.OnCreate(w)
	}
	r, err := OpenReader(s.fs, w.Path())
	if err != nil {
		return errors.Join(fmt.Errorf("open reader: %w", err), w.Close())
	}
	old := d.w
	size := int64(0)
	if old != nil {
		size = old.Size()
		if err := old.Close(); err != nil || old.Err() != nil {
			// What the old file did not sync may be lost; the commits of
			// it have not returned (they sync after writing and see the
			// same sticky error). The file is valid only as far as its
			// last good fsync: a checkpoint must not cover the rest.
			size = old.Synced()
			s.log.Error("close rolled log file", "file", old.Path(), "err", errors.Join(err, old.Err()))
		}
	}
	s.mu.Lock()
	s.files[id] = &setFile{File: File{ID: id, Dir: d.path, Path: w.Path()}, r: r}
	if old != nil {
		if f := s.files[old.ID()]; f != nil {
			f.size = size
		}
	}
	s.mu.Unlock()
	d.w = w
	if old != nil {
		s.log.Info("rolled log file", "dir", d.path, "old", filepath.Base(old.Path()), "new", filepath.Base(w.Path()))
	}
	return nil
}

// Batch is records to append to one data dir's log in one write.
type Batch struct {
	// Buf holds the records' frames, encoded by AppendUnsealed; Frames
	// the offset in Buf of each. Append seals them for the file they go
	// to (write-order id, checksums with that file's salt).
	Buf    []byte
	Frames []int
	// After lists earlier writes (a transaction's spilled puts) that this
	// batch's records count: each must be durable before the batch is
	// written. Those in the file the batch goes to are covered by the
	// batch's own sync.
	After []Mark
	// Completes lists the log files holding puts that this batch's
	// records complete (the events its take records take, the spilled
	// puts its commit commits). See Complete.
	Completes []uint32
}

// Mark is where a write ended in a writer's file.
type Mark struct {
	W   *Writer
	End int64
}

// Appended says where Append wrote a batch.
type Appended struct {
	W    *Writer // the writer of the file written to
	Base int64   // the file offset of Buf[0]
	End  int64   // the file offset just past the batch: sync to here
	// FirstWOID is the write-order id of the batch's first frame; frame i
	// has FirstWOID+i.
	FirstWOID uint64
}

// Append writes b to data dir i's active log in one write, rolling first
// when the dir has no writer, its writer failed, or a non-empty file would
// pass MaxFileSize. Write-order ids are handed out under the dir's lock,
// so they increase within every file. Append does not sync: the caller
// syncs to Appended.End (group commit). b.Buf is sealed in place.
func (s *Set) Append(i int, b *Batch) (Appended, error) {
	d := s.dirs[i]
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil || d.w.Err() != nil ||
		(s.opts.MaxFileSize > 0 && d.w.Size() > HeaderSize && d.w.Size()+int64(len(b.Buf)) > s.opts.MaxFileSize) {
		if err := s.rollLocked(d); err != nil {
			return Appended{}, err
		}
	}
	w := d.w
	for _, m := range b.After {
		if m.W != w {
			// That file was synced when it was rolled, unless its writer
			// failed and cut the records off.
			if err := m.W.SyncTo(m.End); err != nil {
				return Appended{}, fmt.Errorf("spilled puts in %s were lost: %w", m.W.Path(), err)
			}
		}
	}
	base := w.Size()
	if base+int64(len(b.Buf)) > math.MaxUint32 {
		return Appended{}, fmt.Errorf("records of %d bytes do not fit a log file", len(b.Buf))
	}
	n := uint64(len(b.Frames))
	first := s.nextWOID.Add(n) - n
	for k, off := range b.Frames {
		w.fr.setWriteOrderID(b.Buf[off:], first+uint64(k))
	}
	for _, g := range b.Completes {
		s.Complete(w.ID(), g)
	}
	off, err := w.Write(b.Buf)
	if err != nil {
		return Appended{}, fmt.Errorf("write %s: %w", w.Path(), err)
	}
	d.free.Add(-int64(len(b.Buf)))
	return Appended{W: w, Base: base, End: off + int64(len(b.Buf)), FirstWOID: first}, nil
}

// SpaceOK reports whether data dir i can take n more bytes and keep min
// bytes free (min < 0 disables the check), with the free space it counted.
// It logs when the dir runs short and when it has room again.
func (s *Set) SpaceOK(i int, n, min int64) (ok bool, free int64, err error) {
	if min < 0 {
		return true, 0, nil
	}
	d := s.dirs[i]
	now := time.Now().UnixNano()
	if now-d.freeChecked.Load() > int64(time.Second) {
		f, err := s.fs.FreeSpace(d.path)
		if err != nil {
			return false, 0, fmt.Errorf("free space of %s: %w", d.path, err)
		}
		d.free.Store(f)
		d.freeChecked.Store(now)
	}
	free = d.free.Load()
	ok = free-n >= min
	if d.lowSpace.Load() == ok && d.lowSpace.CompareAndSwap(ok, !ok) {
		if ok {
			s.log.Info("data dir has room again", "dir", d.path, "free_bytes", free)
		} else {
			s.log.Error("data dir is short of space: puts fail until room is made", "dir", d.path,
				"free_bytes", free, "minimum_required_space", min)
		}
	}
	return ok, free, nil
}

// ForgetFreeSpace makes the next SpaceOK of every dir ask the filesystem.
func (s *Set) ForgetFreeSpace() {
	for _, d := range s.dirs {
		d.freeChecked.Store(0)
	}
}

// DirState is what Health reports about one data dir.
type DirState struct {
	Path      string
	LowSpace  bool  // the last SpaceOK found it short of space
	WriterErr error // its active writer failed (the next Append rolls)
	Size      int64 // its active file's size
	ActiveID  uint32
	Active    bool // it has an active writer
}

// DirStates returns the state of every data dir.
func (s *Set) DirStates() []DirState {
	out := make([]DirState, len(s.dirs))
	for i, d := range s.dirs {
		out[i] = DirState{Path: d.path, LowSpace: d.lowSpace.Load()}
		d.mu.Lock()
		if d.w != nil {
			out[i].WriterErr, out[i].Size = d.w.Err(), d.w.Size()
			out[i].ActiveID, out[i].Active = d.w.ID(), true
		}
		d.mu.Unlock()
	}
	return out
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
	for _, d := range s.dirs {
		d.mu.Lock()
		d.w = nil
		d.mu.Unlock()
	}
}
