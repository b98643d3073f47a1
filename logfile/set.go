package logfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// Set is the one owner of a channel's data log files: the data dirs and
// every log file in them. Opened with OpenSet it is a catalog: the files
// found (with the ids two dirs hold and the files a crash left unfinished),
// scanners and readers opened the same way for every caller, and the few
// changes recovery and repair make to whole files (RemoveFile, CutTail).
// After Start it is also the live log: the active writer of each data dir,
// rolling, write-order and file ids, the commit dependencies between files
// and the deletion of files nothing needs (setwrite.go, setgc.go).
//
// The offline tools (replay.Run, replay.Verify, channel.Repair and
// channel.Rebuild) use the catalog only; the channel uses both.
type Set struct {
	fs  vfs.FS
	log *slog.Logger
	// opts as given to OpenSet, with defaults.
	opts SetOptions

	listed     []File
	missing    []string     // data dirs that do not exist
	notRegular []NotRegular // entries named like log files that are not files

	dirs []*dir

	// mu guards files (and each setFile's size and rerr). Reader holds it
	// shared while it looks a file up in readers, so that a file leaves
	// files before its reader leaves the cache.
	mu    sync.RWMutex
	files map[uint32]*setFile

	// readers is the bounded cache of open readers (readercache.go).
	readers *readerCache

	// retained holds the retained log files (setretain.go): files nothing
	// needs that Reclaim kept for Retention; guarded by mu, its size
	// mirrored in retainedN, and each dir's share in dir.retained, for
	// the put path's quick look.
	retained  map[uint32]bool
	retainedN atomic.Int64

	// gcMu serialises the deletions of Reclaim and MakeRoom.
	gcMu sync.Mutex

	// depMu guards completes (a leaf: taken with no other lock of the set).
	depMu     sync.Mutex
	completes map[uint32]map[uint32]struct{}

	// spillMu guards spilled, the commits of spilled put transactions by
	// the file holding their puts and tx id (setspill.go), and index, each
	// file's FileIndex (setindex.go). A leaf lock.
	spillMu sync.Mutex
	spilled map[uint32]map[uint64]SpilledCommit
	index   map[uint32]FileIndex

	nextWOID   atomic.Uint64 // the next write-order id to hand out
	nextFileID atomic.Uint32 // the next log file id to create

	layouter layouter     // zero-fills ahead of the active writers (layout.go)
	recycled atomic.Int64 // files started by recycling a consumed one (recycle.go)

	lastOnce sync.Once
	lastIDs  map[string]uint32 // data dir -> largest id listed (lastInDir)
}

