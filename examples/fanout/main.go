// Command fanout is Flume's replicating channel selector on filechannel:
// one source whose events are copied into two file channels, each drained
// by its own sink at its own pace, a fast one and a slow one (-slow-delay
// per batch stands for a slow destination).
//
//	go run ./examples/fanout                      # runs until Ctrl-C, data in ./fanoutdata
//	go run ./examples/fanout -events 20000        # send 20k events, stop when both sinks have them all
//	go run ./examples/fanout -slow-delay 200ms -capacity 2000   # the slow channel fills up: the source waits
//
// Every second it prints, for each channel, its depth out of its capacity,
// the share of the capacity held (fill: queued plus taken or put and not
// yet committed), the size of its data log files, its sink's progress and
// how often and how long the source's Puts into it waited for room; then
// the source's position and the share of the last second it spent
// waiting:
//
//	14s  fast: queued      0/2000 fill   0%  log 9.6 MB  delivered    28000  source waited 0x 0.0s | slow: queued   1900/2000 fill 100%  log 1.6 MB  delivered    26100  source waited 260x 12.9s | source at #28000, blocked 96%
//
// Stop it (Ctrl-C, or kill it) and start it again: the source and both
// sinks resume where they stopped. Every event carries a sequence number;
// each sink checks it receives them in order with no gap.
//
// # Files
//
//	-dir/fast/checkpoint/, -dir/fast/data/   the fast sink's file channel
//	-dir/fast/source.next                    the source's cursor for that channel: the next number to commit there
//	-dir/fast/sink.next                      the fast sink's position: the next number it expects
//	-dir/slow/...                            the same for the slow sink
//
// Cursor and position files are replaced durably: write name.tmp, fsync,
// rename, fsync the directory.
//
// # Replication is not atomic
//
// No transaction spans two channels. The source commits a batch to the
// fast channel, saves that channel's cursor, then commits the same batch to
// the slow channel and saves its cursor. If the process dies between the
// two commits, the fast channel holds the batch and the slow one does not.
// On restart the source compares the two cursors, re-sends the missing
// events to the lagging channel only, and carries on from the leading
// cursor. A crash between a commit and the save of its cursor makes the
// source send that batch to that channel again: delivery is at-least-once
// per channel, never lossy. A sink sees such a repeat as numbers below its
// position and skips them (counted as "redelivered"); a number above its
// position is a gap, a lost event, and stops the run with an error. A
// Ctrl-C can land between the two commits too; the next start handles it
// the same way.
//
// Re-sending needs a source that can produce its events again from a
// position: a file and an offset, a Kafka partition and an offset. Here the
// events are generated from their sequence numbers.
//
// # A full channel blocks the source
//
// Each channel holds up to -capacity events, so the fast sink can run
// ahead of the slow one by that much. When the slow channel is full, Put
// waits for room: until the slow sink commits a batch, or for KeepAlive,
// after which it returns ErrChannelFull and the source rolls the batch back
// and tries again, for as long as it takes. Either way the channel counts
// the wait (Stats.PutWaits, PutWaitTime; the metrics
// filechannel_put_waits_total and filechannel_put_wait_seconds_total), the
// progress line shows it against that channel ("source waited"), and
// "blocked" shows the share of the time the source spends waiting. (Rolling back gives
// back the room the half-put batch held: with several sources, batches that
// each hold part of a full channel could otherwise wait for each other
// forever.) It never drops an
// event and never skips the full channel, so from then on both sinks move
// at the slow sink's pace (Flume's replicating selector with required
// channels does the same; an optional channel that drops events when full
// is a different trade: those events are lost to its sink).
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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/examples/internal/counter"
	"github.com/flumego/filechannel/examples/internal/progress"
	"github.com/flumego/filechannel/examples/internal/syncwriter"
)

type options struct {
	dir       string
	events    int64         // events the source sends this run (0 = until stopped)
	duration  time.Duration // stop after this long (0 = until stopped)
	batch     int           // events per transaction, for the source and both sinks
	size      int           // event body size in bytes
	slowDelay time.Duration // the slow sink's pause per batch
	capacity  int           // events each channel holds
	verbose   bool

	// Test knobs, no flags.
	keepAlive time.Duration // the channels' KeepAlive; 0 = 1s
	// betweenCommits, if set, is called after a batch starting at #from is
	// committed to the first channel and its cursor saved, before the
	// second channel's commit: the window a crash leaves the channels
	// unequal. A non-nil error stops the source there.
	betweenCommits func(from int64) error
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "fanoutdata", "directory for both channels and the cursor files")
	flag.Int64Var(&o.events, "events", 0, "events the source sends this run; stop when both sinks have them (0 = until Ctrl-C)")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long (0 = until Ctrl-C)")
	flag.IntVar(&o.batch, "batch", 100, "events per transaction")
	flag.IntVar(&o.size, "size", 256, "event body size in bytes")
	flag.DurationVar(&o.slowDelay, "slow-delay", 50*time.Millisecond, "the slow sink's pause per batch")
	flag.IntVar(&o.capacity, "capacity", 100_000, "events each channel holds before the source has to wait")
	flag.BoolVar(&o.verbose, "v", false, "log the channels' activity to stderr")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// leg is one copy of the stream: a channel, the source's cursor for it,
// and the sink that drains it.
type leg struct {
	name       string
	ch         *channel.FileChannel
	cursorPath string
	cursor     int64 // the source's cursor; only the source goroutine touches it after start
	sink       *sink
}

