package logfile

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// Writer appends encoded frames to one log file and makes them durable with
// group commit.
//
// Write is not safe for concurrent use (the channel serialises writers per
// data directory); Size, SyncTo, Sync and Syncs are safe concurrently with
// Write and with each other.
//
// Failures are sticky: after a failed or short write (which Write tries to
// undo by truncating the file back to its previous size) or a failed fsync
// (after which the page cache can no longer be trusted), every later Write
// and Sync returns the first failure, wrapped. The channel then rolls to a
// new file.
type Writer struct {
	f    vfs.File
	id   uint32
	path string
	fr   Framing // the file's version and salt, which seal its frames

	size  atomic.Int64 // offset the next Write lands at; stored only by Write
	syncs atomic.Int64 // fsyncs issued by SyncTo

	// observeSync, if set, is told how long each fsync of SyncTo took.
	observeSync func(time.Duration)

	// writing is held shared by a Write from its health check to the end
	// of its write, and exclusively by a failed fsync's truncation, so
	// that a write racing with the failure never lands past the cut end
	// (leaving a hole). Lock order: writing, then mu.
	writing sync.RWMutex

	// mu guards the sync state and the writer's health below.
	mu sync.Mutex
	// syncDone is on mu, broadcast when syncing ends (Close waits for it).
	syncDone *sync.Cond
	synced   int64 // bytes [0,synced) are durable
	// syncedTo is synced, stored with it under mu, for Synced to read
	// without mu: every committer asks after its fsync (Set.markSynced),
	// while the others woken by the same fsync hold mu in turn.
	syncedTo atomic.Int64
	// syncing: a SyncTo leader (or the syncer it started) has an fsync
	// in flight, and keeps syncing while waiters remain (groupcommit.go).
	syncing bool
	// waiters are the SyncTo callers waiting for an fsync to cover their
	// offset, ordered by it; gate is the syncGate the syncer passes on.
	waiters []*syncWaiter
	gate    syncGate
	err     error // sticky write or fsync failure
	closed  bool

	lay layState // zero-fills ahead of the writes (layout.go)
	// padBuf holds a small write padded to its page's end (padded).
	padBuf []byte

	// markedTo is the SyncedTo of the last sync mark written to the file
	// (the header's end before any); stored under the lock of the set's
	// data dir the writer is active in (Set.markSynced).
	markedTo atomic.Int64
}

// Create creates dir/LogName(id), which must not exist, with the
// permission bits vfs.FileMode(fsys), writes and fsyncs its header (the
// current format version, with a fresh random salt), then
// fsyncs dir so the new name survives a crash. On failure it removes the
// file again.
func Create(fsys vfs.FS, dir string, id uint32) (*Writer, error) {
	return create(fsys, dir, id, newFraming())
}

// create is Create with the framing of the new file given.
func create(fsys vfs.FS, dir string, id uint32, fr Framing) (*Writer, error) {
	path := filepath.Join(dir, LogName(id))
	f, err := fsys.Create(path, vfs.FileMode(fsys))
	if err != nil {
		return nil, vfs.Named(fmt.Sprintf("create log %d in %s", id, dir), err)
	}
	if err := initFile(fsys, f, dir, id, fr); err != nil {
		return nil, errors.Join(fmt.Errorf("create log %d in %s: %w", id, dir, err), f.Close(), fsys.Remove(path))
	}
	return newWriter(f, id, path, fr), nil
}

// newWriter returns the writer of f, log file id at path, whose header
// (and nothing after it) is written and durable.
func newWriter(f vfs.File, id uint32, path string, fr Framing) *Writer {
	w := &Writer{f: f, id: id, path: path, fr: fr}
	w.setSyncedLocked(fr.HeaderSize()) // not shared yet
	w.markedTo.Store(fr.HeaderSize())
	w.syncDone = sync.NewCond(&w.mu)
	w.lay.done = sync.NewCond(&w.lay.mu)
	w.lay.reserved = fr.HeaderSize()
	w.size.Store(fr.HeaderSize())
	return w
}

