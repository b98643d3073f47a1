package channel

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// RebuildOptions configures Rebuild.
type RebuildOptions struct {
	// DryRun replays the logs and reports what a rebuild would give, and
	// changes nothing.
	DryRun bool
	// Progress, if set, is called about every ProgressEvery while the logs
	// are read, and at the end. A rebuild reads them twice (a read-only
	// replay to count the events, then Open's): Bytes and Records count
	// both passes, and TotalBytes is twice the bytes to read (once in a dry
	// run), so a bar based on Bytes/TotalBytes moves forward only and ends
	// full.
	Progress func(replay.Progress)
	// ProgressEvery: 0 = 1s.
	ProgressEvery time.Duration
}

// RebuildReport is what Rebuild found and did.
type RebuildReport struct {
	Records, Bytes int64 // log records and bytes read (one pass)
	// Events is the number of events in the rebuilt channel, as
	// FileChannel.Len counts them (the unnamed group's, else the largest
	// group's); Groups has each consumer group's.
	Events              int
	Groups              []RebuildGroup
	Puts, Takes         int64 // committed puts/takes applied
	Corrupt, DamagedTxs int   // as replay.Result
	Duration            time.Duration

	// Capacity is the capacity of the rebuilt checkpoint (of the unnamed
	// group's ring): Config.Capacity, or if that is 0 the capacity of the
	// existing checkpoint (or backup), else DefaultCapacity; CapacityFrom
	// says which.
	Capacity     int
	CapacityFrom CapacitySource
	// Padding counts the padding records read (regions a repair overwrote).
	Padding int64
}

// RebuildGroup is one consumer group of a rebuilt channel.
type RebuildGroup struct {
	ID       uint32
	Name     string // "" for the unnamed group
	Events   int    // queued for it
	Capacity int
	WhenFull FullPolicy
	// MaxDeliveries and DeadLetter as its last groups record says;
	// DeadLetterGroup: it is a dead-letter group. (The delivery counts
	// a rebuild finds in the logs are kept; those only the old
	// checkpoint had are lost: the events may be delivered more often.)
	MaxDeliveries   int
	DeadLetter      string
	DeadLetterGroup bool
	// Filter is the group's filter as its last groups record says.
	Filter string
	// The group's take options (GroupConfig's fields of the same names)
	// as its last groups record says.
	OrderKey     string
	RetryDelays  []time.Duration
	LeaseTimeout time.Duration
	ExpireAfter  time.Duration
}

// rebuildGroupOf is the RebuildGroup of group id with config gc.
func rebuildGroupOf(id uint32, gc GroupConfig, events int, dlqOnly bool) RebuildGroup {
	return RebuildGroup{ID: id, Name: gc.Name, Events: events, Capacity: gc.Capacity, WhenFull: gc.WhenFull,
		MaxDeliveries: gc.MaxDeliveries, DeadLetter: gc.DeadLetter, DeadLetterGroup: dlqOnly, Filter: gc.Filter,
		OrderKey: gc.OrderKey, RetryDelays: gc.RetryDelays, LeaseTimeout: gc.LeaseTimeout, ExpireAfter: gc.ExpireAfter}
}

// config is the GroupConfig that keeps g as it is.
func (g *RebuildGroup) config() GroupConfig {
	return GroupConfig{Name: g.Name, Capacity: g.Capacity, WhenFull: g.WhenFull, MaxDeliveries: g.MaxDeliveries,
		DeadLetter: g.DeadLetter, Filter: g.Filter,
		OrderKey: g.OrderKey, RetryDelays: g.RetryDelays, LeaseTimeout: g.LeaseTimeout, ExpireAfter: g.ExpireAfter}
}

