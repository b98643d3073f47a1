package channel

import (
	"errors"
	"io/fs"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/replay"
)

// The deduplication window on disk: the snapshot file
// (checkpoint.DedupName) is written at every checkpoint before the
// checkpoint files, so that it is never older than the checkpoint, and
// before any log file is deleted (logfile.SetOptions.BeforeDelete), so
// that the ids those files held survive them. Open loads it and adds the
// ids of the puts the replay reads (loadDedup).

// newDedupWindowOf returns the window of d, or nil without deduplication.
func newDedupWindowOf(d Dedup) *dedupWindow {
	if d.Header == "" {
		return nil
	}
	return newDedupWindow(d)
}

// persistDedup writes the snapshot file if the window changed since it was
// last written. Checkpoints and log deletions call it (under ckptMu or the
// set's deletion lock); fileMu serialises them.
func (c *FileChannel) persistDedup() error {
	w := c.dedup
	if w == nil {
		return nil
	}
	w.fileMu.Lock()
	defer w.fileMu.Unlock()
	w.mu.Lock()
	gen := w.gen
	if gen == w.persisted {
		w.mu.Unlock()
		return nil
	}
	w.fileEntries = w.entriesLocked(w.fileEntries[:0])
	w.mu.Unlock()
	buf, err := checkpoint.WriteDedup(c.fs, c.cfg.CheckpointDir, c.cfg.Dedup.Header, w.fileEntries, w.fileBuf)
	w.fileBuf = buf
	clear(w.fileEntries)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.persisted = max(w.persisted, gen)
	w.mu.Unlock()
	return nil
}

// loadDedup (step 7c) rebuilds the deduplication window: the snapshot
// file's entries (if it is there, valid and of the same header), and the
// ids of the committed puts the replay read (rc.res.DedupIDs). Without
// Dedup it leaves a snapshot alone (the offline tools open without it): a
// later Open with Dedup finds the ids it held, and misses only those
// committed meanwhile.
func (c *FileChannel) loadDedup(rc *recovery) error {
	w := c.dedup
	if w == nil {
		return nil
	}
	header, entries, err := checkpoint.ReadDedup(c.fs, c.cfg.CheckpointDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.log.Warn("dedup: no snapshot of the window: rebuilt from the logs alone (the ids of deleted log files are lost)",
			"recovered_from", rc.source, "ids_from_logs", len(rc.res.DedupIDs))
		c.stats.dedupSnapshotBad.Add(1)
		entries = nil
	case errors.Is(err, corrupt.ErrCorrupt) || errors.Is(err, corrupt.ErrUnsupportedFormat):
		c.log.Error("dedup: the window's snapshot is unusable: rebuilt from the logs alone (the ids of deleted log files are lost)",
			"err", err, "ids_from_logs", len(rc.res.DedupIDs))
		c.stats.dedupSnapshotBad.Add(1)
		entries = nil
	case err != nil:
		return opErr("read dedup snapshot", err)
	case header != c.cfg.Dedup.Header:
		c.log.Warn("dedup: the window's snapshot is of another header: rebuilt from the logs alone",
			"snapshot_header", header, "header", c.cfg.Dedup.Header, "ids_from_logs", len(rc.res.DedupIDs))
		c.stats.dedupSnapshotBad.Add(1)
		entries = nil
	}
	if rc.source == replay.FromFullReplay && entries == nil {
		c.log.Warn("dedup: full replay without a snapshot: the ids of the events in deleted log files are forgotten")
	}
	if n := rc.res.DedupUnread; n > 0 {
		c.log.Error("dedup: committed puts whose id could not be read are not in the window: a retry of them goes in again",
			"puts", n)
		c.stats.dedupUnread.Add(n)
	}
	entries = append(entries, rc.res.DedupIDs...)
	rc.res.DedupIDs = nil
	w.load(entries, c.commitTime())
	c.log.Info("dedup: window rebuilt", "ids", w.size(), "window", time.Duration(w.window), "max_ids", w.maxIDs)
	return nil
}