func (o options) validate() error {
	switch {
	case o.batch <= 0:
		return fmt.Errorf("-batch %d: must be positive", o.batch)
	case o.size < 0:
		return fmt.Errorf("-size %d: must not be negative", o.size)
	case o.capacity < o.batch:
		return fmt.Errorf("-capacity %d: must hold at least one batch (%d)", o.capacity, o.batch)
	case o.events < 0:
		return fmt.Errorf("-events %d: must not be negative", o.events)
	case o.slowDelay < 0:
		return fmt.Errorf("-slow-delay %v: must not be negative", o.slowDelay)
	}
	return nil
}

func run(ctx context.Context, o options, w io.Writer) (err error) {
	if err := o.validate(); err != nil {
		return err
	}
	if o.keepAlive == 0 {
		o.keepAlive = time.Second
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	out := syncwriter.New(w)
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	legs := []*leg{{name: "fast"}, {name: "slow"}}
	defer func() {
		for _, l := range legs {
			if l.ch != nil {
				err = errors.Join(err, l.ch.Close())
			}
		}
	}()
	for _, l := range legs {
		dir := filepath.Join(o.dir, l.name)
		l.ch, err = channel.Open(channel.Config{
			Name:                "fanout-" + l.name,
			CheckpointDir:       filepath.Join(dir, "checkpoint"),
			DataDirs:            []string{filepath.Join(dir, "data")},
			Capacity:            o.capacity,
			TransactionCapacity: o.batch,
			MaxFileSize:         64 << 20,
			KeepAlive:           o.keepAlive,
			Logger:              logger,
		})
		if err != nil {
			return fmt.Errorf("open the %s channel: %w", l.name, err)
		}
		l.cursorPath = filepath.Join(dir, "source.next")
		if l.cursor, err = counter.Load(l.cursorPath); err != nil {
			return err
		}
		l.sink = &sink{name: l.name, ch: l.ch, statePath: filepath.Join(dir, "sink.next"), batch: o.batch, out: out}
		if l.name == "slow" {
			l.sink.delay = o.slowDelay
		}
		next, err := counter.Load(l.sink.statePath)
		if err != nil {
			return err
		}
		l.sink.next.Store(next)
	}

	src := &source{legs: legs, batch: o.batch, size: o.size, betweenCommits: o.betweenCommits}
	lead := src.lead()
	if o.events > 0 {
		src.target = lead + o.events
	}
	fmt.Fprintf(out, "fanout: source resumes at #%d", lead)
	for _, l := range legs {
		fmt.Fprintf(out, "; %s channel holds %d events, its sink expects #%d", l.name, l.ch.Len(), l.sink.next.Load())
	}
	fmt.Fprintln(out)
	for _, l := range legs {
		if l.cursor < lead {
			fmt.Fprintf(out, "fanout: the %s channel missed #%d..#%d (the last run stopped between the two commits); resending them to it only\n",
				l.name, l.cursor, lead-1)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 1+len(legs))
	wg.Add(1 + len(legs))
	go func() { defer wg.Done(); errs <- src.run(ctx) }()
	for _, l := range legs {
		go func() { defer wg.Done(); errs <- l.sink.run(ctx, src.target, start) }()
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	rep := newReporter(out, src, legs, start)
	var firstErr error
	for running := 1 + len(legs); running > 0; {
		select {
		case <-tick.C:
			rep.report(false)
		case err := <-errs:
			running--
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
		}
	}
	wg.Wait()
	rep.report(true)
	fast, slow := legs[0].ch.Len(), legs[1].ch.Len()
	for _, l := range legs {
		err = errors.Join(err, l.ch.Close())
	}
	fmt.Fprintf(out, "fanout: stopped; the fast channel holds %d events and the slow one %d for the next run\n", fast, slow)
	if err != nil {
		return errors.Join(firstErr, err)
	}
	return firstErr
}

// reporter prints the progress lines; it keeps the time the source had
// waited on each channel at the last one, for the share of the interval
// the source waited.
type reporter struct {
	out   io.Writer
	src   *source
	legs  []*leg
	start time.Time
	lastT time.Time
	last  []time.Duration // per leg: its channel's Stats().PutWaitTime
}

func newReporter(out io.Writer, src *source, legs []*leg, start time.Time) *reporter {
	return &reporter{out: out, src: src, legs: legs, start: start, lastT: start, last: make([]time.Duration, len(legs))}
}

// report prints a line about the last interval, or with final one about
// the whole run.
func (r *reporter) report(final bool) {
	now := time.Now()
	label, since := fmt.Sprintf("%4.0fs", now.Sub(r.start).Seconds()), now.Sub(r.lastT)
	if final {
		label, since = "total", now.Sub(r.start)
	}
	var b strings.Builder // one Write, so a sink's message never lands mid-line
	fmt.Fprintf(&b, "%5s ", label)
	var blocked time.Duration
	for i, l := range r.legs {
		if i > 0 {
			b.WriteString(" |")
		}
		// The channel counts and times the Puts that waited for room (the
		// source is the only one that puts), a wait in progress included.
		s, st := l.sink, l.ch.Stats()
		fmt.Fprintf(&b, " %s: queued %6d/%d fill %3.0f%%  log %s  delivered %8d", l.name, st.Queued, st.Capacity, 100*progress.Fill(st),
			progress.Bytes(float64(st.LogBytes)), s.delivered.Load())
		if d := s.redelivered.Load(); d > 0 {
			fmt.Fprintf(&b, " (+%d redelivered, skipped)", d)
		}
		fmt.Fprintf(&b, "  source waited %s", progress.Waited(st))
		if final {
			blocked += st.PutWaitTime // since Open, at the start of the run
		} else {
			blocked += st.PutWaitTime - r.last[i]
		}
		r.last[i] = st.PutWaitTime
	}
	fmt.Fprintf(&b, " | source at #%d, blocked %s\n", r.src.sent.Load(), progress.Share(blocked, since))
	io.WriteString(r.out, b.String())
	r.lastT = now
}