// Rebuild replaces the checkpoint of the closed channel cfg describes with
// one made from a full replay of every log file: it removes the checkpoint
// files (and the backup's), then opens the channel, which replays the logs in
// full, cuts torn tails, removes unfinished log files, writes a checkpoint and
// the backup, and closes it. Every consumer group is rebuilt (its ring in its
// group dir, and the catalog). With cfg.Groups nil the groups are those the
// logs end with, with the capacity and policy their last groups record gives
// them (the unnamed group's capacity is the rebuild's Capacity): a rebuild
// neither adds nor removes a group; with cfg.Groups set, Open reconciles them
// with the logs' as always. The channel's rules for deleting log files keep
// every record a full replay needs, so the rebuilt queue holds the committed
// events of the logs: use it when the checkpoint is lost or disagrees with
// the logs (Verify's checkpoint-disagrees), or after a repair.
//
// A read-only full replay runs first: it gives the report of a dry run, and
// if the events do not fit in the capacity Rebuild fails with an error naming
// the capacity needed (wrapping a *replay.CapacityError) and changes nothing.
// It takes every directory's lock (ErrLocked while the channel is open); a
// missing directory is created, except in a dry run. A crash during a rebuild
// leaves no checkpoint or the new one: either way the next Open or Rebuild
// recovers the same events from the logs. A file a newer release wrote, in
// the checkpoint or backup directory or among the logs, makes it fail with
// an error matching ErrUnsupportedFormat, and a checkpoint file that is not
// a regular file (a symbolic link) with one matching ErrNotRegular, before
// anything is changed; so does an entry of a data dir named like a log file
// that is not a regular file (a log file moved away and left as a link, say),
// whose events a full replay could not read.
func Rebuild(cfg Config, opts RebuildOptions) (*RebuildReport, error) {
	if opts.ProgressEvery < 0 {
		return nil, fmt.Errorf("filechannel: rebuild: ProgressEvery %v is negative", opts.ProgressEvery)
	}
	probe, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	missing := missingCreate
	if opts.DryRun {
		missing = missingSkip
	}
	locks, err := lockDirs(probe, "rebuild", missing)
	if err != nil {
		return nil, err
	}
	defer locks.Close()
	return rebuild(cfg, probe, opts)
}

// rebuild is Rebuild with the directories' locks held: raw is the config as
// the caller gave it, full what withDefaults made of it.
func rebuild(raw, full Config, opts RebuildOptions) (*RebuildReport, error) {
	start := time.Now()
	// A rebuild removes the checkpoint and the backup. (The read-only
	// replay refuses newer logs.)
	if err := refusedCheckpoints(full); err != nil {
		return nil, opErrNote("rebuild", err, " (nothing was changed)")
	}
	if err := refuseForeign(full, "rebuild"); err != nil {
		return nil, err
	}
	cfg, from := full, CapacityFromConfig
	if raw.Capacity == 0 {
		// The capacity the checkpoint recorded, with the defaults that
		// depend on it (TransactionCapacity) applied again.
		var err error
		raw.Capacity, from = existingCapacity(full)
		if cfg, err = raw.withDefaults(); err != nil {
			return nil, err
		}
	}
	if opts.ProgressEvery == 0 {
		opts.ProgressEvery = DefaultReplayProgressEvery
	}
	rep := &RebuildReport{Capacity: cfg.Capacity, CapacityFrom: from}
	b := &rebuilder{cfg: cfg, opts: opts, rep: rep, start: start, passes: 2}
	if opts.DryRun {
		b.passes = 1
	}
	if err := b.count(); err != nil {
		return nil, err
	}
	if raw.Groups == nil && b.logGroups != nil {
		// Open with Groups nil would add an unnamed group to a channel
		// without one: keep the groups the logs have.
		raw.Groups = b.groupConfigs()
		if raw.TransactionCapacity == 0 {
			raw.TransactionCapacity = b.transactionCapacity()
		}
		var err error
		if b.cfg, err = raw.withDefaults(); err != nil {
			return nil, opErrNote("rebuild", err, " (nothing was changed)")
		}
	}
	if !opts.DryRun {
		if err := b.rewrite(); err != nil {
			return nil, err
		}
	}
	rep.Duration = time.Since(start)
	if !opts.DryRun {
		cfg.Logger.Info("rebuild done", "events", rep.Events, "capacity", rep.Capacity, "capacity_from", rep.CapacityFrom.String(), "records", rep.Records,
			"corrupt", rep.Corrupt, "damaged_txs", rep.DamagedTxs, "duration", rep.Duration.Round(time.Millisecond))
	}
	return rep, nil
}

// rebuilder is one rebuild in progress: a read-only replay that counts
// (count), then, unless a dry run, the checkpoint written again (rewrite).
type rebuilder struct {
	cfg    Config
	opts   RebuildOptions
	rep    *RebuildReport
	start  time.Time
	passes int64           // 1 for a dry run, 2 otherwise (for the progress)
	first  replay.Progress // the count's last progress
	events int             // what the count recovered
	// logGroups is the groups the count ended with; nil when the logs
	// name none (an older release's: the unnamed group alone).
	logGroups []RebuildGroup
}

