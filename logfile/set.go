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

	listed  []File
	missing []string // data dirs that do not exist

	dirs []*dir

	// mu guards files (and each setFile's size and reader).
	mu    sync.RWMutex
	files map[uint32]*setFile

	// depMu guards completes (a leaf: taken with no other lock of the set).
	depMu     sync.Mutex
	completes map[uint32]map[uint32]struct{}

	nextWOID   atomic.Uint64 // the next write-order id to hand out
	nextFileID atomic.Uint32 // the next log file id to create
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
	Logger   *slog.Logger // nil = discard
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
	r    *Reader
	rerr error // why r could not be opened (a *corrupt.Error), cached
	// size is the file's valid length once no writer appends to it; 0
	// while it is a dir's active file.
	size int64
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
	s := &Set{fs: opts.FS, log: opts.Logger, opts: opts, files: map[uint32]*setFile{},
		completes: map[uint32]map[uint32]struct{}{}}
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
	for _, d := range s.opts.Dirs {
		ids, err := ListLogs(s.fs, d)
		if errors.Is(err, fs.ErrNotExist) {
			s.missing = append(s.missing, d)
			continue
		}
		if err != nil {
			return fmt.Errorf("list log files in %s: %w", d, err)
		}
		for _, id := range ids {
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

// Missing returns the data dirs that did not exist when the set was opened.
func (s *Set) Missing() []string { return slices.Clone(s.missing) }

// Dirs returns the data dirs, in the order the set was opened with.
func (s *Set) Dirs() []string { return slices.Clone(s.opts.Dirs) }

// FS returns the filesystem the set reads and writes.
func (s *Set) FS() vfs.FS { return s.fs }

// Scan opens a scanner on f positioned at start (a file's header is read
// either way). A damaged header is stepped over (salvaged reports it, and
// the scanner's first Skip covers it); a valid header naming another file
// id is a *corrupt.Error.
func (s *Set) Scan(f File, start int64) (sc *Scanner, salvaged bool, err error) {
	sc, salvaged, err = OpenScanner(s.fs, f.Path, start)
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", f.Path, err)
	}
	return sc, salvaged, nil
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

// Reader returns the reader of log file id, opened on first use and kept
// until the file is deleted or the set closed. A damaged header is stepped
// over as the scanner does (the records after it read back); a file no
// data dir holds, or whose header names another id, is a *corrupt.Error.
func (s *Set) Reader(id uint32) (*Reader, error) {
	s.mu.RLock()
	f := s.files[id]
	var r *Reader
	var rerr error
	if f != nil {
		r, rerr = f.r, f.rerr
	}
	s.mu.RUnlock()
	if f == nil {
		// Only a damaged pointer (or a file deleted by hand) leads here.
		return nil, corrupt.New(LogName(id), -1, "an event pointer refers to log file %d, which no data dir holds", id)
	}
	if r != nil || rerr != nil {
		return r, rerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.r != nil || f.rerr != nil {
		return f.r, f.rerr
	}
	r, err := openReader(s.fs, f.Path)
	if errors.Is(err, corrupt.ErrCorrupt) {
		f.rerr = err
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	f.r = r
	return r, nil
}

// openReader opens a reader on path, stepping over a damaged header.
func openReader(fsys vfs.FS, path string) (*Reader, error) {
	r, err := OpenReader(fsys, path)
	if errors.Is(err, corrupt.ErrCorrupt) {
		r, err = OpenSalvageReader(fsys, path)
	}
	return r, err
}

// RemoveFile deletes f (an unfinished create) and syncs its dir, so that
// the deletion survives a power loss.
func (s *Set) RemoveFile(f File) error {
	if err := s.fs.Remove(f.Path); err != nil {
		return fmt.Errorf("remove %s: %w", f.Path, err)
	}
	s.mu.Lock()
	delete(s.files, f.ID)
	s.mu.Unlock()
	return s.fs.SyncDir(f.Dir)
}

// CutTail cuts f at end (a torn tail), keeping the bytes cut in a .corrupt
// file whose path it returns.
func (s *Set) CutTail(f File, end int64) (string, error) {
	return CutTail(s.fs, f.Path, end)
}

// Close closes every writer and reader of the set. A writer that had
// already failed is only logged: its failure went to the commit it failed.
func (s *Set) Close() error {
	var errs []error
	for _, d := range s.dirs {
		d.mu.Lock()
		if d.w != nil {
			failed := d.w.Err() != nil
			if err := d.w.Close(); err != nil {
				if failed {
					s.log.Warn("closed a log writer that had failed", "file", d.w.Path(), "err", err)
				} else {
					errs = append(errs, err)
				}
			}
			d.w = nil
		}
		d.mu.Unlock()
	}
	s.mu.Lock()
	for _, f := range s.files {
		if f.r != nil {
			errs = append(errs, f.r.Close())
		}
	}
	s.files = map[uint32]*setFile{}
	s.mu.Unlock()
	return errors.Join(errs...)
}

// unfinishedCreate reports whether the log file at path was cut short by a
// crash inside Create: shorter than the file header its first bytes begin
// (declaredHeaderSize: 16 bytes for version 1, else 36), or nothing but
// zeros. Such a file holds no record. Anything else with a bad header is
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
		// A short header a newer release began (its magic and a newer
		// version) is that release's file, not an unfinished create.
		var fe *corrupt.FormatError
		if _, herr := DecodeFileHeader(hdr[:n]); errors.As(herr, &fe) {
			fe.File = path
			return false, fe
		}
		return true, nil
	}
	if !zeros.All(hdr[:n]) {
		return false, nil
	}
	// Create syncs the header before any record is written, so a zeroed
	// header followed by anything but zeros is damage, not an unfinished
	// create.
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
