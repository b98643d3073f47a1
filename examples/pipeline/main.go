// Command pipeline is the main job of filechannel: a source that produces
// numbered events, a durable file channel, and a sink that consumes them,
// with progress and throughput printed every second.
//
//	go run ./examples/pipeline                 # runs until Ctrl-C, data in ./fcdata
//	go run ./examples/pipeline -events 200000  # stops after 200k events are delivered
//	go run ./examples/pipeline -dir /tmp/p -capacity 2000 -sink-delay 20ms  # a slow sink: the source waits
//	go run ./examples/pipeline -min-free 16MiB -max-file-size 4000000  # on a small disk (a 64 MB tmpfs)
//	go run ./examples/pipeline -kafka-fake -events 100000  # the same over Kafka: an in-process fake broker
//	go run ./examples/pipeline -kafka host1:9092,host2:9092 -topic events  # over a real Kafka cluster
//
// The source and the sink are written once, over channel.Tx: the same code
// drives a FileChannel or a channel on Kafka (package channel/kafka). On
// Kafka, the channel's events live in the topic (-topic, which must exist
// on a real cluster; -kafka-fake creates it, with 3 partitions on 3
// brokers, and loses it at exit). Every event carries the header
// source=pipeline, which the channel's KeyHeader makes the record key, so
// they all go to one partition, in order, and the sink's sequence check
// holds (Kafka orders per partition only). The sink is the consumer group
// "pipeline-sink". The source's and the sink's positions are kept in -dir
// as on a FileChannel (under kafka-<topic>/ for a real cluster; not kept
// for the fake one, which starts empty every run, as its last line says).
//
// Every second it prints a line like
//
//	progress: put     10500 (    4297 ev/s, 4.4 MB/s)  delivered      8500 (    4297 ev/s)  queued    1900/2000 fill 100%  log 11.3 MB  source waited 86x 1.8s (blocked 90%)  gaps 0  redelivered 0
//
// "queued" is the channel's depth out of its capacity and "fill" the share
// of the capacity held (queued plus taken or put and not yet committed);
// "log" is the size of the data log files on disk, which grows until a
// checkpoint lets the channel delete files whose events are all taken
// (every 30s). "source waited" counts the source's Puts that had to wait
// for room because the channel was full, the time they waited, and the
// share of the last second the source spent waiting: a source blocked most
// of the time means the sink is the bottleneck. The channel counts these
// waits itself (Stats.PutWaits and PutWaitTime, the metrics
// filechannel_put_waits_total and filechannel_put_wait_seconds_total), a
// wait still in progress included, so a source stuck behind a stopped
// sink shows as blocked at once. The last line ("total") gives the same
// over the whole run.
//
// Stop it with Ctrl-C (or kill it) and start it again: the sink resumes
// where it stopped, and no committed event is lost. The sink checks this:
// every event carries a sequence number, and the sink counts re-deliveries
// (possible after a crash: delivery is at-least-once). On the file
// channel the source's side cannot cause them: a source killed between its
// commit and saving its position puts that batch again, and the channel's
// idempotent puts (Config.Dedup on the "seq" header, which holds the
// sequence number) drop it, so a kill -9 loop shows 0 events put twice.
// "redelivered" then counts the sink's side only: events a sink took and
// rolled back, or whose take commit a kill -9 prevented (they are taken
// again after the restart), and events committed by a take whose position
// the sink had not saved yet. On Kafka (-backend kafka) there is no
// deduplication: a batch put again shows there too. A gap (a number
// above the one expected: lost events) stops the run at once with an
// error that names the fcreplay verify command to run; the sink rolls the
// batch back, so the channel still holds it, and its position stays.
// The source checks its context before every Put: it stops within a Put
// of Ctrl-C.
//
// # Disk space
//
// The channel keeps -min-free (default 500 MiB, the channel's
// MinimumRequiredSpace; 0 = none) free on the data dir's disk, and
// refuses puts that would go below it. The source then rolls its batch
// back, waits 0.5s, asks for a checkpoint (which deletes the log files
// whose events are all taken, never the one being written) and tries
// again, for as long as it takes, while the sink drains the channel
// (takes are never refused for space; minfree.Waiter). The first refusal
// is explained; the progress line adds "no space 12x 5.1s (64%)":
// the batches refused, the time spent waiting, and its share of the last
// second. So the defaults need 500 MiB free, and room for a few log files
// of 64 MiB (-max-file-size) to run at full speed; on a small disk, lower
// -min-free, and -max-file-size so that the log is several files, of which
// the drained ones can go (a 64 MB tmpfs runs at about 50 MB/s with
// -min-free 16MiB -max-file-size 4000000).
//
// The sink blocks in TakeContext for the first event of each batch and
// fills the rest of the batch with non-blocking Takes, so an idle pipeline
// does not poll.
//
// While it runs, an HTTP server on -metrics-addr (default 127.0.0.1:9464;
// empty turns it off) serves the channel's Prometheus metrics, with the Go
// runtime's and the process's, at /metrics, and the channel's Health at
// /healthz (200 "ok", or 503 and the error). It listens before the
// channel opens: a second pipeline on the same address stops at once,
// its error pointing at -metrics-addr, before it touches its -dir.
//
//	curl -s localhost:9464/metrics | grep '^filechannel_queue_events'
//	curl -s localhost:9464/healthz
//
// On SIGINT or SIGTERM the source and the sink stop at a transaction
// boundary, then the HTTP server shuts down (waiting up to 5s for requests
// in progress), then the channel closes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/examples/internal/counter"
	"github.com/flumego/filechannel/examples/internal/minfree"
	"github.com/flumego/filechannel/examples/internal/progress"
	"github.com/flumego/filechannel/examples/internal/syncwriter"
)

