package channel

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// Event is what flows through the channel: headers and an opaque body.
type Event struct {
	Headers map[string]string
	Body    []byte
}

// LockFileName is the lock file Open creates in every directory it uses.
const LockFileName = "in_use.lock"

// FileChannel is a durable channel of events. It is safe for concurrent use.
type FileChannel struct {
	cfg  Config
	fs   vfs.FS
	log  *slog.Logger
	gate *gate
	// scratch pools the transactions' buffers (*scratch).
	scratch sync.Pool
	// avail wakes Wait and TakeContext when events become takeable.
	avail signal

	// dirsLocked: the caller (Rebuild, Repair) holds every directory's lock;
	// open takes none and release closes none.
	dirsLocked bool
	locks      []io.Closer
	dirs       []*dataDir

	// commitMu orders log writes against checkpoint snapshots. Every write of
	// records holds it shared from the moment it takes write-order ids until
	// the queue reflects the write; a checkpoint holds it exclusively only
	// while it captures its snapshot, so a snapshot never sees half a commit.
	commitMu sync.RWMutex

	// queueMu guards queue, ckpt's slots, inflightPuts, inflightTakes and
	// takesFrom.
	queueMu       sync.Mutex
	queue         *eventqueue.Queue
	ckpt          *checkpoint.Checkpoint
	inflightPuts  *eventqueue.Inflight
	inflightTakes *eventqueue.Inflight
	takesFrom     map[uint32]map[uint32]struct{}

	// filesMu guards files.
	filesMu sync.RWMutex
	files   map[uint32]*logFile

	nextWOID   atomic.Uint64 // next write-order id to hand out
	nextTxID   atomic.Uint64
	nextFileID atomic.Uint32
	lastCkptW  atomic.Uint64 // write-order id of the last successful checkpoint

	// ckptMu serialises checkpoints (periodic, explicit, on close).
	ckptMu sync.Mutex

	stats   stats
	metrics *metrics
	// lastCkptTime is the unix nanos of the last successful checkpoint;
	// ckptErr the last checkpoint's error (nil after a success).
	lastCkptTime atomic.Int64
	ckptErr      atomic.Pointer[error]

	closed  atomic.Bool
	closing chan struct{}
	wg      sync.WaitGroup
}

// stats are counters kept whether or not metrics are registered.
type stats struct {
	// Set once by Open.
	recoveredFrom    string
	replayRecords    int64
	replaySkipped    int64
	replayCorrupt    int64
	replayDamagedTxs int64
	tornTails        int64
	replayDuration   time.Duration

	corruptSkipped atomic.Int64
	checkpointErrs atomic.Int64
	backupErrs     atomic.Int64
}

// Open opens (or creates) the channel in cfg's directories and recovers its
// committed state: it loads the last complete checkpoint (or the backup, or
// nothing) and replays the logs written after it. A file a newer release of
// filechannel wrote (a newer format version, or a log record of a type this
// release does not know) makes Open fail with an error matching
// ErrUnsupportedFormat before any such file is changed.
func Open(cfg Config) (*FileChannel, error) {
	return openWith(cfg, false)
}

// openWith is Open; with dirsLocked the caller holds the lock of every
// directory of cfg (and keeps it after Close).
func openWith(cfg Config, dirsLocked bool) (*FileChannel, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &FileChannel{
		dirsLocked:    dirsLocked,
		cfg:           cfg,
		fs:            cfg.FS,
		log:           cfg.Logger,
		files:         map[uint32]*logFile{},
		inflightPuts:  eventqueue.NewInflight(),
		inflightTakes: eventqueue.NewInflight(),
		closing:       make(chan struct{}),
	}
	c.scratch.New = func() any { return new(scratch) }
	c.metrics = newMetrics(c)
	if err := c.open(); err != nil {
		c.release()
		return nil, err
	}
	if err := c.metrics.register(cfg.Registerer, cfg.Name); err != nil {
		c.release()
		return nil, err
	}
	c.wg.Add(1)
	go c.checkpointLoop()
	return c, nil
}