// count replays the logs into an in-memory queue: the number of events,
// the check that they fit the capacity, and the dry run's report.
func (b *rebuilder) count() error {
	cfg, opts := b.cfg, b.opts
	ropts := replay.Options{FS: cfg.fs, DataDirs: cfg.DataDirs, Logger: cfg.Logger}
	if !opts.DryRun {
		ropts.Logger = slog.New(slog.DiscardHandler) // Open logs the same again
	}
	if opts.Progress != nil {
		ropts.ProgressEvery = opts.ProgressEvery
		ropts.Progress = func(p replay.Progress) {
			b.first = p
			opts.Progress(replay.Progress{Records: p.Records, Bytes: p.Bytes, TotalBytes: b.passes * p.TotalBytes, Elapsed: time.Since(b.start)})
		}
	}
	// Slots are touched only as events are added: the memory used follows
	// the events, not the capacity.
	q, err := eventqueue.New(eventqueue.NewMemSlots(cfg.Capacity), cfg.Capacity, 0, 0, map[uint32]int{})
	if err != nil {
		return opErr("rebuild", err)
	}
	ropts.Queue = q
	ropts.NewQueue = b.countQueue
	res, err := replay.Run(ropts)
	var ce *replay.CapacityError
	if errors.As(err, &ce) {
		return fmt.Errorf("filechannel: rebuild: the logs hold %d events, more than the capacity %d; rebuild with Capacity >= %d (nothing was changed): %w",
			ce.Needed, ce.Capacity, ce.Needed, err)
	}
	if err != nil {
		return opErrNote("rebuild", err, " (nothing was changed)")
	}
	rep := b.rep
	rep.Records, rep.Bytes = res.Records, res.Bytes
	rep.Puts, rep.Takes, rep.Corrupt, rep.DamagedTxs = res.Puts, res.Takes, res.Corrupt, res.DamagedTxs
	rep.Padding = res.Padding
	for _, g := range res.Groups {
		capacity := int(min(g.Info.Capacity, MaxCapacity))
		if g.Info.ID == 0 {
			capacity = cfg.Capacity
		}
		gc := groupConfigOf(g.Info)
		gc.Capacity = capacity
		rep.Groups = append(rep.Groups, rebuildGroupOf(g.Info.ID, gc, g.Queue.Size(), g.Info.DeadLetterGroup))
	}
	if res.Catalogs > 0 {
		b.logGroups = slices.Clone(rep.Groups)
		if b.logGroups == nil {
			b.logGroups = []RebuildGroup{} // the logs say: no group
		}
	}
	rep.Events = lenOfGroups(rep.Groups)
	b.events = rep.Events
	return nil
}

// countQueue is the count's queue for a group the logs create: in memory,
// of the capacity Open gives it (Config.Groups', else the groups
// record's), so that the count fails where Open would.
func (b *rebuilder) countQueue(gi logfile.GroupInfo) (*eventqueue.Queue, error) {
	capacity := int(min(gi.Capacity, MaxCapacity))
	if gi.ID == 0 {
		capacity = b.cfg.Capacity
	}
	for _, g := range b.cfg.Groups {
		if g.Name == gi.Name {
			capacity = g.Capacity
		}
	}
	capacity = max(capacity, 1)
	return eventqueue.New(eventqueue.NewMemSlots(capacity), capacity, 0, 0, map[uint32]int{})
}

// groupConfigs is the Config.Groups that keeps the groups the logs have.
func (b *rebuilder) groupConfigs() []GroupConfig {
	out := make([]GroupConfig, 0, len(b.logGroups))
	for i := range b.logGroups {
		out = append(out, b.logGroups[i].config())
	}
	return out
}

// transactionCapacity is the TransactionCapacity of a rebuild that keeps
// the logs' groups: the default, at most the capacity of the channel and
// of every Block group (Config's rule; a rebuild writes no transaction).
func (b *rebuilder) transactionCapacity() int {
	n := min(DefaultTransactionCapacity, b.cfg.Capacity)
	for _, g := range b.logGroups {
		if g.WhenFull == Block {
			n = min(n, g.Capacity)
		}
	}
	return max(n, 1)
}

// lenOfGroups counts events as FileChannel.Len does: the unnamed group's,
// else the largest group's.
func lenOfGroups(groups []RebuildGroup) int {
	n := 0
	for _, g := range groups {
		if g.ID == 0 {
			return g.Events
		}
		n = max(n, g.Events)
	}
	return n
}