// SetOptions configures OpenSet.
type SetOptions struct {
	FS   vfs.FS   // nil = vfs.OS()
	Dirs []string // the data dirs, in the channel's order
	// AllowDuplicates lists a file id found in a second data dir (with
	// File.Duplicate set) instead of refusing to open the set: Verify and
	// Repair report it; the channel cannot run with it.
	AllowDuplicates bool
	// MaxFileSize is the size past which Append rolls to a new file (the
	// channel's Config.MaxFileSize); 0 = never roll for size.
	MaxFileSize int64
	// OnCreate, if set, is called with each writer Roll creates, before
	// anything is written through it (the channel observes its fsyncs).
	OnCreate func(*Writer)
	// OnDelete, if set, is called once per log file Reclaim deletes.
	OnDelete func(id uint32)
	// BeforeDelete, if set, is called by Reclaim and MakeRoom (with the
	// set's deletion lock held: it must not call them) before they delete
	// any log file; if it fails they delete nothing and return its error.
	// The channel persists there what it would otherwise have to rebuild
	// from the files (its deduplication window).
	BeforeDelete func() error
	// FileStart, if set, gives the records that begin every new log file
	// (the channel's consumer-group catalog): Roll writes them right
	// after the header, with write-order ids, and they are made durable
	// with the first records appended after them. It is called with the
	// dir's lock held, and must not call the set.
	FileStart func() []Record
	Logger    *slog.Logger // nil = discard
	// Reserve is the size of the space reserve the live set keeps in each
	// data dir (ReserveName, setreserve.go); 0 = none.
	Reserve int64
	// MaxOpenReaders bounds the readers (Reader) kept open at once, least
	// recently used closed first; 0 = DefaultMaxOpenReaders. A reader in
	// use stays open until released, so up to one more per concurrent
	// user can be open. The active writers' files are not counted.
	MaxOpenReaders int
	// Preallocate is how many bytes the live set keeps laid out (zeros
	// written and fdatasynced, by a background goroutine) ahead of each
	// active file's write position, so that commits overwrite allocated
	// blocks instead of growing the file; 0 = none (layout.go). The zeros
	// are written in chunks of Preallocate/4, and never past MaxFileSize.
	Preallocate int64
	// PreallocateMinFree: no zeros are laid out in a dir whose free space
	// would fall below this (the channel's MinimumRequiredSpace, plus the
	// space reserve).
	PreallocateMinFree int64
	// Keys, if set, encrypts every new log file with its active key
	// (keys.go), and opens the put bodies of encrypted files for Reader;
	// nil = no encryption, and readers return encrypted puts sealed.
	Keys Keys
	// ChannelID is the id of the channel the set's files belong to (its
	// channel.id). New encrypted files are bound to it (version 6; with
	// Keys, creating a file without it is ErrKey), and a version-6 file
	// bound to another channel is refused with ErrKey (Reader, CheckKeys).
	// Zero (a tool that does not know the channel): a version-6 file is
	// read with the channel its key record names.
	ChannelID ChannelID
	// Retention is what Reclaim keeps of the files nothing needs
	// (setretain.go); the zero value keeps none.
	Retention Retention
	// Now is the clock of Retention's ages; nil = time.Now.
	Now func() time.Time
	// RecycleLogFiles is how many consumed log files each data dir keeps
	// for reuse (recycle.go): Reclaim renames a file it would delete into
	// the dir's pool, and a roll overwrites a pooled file instead of
	// creating one (RecycledVersion). Only files of at most MaxFileSize
	// bytes are kept, so a dir's pool holds at most RecycleLogFiles ×
	// MaxFileSize bytes; 0 = none (and Start removes pool files a run
	// with recycling left), as does MaxFileSize 0.
	RecycleLogFiles int
}

// File is a log file found in a data dir.
type File struct {
	ID   uint32
	Dir  string // the data dir holding it
	Path string
	// Unfinished: a crash inside Create left it shorter than a header, or
	// zeros only. It holds no record; recovery deletes it (RemoveFile).
	Unfinished bool
	// Duplicate names the data dir listed first that holds the same id
	// (only with SetOptions.AllowDuplicates). Such a file is not in the
	// set's files: Scan and Reader use the first.
	Duplicate string
}

// setFile is a log file of the set once it is known to hold records.
type setFile struct {
	File
	// rerr is why no reader can be opened on the file (a *corrupt.Error:
	// its header names another id), kept so that every take of a pointer
	// into it fails at once without opening it again.
	rerr error
	// size is the file's valid length once no writer appends to it; 0
	// while it is a dir's active file.
	size int64
	// written is the file's fileTime, with Retention, once no writer
	// appends to it (guarded by mu, as size).
	written time.Time
}