func (c *FileChannel) open() error {
	start := time.Now()
	cfg := c.cfg
	type role struct{ dir, what string }
	roles := []role{{cfg.CheckpointDir, "CheckpointDir"}}
	if cfg.BackupCheckpointDir != "" {
		roles = append(roles, role{cfg.BackupCheckpointDir, "BackupCheckpointDir"})
	}
	for i, d := range cfg.DataDirs {
		roles = append(roles, role{d, fmt.Sprintf("DataDirs[%d]", i)})
	}
	var dirs []string
	for _, r := range roles {
		if err := prepareDir(c.fs, r.dir, r.what); err != nil {
			return err
		}
		dirs = append(dirs, r.dir)
	}
	if err := syncParents(c.fs, dirs); err != nil {
		return err
	}
	for _, r := range roles {
		if c.dirsLocked {
			break
		}
		l, err := c.fs.Lock(filepath.Join(r.dir, LockFileName))
		if errors.Is(err, vfs.ErrLocked) {
			return fmt.Errorf("%w: %s %s", ErrLocked, r.what, r.dir)
		}
		if err != nil {
			return fmt.Errorf("filechannel: lock %s: %w", r.dir, err)
		}
		c.locks = append(c.locks, l)
	}
	for _, d := range cfg.DataDirs {
		c.dirs = append(c.dirs, &dataDir{path: d})
	}

	ck, st, source, err := c.loadCheckpoint()
	if err != nil {
		return err
	}
	c.ckpt = ck
	refs := map[uint32]int{}
	if st != nil {
		for _, l := range st.Logs {
			if l.Refs > 0 {
				refs[l.FileID] = l.Refs
			}
		}
	}
	head, size := 0, 0
	if st != nil {
		head, size = st.Head, st.Size
	}
	q, err := eventqueue.New(ck, ck.Capacity(), head, size, refs)
	if err != nil {
		return opErr("load queue from checkpoint", err)
	}
	c.queue = q
	ropts := replay.Options{FS: c.fs, DataDirs: cfg.DataDirs, Checkpoint: st, Queue: q, Logger: c.log}
	if cfg.ReplayProgress != nil {
		ropts.Progress, ropts.ProgressEvery = cfg.ReplayProgress, cfg.ReplayProgressEvery
	}
	res, err := replay.Run(ropts)
	if err != nil {
		return fmt.Errorf("filechannel: %w", err)
	}
	c.log.Info("replay done", "source", source, "records", res.Records, "skipped", res.Skipped,
		"puts", res.Puts, "takes", res.Takes, "returned", res.Returned, "queued", q.Size(),
		"duration", res.Duration.Round(time.Microsecond))

	for _, path := range res.Empty {
		c.log.Warn("removing a log file left empty by a crash during its creation", "file", path)
		if err := c.fs.Remove(path); err != nil {
			return fmt.Errorf("filechannel: remove empty log %s: %w", path, err)
		}
		if err := c.fs.SyncDir(filepath.Dir(path)); err != nil {
			return fmt.Errorf("filechannel: %w", err)
		}
	}
	for _, l := range res.Logs {
		if l.Tail != logfile.TailTorn {
			continue
		}
		// The tail of a write that a crash cut short (or damage after the
		// last record): keep its bytes for the operator, then cut it so
		// later replays and readers see a clean end.
		keep, err := logfile.CutTail(c.fs, l.Path, l.End)
		if err != nil {
			return fmt.Errorf("filechannel: %w", err)
		}
		c.stats.tornTails++
		c.log.Warn("cut a torn tail from a log file", "file", l.Path, "valid_end", l.End,
			"bytes", l.Size-l.End, "kept_in", keep, "reason", l.TailErr)
	}
	// Replay read the files through the page cache. What it applied must be
	// on disk before a checkpoint refers to it: after a failed fsync (or
	// with NoSync) a killed process leaves records that a power loss would
	// still take away.
	for _, l := range res.Logs {
		if l.End > l.Start {
			if err := vfs.SyncFile(c.fs, l.Path); err != nil {
				return fmt.Errorf("filechannel: %w", err)
			}
		}
	}
	c.stats.replayRecords, c.stats.replaySkipped = res.Records, res.Skipped
	c.stats.replayDuration = time.Since(start)
	c.stats.replayCorrupt, c.stats.replayDamagedTxs = int64(res.Corrupt), int64(res.DamagedTxs)
	c.nextWOID.Store(res.MaxWriteOrderID + 1)
	c.nextTxID.Store(res.MaxTxID + 1)
	c.nextFileID.Store(res.MaxFileID + 1)
	c.takesFrom = res.TakesFrom
	for _, l := range res.Logs {
		r, err := logfile.OpenReader(c.fs, l.Path)
		if errors.Is(err, ErrCorrupt) {
			r, err = logfile.OpenSalvageReader(c.fs, l.Path) // replay reported the header
		}
		if err != nil {
			return fmt.Errorf("filechannel: open %s: %w", l.Path, err)
		}
		c.files[l.ID] = &logFile{id: l.ID, dir: c.dirByPath(l.Dir), path: l.Path, r: r, size: max(l.End, logfile.HeaderSize)}
	}

	if ck.Capacity() != cfg.Capacity {
		if err := c.migrateCapacity(); err != nil {
			return err
		}
		source += ", capacity changed"
	}
	c.stats.recoveredFrom = source
	c.gate = newGate(cfg.Capacity, c.queue.Size())

	// Every open starts new log files: old ones may end in a torn record.
	for _, d := range c.dirs {
		d.mu.Lock()
		err := c.rollLocked(d)
		d.mu.Unlock()
		if err != nil {
			return fmt.Errorf("filechannel: %w", err)
		}
	}
	// A checkpoint now makes the next restart cheap and validates the files.
	if source != "checkpoint" || res.Records > res.Skipped {
		if err := c.checkpoint(); err != nil {
			return opErr("checkpoint after replay", err)
		}
	} else {
		c.lastCkptW.Store(st.WriteOrderID)
	}
	c.log.Info("opened", "queued", c.queue.Size(), "capacity", cfg.Capacity, "data_dirs", len(c.dirs),
		"recovered_from", source, "duration", time.Since(start).Round(time.Microsecond))
	return nil
}

