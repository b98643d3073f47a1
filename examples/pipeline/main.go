// Command pipeline is the main job of filechannel: a source that produces
// numbered events, a durable file channel, and a sink that consumes them,
// with progress and throughput printed every second.
//
//	go run ./examples/pipeline                 # runs until Ctrl-C, data in ./fcdata
//	go run ./examples/pipeline -events 200000  # stops after 200k events are delivered
//
// Stop it with Ctrl-C (or kill it) and start it again: the sink resumes
// where it stopped, and no committed event is lost. The sink checks this:
// every event carries a sequence number, and the sink reports gaps (must
// stay 0) and re-deliveries (possible after a crash: delivery is
// at-least-once).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flumego/filechannel/channel"
)

type options struct {
	dir      string
	events   int64         // stop after this many delivered events (0 = run until stopped)
	duration time.Duration // stop after this long (0 = run until stopped)
	batch    int
	size     int
	rate     int // events per second from the source (0 = as fast as possible)
	verbose  bool
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "fcdata", "directory for the channel's checkpoint and data files")
	flag.Int64Var(&o.events, "events", 0, "stop after delivering this many events (0 = until Ctrl-C)")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long (0 = until Ctrl-C)")
	flag.IntVar(&o.batch, "batch", 100, "events per transaction")
	flag.IntVar(&o.size, "size", 1024, "event body size in bytes")
	flag.IntVar(&o.rate, "rate", 0, "source events per second (0 = unlimited)")
	flag.BoolVar(&o.verbose, "v", false, "log the channel's activity to stderr")
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

func loadState(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

func saveState(path string, n int64) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(n, 10)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func run(ctx context.Context, o options, out io.Writer) error {
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
	ch, err := channel.Open(channel.Config{
		Name:          "pipeline",
		CheckpointDir: filepath.Join(o.dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(o.dir, "data")},
		Capacity:      200_000,
		MaxFileSize:   64 << 20,
		KeepAlive:     time.Second,
		Logger:        logger,
	})
	if err != nil {
		return err
	}
	srcPath := filepath.Join(o.dir, "source.next")
	sinkPath := filepath.Join(o.dir, "sink.next")
	srcNext := loadState(srcPath)
	sink := &sinkState{path: sinkPath, next: loadState(sinkPath)}
	fmt.Fprintf(out, "pipeline: %s holds %d events; source resumes at #%d, sink expects #%d\n", o.dir, ch.Len(), srcNext, sink.next)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var put, took, dups, gaps atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs <- source(ctx, ch, o, srcNext, srcPath, &put) }()
	go func() {
		defer wg.Done()
		errs <- sinkLoop(ctx, ch, o, sink, &took, &dups, &gaps, cancel)
	}()

	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastPut, lastTook, lastT := int64(0), int64(0), start
	report := func(final bool) {
		now := time.Now()
		dt := now.Sub(lastT).Seconds()
		p, tk := put.Load(), took.Load()
		if final {
			dt = now.Sub(start).Seconds()
			lastPut, lastTook = 0, 0
		}
		label := "progress"
		if final {
			label = "total   "
		}
		fmt.Fprintf(out, "%s: put %9d (%8.0f ev/s, %6.1f MB/s)  delivered %9d (%8.0f ev/s)  queued %7d  gaps %d  redelivered %d\n",
			label, p, float64(p-lastPut)/dt, float64(p-lastPut)*float64(o.size)/dt/1e6, tk, float64(tk-lastTook)/dt, ch.Len(), gaps.Load(), dups.Load())
		lastPut, lastTook, lastT = p, tk, now
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
		}
	}
	wg.Wait()
	report(true)
	if err := ch.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	fmt.Fprintf(out, "pipeline: stopped cleanly; %d events wait in the channel for the next run\n", ch.Len())
	if gaps.Load() > 0 && firstErr == nil {
		firstErr = fmt.Errorf("sink saw %d gaps: events were lost", gaps.Load())
	}
	return firstErr
}

// source produces numbered events in transactions of o.batch.
func source(ctx context.Context, ch *channel.FileChannel, o options, next int64, statePath string, put *atomic.Int64) error {
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
		tx, err := ch.Begin()
		if err != nil {
			return err
		}
		for i := 0; i < o.batch; i++ {
			body := append(strconv.AppendInt(make([]byte, 0, 16+o.size), next+int64(i), 10), ' ')
			body = append(body, payload...)
			if err := tx.Put(channel.Event{Headers: map[string]string{"source": "pipeline"}, Body: body}); err != nil {
				tx.Rollback()
				if errors.Is(err, channel.ErrChannelFull) {
					break // the sink is behind; try again
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
		if err := saveState(statePath, next); err != nil {
			return err
		}
	}
	return nil
}

// sinkLoop consumes events in transactions of o.batch and checks sequence
// numbers.
func sinkLoop(ctx context.Context, ch *channel.FileChannel, o options, s *sinkState, took, dups, gaps *atomic.Int64, done context.CancelFunc) error {
	for ctx.Err() == nil {
		tx, err := ch.Begin()
		if err != nil {
			return err
		}
		n := 0
		next := s.next
		for ; n < o.batch; n++ {
			ev, ok, err := tx.Take()
			if err != nil {
				tx.Rollback()
				return fmt.Errorf("sink: %w", err)
			}
			if !ok {
				break
			}
			seq, err := parseSeq(ev.Body)
			if err != nil {
				tx.Rollback()
				return fmt.Errorf("sink: %w", err)
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
		}
		if n == 0 {
			tx.Rollback()
			time.Sleep(5 * time.Millisecond)
			continue
		}
		// Deliver (here: record the position), then commit the take.
		if err := saveState(s.path, next); err != nil {
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
