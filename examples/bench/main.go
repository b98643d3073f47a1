package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

// sizes sets how long and how big each measurement is.
type sizes struct {
	mode       string
	dur        time.Duration // time budget of one throughput measurement
	rounds     int           // interleaved rounds it is split into
	maxEvents  int64         // cap on the events of one throughput measurement
	overwrite  int64         // bytes of the file each overwrite baseline writes first, then overwrites in turn
	takeEvents int           // events queued, then taken (filechannel and peers)
	coldEvents int           // events queued, then taken from log files dropped from the page cache
	replay     []int         // events in the log for reopen and full replay
	crash      []crashCase   // events before and after the last checkpoint
	stallFill  int           // events queued before the checkpoint stall runs
	stallTxs   int           // put commits (batch 100) per stall run
	memCap     int           // capacity of the memory measurement
	memBacklog int64         // bytes queued by the memory measurement
	ckptRounds int           // consumer groups: checkpoints timed per channel
	ckptChurn  int           // consumer groups: events put and taken before each
	groupFill  int           // consumer groups: events in every group for the clean reopen
	kafkaTakes int           // Kafka: events each take side drains (kafka.go)
	resetFill  int           // resets: events of 1 KiB in the retained logs they read (reset.go)
	orderFill  int           // OrderKey: events queued with one key stuck (orderkey.go)
	only       string        // run only the steps whose name contains it
}

type crashCase struct{ before, after int }

func quickSizes() sizes {
	return sizes{
		mode: "quick", dur: 500 * time.Millisecond, rounds: 2, maxEvents: 300_000, takeEvents: 200_000,
		overwrite: 32 << 20, coldEvents: 1 << 18,
		replay:    []int{250_000, 1_000_000},
		crash:     []crashCase{{100_000, 20_000}, {400_000, 20_000}, {400_000, 80_000}},
		stallFill: 200_000, stallTxs: 300,
		memCap: 1_000_000, memBacklog: 1 << 30,
		ckptRounds: 5, ckptChurn: 5_000, groupFill: 250_000,
		kafkaTakes: 200_000, resetFill: 1 << 16, orderFill: 200_000,
	}
}

func fullSizes() sizes {
	return sizes{
		mode: "full", dur: 3 * time.Second, rounds: 5, maxEvents: 900_000, takeEvents: 500_000,
		overwrite: 128 << 20, coldEvents: 1 << 20,
		replay:    []int{1_000_000, 4_000_000},
		crash:     []crashCase{{200_000, 50_000}, {800_000, 50_000}, {800_000, 200_000}},
		stallFill: 400_000, stallTxs: 2000,
		memCap: 1_000_000, memBacklog: 4 << 30,
		ckptRounds: 15, ckptChurn: 10_000, groupFill: 1_000_000,
		kafkaTakes: 1_000_000, resetFill: 1 << 20, orderFill: 1_000_000,
	}
}