// loadCheckpoint opens the checkpoint, falling back to the backup and then to
// a fresh one (full replay). source says which.
func (c *FileChannel) loadCheckpoint() (*checkpoint.Checkpoint, *checkpoint.State, string, error) {
	dir, backup := c.cfg.CheckpointDir, c.cfg.BackupCheckpointDir
	// A fallback would replace the checkpoint or restore the backup, and
	// the next checkpoint overwrites the backup.
	if err := newerCheckpoints(c.cfg); err != nil {
		return nil, nil, "", opErr("open checkpoint", err)
	}
	ck, st, err := checkpoint.Open(c.fs, dir)
	if err == nil {
		return ck, st, "checkpoint", nil
	}
	damaged := errors.Is(err, ErrCorrupt) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, checkpoint.ErrIncomplete)
	if !errors.Is(err, checkpoint.ErrNoCheckpoint) && !(errors.Is(err, checkpoint.ErrBadCheckpoint) && damaged) {
		// An I/O or permission error says nothing about the checkpoint's
		// contents: do not throw it away.
		return nil, nil, "", opErr("open checkpoint", err)
	}
	if errors.Is(err, checkpoint.ErrBadCheckpoint) {
		c.log.Warn("checkpoint unusable", "dir", dir, "err", err)
	}
	if backup != "" && checkpoint.HasBackup(c.fs, backup) {
		if rerr := checkpoint.RestoreBackup(c.fs, backup, dir); rerr != nil {
			c.log.Warn("restore backup checkpoint failed", "dir", backup, "err", rerr)
		} else if ck, st, berr := checkpoint.Open(c.fs, dir); berr == nil {
			c.log.Info("using backup checkpoint", "dir", backup, "write_order_id", st.WriteOrderID)
			return ck, st, "backup checkpoint", nil
		} else {
			c.log.Warn("backup checkpoint unusable", "dir", backup, "err", berr)
		}
	}
	if errors.Is(err, checkpoint.ErrBadCheckpoint) {
		c.log.Warn("no usable checkpoint: replaying every log file in full", "dir", dir)
	}
	if err := checkpoint.Remove(c.fs, dir); err != nil {
		return nil, nil, "", opErr("remove bad checkpoint", err)
	}
	ck, err = checkpoint.Create(c.fs, dir, c.cfg.Capacity)
	if err != nil {
		return nil, nil, "", opErr("create checkpoint", err)
	}
	return ck, nil, "full replay", nil
}