// shutdownTimeout bounds how long the HTTP server waits for requests in
// progress when the pipeline stops.
const shutdownTimeout = 5 * time.Second

// defaultCapacity is the channel's capacity without -capacity.
const defaultCapacity = 200_000

// defaultMaxFileSize is a data log file's size without -max-file-size.
const defaultMaxFileSize = 64 << 20

type options struct {
	dir      string
	events   int64         // stop after this many delivered events (0 = run until stopped)
	duration time.Duration // stop after this long (0 = run until stopped)
	batch    int
	size     int
	rate     int // events per second from the source (0 = as fast as possible)
	capacity int // events the channel holds (0 = 200,000)
	// minFree is the free space the channel keeps on the data dir's disk
	// (MinimumRequiredSpace): the source waits below it. 0 = no minimum
	// (the flag's default is minfree.Default, 500 MiB).
	minFree     minfree.Bytes
	maxFileSize int64 // a data log file's size (0 = 64 MiB)
	// sinkDelay is the sink's pause per batch: a slow destination.
	sinkDelay time.Duration
	verbose   bool
	// metricsAddr is where /metrics and /healthz are served ("" = no
	// server; port 0 = any free port).
	metricsAddr string
	// onListen, if set, is called with the server's address once it
	// listens (tests use it to find a port 0 server).
	onListen func(addr string)
	// kafka are the brokers of a Kafka cluster to run on instead of a
	// FileChannel ("" = the file channel); kafkaFake runs on an in-process
	// fake cluster. topic is the Kafka topic.
	kafka     string
	kafkaFake bool
	topic     string
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "fcdata", "directory for the channel's checkpoint and data files")
	flag.Int64Var(&o.events, "events", 0, "stop after delivering this many events (0 = until Ctrl-C)")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long (0 = until Ctrl-C)")
	flag.IntVar(&o.batch, "batch", 100, "events per transaction")
	flag.IntVar(&o.size, "size", 1024, "event body size in bytes")
	flag.IntVar(&o.rate, "rate", 0, "source events per second (0 = unlimited)")
	flag.IntVar(&o.capacity, "capacity", defaultCapacity, "events the channel holds before the source has to wait")
	o.minFree = minfree.Default
	flag.Var(&o.minFree, "min-free", minfree.Usage+"; the source waits below it")
	flag.Int64Var(&o.maxFileSize, "max-file-size", defaultMaxFileSize, "size of a data log file in bytes; a checkpoint deletes a file once its events are all taken")
	flag.DurationVar(&o.sinkDelay, "sink-delay", 0, "the sink's pause per batch, a slow destination (0 = none)")
	flag.BoolVar(&o.verbose, "v", false, "log the channel's activity to stderr")
	flag.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:9464", "serve /metrics and /healthz on this address (empty = off)")
	flag.StringVar(&o.kafka, "kafka", "", "run on this Kafka cluster (comma-separated host:port) instead of a file channel")
	flag.BoolVar(&o.kafkaFake, "kafka-fake", false, "run on an in-process fake Kafka cluster (franz-go's kfake): no Kafka needed")
	flag.StringVar(&o.topic, "topic", "filechannel-pipeline", "the Kafka topic of -kafka and -kafka-fake")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}