// rewrite removes the checkpoints and opens the channel, whose full replay
// writes the new checkpoint. The backup goes first: without a checkpoint
// but with a backup, Open would restore the backup instead of replaying the
// logs.
func (b *rebuilder) rewrite() error {
	cfg, opts := b.cfg, b.opts
	if cfg.BackupCheckpointDir != "" {
		if err := checkpoint.Remove(cfg.fs, cfg.BackupCheckpointDir); err != nil {
			return opErr("rebuild", err)
		}
	}
	if err := checkpoint.Remove(cfg.fs, cfg.CheckpointDir); err != nil {
		return opErr("rebuild", err)
	}
	if opts.Progress != nil {
		cfg.ReplayProgressEvery = opts.ProgressEvery
		cfg.ReplayProgress = func(p replay.Progress) {
			opts.Progress(replay.Progress{Records: b.first.Records + p.Records, Bytes: b.first.TotalBytes + p.Bytes,
				TotalBytes: b.first.TotalBytes + p.TotalBytes, Elapsed: time.Since(b.start)})
		}
	}
	cfg.noKeyCheck = true // the replay reads no event body
	c, err := openWith(cfg, true)
	if err != nil {
		return opErr("rebuild", err)
	}
	counted := b.rep.Groups
	b.rep.Events, b.rep.Groups = c.Len(), rebuiltGroups(c)
	if err := c.Close(); err != nil {
		return opErr("rebuild", err)
	}
	if b.rep.Events != b.events {
		cfg.Logger.Warn("rebuild: the channel recovered another number of events than the read-only replay",
			"events", b.rep.Events, "read_only_replay", b.events)
	}
	for _, g := range b.rep.Groups {
		i := slices.IndexFunc(counted, func(x RebuildGroup) bool { return x.ID == g.ID })
		if i < 0 || counted[i].Events != g.Events {
			n := -1
			if i >= 0 {
				n = counted[i].Events
			}
			cfg.Logger.Warn("rebuild: the channel recovered another number of events for a consumer group than the read-only replay (-1: the replay did not have it)",
				"group", g.Name, "events", g.Events, "read_only_replay", n)
		}
	}
	return nil
}

// rebuiltGroups describes the consumer groups of the channel c opened, by
// id.
func rebuiltGroups(c *FileChannel) []RebuildGroup {
	var out []RebuildGroup
	for _, g := range c.currentGroups() {
		grp, err := c.Group(g.cfg.Name)
		if err != nil {
			continue // removed since: nothing runs on c but Open's own work
		}
		st := grp.Stats() // waiting for their retry delay, or parked behind a waiting key (keyWaiting): the group's too
		out = append(out, rebuildGroupOf(g.id, g.cfg, st.Queued+st.Waiting+st.Parked, g.dlqOnly))
	}
	return out
}

// CapacitySource says where a rebuild's capacity came from.
type CapacitySource int

// Capacity sources (RebuildReport.CapacityFrom).
const (
	CapacityFromConfig     CapacitySource = iota + 1 // Config.Capacity (fcreplay's --capacity)
	CapacityFromCheckpoint                           // the capacity the checkpoint recorded
	CapacityFromBackup                               // the capacity the backup checkpoint recorded
	// CapacityDefault: no checkpoint recorded one, so DefaultCapacity. The
	// application's next Open with another Config.Capacity resizes the
	// queue.
	CapacityDefault
)

func (s CapacitySource) String() string {
	switch s {
	case CapacityFromConfig:
		return "config"
	case CapacityFromCheckpoint:
		return "checkpoint"
	case CapacityFromBackup:
		return "backup checkpoint"
	case CapacityDefault:
		return "default"
	}
	return fmt.Sprintf("CapacitySource(%d)", int(s))
}

// RecordedCapacity returns the capacity the checkpoint of the channel cfg
// describes records for its ring (the unnamed consumer group's: a
// checkpoint whose groups catalog lists no unnamed group records none),
// else its complete backup's, and which of them it is;
// DefaultCapacity and CapacityDefault when neither records one (a new
// channel, or checkpoint files lost or damaged). cfg.Capacity is ignored.
// It only reads: an application that wants to keep a channel's capacity
// whatever its Config says passes the result to Open. The error is cfg's
// (invalid config).
func RecordedCapacity(cfg Config) (int, CapacitySource, error) {
	cfg.Capacity = 0
	full, err := cfg.withDefaults()
	if err != nil {
		return 0, 0, err
	}
	n, from := existingCapacity(full)
	return n, from, nil
}

// existingCapacity is the capacity recorded in the checkpoint.meta of the
// checkpoint, else of a complete backup, else DefaultCapacity, and which
// it is; a checkpoint without an unnamed group records none. cfg has its
// defaults applied.
func existingCapacity(cfg Config) (int, CapacitySource) {
	type source struct {
		dir  string
		from CapacitySource
	}
	dirs := []source{{cfg.CheckpointDir, CapacityFromCheckpoint}}
	if b := cfg.BackupCheckpointDir; b != "" && checkpoint.HasBackup(cfg.fs, b) {
		dirs = append(dirs, source{b, CapacityFromBackup})
	}
	for _, d := range dirs {
		if cat, err := checkpoint.ReadCatalog(cfg.fs, d.dir); err == nil &&
			!slices.ContainsFunc(cat.Groups, func(g checkpoint.Group) bool { return g.ID == 0 }) {
			continue // the top level holds the empty ring of one slot
		}
		if m, err := checkpoint.ReadMeta(cfg.fs, d.dir); err == nil && m.Capacity > 0 {
			return m.Capacity, d.from
		}
	}
	return DefaultCapacity, CapacityDefault
}