func initFile(fsys vfs.FS, f vfs.File, dir string, id uint32, fr Framing) error {
	hdr := appendFileHeader(make([]byte, 0, HeaderSize), id, fr)
	// Each error names its operation and file ("sync <path>: ..."); Create
	// adds "create log <id> in <dir>".
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// ID returns the file id.
func (w *Writer) ID() uint32 { return w.id }

// Path returns the path of the file.
func (w *Writer) Path() string { return w.path }

// Framing returns the framing of the file's frames: frames written to it
// must be encoded (Framing.AppendRecord) or sealed for it.
func (w *Writer) Framing() Framing { return w.fr }

// Size returns the bytes written so far, header included: the offset the
// next Write lands at.
func (w *Writer) Size() int64 { return w.size.Load() }

// Synced returns how many bytes of the file are known to be durable: the
// extent of the last successful fsync (the header, right after Create).
func (w *Writer) Synced() int64 { return w.syncedTo.Load() }

// setSyncedLocked raises synced to off (never lowers it). w.mu is held.
func (w *Writer) setSyncedLocked(off int64) {
	w.synced = max(w.synced, off)
	w.syncedTo.Store(w.synced)
}

// ObserveSyncs makes f be called with the duration of every fsync the
// writer issues for SyncTo (and Sync). Call it before sharing the writer.
func (w *Writer) ObserveSyncs(f func(time.Duration)) { w.observeSync = f }

// Syncs returns the number of fsyncs SyncTo, Sync and Close have issued (the
// header fsync of Create, and takeBack's after a failure, are not counted).
func (w *Writer) Syncs() int64 { return w.syncs.Load() }

// Write appends p, one or more encoded frames, in one write call and returns
// the offset of p[0]. Where the file is laid out past p it writes zeros
// after p up to the end of the page (in p's spare capacity,
// p[len(p):cap(p)], if p has room, so the caller must not keep anything
// there; see claim). The bytes are not durable until SyncTo covers them.
// It returns ErrFileFull, writing nothing, if the file would grow past
// MaxFileSize. The offset is meaningful only when err is nil.
func (w *Writer) Write(p []byte) (off int64, err error) {
	w.writing.RLock()
	defer w.writing.RUnlock()
	w.mu.Lock()
	err = w.unusableLocked()
	w.mu.Unlock()
	if err != nil {
		return 0, err
	}
	off = w.size.Load()
	if len(p) == 0 {
		return off, nil
	}
	if int64(len(p)) > MaxFileSize-off {
		return 0, fmt.Errorf("write log %d: %d bytes at offset %d: %w", w.id, len(p), off, ErrFileFull)
	}
	n, err := w.f.WriteAt(w.padded(p, w.claim(off+int64(len(p)))-off), off)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = fmt.Errorf("write log %d at offset %d: %w", w.id, off, err)
		// Take back whatever part of p landed, so the file still ends with a
		// whole frame; the failure stays sticky either way.
		w.stopLayout()
		terr := w.takeBack(off)
		if terr != nil {
			err = errors.Join(err, terr)
		}
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		if terr == nil {
			// takeBack's fsync returned: the writes before this one
			// are durable (their pages were dirty, not dropped by a
			// failed fsync), so what earlier appends wrote to the file
			// (a transaction's spilled puts) still counts.
			w.setSyncedLocked(off)
		}
		w.mu.Unlock()
		return 0, err
	}
	w.size.Store(off + int64(len(p)))
	return off, nil
}

// maxPadCopy bounds the writes padded (Writer.padded) by a copy: larger
// ones are padded only in their own spare capacity.
const maxPadCopy = 16 << 10

// padded returns p followed by zeros up to n bytes (n >= len(p)): in p's
// spare capacity if it has room, else, for a write of at most maxPadCopy
// bytes, in a copy in w.padBuf; else p alone. Write calls it, one at a
// time.
func (w *Writer) padded(p []byte, n int64) []byte {
	if n <= int64(len(p)) {
		return p
	}
	if n <= int64(cap(p)) {
		q := p[:n]
		clear(q[len(p):])
		return q
	}
	if n > maxPadCopy {
		return p
	}
	if int64(cap(w.padBuf)) < n {
		w.padBuf = make([]byte, maxPadCopy)
	}
	q := w.padBuf[:n]
	clear(q[copy(q, p):])
	return q
}

// takeBack cuts the file back to size after a failed write or fsync, and
// makes the cut durable. The bytes past size may be on disk already: a
// failed fsync may have written some of them, and so does a zero-fill's
// fdatasync that ran after them (stopLayout waits for the one in flight).
// Left to a later fsync, the cut could be undone by a power loss before
// it, with a checkpoint already written that counts those bytes out: a
// full replay would then find a transaction whose commit failed.
func (w *Writer) takeBack(size int64) error {
	if err := w.f.Truncate(size); err != nil {
		return fmt.Errorf("truncate log %d back to %d: %w", w.id, size, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync log %d after cutting it back to %d: %w", w.id, size, err)
	}
	return nil
}

// unusableLocked returns why the writer can take no more writes, or nil.
func (w *Writer) unusableLocked() error {
	if w.closed {
		return fmt.Errorf("log %d: %w", w.id, ErrClosed)
	}
	if w.err != nil {
		return fmt.Errorf("log %d failed earlier: %w", w.id, w.err)
	}
	return nil
}

// Sync makes every byte written so far durable: SyncTo(Size()). It returns
// the writer's sticky failure, if any, even when there is nothing to sync.
func (w *Writer) Sync() error {
	w.mu.Lock()
	err := w.unusableLocked()
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return w.SyncTo(w.Size())
}

// Close syncs and closes the file. It returns the sticky failure, if any,
// but closes the file regardless. SyncTo calls racing with Close return nil
// if their range was made durable, an error wrapping ErrClosed otherwise.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("close log %d: %w", w.id, ErrClosed)
	}
	w.mu.Unlock()
	w.stopLayout()
	if w.Err() == nil {
		w.trim()
	}
	serr := w.Sync()
	w.mu.Lock()
	for w.syncing {
		w.syncDone.Wait()
	}
	w.closed = true
	w.mu.Unlock()
	if err := w.f.Close(); err != nil {
		return errors.Join(serr, fmt.Errorf("close log %d: %w", w.id, err))
	}
	return serr
}

// Err returns the writer's sticky failure, or nil while it is healthy.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
