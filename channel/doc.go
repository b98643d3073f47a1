// Package channel is filechannel's public API: a durable, embeddable,
// Flume-style file channel between a source and a sink inside one process.
//
// # Using it
//
//	c, err := channel.Open(channel.Config{
//		CheckpointDir: "/var/lib/app/fc/checkpoint",
//		DataDirs:      []string{"/var/lib/app/fc/data"},
//	})
//	...
//	tx, _ := c.Begin()           // a put transaction
//	tx.Put(channel.Event{Body: b})
//	err = tx.Commit()            // durable (fsync'd) when it returns
//
//	tx, _ = c.Begin()            // a take transaction
//	ev, ok, err := tx.Take()     // ok=false: empty right now
//	...deliver ev...
//	tx.Commit()                  // or tx.Rollback(): ev returns to the head
//
// Delivery is at-least-once: an event is gone only once the take that
// returned it commits. Events come out in commit order.
//
// # Files
//
// In CheckpointDir: checkpoint (the mmap'd ring of event pointers),
// checkpoint.meta, inflightputs, inflighttakes, in_use.lock. In each data
// dir: log-NNNNNNNNNN data log files, in_use.lock, and the .corrupt files
// holding bytes cut from a torn tail by Open or removed by Repair. In
// BackupCheckpointDir (optional): a copy of the checkpoint files and
// backupComplete. docs/format.md specifies every format.
//
// # How it works
//
// A put transaction encodes its events in memory (spilling to the log, not
// synced, beyond 1 MiB) and at commit writes the put records and a commit
// record to one data dir's log in one write, fsyncs (concurrent commits
// share fsyncs), and appends the events' pointers (fileID<<32 | offset) to
// the tail of the event queue. A take removes the head pointer, reads the
// event from its log file and holds it in flight; its commit writes one take
// record listing the pointers and a commit record, and fsyncs. Checkpoints
// (every CheckpointInterval, on Close, and on demand) persist the queue and
// the in-flight transactions as of one write-order id; Open loads the last
// checkpoint and replays only the log records written after it. Log files
// that hold nothing needed are deleted after each checkpoint.
//
// # Crash safety
//
// After a process kill or a power loss, Open recovers every put whose Commit
// returned nil and no event whose take Commit returned nil; events taken by
// transactions that had not committed come back at the head. A Commit that
// returned an error has an unknown outcome. Open cuts a log file's torn tail
// (keeping the bytes in a .corrupt file), skips damaged records (counted in
// Stats), and falls back from a damaged checkpoint to the backup or a full
// replay.
//
// # Offline tools
//
// On a closed channel (each takes every directory's lock, so they fail with
// ErrLocked while it is open): Verify checks the files and lists every
// inconsistency; Repair overwrites damaged log regions with padding in place
// (no record moves), rewrites damaged headers, cuts torn tails and removes
// unfinished log files, keeping every byte it removes in a .corrupt file,
// then rebuilds the checkpoint; Rebuild replaces the checkpoint with one
// made by a full replay of the logs. replay.Events lists the queued events
// read-only. docs/crash-safety.md lists
// every crash state, step by step, what recovery does with it, and how it is
// tested.
//
// # Concurrency and lock order
//
// FileChannel is safe for concurrent use; a Transaction belongs to one
// goroutine. Locks, always taken in this order:
//
//	ckptMu    serialises checkpoints
//	commitMu  shared by every log write until its effect is in the queue;
//	          exclusive only while a checkpoint captures its snapshot
//	dataDir.mu serialises appends (and rolls) to one data dir's log
//	queueMu   the event queue, in-flight sets, take bookkeeping
//	filesMu   the map of open log files
//
// fsyncs happen outside dataDir.mu and queueMu; a checkpoint writes its
// files outside commitMu and queueMu, so puts and takes continue while it
// runs.
package channel
