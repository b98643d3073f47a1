package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain lets the test binary serve as the harness's child process.
func TestMain(m *testing.M) {
	if isChild() {
		runChild()
		return
	}
	// The tests fail if a goroutine outlives them. goleveldb's DB.Close
	// does not wait for its mpoolDrain goroutine, which lingers up to a
	// second after Close (leveldb/db_state.go, v1.0.0): a third-party
	// goroutine that ends on its own.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mpoolDrain"))
}

// tinySizes runs every measurement of the harness on a few thousand events.
func tinySizes() sizes {
	return sizes{
		mode: "tiny", dur: 20 * time.Millisecond, rounds: 2, maxEvents: 2000, takeEvents: 2000,
		overwrite: 256 << 10, coldEvents: 2000,
		replay:    []int{1000, 4000},
		crash:     []crashCase{{1000, 200}, {2000, 400}},
		stallFill: 1000, stallTxs: 20,
		memCap: 4000, memBacklog: 4000 << 10,
		ckptRounds: 2, ckptChurn: 200, groupFill: 2000,
		kafkaTakes: 1000, resetFill: 2000, orderFill: 2000,
	}
}

// TestHarness runs the whole harness at tiny sizes and checks that it
// reports every measurement, every target and both output files.
func TestHarness(t *testing.T) {
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	var out, progress bytes.Buffer
	if err := run(tinySizes(), dir, jsonPath, svgPath, &out, &progress); err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	text := out.String()
	for _, want := range []string{
		"write+fdatasync", "put commit", "take commit", "clean reopen", "crash replay", "full replay",
		"with Checkpoint() in a loop", "VmRSS", "SyncEvery=1", "goleveldb",
		"puts batch 100 / write+fdatasync batch 100", "group commit", "takes batch 100 / go-diskqueue reads",
		"crash replay reads only records after the checkpoint", "full replay is linear", "memory: VmRSS",
		"groups: puts batch 100, 4 groups / 1 group", "groups: data-dir bytes per event put,",
		"groups: data-dir bytes per event put and taken",
		"groups: 2 groups against the fan-out", "groups: takes batch 100, 4 groups at once",
		"groups: checkpoint,", "groups: clean reopen, 4 groups", "consumer groups: checkpoints",
		"dead letters: take commits batch 100, MaxDeliveries 16 / without", "dead letters: take commits batch 1,",
		"retry delays: take commits batch 100, 100000 waiting / none", "g0, 100000 waiting: take commit",
		"retention: put commits batch 100, Retention{MaxAge: 1h} / without", "put commit, Retention{MaxAge: 1h}",
		"MaxDeliveries 16: take commit", "group take, MaxDeliveries 16 (batch 100)",
		"kafka.Channel: put commit", "raw transactional produce", "kafka.Channel: take commit", "raw poll + offset commit",
		"kafka: put commits batch 100, kafka.Channel / raw franz-go transactions",
		"kafka: take commits batch 100, kafka.Channel / raw franz-go poll + offset commit",
		// Performance II: the overwrite baseline, the cold takes, the
		// checkpoint stall and the memory of 4 groups.
		"pwrite+fdatasync, overwrite", "take commit, log dropped from the page cache", "read logs, dropped, beside the cold takes",
		"puts batch 10 / write+fdatasync batch 10", "puts batch 10 / overwrite+fdatasync batch 10",
		"puts batch 100 / overwrite+fdatasync batch 100", "puts batch 1000 / overwrite+fdatasync batch 1000",
		"group commit: 8 producers batch 10 / overwrite+fdatasync batch 80",
		// Issue 33, target 2: many small committers.
		"many committers: 64 committing one event each / overwrite+fdatasync batch 64", "put commit, 64 committers",
		"64 committers, one event per commit: commit p50", "commits per channel fsync",
		"many committers in the steady state (a consumer, RecycleLogFiles 16, TakeSyncDelay) / overwrite+fdatasync batch 64",
		"64 committers (steady state: beside a consumer, files recycled), one event per commit",
		"cold takes: drain batch 100 / plain read of the same log",
		"take commits: fsyncs of 4 producers (batch 10) with a drain (batch 100) beside them / alone",
		"take commits: fsyncs of 4 producers (batch 10) with a drain (batch 100) beside them / alone, TakeSyncDelay 10 ms",
		"cold takes: drain batch 100, TakeSyncDelay 100ms / plain read of the same log", "take commit, TakeSyncDelay 100ms",
		"checkpoint stall: p99 put commit (batch 100), checkpoints in a loop / none",
		"checkpoint stall: max put commit (batch 100), checkpoints in a loop",
		"memory: VmRSS, 4 groups x capacity", "4 groups, each holding every event",
		// Issue 33, target 4: the cold full replay, interleaved with the
		// plain read, and the rows kept from Performance II.
		"cold full replay 1000 events / plain read of the same log, both dropped from the page cache, interleaved [issue 33 target 4]",
		"cold full replay 4000 events / plain read", "full replay, log dropped from the page cache",
		"read logs, dropped, beside the cold full replay", "dropped, interleaved",
		"full replay 1000 events (page cache) / plain read", "checkpoint stall: p99 put commit (batch 100), checkpoints in a loop / none [issue 33 target 4]",
		"4 groups x capacity 4000, backlog up to 4 MiB [issue 33 target 4]",
		// Issue 30: resets over retained logs.
		"ResetGroup(Earliest()), dropped", "ResetGroup(AtTime(the fill's last commit)), page-cache",
		"reset: ResetGroup(Earliest) / plain read of the same log bytes (page-cache)",
		"reset: ResetGroup(Earliest) / plain read of the same log bytes (dropped)",
		"reset: ResetGroup(AtTime near the end) / plain read of one log file (dropped)",
		"reset: ResetGroup(AtTime near the end), bytes read from the disk (dropped)",
		"reset: heap a ResetGroup(Earliest) adds, per event queued, GOGC 10",
		"reset: heap a ResetGroup(Earliest) adds, per event queued, GOGC 100",
		// Issue 32: OrderKey.
		"orderkey: take commits batch 100, 4 takers, OrderKey over 1000 keys / without",
		"orderkey: take commits batch 100, 4 takers, one key stuck (every 10th event) / none stuck",
		"g0, OrderKey, one key held by a stuck transaction (200 of 2000 queued): take commit, 4 takers",
		// Issue 33, target 1: the steady state.
		"steady state, puts batch 100 beside a consumer (batch 100): RecycleLogFiles 16, TakeSyncDelay / overwrite+fdatasync batch 100",
		"steady state, puts batch 100 beside a consumer (batch 100): RecycleLogFiles 16, durable takes / off (files laid out with zeros)",
		"put commit beside a consumer, RecycleLogFiles 16, TakeSyncDelay 100ms",
		// Issue 31: filters.
		"filters: puts batch 100, 4 groups each filtering on a header (~25% each) / 4 unfiltered groups",
		"filters: takers' time per event put, unfiltered group / group whose filter matches 10%",
		"filtering on headers[\"tag\"] == \"t<i>\": put commit", "matches ~10%: take commit",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	// A whole run measures every target: none says "not measured".
	if strings.Contains(text, "not measured") {
		t.Errorf("a target is not measured:\n%s", text)
	}
	for _, p := range []string{jsonPath, svgPath} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("the harness left %d entries in its directory, want only the two output files", len(entries))
	}
	if testing.Verbose() {
		t.Log("\n" + text)
	}
}