// OpenSet lists the log files of the data dirs in opts.Dirs. A data dir
// that does not exist is skipped (Missing lists it). Two dirs holding the
// same file id are an error unless opts.AllowDuplicates. Nothing is
// changed on disk.
func OpenSet(opts SetOptions) (*Set, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxOpenReaders < 0 {
		return nil, fmt.Errorf("MaxOpenReaders %d is negative", opts.MaxOpenReaders)
	}
	if opts.MaxOpenReaders == 0 {
		opts.MaxOpenReaders = DefaultMaxOpenReaders
	}
	s := &Set{fs: opts.FS, log: opts.Logger, opts: opts, files: map[uint32]*setFile{}, retained: map[uint32]bool{},
		completes: map[uint32]map[uint32]struct{}{},
		spilled:   map[uint32]map[uint64]SpilledCommit{},
		index:     map[uint32]FileIndex{},
		readers:   newReaderCache(opts.FS, opts.Logger, opts.MaxOpenReaders, opts.Keys, opts.ChannelID)}
	for _, d := range opts.Dirs {
		s.dirs = append(s.dirs, &dir{path: d})
	}
	if err := s.list(); err != nil {
		return nil, err
	}
	return s, nil
}

// list fills in s.listed and s.files from the data dirs.
func (s *Set) list() error {
	firstDir := map[uint32]string{}
	for i, d := range s.opts.Dirs {
		l, err := listDir(s.fs, d)
		if errors.Is(err, fs.ErrNotExist) {
			s.missing = append(s.missing, d)
			continue
		}
		if err != nil {
			return fmt.Errorf("list log files in %s: %w", d, err)
		}
		for _, n := range l.notRegular {
			s.log.Warn("left alone: named like a log file but not a regular file", "path", n.Path, "type", vfs.TypeName(n.Mode))
		}
		s.notRegular = append(s.notRegular, l.notRegular...)
		s.dirs[i].listedPool = l.recycled
		for _, id := range l.ids {
			f := File{ID: id, Dir: d, Path: filepath.Join(d, LogName(id))}
			if other, dup := firstDir[id]; dup {
				if !s.opts.AllowDuplicates {
					return fmt.Errorf("log file id %d exists in two data dirs (%s and %s)", id, other, d)
				}
				f.Duplicate = other
				s.listed = append(s.listed, f)
				continue
			}
			firstDir[id] = d
			if f.Unfinished, err = unfinishedCreate(s.fs, f.Path); err != nil {
				return err
			}
			s.listed = append(s.listed, f)
			if !f.Unfinished {
				s.files[id] = &setFile{File: f}
			}
		}
	}
	slices.SortStableFunc(s.listed, func(a, b File) int { return compareIDs(a.ID, b.ID) })
	return nil
}

func compareIDs(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Listed returns every log file found, by id (a duplicate right after the
// file it duplicates), unfinished ones included.
func (s *Set) Listed() []File { return slices.Clone(s.listed) }

// Files returns the log files that hold records (neither unfinished nor
// duplicates), by id.
func (s *Set) Files() []File {
	var out []File
	for _, f := range s.listed {
		if !f.Unfinished && f.Duplicate == "" {
			out = append(out, f)
		}
	}
	return out
}

// LiveFiles returns the log files of the live set now, by id: those it
// found at Open that recovery kept and those it created since, less the
// files it deleted. The active writers' files are included.
func (s *Set) LiveFiles() []File {
	s.mu.RLock()
	out := make([]File, 0, len(s.files))
	for _, f := range s.files {
		out = append(out, f.File)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b File) int { return compareIDs(a.ID, b.ID) })
	return out
}

// NotRegular returns the entries of the data dirs named like log files that
// are not regular files (links, directories, ...), dir by dir: left alone,
// listed nowhere else, never opened. Each was logged as it was found.
func (s *Set) NotRegular() []NotRegular { return slices.Clone(s.notRegular) }

// Missing returns the data dirs that did not exist when the set was opened.
func (s *Set) Missing() []string { return slices.Clone(s.missing) }

// Scan opens a scanner on f positioned at start (a file's header is read
// either way). A damaged header is stepped over (salvaged reports it, and
// the scanner's first Skip covers it); a valid header naming another file
// id is a *corrupt.Error. In the last file of each data dir (lastInDir), a
// frame torn the way a crash tears an overwrite ends the scan as a torn
// tail, records after it included (Scanner.tornOverwrite): there they are
// writes no fsync covered, not records to resync to.
func (s *Set) Scan(f File, start int64) (sc *Scanner, salvaged bool, err error) {
	sc, salvaged, err = OpenScanner(s.fs, f.Path, start)
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", f.Path, err)
	}
	if s.lastInDir(f) {
		sc.tearFrom = 0
	}
	return sc, salvaged, nil
}

