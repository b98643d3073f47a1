// Package channel is filechannel's public API: a durable, embeddable,
// Flume-style file channel between a source and a sink inside one process.
//
// A source puts events into the channel; a sink takes them out and delivers
// them somewhere else. The channel keeps them on disk in between, so that
// neither a slow sink nor a crash loses one.
//
// # The model
//
// An [Event] is a map of headers and an opaque body. Events move only in
// transactions ([FileChannel.Begin]): a transaction either puts or takes
// (mixing them gives [ErrMixedTransaction]), holds at most
// Config.TransactionCapacity events ([ErrTransactionFull]), belongs to one
// goroutine ([ErrConcurrentUse]), and ends with [Transaction.Commit] or
// [Transaction.Rollback].
//
//   - A put transaction's events become visible to takers, all together,
//     when Commit returns nil; by then they are on disk (fsync'd, unless
//     Config.NoSync). Rollback discards them.
//   - A take transaction's events are invisible to other takers until it
//     ends. Commit removes them for good (also fsync'd); Rollback puts them
//     back at the head of the channel in their order, to be taken again.
//   - A Commit that returns an error has rolled the transaction back, but
//     its records may have reached the disk: after a crash its outcome is
//     unknown.
//
// So delivery is at-least-once: a sink that delivers an event and then
// fails to commit (or crashes first) gets it again. Make delivery
// idempotent, or deduplicate downstream. Events come out in the order
// their put commits made them visible; one transaction's events keep their
// Put order.
//
// Take sets Event.ID and Event.Time from the log: an [EventID] names the
// event, unique and increasing in commit order ([EventID.Compare]; as text
// [EventID.String] and [ParseEventID]), and Time is when its put
// committed (the committing process's wall clock). Both are the same after
// a restart, a full replay, [Repair] and [Rebuild]. Events of log files
// an older release wrote (format version 6 and before) have a zero Time,
// older than any time. Put ignores both fields.
//
// Config.Capacity bounds the events the channel holds: queued, put by
// uncommitted transactions, and taken by uncommitted ones. At capacity
// [Transaction.Put] waits up to Config.KeepAlive for room and then returns
// [ErrChannelFull] ([Transaction.PutContext] also gives up when its context
// ends). A data dir with less free space than Config.MinimumRequiredSpace
// refuses puts with [ErrInsufficientSpace]; takes are never refused for
// space, so sinks can drain a full disk. Each data dir also keeps a space
// reserve file (Config.SpaceReserve): when a write there finds the disk
// full, the file goes, take commits use its room, and puts there fail
// until a checkpoint has made room for it again; Open succeeds on such a
// disk, so a sink can drain it after a restart.
//
// # Retention and replay
//
// Config.Retention keeps the log files of events every group has taken,
// for MaxAge or up to MaxBytes, so that they can be replayed; such
// retained files are the first to go when a put would otherwise be
// refused for space (docs/operations.md, "Retention and replay"). A group
// can then start in the past, or go back: GroupConfig.StartAt places a
// group Open or [FileChannel.AddGroup] creates, and
// [FileChannel.ResetGroup] (the package-level [ResetGroup] on a closed
// channel) rebuilds a group's queue from the retained logs, from a
// [Position]: [Earliest], [Latest], [AtTime] or [AfterEvent]. The queue is
// every retained event from the position on, in commit order, with
// delivery counts of zero; the reset is durable when it returns, and a
// take transaction of the group open across it cannot commit
// ([ErrGroupReset]). [PreviewReset] says what a reset would do.
//
//	cfg.Retention = channel.Retention{MaxAge: 24 * time.Hour}
//	...
//	// A new sink that starts with everything the logs still hold:
//	g, err := c.AddGroup(channel.GroupConfig{Name: "audit", StartAt: channel.Earliest()})
//	// Send the last hour again to the index:
//	n, err := c.ResetGroup("index", channel.AtTime(time.Now().Add(-time.Hour)))
//
// A group's lag is the age of its oldest queued event
// (time.Since(GroupStats.Oldest); the metric
// filechannel_group_oldest_event_age_seconds), parked events of a key
// held by an open take transaction (OrderKey) included.
//
// # Consumer groups
//
// Config.Groups gives the channel consumer groups: every group receives
// every event committed after it exists (broadcast), and the take
// transactions of one group compete for its events (clustering). An event
// is written to the logs once however many groups there are; each group
// has its own queue, in-flight takes, rollback to its own head, capacity
// and full policy ([Block], [DropOldest], [DropNewest]). A put (through
// [FileChannel.Begin]) reaches every group; [FileChannel.Group] and
// [Group.Begin] take from one. Config.Groups nil is one unnamed group: the
// channel as it is without groups, whose takes [FileChannel.Begin] makes.
//
//	cfg.Groups = []channel.GroupConfig{{Name: "index"}, {Name: "archive", WhenFull: channel.DropNewest}}
//	c, err := channel.Open(cfg)
//	...
//	g, err := c.Group("index")
//	tx, err := g.Begin() // a take transaction of group "index"
//
// [FileChannel.AddGroup] and [FileChannel.RemoveGroup] change the groups
// at run time, durably when they return; a group missing from Config.Groups
// at the next Open is kept, never dropped. The open transactions and Group
// values of a removed group fail with ErrNoGroup, changing nothing, even
// once a group of the same name is added again. A slow group keeps the log
// files of its backlog on disk (docs/operations.md, "Consumer groups").
//
// # Filters
//
// GroupConfig.Filter, a CEL expression over the event's headers, chooses
// the events a group receives: RocketMQ's subscription "TagA || TagC" and
// Flume's multiplexing selector are
//
//	{Name: "orders", Filter: channel.TagFilter("tag", "TagA", "TagC")}
//	{Name: "cz", Filter: `headers["state"] == "CZ"`}
//
// An event a group's filter does not match is never queued for it: it
// takes no room there and costs its takers nothing. A missing header is no
// match. Open and AddGroup refuse a bad expression with ErrBadFilter
// (docs/operations.md, "Filters"). A changed filter applies to the events
// committed afterwards, and to ResetGroup and StartAt, which queue the
// retained events the filter matches.
//
// # Idempotent puts
//
// Config.Dedup drops, at its put commit, an event whose Dedup.Header value
// an event committed within Dedup.Window had: a source that crashed between
// its commit and saving its cursor puts its last batch again without
// putting it twice. The commit succeeds; no group receives the duplicate,
// which takes no capacity and is counted (Stats.Duplicates). The window
// (at most Dedup.MaxIDs ids) survives Close, a crash and a power loss: Open
// rebuilds it from the snapshot file dedup in CheckpointDir and the logs
// (with Config.Keys, it opens each encrypted put it replays to read its
// id; one that does not open is logged and counted, Stats.DedupUnread).
// Two commits in flight with the same value both keep their event (the
// first may still fail): a possible duplicate, never a loss
// (docs/operations.md, "Idempotent puts").
//
// # Dead letters
//
// A group with GroupConfig.MaxDeliveries gives up on an event after that
// many deliveries and moves it to its dead-letter group
// (GroupConfig.DeadLetter; by default the group's name plus ".dlq", created
// with it) instead of delivering it again. Every Take that returned the
// event counts, whether its transaction then rolled back, failed, or died
// with the process: before Take returns, the new count is stored in the
// delivery journal, a file of the checkpoint dir mapped into memory (no
// system call), so a sink that crashes on an event still gets rid of it. A
// power loss can lose counts, and then the event is delivered more often,
// never dead-lettered early. [Transaction.Reject] moves one taken event there
// when the transaction commits: a sink that took 100 events and can
// deliver 99 rejects one and commits. A dead-letter group is a group that
// no put feeds and that never holds up a put; a sink takes from it like
// from any group, and [FileChannel.Redrive] moves its events back to the
// group it serves (the package-level [Redrive] on a closed channel). Each
// group needs a dead-letter group of its own. Event.Deliveries tells a
// sink how often its group has delivered an event, and
// Config.OnDeadLetter is told of each move ([DeadLetter]), once the move
// and the call that made it are complete: a panic in it goes up through
// that Take, Commit or Rollback with the event in the dead-letter group
// only and no lock held. Since every
// rollback counts for every event of the transaction, retry a transient
// failure inside the transaction rather than rolling back
// (docs/operations.md, "Retries and dead letters").
//
//	cfg.Groups = []channel.GroupConfig{{Name: "index", MaxDeliveries: 5}} // and "index.dlq"
//	...
//	if err := index(ev); errors.Is(err, errRefused) {
//		err = tx.Reject(ev) // to index.dlq when tx commits
//	}
//
// # Retry delays
//
// GroupConfig.RetryDelays makes an event a rollback returns wait before
// its next delivery: RetryDelays[n-1] after its n-th delivery (the last
// value repeats), out of the way: the group's other events are taken
// meanwhile, then it comes back before the queue's head. A waiting event
// counts against the group's Capacity (GroupStats.Waiting counts them).
// Transaction.Retry asks for one wait for one event, at a commit that
// takes the transaction's others for good. The due time is in the log:
// it survives Close, a crash and a full replay; a power loss may shorten
// it, never lose the event. With MaxDeliveries, the event becomes a dead
// letter after that many deliveries instead of waiting again. With
// OrderKey, the event's key waits with it ("Order per key"). A sink that
// retries with backoff:
//
//	orders := channel.GroupConfig{Name: "orders", MaxDeliveries: 6,
//		RetryDelays: []time.Duration{time.Second, 10 * time.Second, time.Minute}}
//	...
//	tx, _ := g.Begin()
//	ev, err := tx.TakeContext(ctx)
//	if err != nil { ... }
//	if err := deliver(ev); err != nil {
//		tx.Rollback() // back after 1 s, 10 s, then every minute; a.dlq after 6
//		continue
//	}
//	tx.Commit()
//
// or, for a batch of which one event failed:
//
//	tx.Retry(failed, 30*time.Second) // the others are committed
//	tx.Commit()
//
// # Order per key
//
// GroupConfig.OrderKey names a header: within the group, the events with
// the same non-empty value of it are never held by two open take
// transactions at once and are taken in commit order. A Take skips past
// the events whose key another transaction holds (they keep their place:
// GroupStats.Parked) and takes the next free one; events without the
// header are free. A commit frees the key; a rollback returns the key's
// events first, in order. A slow or stuck taker holds back only its keys
// (docs/operations.md, "Order per key").
//
//	orders := channel.GroupConfig{Name: "orders", OrderKey: "customer"}
//
// With RetryDelays (or Transaction.Retry) a key waits with its event: of
// the events a rollback returns, the first of each key waits out its delay
// (the latest of the key's events' delays) and the key's later events wait
// behind it, while the other keys flow; none is delivered before its own
// due time, and the key's events keep their order. A sink that retries a
// customer's orders with backoff, one customer never blocking the others:
//
//	orders := channel.GroupConfig{Name: "orders", OrderKey: "customer", MaxDeliveries: 6,
//		RetryDelays: []time.Duration{time.Second, 10 * time.Second, time.Minute}}
//	...
//	if err := deliver(batch); err != nil {
//		tx.Rollback() // each failed customer's orders wait, in order
//		continue
//	}
//
// Retry(e, after) in a keyed group makes e wait with its key; the
// transaction's other events of e's key that it commits are committed
// (mark them too, to keep them behind e).
//
// # Leases
//
// GroupConfig.LeaseTimeout bounds how long a take transaction of the
// group holds its events: one still open that long after its first Take
// of an event loses them, even if its taker never calls again: they go
// back to the group's head in order, as after a Rollback (their
// deliveries stay counted), and the transaction is fenced: its Take and
// Commit return [ErrLeaseExpired] and change nothing, and its Rollback
// returns nil. A commit and its expiry never both succeed. Choose it above
// the sink's slowest batch (docs/operations.md, "Leases").
//
// # Expiry
//
// GroupConfig.ExpireAfter gives a group's events a time to live, from
// their commit time in the log: an event still queued that long is never
// delivered by the group. It moves to the group's dead-letter group if it
// has one, else it is dropped; either way it is counted, logged and told
// to Config.OnDeadLetter (DeadLetter.Reason "expired"). A Take skips it so;
// a sweep before each checkpoint moves or drops those at the head of an
// idle group, so that they do not keep their log files
// (docs/operations.md, "Expiry").
//
// The take options (OrderKey, RetryDelays, LeaseTimeout, ExpireAfter) are
// stored with their group, as the rest of its config is: in the groups
// record AddGroup writes (and every log file starts with) and in the
// checkpoint's catalog. A group that a later Open does not list in
// Config.Groups keeps them, whether Open recovers from a checkpoint or a
// full replay; one listed takes them from Config.Groups, and the change is
// stored (docs/operations.md, "Where a group's options come from").
//
// # A source
//
//	c, err := channel.Open(channel.Config{
//		CheckpointDir: "/var/lib/app/fc/checkpoint",
//		DataDirs:      []string{"/var/lib/app/fc/data"},
//	})
//	if err != nil { ... }
//	defer c.Close()
//
//	tx, err := c.Begin()
//	if err != nil { ... }
//	for _, b := range batch {
//		if err := tx.Put(channel.Event{Body: b}); err != nil {
//			tx.Rollback() // ErrChannelFull: keep the batch, retry later
//			return err
//		}
//	}
//	return tx.Commit() // durable when it returns nil
//
// One commit is one fsync, so batches make throughput: docs/benchmarks.md
// measures about 4,800 events/s at one event per commit and 190,000 at 100
// (1 KiB events, one disk). Concurrent commits share an fsync.
//
// # A sink
//
// [Transaction.Take] returns ok == false on an empty channel;
// [Transaction.TakeContext] waits for an event instead, until its context
// ends or the channel closes ([FileChannel.Wait] only waits). A sink's loop
// blocks for the first event of a batch and takes the rest without waiting:
//
//	for {
//		tx, err := c.Begin()
//		if err != nil { ... }
//		ev, err := tx.TakeContext(ctx) // ctx.Err() on shutdown, ErrClosed after Close
//		if err != nil {
//			tx.Rollback()
//			return err
//		}
//		batch := []channel.Event{ev}
//		for len(batch) < 100 {
//			ev, ok, err := tx.Take()
//			if err != nil {
//				tx.Rollback()
//				return err
//			}
//			if !ok {
//				break // deliver what there is rather than wait
//			}
//			batch = append(batch, ev)
//		}
//		if err := deliver(batch); err != nil {
//			tx.Rollback() // the events return to the head
//			continue
//		}
//		if err := tx.Commit(); err != nil { ... } // now they are gone
//	}
//
// A damaged event (a record that fails its checksum) is never returned: Take
// skips it, logs it at Error, counts it (Stats().CorruptSkipped,
// filechannel_corrupt_events_skipped_total) and consumes it with the
// transaction; it does not count toward TransactionCapacity, so a batch of
// TransactionCapacity good events still fits.
//
// When the channel closes under a sink (the loop above on shutdown), every
// call returns [ErrClosed], Rollback and Commit included, and nothing
// else happens: the events the open transaction took come back at the next
// Open.
//
// The package's runnable examples show both sides (Example,
// ExampleTransaction_Put, ExampleTransaction_Rollback,
// ExampleTransaction_TakeContext); examples/pipeline is a complete program
// with metrics, a health check and graceful shutdown.
//
// # One source and one sink, two backends
//
// [Tx] is the transaction of any backend: a [*Transaction] here, a
// *kafka.Transaction of package channel/kafka, which runs the same
// transactions over a Kafka topic when one machine is not enough
// (docs/kafka.md). Write a source or a sink once, generic over the
// transaction type, and pass it a begin function:
//
//	func sink[T channel.Tx](ctx context.Context, begin func() (T, error)) error
//
//	sink(ctx, fc.Begin) // on a FileChannel; g.Begin for one of its groups
//	sink(ctx, kc.Begin) // on Kafka
//
// examples/pipeline runs its source and sink on either (-kafka, -kafka-fake).
//
// # Metrics and health
//
// With Config.Registerer set, Open registers the channel's Prometheus
// metrics there (pass a registry of your own, such as
// prometheus.NewRegistry(); nothing is ever registered globally), every
// series labelled channel_name=Config.Name; Close unregisters them. Two
// channels on one Registerer need different Names, or the second Open
// fails. They cover Flume's channel counters (puts and takes attempted,
// committed and failed by reason, rollbacks, queue size, capacity, fill
// ratio, checkpoint errors) and more: commit and fsync latency histograms,
// events per commit, checkpoint duration, log files and bytes, free space
// per data dir, and what the last Open's recovery found.
// docs/operations.md#metrics lists every metric; docs/alerts.yml holds
// Prometheus alerting rules for them.
//
// [FileChannel.Health] returns nil while the channel works normally and
// otherwise an error naming the problem: closed, the last checkpoint or
// backup checkpoint failed, a data dir short of MinimumRequiredSpace, or a
// log writer failed. An HTTP health check should report it; the
// filechannel_healthy gauge mirrors it. [FileChannel.Stats] is a snapshot
// of the queue, of what the last Open's recovery found and of the error
// counters, for programs without Prometheus.
//
// # Logging
//
// Config.Logger (a *slog.Logger; nil discards) receives the channel's log
// lines, each with a channel=Config.Name attribute when Name is set. An open
// channel logs nothing per put, take or successful commit, and nothing at
// Debug.
//
//   - Info: lifecycle and routine work: "opened", "closed", "replay done"
//     (and "replay progress" during a long replay), "using backup
//     checkpoint", "capacity changed", "checkpoint" (one line per
//     checkpoint, with its duration), "rolled log file", "deleted log
//     file", "data dir has room again".
//   - Warn: recovery found something to fix, and fixed it or worked around
//     it: "checkpoint unusable", "backup checkpoint unusable", "no usable
//     checkpoint: replaying every log file in full", a torn tail found and
//     cut, a log file left empty by a crash removed.
//   - Error: an operation failed or data is damaged: "commit failed" (not
//     for ErrClosed), "periodic checkpoint failed", "backup checkpoint
//     failed", "data dir is short of space" (once when a put is first
//     refused for space; Info "has room again" once its free space is back
//     above MinimumRequiredSpace by the refused put and a margin, so one
//     shortage is one pair of lines), "skipping damaged event", and
//     replay's damaged regions and damaged transactions.
//
// docs/operations.md#observing-the-channel lists every message and its
// fields.
//
// # Files
//
// In CheckpointDir: checkpoint (the ring of event pointers, (Capacity +
// 1029) × 8 bytes, fully allocated and mapped read-only), checkpoint.meta,
// inflightputs, inflighttakes, in_use.lock; with consumer groups, groups and
// a group-N directory per named group; while a group has MaxDeliveries,
// deliveries, the delivery journal (786,464 bytes, mapped read-write and
// never synced, rewritten in place by each Open so that a full disk does
// not stop one; it may be deleted while the channel is closed, at the cost
// of the delivery counts only it holds); with Config.Dedup, dedup (the
// deduplication window's ids, 24 bytes each). In each data dir: log-NNNNNNNNNN
// data log files (a new one per data dir at every Open and whenever one
// would pass MaxFileSize), in_use.lock, space.reserve (zeros, removed when
// the disk fills: Config.SpaceReserve), and the .corrupt files holding
// bytes cut from a torn tail by Open or removed by Repair (never deleted by
// the channel). In BackupCheckpointDir (optional): a copy of the checkpoint
// files and backupComplete. In every directory: channel.id, the channel's
// random id and checkpoint dir, written by the first Open; Open, Repair and
// Rebuild refuse a directory whose channel.id names another channel
// (ErrForeignDir). docs/format.md specifies every format.
//
// Files are created 0600 and directories 0700 (Config.FileMode and DirMode
// widen them; the umask applies). The directories may be symbolic links,
// but nothing inside them is followed: a checkpoint file or in_use.lock
// that is not a regular file fails Open ([ErrNotRegular]), and an entry
// named like a log file that is not one is logged and left alone, unless it
// stands where the recovery needs a log file (one the checkpoint lists or
// newer, or any in a full replay): then Open, Repair and Rebuild refuse it
// with ErrNotRegular, naming it (move the file back in place of a link).
//
// # Encryption at rest
//
// With Config.Keys (a [KeyProvider]: [KeysFromFile], [KeysFromEnv],
// [StaticKeys], or a KMS of your own), every event's headers and body are
// sealed with AES-256-GCM in the log files written from then on, under a
// key derived for each file from the active key and the channel's id, and
// authenticated with the record's place in the log. Files keep the key they
// were written with, so rotation is a new active key with the old ones kept
// until their files are gone. A missing or wrong key, or a log file of
// another channel that has the same key, is [ErrKey] from Open, which then
// changes nothing. It protects the files at rest (a disk, a backup copy), not the
// running host; sizes, counts and ids stay visible. docs/operations.md,
// "Encryption at rest", has the threat model and the key management.
//
// # How it works
//
// A put transaction encodes its events in memory (spilling them to the log,
// not synced, beyond min(4 MiB, MaxFileSize/4)) and at commit writes the put
// records and a commit record to one data dir's log in one write, fsyncs
// (concurrent commits share fsyncs), and appends the events' pointers
// (fileID<<32 | offset) to the tail of the event queue. A take removes the
// head pointer, reads the event from its log file and holds it in flight;
// its commit writes one take record listing the pointers and a commit
// record, and fsyncs (with Config.TakeSyncDelay it returns once written:
// the next fsync of its file, a put commit's or a checkpoint's, or a timer
// within that delay makes it durable; takesync.go). Checkpoints (every
// CheckpointInterval when something was written, on Close, and on demand
// with [FileChannel.Checkpoint]) persist the queue and the in-flight transactions as of one write-order
// id; Open loads the last checkpoint and replays only the log records
// written after it. Log files that hold nothing needed are deleted after
// each checkpoint.
//
// # Crash safety
//
// After a process kill or a power loss, Open recovers every put whose Commit
// returned nil and no event whose take Commit returned nil; events taken by
// transactions that had not committed come back at the head. A Commit that
// returned an error has an unknown outcome. Open cuts a log file's torn tail
// (keeping the bytes in a .corrupt file), skips damaged records (counted in
// Stats), and falls back from a damaged checkpoint to the backup or a full
// replay. With NoSync, a killed process still loses nothing, but a power
// loss can lose commits made since their log file's last fsync. With
// TakeSyncDelay, a power loss can undo the take commits of the last
// TakeSyncDelay: their events come back (delivered again, never lost).
//
// # Offline tools
//
// On a closed channel (each takes every directory's lock, so they fail with
// ErrLocked while it is open): [Verify] checks the files and lists every
// inconsistency; [Repair] overwrites damaged log regions with padding in
// place (no record moves), rewrites damaged headers, cuts torn tails and
// removes unfinished log files, keeping every byte it removes in a .corrupt
// file, then rebuilds the checkpoint; [Rebuild] replaces the checkpoint with
// one made by a full replay of the logs. replay.ListEvents lists the queued
// events read-only. The fcreplay command (replay/cmd/fcreplay) does all of
// this from a shell.
//
// # Concurrency
//
// FileChannel is safe for concurrent use; a Transaction belongs to one
// goroutine. A Transaction call made while another call on the same
// transaction is in progress returns [ErrConcurrentUse] and does nothing
// (a cheap check, not a guarantee: calls from two goroutines that do not
// overlap in time go undetected, and they are still a mistake). Puts and
// takes go on while a checkpoint runs. Close waits for a checkpoint in
// progress; every call after Close returns ErrClosed (Len, Cap and Stats
// answer with what the channel held when it closed).
//
// # More
//
// docs/operations.md: every option and its Flume equivalent, what Open and
// Close do, recovery, disk space, metrics, sizing, tuning and alerts.
// docs/crash-safety.md: every crash state and how recovery handles it.
// docs/format.md: the on-disk formats. docs/benchmarks.md: measured
// throughput, latency, replay time and memory. docs/architecture.md: how the
// code works, for those who change it.
package channel

