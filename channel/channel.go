package channel

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// Event is what flows through the channel: headers and an opaque body.
type Event struct {
	Headers map[string]string
	Body    []byte
	// Deliveries is set by Take from a group with MaxDeliveries: how many
	// times the group has delivered this event, this time included (1 the
	// first time; a Take of a process that crashed counts). 0 otherwise.
	// Put ignores it.
	Deliveries int
	// ID is set by Take: the event's id, from the log (see EventID).
	// Put ignores it.
	ID EventID
	// Time is set by Take: when the event's put transaction committed
	// (the wall clock of the process that committed it, from the log).
	// It is the zero Time for an event of a log file older than format
	// version 7, which recorded no time: such events count as older
	// than any time. Put ignores it.
	Time time.Time
}

// LockFileName is the lock file Open creates in every directory it uses.
const LockFileName = "in_use.lock"

// FileChannel is a durable channel of events. It is safe for concurrent use.
//
// It is a log set (logs: the data dirs, their log files and writers, the
// ids) plus its consumer groups (groups, each a groupState: the ring,
// in-flight takes, capacity gate; main is the unnamed one),
// tied together by the transactions and the checkpoint. See
// docs/architecture.md.
type FileChannel struct {
	cfg Config
	fs  vfs.FS
	log *slog.Logger
	// scratch pools the transactions' buffers (*scratch).
	scratch sync.Pool

	// dirsLocked: the caller (Rebuild, Repair) holds every directory's lock;
	// open takes none and release closes none.
	dirsLocked bool
	locks      []io.Closer
	logs       *logfile.Set
	// id is the channel's id (its channel.id), set by Open's claimDirs:
	// the encrypted log files it writes are bound to it, and one bound to
	// another channel is refused (logfile.SetOptions.ChannelID).
	id logfile.ChannelID

	// commitMu orders log writes against checkpoint snapshots. Every write of
	// records holds it shared from the moment it takes write-order ids until
	// the queue reflects the write; a checkpoint holds it exclusively only
	// while it captures its snapshot, so a snapshot never sees half a commit.
	commitMu sync.RWMutex
	// journal is the delivery journal (deliveries.go), nil when no group
	// counts deliveries; set (setJournal) and released with the files
	// under commitMu exclusive, used under commitMu shared.
	journal *checkpoint.Journal

	// queueMu guards the groups' queues, checkpoint slots and in-flight
	// takes, the group list, nextGroupID, inflightPuts, removedWaits and
	// released: the fields below, down to groupMu.
	queueMu sync.Mutex
	// groups is the consumer groups, by id; main the unnamed one (nil if
	// the channel has none). The list changes under commitMu (exclusive)
	// and queueMu, so either is enough to read it.
	groups []*groupState
	main   *groupState
	// groupList is a copy of groups for the lock-free readers (each Put's
	// permits): see currentGroups.
	groupList atomic.Pointer[[]*groupState]
	// top is the checkpoint file of the checkpoint dir itself: the
	// unnamed group's ring (main.ckpt), or an empty ring of one slot when
	// there is no unnamed group. The other groups' are in group-N subdirs.
	top          *checkpoint.Checkpoint
	nextGroupID  uint32
	inflightPuts *eventqueue.Inflight
	// removedWaits is what the gates of removed groups counted: Stats and
	// the put-wait counters add it, so that they never go down when a
	// group goes.
	removedWaits gateWaits
	// released: Close released the checkpoint and the log set; the queue's
	// slots are gone. Set by Close holding ckptMu, commitMu and queueMu, so
	// any one of them is enough to read it.
	released bool
	// leases are the armed leases of take transactions (lease.go).
	leases map[leaseKey]*lease
	// groupMu serialises AddGroup, RemoveGroup and ResetGroup.
	groupMu sync.Mutex
	// startAt: the groups Open created with a StartAt to move them to
	// once the channel runs (startNewGroups).
	startAt []GroupConfig
	// catalog is the groups record every new log file starts with
	// (logfile.SetOptions.FileStart), replaced when the groups change.
	catalog atomic.Pointer[logfile.Record]

	nextTxID  atomic.Uint64
	lastCkptW atomic.Uint64 // write-order id of the last successful checkpoint

	// ckptMu serialises checkpoints (periodic, explicit, on close).
	ckptMu sync.Mutex
	// staleGroupDirs are the checkpoint subdirs of removed groups, deleted
	// once a checkpoint without them is written.
	staleGroupDirs []uint32

	stats   stats
	metrics *metrics
	// dedup is the deduplication window (Config.Dedup; nil without it).
	dedup *dedupWindow
	// lastCkptTime is the unix nanos of the last successful checkpoint;
	// ckptErr the last checkpoint's error (nil after a success).
	lastCkptTime atomic.Int64
	ckptErr      atomic.Pointer[error]

	closed  atomic.Bool
	closing chan struct{}
	wg      sync.WaitGroup
	// leaseWG counts the armed leases and the expiries running
	// (lease.go): Close waits for it.
	leaseWG sync.WaitGroup
	// retryWG counts the groups' armed retry timers and those firing
	// (retry.go).
	retryWG sync.WaitGroup
	// takeSyncs is the take commits not yet synced (Config.TakeSyncDelay;
	// takesync.go).
	takeSyncs takeSyncs
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
	channelIDsHealed int64
	replayDuration   time.Duration

	corruptSkipped atomic.Int64
	checkpointErrs atomic.Int64
	backupErrs     atomic.Int64
	// dedupSnapshotBad counts the Opens that found the deduplication
	// snapshot missing, unusable or of another header.
	dedupSnapshotBad atomic.Int64
	// dedupUnread is the committed puts whose deduplication id Open's
	// replay could not read (replay.Result.DedupUnread).
	dedupUnread atomic.Int64
}

