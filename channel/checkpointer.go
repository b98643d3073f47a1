package channel

import (
	"fmt"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// Checkpoint writes a checkpoint now: the queue as of this moment, so the
// next Open replays only what comes after. Then it deletes log files that no
// longer hold anything the channel needs. After Close, or when Close
// starts before it, it returns ErrClosed; Close waits for a checkpoint in
// progress.
func (c *FileChannel) Checkpoint() error {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	return c.checkpointLocked()
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
			// A full data dir may have room again all the same.
			if c.logs.LastWriteOrderID() == c.lastCkptW.Load() {
				c.logs.KeepReserves()
				continue
			}
			if err := c.checkpoint(); err != nil {
				c.log.Error("periodic checkpoint failed", "err", err)
			}
		}
	}
}

// checkpoint writes a checkpoint (see checkpointLocked).
func (c *FileChannel) checkpoint() error {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	return c.checkpointLocked()
}

// checkpointLocked writes a checkpoint and keeps the score: counters,
// duration, and the error Health reports until a checkpoint succeeds. The
// caller holds ckptMu. Once Close has released the files it returns
// ErrClosed and touches nothing.
func (c *FileChannel) checkpointLocked() error {
	if c.released {
		return ErrClosed
	}
	start := time.Now()
	err := c.writeCheckpoint(start)
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

// writeCheckpoint is checkpointLocked's work: capture, sync, write, back up,
// delete the log files no longer needed.
func (c *FileChannel) writeCheckpoint(start time.Time) error {
	st, sn := c.capture()
	capture := time.Since(start)

	// Every record at or before the checkpoint's write-order id must be
	// durable before the checkpoint says so (in-flight spilled puts are
	// not synced by their own transactions yet).
	if err := sn.Sync(); err != nil {
		c.thaw(false)
		return fmt.Errorf("checkpoint: %w", err)
	}
	err := c.main.ckpt.Write(st)
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
	deleted, err := c.logs.Reclaim(sn, c.unheld)
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
	defer c.queueMu.Unlock()
	c.main.ckpt.Thaw(ok)
}

// capture takes the checkpoint's snapshot. It holds commitMu exclusively, so
// no commit is half applied (and no log is appended to), and queueMu, so no
// take is half done; both only for the time it takes to copy the
// bookkeeping.
func (c *FileChannel) capture() (*checkpoint.State, *logfile.Snapshot) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	sn := c.logs.Snapshot()
	st := &checkpoint.State{
		Meta: checkpoint.Meta{
			WriteOrderID: sn.WriteOrderID,
			NextFileID:   sn.NextFileID,
			MaxTxID:      c.nextTxID.Load(),
			Time:         time.Now(),
		},
	}
	for _, f := range sn.Files {
		st.Logs = append(st.Logs, checkpoint.LogState{FileID: f.ID, Position: f.Position, Completes: f.Completes})
	}
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	st.InflightPuts = c.inflightPuts.Entries()
	for id := range c.inflightPuts.Files() {
		sn.Keep(id)
	}
	c.main.capture(st, sn)
	c.main.ckpt.Freeze()
	return st, sn
}

// unheld returns the log files of candidates that no consumer and no put in
// flight points into now (the log set's question before it deletes them).
func (c *FileChannel) unheld(candidates []uint32) []uint32 {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	puts, takes := c.inflightPuts.Files(), c.main.inflight.Files()
	var out []uint32
	for _, id := range candidates {
		if puts[id] == 0 && !c.main.holds(id, takes) {
			out = append(out, id)
		}
	}
	return out
}
