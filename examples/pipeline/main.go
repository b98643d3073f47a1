// Command pipeline is the main job of filechannel: a source that produces
// numbered events, a durable file channel, and a sink that consumes them,
// with progress and throughput printed every second.
//
//	go run ./examples/pipeline                 # runs until Ctrl-C, data in ./fcdata
//	go run ./examples/pipeline -events 200000  # stops after 200k events are delivered
//	go run ./examples/pipeline -dir /tmp/p -capacity 2000 -sink-delay 20ms  # a slow sink: the source waits
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
// for the fake one, which starts empty every run).
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
// every event carries a sequence number, and the sink reports gaps (must
// stay 0) and re-deliveries (possible after a crash: delivery is
// at-least-once).
//
// The sink blocks in TakeContext for the first event of each batch and
// fills the rest of the batch with non-blocking Takes, so an idle pipeline
// does not poll.
//
// While it runs, an HTTP server on -metrics-addr (default 127.0.0.1:9464;
// empty turns it off) serves the channel's Prometheus metrics, with the Go
// runtime's and the process's, at /metrics, and the channel's Health at
// /healthz (200 "ok", or 503 and the error):
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
	"github.com/flumego/filechannel/examples/internal/progress"
)

// shutdownTimeout bounds how long the HTTP server waits for requests in
// progress when the pipeline stops.
const shutdownTimeout = 5 * time.Second

// defaultCapacity is the channel's capacity without -capacity.
const defaultCapacity = 200_000

type options struct {
	dir      string
	events   int64         // stop after this many delivered events (0 = run until stopped)
	duration time.Duration // stop after this long (0 = run until stopped)
	batch    int
	size     int
	rate     int // events per second from the source (0 = as fast as possible)
	capacity int // events the channel holds (0 = 200,000)
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
	path string
	next int64 // next sequence number expected
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
	case o.kafka != "" && o.kafkaFake:
		return errors.New("-kafka and -kafka-fake: choose one")
	}
	return nil
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.capacity == 0 {
		o.capacity = defaultCapacity
	}
	if err := o.validate(); err != nil {
		return err
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
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
		return runOn(ctx, o, out, reg, b)
	}
	b, err := openFile(o, logger, reg)
	if err != nil {
		return err
	}
	return runOn(ctx, o, out, reg, b)
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
}

// openFile opens the durable file channel in o.dir.
func openFile(o options, logger *slog.Logger, reg *prometheus.Registry) (backend[*channel.Transaction], error) {
	ch, err := channel.Open(channel.Config{
		Name:          "pipeline",
		CheckpointDir: filepath.Join(o.dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(o.dir, "data")},
		Capacity:      o.capacity,
		MaxFileSize:   64 << 20,
		KeepAlive:     time.Second,
		Logger:        logger,
		Registerer:    reg,
	})
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
		srcPath:   filepath.Join(o.dir, "source.next"),
		sinkPath:  filepath.Join(o.dir, "sink.next"),
	}, nil
}

