package channel

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// Checkpoint writes a checkpoint now: the queue as of this moment, so the
// next Open replays only what comes after. Then it deletes log files that no
// longer hold anything the channel needs.
func (c *FileChannel) Checkpoint() error {
	if c.closed.Load() {
		return ErrClosed
	}
	return c.checkpoint()
}

func (c *FileChannel) checkpointLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-c.closing:
			return
		case <-t.C:
			// Nothing written since the last checkpoint: it still holds.
			if c.nextWOID.Load() == c.lastCkptW.Load()+1 {
				continue
			}
			if err := c.checkpoint(); err != nil {
				c.log.Error("periodic checkpoint failed", "err", err)
			}
		}
	}
}

// keep is what a checkpoint needs to stay recoverable: the files its ring and
// in-flight transactions point into, the files being written at its capture,
// and every file created after it.
type keep struct {
	ids   map[uint32]bool
	maxID uint32
	// failed holds the active writers that had already failed at the
	// capture: their files count only up to their last good fsync, and
	// there is nothing more of theirs to sync.
	failed map[*logfile.Writer]bool
}

// checkpoint writes a checkpoint and keeps the score: counters, duration,
// and the error Health reports until a checkpoint succeeds.
func (c *FileChannel) checkpoint() error {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	start := time.Now()
	err := c.checkpointLocked(start)
	c.metrics.checkpointSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		c.stats.checkpointErrs.Add(1)
		c.metrics.checkpointErrors.Inc()
		c.ckptErr.Store(&err)
		return err
	}
	c.metrics.checkpoints.Inc()
	return nil
}

func (c *FileChannel) checkpointLocked(start time.Time) error {
	st, k := c.capture()
	capture := time.Since(start)

	// Every record at or before the checkpoint's write-order id must be
	// durable before the checkpoint says so (in-flight spilled puts are
	// not synced by their own transactions yet).
	for _, d := range c.dirs {
		d.mu.Lock()
		w := d.w
		d.mu.Unlock()
		if w == nil || k.failed[w] {
			continue
		}
		if err := w.Sync(); err != nil {
			c.thaw(false)
			return fmt.Errorf("checkpoint: sync %s: %w", w.Path(), err)
		}
	}
	err := c.ckpt.Write(st)
	c.thaw(err == nil)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	c.lastCkptW.Store(st.WriteOrderID)
	c.lastCkptTime.Store(time.Now().UnixNano())
	if b := c.cfg.BackupCheckpointDir; b != "" {
		if err := checkpoint.Backup(c.fs, c.cfg.CheckpointDir, b); err != nil {
			// The main checkpoint is good. The backup is marked
			// incomplete, unless the failure was in making that mark
			// durable: then a power loss could bring the previous backup
			// back, and it needs the log files it knew. Delete none until
			// a backup succeeds.
			c.stats.backupErrs.Add(1)
			c.metrics.backupErrors.Inc()
			c.log.Error("backup checkpoint failed; keeping every log file until a backup succeeds", "dir", b, "err", err)
			err = fmt.Errorf("backup checkpoint in %s: %w", b, err)
			c.ckptErr.Store(&err)
			return nil
		}
	}
	c.ckptErr.Store(nil)
	deleted, err := c.collectGarbage(k)
	c.log.Info("checkpoint", "write_order_id", st.WriteOrderID, "queued", st.Size,
		"inflight_takes", len(st.InflightTakes), "deleted_logs", deleted,
		"capture", capture.Round(time.Microsecond), "duration", time.Since(start).Round(time.Microsecond))
	if err != nil {
		return fmt.Errorf("checkpoint: delete old logs: %w", err)
	}
	return nil
}

func (c *FileChannel) thaw(ok bool) {
	c.queueMu.Lock()
	c.ckpt.Thaw(ok)
	c.queueMu.Unlock()
}