// sinkState is the sink's own durable position: the highest sequence number
// it has delivered. A real sink would keep this in its destination.
type sinkState struct {
	path  string
	next  int64  // next sequence number expected
	check string // what a gap's error tells the operator to check
}

// withDefaults is o with its zero capacity and file size defaulted.
func (o options) withDefaults() options {
	if o.capacity == 0 {
		o.capacity = defaultCapacity
	}
	if o.maxFileSize == 0 {
		o.maxFileSize = defaultMaxFileSize
	}
	return o
}

func (o options) validate() error {
	switch {
	case o.batch <= 0:
		return fmt.Errorf("-batch %d: must be positive", o.batch)
	case o.size < 0:
		return fmt.Errorf("-size %d: must not be negative", o.size)
	case o.capacity < o.batch:
		return fmt.Errorf("-capacity %d: must hold at least one batch (%d)", o.capacity, o.batch)
	case o.sinkDelay < 0:
		return fmt.Errorf("-sink-delay %v: must not be negative", o.sinkDelay)
	case o.maxFileSize < 0:
		return fmt.Errorf("-max-file-size %d: must not be negative", o.maxFileSize)
	case o.kafka != "" && o.kafkaFake:
		return errors.New("-kafka and -kafka-fake: choose one")
	}
	return nil
}

func run(ctx context.Context, o options, w io.Writer) error {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return err
	}
	// Listen before anything opens: a second pipeline on the same port
	// stops here, before it opens (and locks) a channel. The server's
	// Shutdown closes ln; this Close is for the returns before it serves.
	ln, err := listenMetrics(o.metricsAddr)
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.Close()
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	out := syncwriter.New(w) // the progress lines and the source's messages
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	// A registry of our own, never the global one: the channel's metrics
	// (labelled channel_name="pipeline") plus the Go runtime's and the
	// process's.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.kafka != "" || o.kafkaFake {
		b, err := openKafka(o, logger, reg, out)
		if err != nil {
			return err
		}
		return runOn(ctx, o, out, reg, ln, b)
	}
	b, err := openFile(o, logger, reg)
	if err != nil {
		return err
	}
	return runOn(ctx, o, out, reg, ln, b)
}

// backend is what the pipeline runs on: a FileChannel or a channel on
// Kafka, through their transactions (T) and a few hooks.
type backend[T channel.Tx] struct {
	name      string                       // what the first line says it runs on
	begin     func() (T, error)            // the source's transactions
	sinkBegin func() (T, error)            // the sink's
	queued    func() int                   // events waiting at the start (-1: unknown)
	stats     func() (channel.Stats, bool) // the progress line's fill, log and waits (false: none)
	health    func() error                 // /healthz
	close     func() error
	// srcPath and sinkPath keep the source's and the sink's positions
	// ("" = not kept: the fake Kafka cluster starts empty every run).
	srcPath, sinkPath string
	// check is what a gap's error tells the operator to run or look at.
	check string
	// makeRoom, if set, deletes what the sink has drained from the disk
	// (FileChannel.Checkpoint): the source calls it while it waits for
	// disk space.
	makeRoom func() error
}