// Open opens (or creates) the channel in cfg's directories and recovers its
// committed state: it loads the last complete checkpoint (or the backup, or
// nothing) and replays the logs written after it. A file a newer release of
// filechannel wrote (a newer format version, or a log record of a type this
// release does not know) makes Open fail with an error matching
// ErrUnsupportedFormat before any such file is changed.
func Open(cfg Config) (*FileChannel, error) {
	full, err := cfg.withDefaults() // step 1 of the recovery procedure
	if err != nil {
		return nil, err
	}
	return openWith(full, false)
}

// openWith is Open of a config withDefaults returned; with dirsLocked the
// caller holds the lock of every directory of cfg (and keeps it after
// Close).
func openWith(cfg Config, dirsLocked bool) (*FileChannel, error) {
	c := &FileChannel{
		dirsLocked:   dirsLocked,
		cfg:          cfg,
		fs:           cfg.fs,
		log:          cfg.Logger,
		inflightPuts: eventqueue.NewInflight(),
		closing:      make(chan struct{}),
		dedup:        newDedupWindowOf(cfg.Dedup),
	}
	c.scratch.New = func() any { return new(scratch) }
	c.metrics = newMetrics(c)
	opened := false
	defer func() {
		// A failed step, or a panic (the user's ReplayProgress or
		// logger): Open keeps no file and no lock.
		if !opened {
			c.release()
		}
	}()
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.metrics.register(cfg.Registerer, cfg.Name); err != nil {
		return nil, err
	}
	opened = true
	c.wg.Add(1)
	go c.checkpointLoop()
	if c.dedup != nil {
		c.wg.Add(1)
		go c.dedupTrimLoop()
	}
	if err := c.startNewGroups(); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// Len returns the number of events in the channel: committed and not taken
// by the unnamed group (with no unnamed group: the largest number any group
// has queued). After Close it returns the number when Close released the
// queues.
func (c *FileChannel) Len() int {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return c.lenLocked()
}

func (c *FileChannel) lenLocked() int {
	if c.main != nil {
		return c.main.queue.Size()
	}
	n := 0
	for _, g := range c.groups {
		n = max(n, g.queue.Size())
	}
	return n
}

// Cap returns the channel's capacity in events: the unnamed group's (with
// no unnamed group, Config.Capacity).
func (c *FileChannel) Cap() int {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return c.capLocked()
}

func (c *FileChannel) capLocked() int {
	if c.main != nil {
		return c.main.cfg.Capacity
	}
	return c.cfg.Capacity
}

// Close checkpoints (unless NoCheckpointOnClose), waits for commits and a
// checkpoint in progress, and releases every file and lock. Transactions
// still open are abandoned: their takes return to the channel at the next
// Open and their puts vanish; their methods return ErrClosed from then on
// (Rollback included) and touch nothing Close released. Close is
// idempotent.
func (c *FileChannel) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(c.closing)
	c.wg.Wait()
	c.stopLeases()
	c.stopRetryTimers()
	c.stopTakeSyncs()
	err := c.closeFiles()
	c.takeSyncs.running.Wait() // a timer that fired before: it saw c closed
	c.metrics.unregister()
	c.log.Info("closed")
	return err
}

// closeFiles writes the last checkpoint (unless NoCheckpointOnClose) and
// releases the files. It holds ckptMu throughout, so that a checkpoint in
// progress (a Checkpoint call racing with Close) ends before the files go
// and none starts after, and commitMu around release, so that no write is
// between its log append and its queue update.
func (c *FileChannel) closeFiles() error {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	var errs []error
	if !c.cfg.NoCheckpointOnClose {
		if err := c.checkpointLocked(); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint on close: %w", err))
		}
	}
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.markReleased()
	return errors.Join(append(errs, c.release())...)
}

// markReleased says, under queueMu, that the queue is about to be released:
// the transactions' steps under queueMu leave it alone from then on.
func (c *FileChannel) markReleased() {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	c.released = true
}

// release closes the log set (writers and readers), the checkpoint and the
// locks.
func (c *FileChannel) release() error {
	var errs []error
	if c.logs != nil {
		errs = append(errs, c.logs.Close())
	}
	if c.journal != nil {
		errs = append(errs, c.journal.Close())
		c.journal = nil
	}
	for _, g := range c.groups {
		if g.ckpt != nil && g.ckpt != c.top {
			errs = append(errs, g.ckpt.Close())
		}
		g.ckpt = nil
	}
	if c.top != nil {
		errs = append(errs, c.top.Close())
		c.top = nil
	}
	for _, l := range c.locks {
		errs = append(errs, l.Close())
	}
	c.locks = nil
	return errors.Join(errs...)
}