func main() {
	if isChild() {
		runChild()
		return
	}
	quick := flag.Bool("quick", false, "small sizes (under a minute)")
	dir := flag.String("dir", os.TempDir(), "directory to create the temporary benchmark directory in")
	jsonPath := flag.String("json", "", "write every number to this JSON file")
	svgPath := flag.String("svg", "", "write a throughput chart to this SVG file")
	backlog := flag.Int64("backlog-mib", 0, "bytes queued by the memory measurement, in MiB (0 = 1024 with -quick, 4096 without)")
	only := flag.String("only", "", "run only the steps whose name contains this text (e.g. \"replay\"); targets of the others show as not measured")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	mutexProfile := flag.String("mutexprofile", "", "write a mutex contention profile of the run to this file")
	blockProfile := flag.String("blockprofile", "", "write a blocking profile of the run (every blocking event) to this file")
	flag.Parse()
	sz := fullSizes()
	if *quick {
		sz = quickSizes()
	}
	if *backlog > 0 {
		sz.memBacklog = *backlog << 20
	}
	sz.only = *only
	err := withCPUProfile(*cpuProfile, func() error {
		return withProfiles(*mutexProfile, *blockProfile, func() error { return run(sz, *dir, *jsonPath, *svgPath, os.Stdout, os.Stderr) })
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// withCPUProfile runs fn, writing a CPU profile of it to path if path is
// not empty.
func withCPUProfile(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return errors.Join(err, f.Close())
	}
	err = fn()
	pprof.StopCPUProfile()
	return errors.Join(err, f.Close())
}

// withProfiles runs fn, recording every mutex contention and blocking
// event, and writes their profiles to mutexPath and blockPath (each if not
// empty).
func withProfiles(mutexPath, blockPath string, fn func() error) error {
	if mutexPath != "" {
		runtime.SetMutexProfileFraction(1)
	}
	if blockPath != "" {
		runtime.SetBlockProfileRate(1)
	}
	err := fn()
	for _, p := range []struct{ name, path string }{{"mutex", mutexPath}, {"block", blockPath}} {
		if p.path == "" {
			continue
		}
		f, ferr := os.Create(p.path)
		if ferr == nil {
			ferr = errors.Join(pprof.Lookup(p.name).WriteTo(f, 0), f.Close())
		}
		err = errors.Join(err, ferr)
	}
	return err
}

// run performs every measurement, prints the table to out and progress to
// progress, and writes the JSON and SVG files if their paths are set.
func run(sz sizes, parent, jsonPath, svgPath string, out, progress io.Writer) error {
	root, err := os.MkdirTemp(parent, "fcbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	b := &bench{sz: sz, root: root, log: progress, body: make([]byte, 1024), pendingAllocs: map[string]allocCount{}}
	b.orderBody = b.body[:orderBodySize]
	for i := range b.body {
		b.body[i] = byte(i * 7)
	}
	b.rep.Mode = sz.mode
	b.rep.Env = environment(root)
	start := time.Now()
	steps := []struct {
		name string
		fn   func() error
	}{
		{"puts: disk baseline, filechannel, peers, interleaved", b.puts},
		{"filechannel group commit: producers, interleaved", b.producers},
		{"filechannel group commit: 64 committers of one event each and overwrite+fdatasync batch 64, interleaved", b.manyCommitters},
		{"takes: filechannel and go-diskqueue reads, interleaved", b.takes},
		{"cold takes: filechannel drain and plain read of the log, dropped from the page cache, interleaved", b.coldTakes},
		{"drain fsyncs: 4 producers (batch 10) alone and with a drain (batch 100) beside them, fsyncs counted, TakeSyncDelay off and 10 ms", b.drainFsyncs},
		{"filechannel reopen and full replay", b.fcReplay},
		{"filechannel crash replay", b.fcCrash},
		{"filechannel checkpoint stall", b.fcStall},
		{"filechannel memory", b.fcMemory},
		{"goleveldb reads", b.leveldb},
		{"groups: put commits with 1, 2, 4 groups and a 2-channel fan-out, interleaved", b.groupPuts},
		{"groups: takes of 4 groups at once and of 1 alone, interleaved", b.groupTakes},
		{"groups: take with MaxDeliveries 16 and without, batch 1, 10, 100, interleaved", b.groupDeliveryTakes},
		{"retry: take commits with 100,000 events waiting for their retry delay and with none, batch 100, interleaved", b.retryTakes},
		{"orderkey: take commits of 4 takers, OrderKey over 1,000 keys, without, and with one key stuck, batch 100, interleaved", b.orderTakes},
		{"groups: checkpoints with 1, 2, 4 groups", b.groupCheckpoints},
		{"groups: clean reopen with 1 and 4 groups", b.groupReopens},
		{"retention: put commits with Retention{MaxAge: 1h} and without, interleaved", b.retentionPuts},
		{"dedup: put commits with Dedup (1M ids in the window) and without, interleaved; the window's heap per id", b.dedupPuts},
		{"reset: ResetGroup to a time near the end and to Earliest, and plain reads of the log, from the page cache and dropped, interleaved; a reset's heap", b.resets},
		{"filters: put commits, 4 groups each filtering on a header and 4 unfiltered groups, interleaved", b.filterPuts},
		{"filters: takes of a group whose filter matches 10% and of an unfiltered group, per event put, interleaved", b.filterTakes},
		{"kafka: put and take commits of kafka.Channel and of raw franz-go on a kfake cluster, interleaved", b.kafkaBench},
		{"steady: 1 producer (batch 100, durable) and 1 consumer (batch 100) at a constant backlog, RecycleLogFiles on and off, and overwrite+fdatasync batch 100, interleaved", b.steady},
	}
	for _, s := range steps {
		if sz.only != "" && !strings.Contains(s.name, sz.only) {
			continue
		}
		b.logf("== %s", s.name)
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	b.rep.Seconds = time.Since(start).Seconds()
	b.rep.Targets = targets(&b.rep, sz)
	printReport(out, &b.rep)
	if jsonPath != "" {
		if err := writeJSON(jsonPath, &b.rep); err != nil {
			return err
		}
	}
	if svgPath != "" {
		if err := os.WriteFile(svgPath, []byte(chart(&b.rep)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// bench carries the state shared by the measurements.
type bench struct {
	sz   sizes
	root string
	log  io.Writer
	body []byte // the 1 KiB event body
	// orderBody is the OrderKey measurement's event body (orderkey.go).
	orderBody []byte
	rep       Report

	pendingAllocs map[string]allocCount // by op, until reportAllocs
}

// allocCount accumulates the allocations of one op over several rounds.
type allocCount struct {
	Allocs
	mallocs, bytes uint64
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, format+"\n", args...)
}