// fileConfig is the config of the durable file channel in o.dir.
func fileConfig(o options) channel.Config {
	return channel.Config{
		Name:                 "pipeline",
		CheckpointDir:        filepath.Join(o.dir, "checkpoint"),
		DataDirs:             []string{filepath.Join(o.dir, "data")},
		Capacity:             o.capacity,
		MaxFileSize:          o.maxFileSize,
		MinimumRequiredSpace: o.minFree.Config(),
		KeepAlive:            time.Second,
		// Idempotent puts: the source's batch put again after a crash
		// (its position is saved after the commit) is dropped.
		Dedup: channel.Dedup{Header: seqHeader},
	}
}

// seqHeader is the header holding an event's sequence number: the id
// Config.Dedup deduplicates puts by.
const seqHeader = "seq"

// openFile opens the durable file channel in o.dir.
func openFile(o options, logger *slog.Logger, reg *prometheus.Registry) (backend[*channel.Transaction], error) {
	cfg := fileConfig(o)
	cfg.Logger, cfg.Registerer = logger, reg
	ch, err := channel.Open(cfg)
	if err != nil {
		return backend[*channel.Transaction]{}, err
	}
	return backend[*channel.Transaction]{
		name:      o.dir,
		begin:     ch.Begin,
		sinkBegin: ch.Begin,
		queued:    ch.Len,
		stats:     func() (channel.Stats, bool) { return ch.Stats(), true },
		health:    ch.Health,
		close:     ch.Close,
		makeRoom:  ch.Checkpoint,
		srcPath:   filepath.Join(o.dir, "source.next"),
		sinkPath:  filepath.Join(o.dir, "sink.next"),
		check: fmt.Sprintf("check the channel's files with fcreplay verify --checkpoint-dir %s --data-dirs %s",
			cfg.CheckpointDir, cfg.DataDirs[0]),
	}, nil
}

// runOn runs the source and the sink on b until ctx ends, the sink has
// delivered o.events, or one of them fails, with a progress line every
// second. It serves the metrics on ln (nil = no server).
func runOn[T channel.Tx](ctx context.Context, o options, out io.Writer, reg *prometheus.Registry, ln net.Listener, b backend[T]) error {
	srcNext, sink, err := resume(b, out)
	if err != nil {
		return errors.Join(err, b.close())
	}
	srv, served := serveMetrics(ln, reg, b.health, out, o.onListen)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var put, took, dups, gaps atomic.Int64
	space := &minfree.Waiter{Out: out, Prefix: "pipeline: ", MakeRoom: b.makeRoom,
		Hint: fmt.Sprintf(`the progress line counts the waits ("no space"); on a small disk, lower -min-free (%s) and -max-file-size (%d)`, o.minFree, o.maxFileSize)}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- source(ctx, b, o, srcNext, &put, space) })
	wg.Go(func() { errs <- sinkLoop(ctx, b.sinkBegin, o, sink, &took, &dups, &gaps, cancel) })

	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last progressCounts
	lastT := start
	report := func(final bool) {
		now := time.Now()
		cur := progressCounts{put: put.Load(), took: took.Load(), spaceWaits: space.Count(), spaceWaited: space.Waited()}
		var ok bool
		cur.ch, ok = b.stats()
		cur.noStats = !ok
		label, since, prev := "progress", now.Sub(lastT), last
		if final {
			label, since, prev = "total   ", now.Sub(start), progressCounts{}
		}
		fmt.Fprintln(out, progressLine(label, since, prev, cur, o.size, gaps.Load(), dups.Load()))
		last, lastT = cur, now
	}
	var firstErr error