// lastInDir reports whether f has the largest id of the log files its data
// dir held when the set was opened (unfinished creates included): the only
// file of the dir that can have been written to, unsynced, when the process
// stopped. A roll fsyncs the old file before it creates the next one.
func (s *Set) lastInDir(f File) bool {
	s.lastOnce.Do(func() {
		s.lastIDs = map[string]uint32{}
		for _, g := range s.listed {
			s.lastIDs[g.Dir] = max(s.lastIDs[g.Dir], g.ID)
		}
	})
	return f.ID >= s.lastIDs[f.Dir]
}

// ValidEnd scans f from its header and returns the end of its last valid
// record.
func (s *Set) ValidEnd(f File) (int64, error) {
	sc, _, err := s.Scan(f, 0)
	if err != nil {
		return 0, err
	}
	defer sc.Close()
	for sc.Next() {
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", f.Path, err)
	}
	return sc.End(), nil
}

// Reader returns a reference to the reader of log file id, from the set's
// cache of open readers (at most SetOptions.MaxOpenReaders; the least
// recently used is closed first). The caller must Release it; until then
// the reader stays open, even if the cache evicts it or the file is
// deleted. No lock of the set is held while it is used.
//
// A damaged header is stepped over as the scanner does (the records after
// it read back); a file no data dir holds, or whose header names another
// id, is a *corrupt.Error (the latter kept: the file is not opened again).
func (s *Set) Reader(id uint32) (ReaderRef, error) {
	s.mu.RLock()
	f := s.files[id]
	if f == nil {
		s.mu.RUnlock()
		// Only a damaged pointer (or a file deleted by hand) leads here.
		return ReaderRef{}, corrupt.New(LogName(id), -1, "an event pointer refers to log file %d, which no data dir holds", id)
	}
	if f.rerr != nil {
		s.mu.RUnlock()
		return ReaderRef{}, f.rerr
	}
	// get inserts the file's node under s.mu (shared): a deletion, which
	// removes the file from files under s.mu before it evicts the node,
	// then always finds the node to evict.
	r, err := s.readers.get(id, f.Path)
	s.mu.RUnlock()
	if errors.Is(err, corrupt.ErrCorrupt) {
		s.mu.Lock()
		if s.files[id] == f {
			f.rerr = err
		}
		s.mu.Unlock()
	}
	return r, err
}

// OpenReaders returns the number of log file readers open now: those the
// cache keeps and those evicted while still in use.
func (s *Set) OpenReaders() int { return int(s.readers.open.Load()) }

// openReader opens a reader on path, stepping over a damaged header. An
// encrypted file's reader gets the file's keys from keys, if set: a key
// keys does not have, a wrong one, or a version-6 file bound to another
// channel than channel (unless zero) is ErrKey.
func openReader(fsys vfs.FS, path string, keys Keys, channel ChannelID) (*Reader, error) {
	r, err := OpenReader(fsys, path)
	if errors.Is(err, corrupt.ErrCorrupt) {
		r, err = OpenSalvageReader(fsys, path)
	}
	if err != nil || keys == nil || !r.fr.Encrypted() || r.fr.keyID == "" {
		return r, err
	}
	if err := r.fr.attach(keys, r.id, channel); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", path, err), r.Close())
	}
	return r, nil
}

// Encrypted reports whether the set writes encrypted log files
// (SetOptions.Keys). Its batches (NewBatch) encode puts for them.
func (s *Set) Encrypted() bool { return s.opts.Keys != nil }

