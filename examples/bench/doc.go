// Command bench measures filechannel side by side with the disk it runs on
// and with two peers (go-diskqueue v1.1.0, goleveldb v1.0.0), in one process,
// one measurement after another on the same disk, and checks the targets of
// issue 5, of Performance II and of Performance III (issue 33) and the
// later issues' (targets.go) as ratios between numbers of the same run.
//
//	cd examples/bench && go run . -quick            # < 1 minute, smaller sizes
//	cd examples/bench && go run . -json r.json -svg ../../docs/benchmarks-throughput.svg
//
// It is a nested module (its own go.mod) so that its peer dependencies stay
// out of filechannel's go.mod; docs/benchmarks.md explains the method and
// shows a run.
//
// # What it measures
//
//   - disk: write+fdatasync of batch × 1 KiB appended to a file (batches
//     1/10/100/1000; the append baseline), pwrite of batch × 1 KiB into a
//     file written and fsynced earlier, then fdatasync (batches 10/100/1000
//     beside the puts, 80 beside the producers; the overwrite baseline:
//     no size or block allocation to make durable), and a plain sequential
//     read of the channel's log files, from the page cache and after
//     posix_fadvise(DONTNEED).
//   - filechannel (channel package, default durable config): put commits at
//     batch 1/10/100/1000; 1, 2, 4 and 8 producers at batch 10; take commits
//     at batch 100, from the page cache and (cold takes, cold.go) from log
//     files dropped from it, beside a plain read of the same bytes dropped
//     the same way; Open after a clean Close (reopen), after a SIGKILL
//     (crash replay, in a child process), and without a checkpoint (full
//     replay); p50/p99/max put commit latency with and without checkpoints
//     running back to back, interleaved; resident memory with a large
//     backlog, with the unnamed group and with 4 named groups (in child
//     processes); allocations per put and per take.
//   - many small committers (committers.go): 64 goroutines each committing
//     one 1 KiB event at a time (default durable config), every commit
//     timed, against the overwrite baseline at batch 64 (a perfect merge
//     of their commits), every fdatasync timed; with the commits one
//     channel fsync covered (its fsync_duration_seconds count), the share
//     of the time an fsync was in flight, and the CPU per commit; and the
//     same committers in the steady state (a consumer beside them, log
//     files recycled).
//   - the steady state (steady.go): one producer (batch 100) and one
//     consumer (batch 100) at a constant backlog of a few small log files,
//     with Config.RecycleLogFiles on and off and the take commits durable
//     or with TakeSyncDelay, against the overwrite baseline at batch 100,
//     with each channel's fsyncs and put commits (count, mean).
//   - the fsyncs a drain adds (drainfsyncs.go): 4 producers committing
//     batches of 10, alone and with a drain taking batches of 100 beside
//     them, the data log files' fsyncs counted, by default and with
//     TakeSyncDelay.
//   - filechannel consumer groups (groups.go): put commits at batch 100 to
//     channels with 1, 2 and 4 groups and to a fan-out of 2 channels, with
//     the data-dir bytes per event; take commits of 4 groups draining at
//     once against one alone, with the CPU time they used; checkpoint time
//     and size with 1, 2 and 4 groups; clean reopen with 1 and 4 groups.
//   - dead letters (deadletter.go): take commits at batch 1, 10 and 100 of
//     a group with MaxDeliveries 16 (a delivery-journal entry stored in
//     every Take) against the same group without, with the CPU time they
//     used.
//   - retry delays (retry.go): take commits at batch 100 of a group with
//     RetryDelays while 100,000 of its events wait for their delay (an
//     hour away), against the same group with none waiting (target: >=
//     0.9 of its rate).
//   - order per key (orderkey.go): take commits at batch 100 by 4 takers
//     (goroutines, each committing its own take transactions) from a group
//     with OrderKey over 1,000 keys (header k, the keys in turn) against
//     the same group without OrderKey (target: >= 0.8), and from a keyed
//     group of 1,000,000 queued events (200,000 with -quick) where a stuck
//     transaction holds the key of every 10th: the takers park those and
//     take all the others (target: >= 0.8 of the keyed group's rate), all
//     three interleaved; 1 KiB events.
//   - retention (retention.go): put commits of batch 100 to a channel with
//     Retention{MaxAge: 1h} that retains the log files of a fill it took,
//     against one without.
//   - resets (reset.go): on a channel with Retention{MaxAge: 24h} whose
//     group "r" took a fill of 1 KiB events (1 GiB in full mode, about 16
//     log files, retained), ResetGroup("r", AtTime(t)) with t just before
//     the fill's last commit against a plain read of one full log file,
//     and ResetGroup("r", Earliest()) against a plain read of all the log
//     files, each interleaved, from the page cache and dropped from it
//     (with the bytes read from the disk, /proc/self/io); and the heap one
//     reset to Earliest allocates and peaks at, at GOGC 100 and 10.
//   - filters (filters.go): put commits of batch 100 to a channel with 4
//     groups each filtering on a tag header (~25% each) against one with 4
//     unfiltered groups; take commits of batch 100 draining a group whose
//     filter matches ~10% of a fill and an unfiltered group of the same
//     channel, with the time and CPU per event put.
//   - Kafka (kafka.go): on one in-process kfake cluster of 3 brokers, put
//     commits of batch 100 through channel/kafka against raw franz-go
//     transactions of the same batches (with no producer linger on both),
//     and take commits of batch 100 against a
//     raw consumer-group client's poll and offset commit, each draining
//     the same backlog in its own group.
//   - go-diskqueue: puts with SyncEvery=1 and SyncEvery=100, reads.
//   - goleveldb: sync write batches of 100, reads by iterating.
//
// The measurements a target compares run interleaved (interleave.go): each
// one's time budget is cut into rounds and the rounds take turns, so that
// other work on a shared machine weighs on both sides alike.
//
// # Files
//
// Everything goes in a fresh temporary directory under -dir, removed at the
// end (and each measurement's files as soon as it is done).
//
// # Processes
//
// The crash and memory measurements run in child processes: the harness
// starts its own binary again with FCBENCH_CHILD set (see child.go).
package main