loop:
	for {
		select {
		case <-tick.C:
			report(false)
		case <-ctx.Done():
			break loop
		case err := <-errs:
			if err != nil {
				firstErr = err
				cancel()
				break loop
			}
		case err := <-served:
			// Serve returns only at Shutdown, which has not happened yet.
			firstErr = fmt.Errorf("metrics server: %w", err)
			served = nil
			cancel()
			break loop
		}
	}
	wg.Wait()
	// The other goroutine's error, if it failed too (the first one to
	// fail stopped the run; its error is the one returned).
	firstErr = firstError(firstErr, errs)
	report(true)
	// The HTTP server goes first, so no scrape or health check sees a
	// closing channel; then the channel.
	stopMetrics(srv, served, out)
	left := b.queued()
	if err := b.close(); err != nil && firstErr == nil {
		firstErr = err
	}
	fmt.Fprintln(out, stoppedLine(firstErr, left, b.srcPath == "", sink.next))
	return firstErr
}

// resume loads where the source and the sink left off and prints them.
func resume[T channel.Tx](b backend[T], out io.Writer) (srcNext int64, sink *sinkState, err error) {
	srcNext, err = counter.Load(b.srcPath)
	if err != nil {
		return 0, nil, err
	}
	sinkNext, err := counter.Load(b.sinkPath)
	if err != nil {
		return 0, nil, err
	}
	sink = &sinkState{path: b.sinkPath, next: sinkNext, check: b.check}
	if n := b.queued(); n >= 0 {
		fmt.Fprintf(out, "pipeline: %s holds %d events; source resumes at #%d, sink expects #%d\n", b.name, n, srcNext, sink.next)
	} else {
		fmt.Fprintf(out, "pipeline: on %s; source resumes at #%d, sink expects #%d\n", b.name, srcNext, sink.next)
	}
	return srcNext, sink, nil
}

// firstError is first, or else the first error among the results waiting
// in errs (each of its goroutines has returned).
func firstError(first error, errs chan error) error {
	for range cap(errs) {
		select {
		case err := <-errs:
			if first == nil {
				first = err
			}
		default:
		}
	}
	return first
}

// stopMetrics shuts the metrics server srv down (nil: none), closing its
// connections after shutdownTimeout, and waits for its Serve to return on
// served (nil: already returned).
func stopMetrics(srv *http.Server, served chan error, out io.Writer) {
	if srv == nil {
		return
	}
	sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintf(out, "pipeline: metrics server did not stop within %v (%v); closing its connections\n", shutdownTimeout, err)
		srv.Close()
	}
	scancel()
	if served != nil {
		<-served // http.ErrServerClosed
	}
}

// stoppedLine is the last line of a run that ended with err (main prints
// err after it): what waits for the next run. A run that failed never
// says it stopped cleanly. left is the events the channel holds (-1:
// unknown, on Kafka); forgets says the backend's events and positions do
// not outlive the run (the fake Kafka cluster).
func stoppedLine(err error, left int, forgets bool, sinkNext int64) string {
	how := "stopped cleanly"
	if err != nil {
		how = "stopped on an error"
	}
	switch {
	case left >= 0:
		return fmt.Sprintf("pipeline: %s; %d events wait in the channel for the next run", how, left)
	case forgets:
		return fmt.Sprintf("pipeline: %s; the fake Kafka cluster is gone, and its events with it: the next run starts again at #0", how)
	default:
		return fmt.Sprintf("pipeline: %s; the sink resumes at #%d", how, sinkNext)
	}
}

// progressCounts are what a progress line reports, and the differences of
// which give its rates.
type progressCounts struct {
	put, took int64
	// ch is the channel's Stats: its fill and log size, and its count and
	// time of Puts that waited for room (the source is the only one that
	// puts), kept by the channel since Open.
	ch channel.Stats
	// noStats: the backend has no Stats (Kafka: its depth is the
	// consumer group's lag, which Kafka's own tools show).
	noStats bool
	// spaceWaits and spaceWaited are the source's batches refused for
	// disk space and the time it waited to retry them (minfree.Waiter).
	spaceWaits  int64
	spaceWaited time.Duration
}