// RemoveFile deletes f (an unfinished create) and syncs its dir, so that
// the deletion survives a power loss.
func (s *Set) RemoveFile(f File) error {
	if err := s.fs.Remove(f.Path); err != nil {
		return fmt.Errorf("remove %s: %w", f.Path, err)
	}
	s.mu.Lock()
	delete(s.files, f.ID)
	s.mu.Unlock()
	s.forgetFreeSpaceOf(f.Dir)
	return errors.Join(s.readers.evict(f.ID), s.fs.SyncDir(f.Dir))
}

// CutTail cuts f at end (a torn tail), keeping the bytes cut in a .corrupt
// file whose path it returns.
func (s *Set) CutTail(f File, end int64) (string, error) {
	defer s.forgetFreeSpaceOf(f.Dir)
	return CutTail(s.fs, f.Path, end)
}

// Close closes every writer of the set and every reader not in use (those
// are closed as they are released). A writer that had
// already failed is only logged: its failure went to the commit it failed.
func (s *Set) Close() error {
	s.layouter.stop()
	var errs []error
	for _, d := range s.dirs {
		errs = append(errs, s.closeWriter(d))
	}
	s.mu.Lock()
	s.files = map[uint32]*setFile{}
	clear(s.retained) // nothing left to delete to make room
	s.countRetainedLocked()
	s.mu.Unlock()
	// A reader in use (a take reads with no channel lock held) is closed
	// when it is released.
	errs = append(errs, s.readers.closeAll())
	return errors.Join(errs...)
}

// closeWriter closes d's active writer, if any, under d.mu (unlocked by
// defer: the logger is the user's code).
func (s *Set) closeWriter(d *dir) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil {
		return nil
	}
	w := d.w
	failed := w.Err() != nil
	if !failed && w.Sync() == nil {
		// A last mark, made durable by Close's fsync: a full replay
		// then keeps every record of the file past damage (Scanner).
		s.markSyncedLocked(d, w)
	}
	d.w = nil
	failed = w.Err() != nil
	err := w.Close()
	s.layouter.retire(w)
	if err != nil && failed {
		s.log.Warn("closed a log writer that had failed", "file", w.Path(), "err", err)
		return nil
	}
	return err
}

// unfinishedCreate reports whether the log file at path was cut short by a
// crash inside Create: shorter than the file header its first bytes begin
// (declaredHeaderSize: 16 bytes for version 1, else 36), or nothing but
// zeros, or a header torn to say a newer version (tornNewer) and nothing
// but zeros after it. Such a file holds no record. Anything else with a bad header is
// damage, which the scanner reports. A short header a newer release began
// is a *corrupt.FormatError.
func unfinishedCreate(fsys vfs.FS, path string) (bool, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	var hdr [HeaderSize]byte
	n, err := f.ReadAt(hdr[:], 0)
	if n < declaredHeaderSize(hdr[:n]) {
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		// A short header a newer release began (its magic, a newer
		// version and the checksum every version keeps at bytes 20..23)
		// is that release's file, not an unfinished create. Without the
		// checksum (too short to hold it, or failing) it is a header a
		// power loss tore and cut short: unfinished, as tornNewer.
		var fe *corrupt.FormatError
		if _, herr := DecodeFileHeader(hdr[:n]); errors.As(herr, &fe) && n >= newerHeaderCRCAt+4 && !tornNewer(hdr[:n]) {
			fe.File = path
			return false, fe
		}
		return true, nil
	}
	if !zeros.All(hdr[:n]) && !tornNewer(hdr[:n]) {
		return false, nil
	}
	// Create syncs the header before any record is written, so a zeroed
	// (or torn) header followed by anything but zeros is damage, not an
	// unfinished create.
	buf := make([]byte, 64<<10)
	for off := int64(n); ; {
		n, err := f.ReadAt(buf, off)
		if !zeros.All(buf[:n]) {
			return false, nil
		}
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
	}
}