// For maintainers (docs/architecture.md has the whole picture and every
// nesting): the locks, always taken in this order:
//
//	groupMu    serialises AddGroup and RemoveGroup
//	ckptMu     serialises checkpoints
//	commitMu   shared by every log write until its effect is in the queue;
//	           exclusive while a checkpoint captures its snapshot, and in Close
//	orderMu    per group with OrderKey (groupState.orderMu, an RWMutex):
//	           shared by a Take's pop and key claim by key tag; exclusive
//	           for a pop, read and claim of an event whose key tag is
//	           unknown, a take transaction's end, a take that
//	           leaves it (untake, dropKeyTake) and may free its key; a
//	           checkpoint's capture (every keyed group's)
//	queueMu    each group's queue (and the checkpoint slots under it), its
//	           in-flight takes, the in-flight puts
//
// The deduplication window's locks (dedup.go) are never nested with
// queueMu: dedupWindow.fileMu (serialises the writes of its snapshot file;
// taken under ckptMu by a checkpoint, under the set's gcMu before a log
// file deletion), then dedupWindow.mu (dedupMu: the ids; a leaf, taken
// under commitMu shared by put commits, by fileMu to copy them, and alone
// by the window's trimmer goroutine, dedupTrimLoop, a batch of 64 ids at a
// time).
//
// and inside the log set (logfile.Set), after commitMu and never nested
// with queueMu:
//
//	dir.mu          serialises appends (and rolls) to one data dir's log
//	Set.mu          the set's files (their sizes and bad headers)
//	readerCache.mu  the open readers (a leaf, taken under Set.mu by Reader)
//	Set.depMu       the commit dependencies between files
//
// The delivery journal's lock (checkpoint.Journal.mu) is a leaf taken under
// commitMu, never under queueMu; the set's other locks (layState.mu,
// layouter.mu, Reader.blkMu, dir.pendMu: the put appends waiting to be
// merged into one write) are leaves.
//
// Commit fsyncs happen outside the set's locks and queueMu (a roll fsyncs
// under dir.mu: the new file's header and directory, the old file); a
// checkpoint writes and syncs its files under ckptMu only. Nothing under
// queueMu writes, syncs or logs. Every unlock of ckptMu, commitMu and
// queueMu (and of the set's locks around I/O or the logger) is deferred,
// but in the one function architecture.md §6 names (TestDocLockRules
// checks), so that a panic (the user's logger, a misused Transaction)
// leaves no lock held. Close releases the files holding ckptMu, commitMu
// and queueMu (released).
