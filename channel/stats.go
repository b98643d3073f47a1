package channel

import (
	"errors"
	"fmt"
	"time"
)

// Stats is a snapshot of the channel's state and counters.
type Stats struct {
	Queued        int // events in the channel, committed and not taken
	InflightTakes int // events taken by open transactions
	InflightPuts  int // events written by open transactions that spilled to the log
	Capacity      int
	LogFiles      int   // data log files the channel holds (at most MaxOpenLogFiles of them open)
	LogBytes      int64 // bytes in those files (taken events stay until their file is deleted)

	// PutWaits counts the Puts (Put and PutContext) that found the channel
	// at capacity and waited for room, whatever came of it: room, or
	// ErrChannelFull after KeepAlive, or PutContext's context ending, or
	// Close. A Put waiting now is counted already. A Put with KeepAlive < 0
	// does not wait and is not counted here (see PutsFull).
	PutWaits int64
	// PutWaitTime is the time those Puts spent waiting, the waits in
	// progress included (so it grows while a source is blocked). Over an
	// interval, its increase divided by the interval is how many Puts
	// waited on average: with one producer, the share of the time it was
	// blocked.
	PutWaitTime time.Duration
	// PutsWaiting is the number of Puts waiting for room now: a source
	// blocked behind a stopped sink shows here at once.
	PutsWaiting int
	// PutsFull counts the Puts that returned ErrChannelFull: they waited
	// KeepAlive in vain, or KeepAlive < 0 and there was no room.
	PutsFull int64

	RecoveredFrom string // "checkpoint", "backup checkpoint" or "full replay" (with ", capacity changed")
	ReplayRecords int64  // log records read by the last Open
	ReplaySkipped int64  // of those, records already covered by the checkpoint
	// ReplayCorrupt counts the damaged regions in the middle of log files
	// (or damaged log headers) the last Open stepped over; the damage is
	// logged with file and offset and left in place (the fcreplay tool's
	// repair command removes it).
	ReplayCorrupt int64
	// ReplayDamagedTxs counts committed transactions damage took records
	// of in the last Open: put transactions missing damaged puts (their
	// intact events are delivered), and take transactions missing take
	// records (whose events stay queued).
	ReplayDamagedTxs int64
	// TornTails counts log files whose torn tail the last Open cut off
	// (the bytes are kept in a .corrupt file next to the log).
	TornTails      int64
	CorruptSkipped int64  // damaged events skipped by takes
	CheckpointErrs int64  // failed checkpoints
	BackupErrs     int64  // failed backup checkpoints
	LastCheckpoint uint64 // write-order id of the last successful checkpoint
}

// Stats returns a snapshot of the channel's state and counters.
func (c *FileChannel) Stats() Stats {
	s := c.queueStats()
	s.LogFiles = c.logs.Len()
	s.LogBytes = c.logs.Bytes()
	w := c.primaryWaits()
	s.PutWaits, s.PutWaitTime, s.PutsWaiting, s.PutsFull = w.waits, w.time, w.waiting, w.full
	s.RecoveredFrom = c.stats.recoveredFrom
	s.ReplayRecords = c.stats.replayRecords
	s.ReplaySkipped = c.stats.replaySkipped
	s.ReplayCorrupt = c.stats.replayCorrupt
	s.ReplayDamagedTxs = c.stats.replayDamagedTxs
	s.TornTails = c.stats.tornTails
	s.CorruptSkipped = c.stats.corruptSkipped.Load()
	s.CheckpointErrs = c.stats.checkpointErrs.Load()
	s.BackupErrs = c.stats.backupErrs.Load()
	s.LastCheckpoint = c.lastCkptW.Load()
	return s
}

// queueStats returns the part of Stats that queueMu guards.
func (c *FileChannel) queueStats() Stats {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	s := Stats{InflightPuts: c.inflightPuts.Len(), Capacity: c.cfg.Capacity}
	if g := c.primaryLocked(); g != nil {
		s.Queued, s.InflightTakes, s.Capacity = g.queue.Size(), g.inflight.Len(), g.cfg.Capacity
	}
	return s
}

// primaryGroup returns the group whose numbers the channel-wide Stats and
// metrics report: the unnamed group, else the first by id (nil if none).
func (c *FileChannel) primaryGroup() *consumer {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return c.primaryLocked()
}

func (c *FileChannel) primaryLocked() *consumer {
	if c.main != nil {
		return c.main
	}
	if len(c.groups) > 0 {
		return c.groups[0]
	}
	return nil
}

// primaryWaits is the primary group's count of Puts that found no room.
func (c *FileChannel) primaryWaits() gateWaits {
	if g := c.primaryGroup(); g != nil {
		return g.gate.putWaits()
	}
	return gateWaits{}
}

// Health returns nil while the channel works normally, or an error saying
// what is wrong: the channel is closed, the last checkpoint (or backup
// checkpoint) failed, a data dir is short of MinimumRequiredSpace (from a
// put refused for space, or a look at the disk finding less than the
// minimum, until its free space is back above the minimum by the refused
// put and logfile.LowSpaceMargin), a data dir's log writer failed (the
// next commit there rolls to a new file), or a new log file could not be
// created (until one is).
// It is what the filechannel_healthy gauge reports, and what an HTTP
// health check of an embedding program should call.
func (c *FileChannel) Health() error {
	if c.closed.Load() {
		return ErrClosed
	}
	var errs []error
	if p := c.ckptErr.Load(); p != nil {
		errs = append(errs, *p)
	}
	if c.cfg.MinimumRequiredSpace >= 0 {
		for i := range c.logs.NumDirs() {
			// Refreshes the cached free space (at most once a second):
			// below the minimum the dir becomes short, and a short dir
			// whose room came back ends its shortage.
			c.logs.SpaceOK(i, 0, c.cfg.MinimumRequiredSpace)
		}
	}
	for _, d := range c.logs.DirStates() {
		if d.Full {
			errs = append(errs, fmt.Errorf("%w: data dir %s is full: its space reserve is in use, and puts there fail until a checkpoint frees room for it",
				ErrInsufficientSpace, d.Path))
		} else if d.LowSpace {
			errs = append(errs, fmt.Errorf("%w: data dir %s", ErrInsufficientSpace, d.Path))
		}
		if d.WriterErr != nil {
			errs = append(errs, fmt.Errorf("log writer in %s failed: %w", d.Path, d.WriterErr))
		}
		if d.RollErr != nil {
			errs = append(errs, fmt.Errorf("no new log file in %s: commits there fail: %w", d.Path, d.RollErr))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("filechannel: unhealthy: %w", errors.Join(errs...))
}
