package channel

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// dataDir is one data directory and its active log writer. A transaction's
// records all go to one dataDir.
type dataDir struct {
	path string

	// mu guards w and serialises appends to it (and rolls).
	mu sync.Mutex
	w  *logfile.Writer

	// Free-space cache for the MinimumRequiredSpace check: refreshed from
	// the filesystem at most once per second and decremented by each write.
	free        atomic.Int64
	freeChecked atomic.Int64 // unix nanos of the last refresh
	// lowSpace is set while puts to the dir fail for lack of space (logged
	// once when it starts and once when it ends).
	lowSpace atomic.Bool
}

// logFile is a log file the channel knows about: the active writer's file or
// an older one still holding records.
type logFile struct {
	id   uint32
	dir  *dataDir
	path string
	r    *logfile.Reader
	// size is the file's valid length once it is no longer written to
	// (0 while it is an active writer's file). Guarded by filesMu.
	size int64
}

// spaceOK reports whether d can take n more bytes and keep the minimum
// free space (MinimumRequiredSpace < 0 disables the check). It logs when
// the dir runs short and when it has room again.
func (c *FileChannel) spaceOK(d *dataDir, n int64) (bool, error) {
	min := c.cfg.MinimumRequiredSpace
	if min < 0 {
		return true, nil
	}
	ok, err := d.checkSpace(c.fs, n, min)
	if err == nil && d.lowSpace.Load() == ok && d.lowSpace.CompareAndSwap(ok, !ok) {
		if ok {
			c.log.Info("data dir has room again", "dir", d.path, "free_bytes", d.free.Load())
		} else {
			c.log.Error("data dir is short of space: puts fail until room is made", "dir", d.path,
				"free_bytes", d.free.Load(), "minimum_required_space", min)
		}
	}
	return ok, err
}

func (d *dataDir) checkSpace(fsys vfs.FS, n, min int64) (bool, error) {
	now := time.Now().UnixNano()
	if now-d.freeChecked.Load() > int64(time.Second) {
		free, err := fsys.FreeSpace(d.path)
		if err != nil {
			return false, fmt.Errorf("free space of %s: %w", d.path, err)
		}
		d.free.Store(free)
		d.freeChecked.Store(now)
	}
	return d.free.Load()-n >= min, nil
}

// roll replaces d's writer with a new log file. The old writer is synced and
// closed: a transaction whose records straddle the roll finds its earlier
// records durable. Called with d.mu held.
func (c *FileChannel) rollLocked(d *dataDir) error {
	id := c.nextFileID.Add(1) - 1
	w, err := logfile.Create(c.fs, d.path, id)
	if err != nil {
		return err // logfile.Create names the operation and the file
	}
	w.ObserveSyncs(c.metrics.observeFsync)
	c.metrics.logsCreated.Inc()
	r, err := logfile.OpenReader(c.fs, w.Path())
	if err != nil {
		return errors.Join(fmt.Errorf("open reader for %s: %w", w.Path(), err), w.Close())
	}
	old := d.w
	size := int64(0)
	if old != nil {
		size = old.Size()
		if err := old.Close(); err != nil || old.Err() != nil {
			// The records in the old file that were not synced may be lost;
			// their commits have not returned (they sync after writing and
			// see the same sticky error). The file is valid only as far as
			// its last good fsync: a checkpoint must not cover the rest.
			size = old.Synced()
			c.log.Error("close rolled log file", "file", old.Path(), "err", errors.Join(err, old.Err()))
		}
	}
	c.filesMu.Lock()
	c.files[id] = &logFile{id: id, dir: d, path: w.Path(), r: r}
	if old != nil {
		if f := c.files[old.ID()]; f != nil {
			f.size = size
		}
	}
	c.filesMu.Unlock()
	d.w = w
	if old != nil {
		c.log.Info("rolled log file", "dir", d.path, "old", filepath.Base(old.Path()), "new", filepath.Base(w.Path()))
	}
	return nil
}

// reader returns the reader of log file id.
func (c *FileChannel) reader(id uint32) (*logfile.Reader, error) {
	c.filesMu.RLock()
	f := c.files[id]
	c.filesMu.RUnlock()
	if f == nil {
		// Only a damaged ring slot (or a file deleted by hand) points here.
		return nil, corrupt.New(logfile.LogName(id), -1, "an event pointer refers to log file %d, which does not exist", id)
	}
	return f.r, nil
}
