package channel

import (
	"errors"
	"fmt"
	"slices"
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
	// LogPreallocated is the zeros laid out past the records of the active
	// log files (Config.Preallocate): disk space they hold beyond LogBytes.
	LogPreallocated int64
	// LayoutWaits counts the appends that caught up with a zero-fill in
	// flight and waited for it: Preallocate is too small for the rate.
	LayoutWaits int64
	// LogFilesRecycled counts the log files started by overwriting a
	// consumed one since Open (Config.RecycleLogFiles); LogFilesPooled is
	// the consumed files waiting for reuse now.
	LogFilesRecycled int64
	LogFilesPooled   int
	// RetainedFiles and RetainedBytes are the log files (of LogFiles) kept
	// only for Config.Retention, and their bytes: no group queues or holds
	// an event in them. OldestRetained is when the oldest one's last
	// record was written (zero without one).
	RetainedFiles  int
	RetainedBytes  int64
	OldestRetained time.Time

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

	RecoveredFrom string // "checkpoint", "backup checkpoint" or "full replay" (with ", groups changed", ", capacity changed")
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

	// ChannelIDsHealed counts the damaged channel.id files of the
	// checkpoint and backup dirs the last Open wrote again, from what every
	// data dir's channel.id records (docs/format.md §1.1, rule 4).
	ChannelIDsHealed int64

	// Idempotent puts (Config.Dedup). Duplicates counts the events put
	// commits dropped as duplicates since Open; DedupIDs is the number of
	// ids the window remembers; DedupForgotten counts the ids forgotten
	// for MaxIDs while still inside the window (a later duplicate of one
	// is not dropped); DedupSnapshotMissing is 1 when Open found the
	// window's snapshot missing, damaged or of another header and rebuilt
	// the window from the logs alone; DedupUnread counts the committed
	// puts Open could not read the id of (logged: an encrypted put that
	// does not open, a damaged record), whose retry goes in again.
	Duplicates           int64
	DedupIDs             int
	DedupForgotten       int64
	DedupSnapshotMissing int64
	DedupUnread          int64

	// Groups are the consumer groups' own numbers, by group id.
	Groups []GroupStats
}

// GroupStats is a snapshot of one consumer group's state and counters.
type GroupStats struct {
	Name          string
	WhenFull      FullPolicy
	Queued        int // committed, not taken by this group
	InflightTakes int // taken by its open transactions
	// Waiting is its events waiting for their retry delay
	// (GroupConfig.RetryDelays, Transaction.Retry): not in Queued, but
	// counted against Capacity.
	Waiting int
	// Parked is its events parked behind a key another open transaction
	// holds (GroupConfig.OrderKey): not in Queued, but counted against
	// Capacity; Skipped counts the events ever parked (each once per
	// hold of its key).
	Parked, Skipped int
	Capacity        int
	Taken           int64 // events taken by its committed transactions
	Rollbacks       int64 // its take transactions rolled back
	// DroppedOldest counts the events a full DropOldest group dropped from
	// its head; Missed the events of put commits a full group did not
	// receive (DropNewest, or DropOldest with nothing queued to drop).
	DroppedOldest, Missed int64
	// PutWaits, PutWaitTime, PutsWaiting and PutsFull are Stats' fields
	// for the Puts this (Block) group held up.
	PutWaits    int64
	PutWaitTime time.Duration
	PutsWaiting int
	PutsFull    int64

	// Dead letters. MaxDeliveries and DeadLetter are the group's config;
	// DeadLetterGroup says it is a dead-letter group (no put feeds it).
	// Counted is the number of its events with a delivery count (delivered,
	// not yet taken for good). DeadLettered counts the events moved to its
	// dead-letter group for reaching MaxDeliveries, Rejected those moved by
	// Transaction.Reject, DeadLetterRefused the moves a full Block
	// dead-letter group refused (the event was delivered again), Redriven
	// the events Redrive moved out of this (dead-letter) group.
	MaxDeliveries     int
	DeadLetter        string
	DeadLetterGroup   bool
	Counted           int
	DeadLettered      int64
	Rejected          int64
	DeadLetterRefused int64
	Redriven          int64

	// Filter is the group's filter ("" = every event); FilteredOut
	// counts the events of put commits it kept out of the group since
	// Open.
	Filter      string
	FilteredOut int64

	// LeaseTimeout is the group's; LeasesExpired counts its take
	// transactions whose lease expired since Open (their events went
	// back to the group).
	LeaseTimeout  time.Duration
	LeasesExpired int64
	// ExpireAfter is the group's; Expired counts its events that expired
	// since Open: moved to its dead-letter group (also counted in
	// ExpiredDeadLettered) or, without one, dropped.
	ExpireAfter         time.Duration
	Expired             int64
	ExpiredDeadLettered int64
	// OrderKey and RetryDelays are the group's (as LeaseTimeout and
	// ExpireAfter: the take options the group has now, stored with it).
	OrderKey    string
	RetryDelays []time.Duration

	// Oldest is when the put of its oldest queued event committed:
	// time.Since(Oldest) is the group's lag. The oldest queued event is
	// the one at its head or, with OrderKey, the first event parked behind
	// a key another open take transaction holds (Parked), whichever is
	// older: a stuck key shows in the lag. Events waiting for a retry
	// delay (Waiting) are not in it. Zero when nothing is queued nor
	// parked, or no such event has a time (a log file older than format
	// version 7).
	Oldest time.Time
}