// newerCheckpoints returns the error, matching ErrUnsupportedFormat, of a
// file of cfg's checkpoint or backup directory that a newer release wrote
// (checkpoint.CheckFormat), or nil. Whatever replaces or overwrites those
// directories asks it first.
func newerCheckpoints(cfg Config) error {
	for _, dir := range []string{cfg.CheckpointDir, cfg.BackupCheckpointDir} {
		if dir == "" {
			continue
		}
		if err := checkpoint.CheckFormat(cfg.FS, dir); errors.Is(err, ErrUnsupportedFormat) {
			return err
		}
	}
	return nil
}

// migrateCapacity moves the queue into a checkpoint of the configured
// capacity. If it crashes midway the logs still hold every event: the next
// open finds no complete checkpoint and replays them.
func (c *FileChannel) migrateCapacity() error {
	ptrs := c.queue.Pointers()
	old := c.ckpt.Capacity()
	if len(ptrs) > c.cfg.Capacity {
		return fmt.Errorf("filechannel: the channel holds %d events, more than the configured Capacity %d; reopen with Capacity >= %d (nothing was changed)",
			len(ptrs), c.cfg.Capacity, len(ptrs))
	}
	if err := c.ckpt.Close(); err != nil {
		return opErr("close checkpoint", err)
	}
	c.ckpt = nil
	if err := checkpoint.Remove(c.fs, c.cfg.CheckpointDir); err != nil {
		return opErr("remove old checkpoint", err)
	}
	ck, err := checkpoint.Create(c.fs, c.cfg.CheckpointDir, c.cfg.Capacity)
	if err != nil {
		return opErr("create checkpoint", err)
	}
	c.ckpt = ck
	q, err := eventqueue.New(ck, c.cfg.Capacity, 0, 0, nil)
	if err != nil {
		return err
	}
	for _, p := range ptrs {
		if err := q.AddTail(p); err != nil {
			return err
		}
	}
	c.queue = q
	c.log.Info("capacity changed", "old", old, "new", c.cfg.Capacity, "queued", len(ptrs))
	return nil
}

func (c *FileChannel) dirByPath(path string) *dataDir {
	for _, d := range c.dirs {
		if d.path == path {
			return d
		}
	}
	return nil
}

// Len returns the number of events in the channel: committed and not taken.
func (c *FileChannel) Len() int {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return c.queue.Size()
}

// Cap returns the channel's capacity in events.
func (c *FileChannel) Cap() int { return c.cfg.Capacity }

// Close checkpoints (unless NoCheckpointOnClose), waits for commits in
// progress, and releases every file and lock. Transactions still open are
// abandoned: their takes return to the channel at the next Open and their
// puts vanish. Close is idempotent.
func (c *FileChannel) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(c.closing)
	c.wg.Wait()
	var errs []error
	if !c.cfg.NoCheckpointOnClose {
		if err := c.checkpoint(); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint on close: %w", err))
		}
	}
	c.commitMu.Lock()
	errs = append(errs, c.release())
	c.commitMu.Unlock()
	c.metrics.unregister()
	c.log.Info("closed")
	return errors.Join(errs...)
}

// release closes writers, readers, the checkpoint and the locks.
func (c *FileChannel) release() error {
	var errs []error
	for _, d := range c.dirs {
		d.mu.Lock()
		if d.w != nil {
			failed := d.w.Err() != nil
			if err := d.w.Close(); err != nil {
				if failed {
					// Already returned to the commit it failed; what that
					// writer synced before stays valid.
					c.log.Warn("closed a log writer that had failed", "file", d.w.Path(), "err", err)
				} else {
					errs = append(errs, err)
				}
			}
			d.w = nil
		}
		d.mu.Unlock()
	}
	c.filesMu.Lock()
	for _, f := range c.files {
		errs = append(errs, f.r.Close())
	}
	c.files = map[uint32]*logFile{}
	c.filesMu.Unlock()
	if c.ckpt != nil {
		errs = append(errs, c.ckpt.Close())
		c.ckpt = nil
	}
	for _, l := range c.locks {
		errs = append(errs, l.Close())
	}
	c.locks = nil
	return errors.Join(errs...)
}