// capture takes the checkpoint's snapshot. It holds commitMu exclusively, so
// no commit is half applied, and queueMu, so no take is half done; both only
// for the time it takes to copy the bookkeeping.
func (c *FileChannel) capture() (*checkpoint.State, keep) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	st := &checkpoint.State{
		Meta: checkpoint.Meta{
			WriteOrderID: c.nextWOID.Add(1) - 1,
			Capacity:     c.queue.Capacity(),
			Head:         c.queue.Head(),
			Size:         c.queue.Size(),
			NextFileID:   c.nextFileID.Load(),
			MaxTxID:      c.nextTxID.Load(),
			Time:         time.Now(),
		},
		InflightPuts:  c.inflightPuts.Entries(),
		InflightTakes: c.inflightTakes.Entries(),
	}
	k := keep{ids: map[uint32]bool{}, maxID: c.nextFileID.Load() - 1, failed: map[*logfile.Writer]bool{}}
	c.filesMu.RLock()
	for id, f := range c.files {
		pos := f.size
		if f.dir != nil && f.dir.w != nil && f.dir.w.ID() == id {
			w := f.dir.w
			pos = w.Size()
			if w.Err() != nil {
				// Its next append rolls it; what it wrote after its last
				// good fsync was taken back.
				pos = w.Synced()
				k.failed[w] = true
			}
			k.ids[id] = true
		}
		ls := checkpoint.LogState{FileID: id, Position: pos, Refs: c.queue.FileRef(id)}
		for from := range c.takesFrom[id] {
			ls.TakesFrom = append(ls.TakesFrom, from)
		}
		slices.Sort(ls.TakesFrom)
		st.Logs = append(st.Logs, ls)
	}
	c.filesMu.RUnlock()
	slices.SortFunc(st.Logs, func(a, b checkpoint.LogState) int { return int(a.FileID) - int(b.FileID) })
	for id := range c.queue.FileRefs() {
		k.ids[id] = true
	}
	for id := range c.inflightPuts.Files() {
		k.ids[id] = true
	}
	for id := range c.inflightTakes.Files() {
		k.ids[id] = true
	}
	c.ckpt.Freeze()
	return st, k
}

// collectGarbage deletes log files that neither the checkpoint just written
// nor the live channel needs. A file whose take records consume events of a
// file that stays is kept too, so that a full replay (after the loss of
// every checkpoint) never brings a taken event back.
func (c *FileChannel) collectGarbage(k keep) (int, error) {
	c.queueMu.Lock()
	live := map[uint32]bool{}
	for id := range c.inflightPuts.Files() {
		live[id] = true
	}
	for id := range c.inflightTakes.Files() {
		live[id] = true
	}
	c.filesMu.RLock()
	cand := map[uint32]*logFile{}
	for id, f := range c.files {
		active := f.size == 0 // still being written; set when rolled
		if active || k.ids[id] || id > k.maxID || live[id] || c.queue.FileRef(id) > 0 {
			continue
		}
		cand[id] = f
	}
	for changed := true; changed; {
		changed = false
		for id := range cand {
			for from := range c.takesFrom[id] {
				if _, exists := c.files[from]; exists && cand[from] == nil {
					delete(cand, id)
					changed = true
					break
				}
			}
		}
	}
	c.filesMu.RUnlock()
	c.queueMu.Unlock()
	if len(cand) == 0 {
		return 0, nil
	}

	ids := make([]uint32, 0, len(cand))
	for id := range cand {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var errs []error
	dirs := map[string]bool{}
	for _, id := range ids {
		f := cand[id]
		c.filesMu.Lock()
		delete(c.files, id)
		c.filesMu.Unlock()
		errs = append(errs, f.r.Close())
		if err := c.fs.Remove(f.path); err != nil {
			errs = append(errs, err)
			continue
		}
		dirs[f.dir.path] = true
		c.queueMu.Lock()
		delete(c.takesFrom, id)
		c.queueMu.Unlock()
		c.metrics.logsDeleted.Inc()
		c.log.Info("deleted log file", "file", f.path, "id", logfile.LogName(id))
	}
	for d := range dirs {
		errs = append(errs, c.fs.SyncDir(d))
	}
	return len(ids), errors.Join(errs...)
}