// Stats returns a snapshot of the group's state and counters.
func (g *Group) Stats() GroupStats {
	c := g.c
	var gs GroupStats
	var lag lagHeads
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		gs = g.g.statsLocked()
		lag = c.lagHeadsLocked(g.g)
	}()
	gs.Oldest = c.oldestTime(g.g, lag)
	return gs
}

// statsLocked is the group's GroupStats; the caller holds queueMu.
func (g *groupState) statsLocked() GroupStats {
	w := g.gate.putWaits()
	return GroupStats{Name: g.cfg.Name, WhenFull: g.cfg.WhenFull, Queued: g.queue.Size(), InflightTakes: g.inflight.Len(),
		Waiting: g.waitingLen(), Parked: g.order.parked, Skipped: int(g.order.skips), Capacity: g.cfg.Capacity, Taken: g.counts.taken.Load(), Rollbacks: g.counts.rollbacks.Load(),
		DroppedOldest: g.counts.oldest.Load(), Missed: g.counts.newest.Load(),
		PutWaits: w.waits, PutWaitTime: w.time, PutsWaiting: w.waiting, PutsFull: w.full,
		MaxDeliveries: g.cfg.MaxDeliveries, DeadLetter: g.cfg.DeadLetter, DeadLetterGroup: g.dlqOnly,
		Counted: len(g.deliveries), DeadLettered: g.counts.deadMax.Load(), Rejected: g.counts.deadRejected.Load(),
		DeadLetterRefused: g.counts.deadRefused.Load(), Redriven: g.counts.redriven.Load(),
		Filter: g.cfg.Filter, FilteredOut: g.counts.filtered.Load(),
		LeaseTimeout: g.cfg.LeaseTimeout, LeasesExpired: g.counts.leasesExpired.Load(),
		ExpireAfter: g.cfg.ExpireAfter, Expired: g.counts.deadExpired.Load() + g.counts.expiredDropped.Load(),
		ExpiredDeadLettered: g.counts.deadExpired.Load(),
		OrderKey:            g.cfg.OrderKey, RetryDelays: slices.Clone(g.cfg.RetryDelays)}
}

// Stats returns a snapshot of the channel's state and counters. With
// consumer groups, Groups has each group's; Queued and Capacity are the
// unnamed group's (without one: the largest backlog of any group, and
// Config.Capacity), InflightTakes and the Put waits are summed over the
// groups.
func (c *FileChannel) Stats() Stats {
	s, heads := c.queueStats()
	for i, h := range heads {
		s.Groups[i].Oldest = c.oldestTime(h.g, h.lag)
	}
	s.LogFiles = c.logs.Len()
	s.LogBytes = c.logs.Bytes()
	for _, d := range c.logs.DirStates() {
		s.LogPreallocated += d.LaidOut
	}
	s.LayoutWaits = c.logs.LayoutStats().Waits
	s.LogFilesRecycled, s.LogFilesPooled = c.logs.RecycleStats()
	r := c.logs.Retained()
	s.RetainedFiles, s.RetainedBytes, s.OldestRetained = r.Files, r.Bytes, r.Oldest
	s.RecoveredFrom = c.stats.recoveredFrom
	s.ReplayRecords = c.stats.replayRecords
	s.ReplaySkipped = c.stats.replaySkipped
	s.ReplayCorrupt = c.stats.replayCorrupt
	s.ReplayDamagedTxs = c.stats.replayDamagedTxs
	s.TornTails = c.stats.tornTails
	s.ChannelIDsHealed = c.stats.channelIDsHealed
	s.CorruptSkipped = c.stats.corruptSkipped.Load()
	s.CheckpointErrs = c.stats.checkpointErrs.Load()
	s.BackupErrs = c.stats.backupErrs.Load()
	s.LastCheckpoint = c.lastCkptW.Load()
	if w := c.dedup; w != nil {
		s.DedupIDs = w.size() // first: it trims, and may forget some
		s.Duplicates, s.DedupForgotten = w.duplicates.Load(), w.forgotten.Load()
		s.DedupSnapshotMissing = c.stats.dedupSnapshotBad.Load()
		s.DedupUnread = c.stats.dedupUnread.Load()
	}
	return s
}

// queueStatsOnly is queueStats without the heads (the metrics' gauges).
func (c *FileChannel) queueStatsOnly() Stats {
	s, _ := c.queueStats()
	return s
}

// groupHead is what a group's Oldest is read from at a snapshot.
type groupHead struct {
	g   *groupState
	lag lagHeads
}

// queueStats returns the part of Stats that queueMu guards, and each
// group's lagHeads (in the order of s.Groups).
func (c *FileChannel) queueStats() (Stats, []groupHead) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	r := c.removedWaits
	s := Stats{InflightPuts: c.inflightPuts.Len(), Queued: c.lenLocked(), Capacity: c.capLocked(),
		PutWaits: r.waits, PutWaitTime: r.time, PutsFull: r.full}
	heads := make([]groupHead, 0, len(c.groups))
	for _, g := range c.groups {
		heads = append(heads, groupHead{g: g, lag: c.lagHeadsLocked(g)})
		gs := g.statsLocked()
		s.Groups = append(s.Groups, gs)
		s.InflightTakes += gs.InflightTakes
		s.PutWaits += gs.PutWaits
		s.PutWaitTime += gs.PutWaitTime
		s.PutsWaiting += gs.PutsWaiting
		s.PutsFull += gs.PutsFull
	}
	return s, heads
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