// progressLine is one line of progress: counts so far, rates and the
// share of the time the source waited over the interval since (from prev
// to cur), and the channel's fill and log size now. Once the source has
// been refused for disk space, the line says how often and how long it
// waited for space ("no space").
func progressLine(label string, since time.Duration, prev, cur progressCounts, size int, gaps, dups int64) string {
	st, puts := cur.ch, float64(cur.put-prev.put)
	var noSpace string
	if cur.spaceWaits > 0 {
		noSpace = fmt.Sprintf("  no space %dx %.1fs (%s)", cur.spaceWaits, cur.spaceWaited.Seconds(),
			progress.Share(cur.spaceWaited-prev.spaceWaited, since))
	}
	if cur.noStats {
		return fmt.Sprintf("%s: put %9d (%s ev/s, %s/s)  delivered %9d (%s ev/s)%s  gaps %d  redelivered %d",
			label, cur.put, progress.Rate(progress.PerSecond(puts, since), 8), progress.Bytes(progress.PerSecond(puts*float64(size), since)),
			cur.took, progress.Rate(progress.PerSecond(float64(cur.took-prev.took), since), 8),
			noSpace, gaps, dups)
	}
	return fmt.Sprintf("%s: put %9d (%s ev/s, %s/s)  delivered %9d (%s ev/s)  queued %7d/%d fill %3.0f%%  log %s  source waited %s (blocked %s)%s  gaps %d  redelivered %d",
		label, cur.put, progress.Rate(progress.PerSecond(puts, since), 8), progress.Bytes(progress.PerSecond(puts*float64(size), since)),
		cur.took, progress.Rate(progress.PerSecond(float64(cur.took-prev.took), since), 8),
		st.Queued, st.Capacity, 100*progress.Fill(st), progress.Bytes(float64(st.LogBytes)),
		progress.Waited(st), progress.Share(st.PutWaitTime-prev.ch.PutWaitTime, since),
		noSpace, gaps, dups)
}

// listenMetrics listens on addr for the HTTP server of /metrics and
// /healthz, unless addr is empty (then it returns nil).
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("metrics server: %w: is another pipeline running? Give this one another -metrics-addr (port 0 = any free port), or -metrics-addr \"\" for none", err)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics server on -metrics-addr %q: %w", addr, err)
	}
	return ln, nil
}