// runOn runs the source and the sink on b until ctx ends, the sink has
// delivered o.events, or one of them fails, with a progress line every
// second.
func runOn[T channel.Tx](ctx context.Context, o options, out io.Writer, reg *prometheus.Registry, b backend[T]) error {
	srcNext, err := counter.Load(b.srcPath)
	if err != nil {
		return errors.Join(err, b.close())
	}
	sinkNext, err := counter.Load(b.sinkPath)
	if err != nil {
		return errors.Join(err, b.close())
	}
	sink := &sinkState{path: b.sinkPath, next: sinkNext}
	if n := b.queued(); n >= 0 {
		fmt.Fprintf(out, "pipeline: %s holds %d events; source resumes at #%d, sink expects #%d\n", b.name, n, srcNext, sink.next)
	} else {
		fmt.Fprintf(out, "pipeline: on %s; source resumes at #%d, sink expects #%d\n", b.name, srcNext, sink.next)
	}
	srv, served, err := serveMetrics(o, reg, b.health, out)
	if err != nil {
		return errors.Join(err, b.close())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var put, took, dups, gaps atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs <- source(ctx, b.begin, o, srcNext, b.srcPath, &put) }()
	go func() {
		defer wg.Done()
		errs <- sinkLoop(ctx, b.sinkBegin, o, sink, &took, &dups, &gaps, cancel)
	}()

	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last progressCounts
	lastT := start
	report := func(final bool) {
		now := time.Now()
		cur := progressCounts{put: put.Load(), took: took.Load()}
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
	report(true)
	// The HTTP server goes first, so no scrape or health check sees a
	// closing channel; then the channel.
	if srv != nil {
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
	left := b.queued()
	if err := b.close(); err != nil && firstErr == nil {
		firstErr = err
	}
	if left >= 0 {
		fmt.Fprintf(out, "pipeline: stopped cleanly; %d events wait in the channel for the next run\n", left)
	} else {
		fmt.Fprintf(out, "pipeline: stopped cleanly; the sink resumes at #%d\n", sink.next)
	}
	if gaps.Load() > 0 && firstErr == nil {
		firstErr = fmt.Errorf("sink saw %d gaps: events were lost", gaps.Load())
	}
	return firstErr
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
}

// progressLine is one line of progress: counts so far, rates and the
// share of the time the source waited over the interval since (from prev
// to cur), and the channel's fill and log size now.
func progressLine(label string, since time.Duration, prev, cur progressCounts, size int, gaps, dups int64) string {
	st, puts := cur.ch, float64(cur.put-prev.put)
	if cur.noStats {
		return fmt.Sprintf("%s: put %9d (%s ev/s, %s/s)  delivered %9d (%s ev/s)  gaps %d  redelivered %d",
			label, cur.put, progress.Rate(progress.PerSecond(puts, since), 8), progress.Bytes(progress.PerSecond(puts*float64(size), since)),
			cur.took, progress.Rate(progress.PerSecond(float64(cur.took-prev.took), since), 8),
			gaps, dups)
	}
	return fmt.Sprintf("%s: put %9d (%s ev/s, %s/s)  delivered %9d (%s ev/s)  queued %7d/%d fill %3.0f%%  log %s  source waited %s (blocked %s)  gaps %d  redelivered %d",
		label, cur.put, progress.Rate(progress.PerSecond(puts, since), 8), progress.Bytes(progress.PerSecond(puts*float64(size), since)),
		cur.took, progress.Rate(progress.PerSecond(float64(cur.took-prev.took), since), 8),
		st.Queued, st.Capacity, 100*progress.Fill(st), progress.Bytes(float64(st.LogBytes)),
		progress.Waited(st), progress.Share(st.PutWaitTime-prev.ch.PutWaitTime, since),
		gaps, dups)
}

// serveMetrics starts the HTTP server of /metrics and /healthz on
// o.metricsAddr, unless it is empty (then it returns a nil server and a nil
// channel). served receives Serve's error when the server stops.
func serveMetrics(o options, reg *prometheus.Registry, health func() error, out io.Writer) (*http.Server, chan error, error) {
	if o.metricsAddr == "" {
		return nil, nil, nil
	}
	ln, err := net.Listen("tcp", o.metricsAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics server: %w", err)
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
	if o.onListen != nil {
		o.onListen(addr)
	}
	return srv, served, nil
}

// source produces numbered events in transactions of o.batch. A Put
// waits up to KeepAlive for room in a full channel; the channel counts
// and times the wait (Stats.PutWaits, PutWaitTime).
func source[T channel.Tx](ctx context.Context, begin func() (T, error), o options, next int64, statePath string, put *atomic.Int64) error {
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
		tx, err := begin()
		if err != nil {
			return err
		}
		for i := 0; i < o.batch; i++ {
			body := append(strconv.AppendInt(make([]byte, 0, 16+o.size), next+int64(i), 10), ' ')
			body = append(body, payload...)
			if err := tx.PutContext(ctx, channel.Event{Headers: map[string]string{"source": "pipeline"}, Body: body}); err != nil {
				tx.Rollback()
				if errors.Is(err, channel.ErrChannelFull) {
					break // the sink is behind; try again
				}
				if ctx.Err() != nil {
					return nil // stopping
				}
				return fmt.Errorf("source: %w", err)
			}
		}
		if err := tx.Commit(); err != nil {
			if errors.Is(err, channel.ErrTransactionDone) {
				continue // rolled back above
			}
			return fmt.Errorf("source: %w", err)
		}
		next += int64(o.batch)
		put.Add(int64(o.batch))
		// The source's position is saved after the commit: a crash between
		// the two makes the source produce those numbers again, which the
		// sink sees as re-deliveries, never as gaps.
		if err := counter.Save(statePath, next); err != nil {
			return err
		}
	}
	return nil
}

// sinkLoop consumes events in transactions of up to o.batch and checks
// sequence numbers. It blocks in TakeContext for a batch's first event, then
// takes what else is there without waiting: a batch is never held back to
// fill up, and an idle sink sleeps until a put commits.
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
				next = seq + 1
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

func parseSeq(body []byte) (int64, error) {
	for i, b := range body {
		if b == ' ' {
			return strconv.ParseInt(string(body[:i]), 10, 64)
		}
	}
	return 0, fmt.Errorf("event without a sequence number: %.20q", body)
}