// serveMetrics serves /metrics and /healthz on ln, unless ln is nil (then
// it returns a nil server and a nil channel). served receives Serve's
// error when the server stops. onListen, if set, is called with the
// address.
func serveMetrics(ln net.Listener, reg *prometheus.Registry, health func() error, out io.Writer, onListen func(string)) (*http.Server, chan error) {
	if ln == nil {
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := health(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	fmt.Fprintf(out, "pipeline: metrics at http://%s/metrics, health at http://%s/healthz\n", addr, addr)
	if onListen != nil {
		onListen(addr)
	}
	return srv, served
}

// source produces numbered events in transactions of o.batch on b. A Put
// waits up to KeepAlive for room in a full channel; the channel counts
// and times the wait (Stats.PutWaits, PutWaitTime). A batch refused for
// room (ErrChannelFull) or for disk space (ErrInsufficientSpace) is
// rolled back and tried again, for as long as it takes: takes are never
// refused for space, so the sink drains the channel meanwhile, and space
// asks for a checkpoint (b.makeRoom) before each retry.
func source[T channel.Tx](ctx context.Context, b backend[T], o options, next int64, put *atomic.Int64, space *minfree.Waiter) error {
	payload := make([]byte, o.size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	var pace *time.Ticker
	if o.rate > 0 {
		pace = time.NewTicker(time.Second * time.Duration(o.batch) / time.Duration(o.rate))
		defer pace.Stop()
	}
	for ctx.Err() == nil {
		if pace != nil {
			select {
			case <-pace.C:
			case <-ctx.Done():
				return nil
			}
		}
		err := putBatch(ctx, b.begin, o.batch, next, payload)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil // stopping
		case errors.Is(err, channel.ErrChannelFull):
			continue // the sink is behind, and Put waited KeepAlive: try again
		case errors.Is(err, channel.ErrInsufficientSpace):
			space.Wait(ctx, err)
			continue
		default:
			return fmt.Errorf("source: %w", err)
		}
		next += int64(o.batch)
		put.Add(int64(o.batch))
		// The source's position is saved after the commit: a crash between
		// the two makes the source produce those numbers again. On the
		// file channel the events carry their number in the "seq" header
		// and Config.Dedup drops the batch put again; on Kafka the sink
		// sees it as re-deliveries, never as gaps.
		if err := counter.Save(b.srcPath, next); err != nil {
			return err
		}
	}
	return nil
}

// putBatch is one put transaction of events #next..#next+n-1: all or
// none. It stops with ctx.Err() between two Puts once ctx ends.
func putBatch[T channel.Tx](ctx context.Context, begin func() (T, error), n int, next int64, payload []byte) error {
	tx, err := begin()
	if err != nil {
		return err
	}
	for i := range int64(n) {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		body := append(strconv.AppendInt(make([]byte, 0, 16+len(payload)), next+i, 10), ' ')
		body = append(body, payload...)
		h := map[string]string{"source": "pipeline", seqHeader: strconv.FormatInt(next+i, 10)}
		if err := tx.PutContext(ctx, channel.Event{Headers: h, Body: body}); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// sinkLoop consumes events in transactions of up to o.batch and checks
// sequence numbers. It blocks in TakeContext for a batch's first event, then
// takes what else is there without waiting: a batch is never held back to
// fill up, and an idle sink sleeps until a put commits. A gap (a number
// above the one expected: lost events) stops it with an error, the batch
// rolled back: nothing after the gap is delivered until an operator has
// looked.
func sinkLoop[T channel.Tx](ctx context.Context, begin func() (T, error), o options, s *sinkState, took, dups, gaps *atomic.Int64, done context.CancelFunc) error {
	for ctx.Err() == nil {
		tx, err := begin()
		if err != nil {
			return err
		}
		next := s.next
		check := func(ev channel.Event) error {
			seq, err := parseSeq(ev.Body)
			if err != nil {
				return err
			}
			switch {
			case seq < next:
				dups.Add(1)
			case seq > next:
				gaps.Add(seq - next)
				return s.gap(next, seq)
			default:
				next++
			}
			return nil
		}
		ev, err := tx.TakeContext(ctx)
		if err != nil {
			tx.Rollback()
			if ctx.Err() != nil {
				return nil // stopping
			}
			return fmt.Errorf("sink: %w", err)
		}
		if err := check(ev); err != nil {
			tx.Rollback()
			return fmt.Errorf("sink: %w", err)
		}
		n := 1
		for ; n < o.batch; n++ {
			ev, ok, err := tx.Take()
			if err != nil {
				tx.Rollback()
				return fmt.Errorf("sink: %w", err)
			}
			if !ok {
				break
			}
			if err := check(ev); err != nil {
				tx.Rollback()
				return fmt.Errorf("sink: %w", err)
			}
		}
		if o.sinkDelay > 0 { // "delivering" to a slow destination
			select {
			case <-time.After(o.sinkDelay):
			case <-ctx.Done():
				tx.Rollback()
				return nil // stopping; the batch is taken again next run
			}
		}
		// Deliver (here: record the position), then commit the take.
		if err := counter.Save(s.path, next); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sink: %w", err)
		}
		s.next = next
		if t := took.Add(int64(n)); o.events > 0 && t >= o.events {
			done()
		}
	}
	return nil
}

// gap is the error of a gap: the sink expected #want and got #got.
func (s *sinkState) gap(want, got int64) error {
	msg := fmt.Sprintf("gap: expected #%d, got #%d: events #%d..#%d are missing; the batch is rolled back and the pipeline stopped: %s",
		want, got, want, got-1, s.check)
	if s.path != "" {
		msg += fmt.Sprintf(" (to accept the loss and go on from #%d: echo %d > %s)", got, got, s.path)
	}
	return errors.New(msg)
}

func parseSeq(body []byte) (int64, error) {
	for i, b := range body {
		if b == ' ' {
			return strconv.ParseInt(string(body[:i]), 10, 64)
		}
	}
	return 0, fmt.Errorf("event without a sequence number: %.20q", body)
}
