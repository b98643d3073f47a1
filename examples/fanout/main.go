// Command fanout is one source feeding two sinks through one file channel
// with two consumer groups, "fast" and "slow": the source commits each
// event once, every group receives every event, and each sink drains its
// own group at its own pace (-slow-delay per batch stands for a slow
// destination). It does what Flume's replicating channel selector does
// with one channel per sink, without writing each event once per sink.
//
//	go run ./examples/fanout                      # runs until Ctrl-C, data in ./fanoutdata
//	go run ./examples/fanout -events 20000        # send 20k events, stop when both sinks have them all
//	go run ./examples/fanout -slow-delay 200ms -capacity 2000   # the slow group fills up: the source waits
//	go run ./examples/fanout -slow-delay 200ms -capacity 2000 -slow-when-full drop-oldest   # it drops instead
//	go run ./examples/fanout -events 20000 -slow-filter 'headers["tag"] == "TagA"'      # the slow group gets a tenth
//
// Every second it prints, for each group, its depth out of its capacity
// and its sink's progress; then the size of the channel's data log files,
// the source's position and the share of the last second the source spent
// waiting in Put (here with -slow-delay 100ms -capacity 20000
// -max-file-size 1000000):
//
//	9s  fast: queued      0/20000   0%  delivered    28600 | slow: queued  19900/20000 100%  delivered     8600 | log 9.1 MB in 10 files | source at #28600, blocked 96%
//
// Stop it (Ctrl-C, or kill it) and start it again: the source and both
// sinks resume where they stopped. Ctrl-C stops the source before its next
// Put (PutContext looks at its context only while it waits for room) and
// each sink after the batch it is on. Every event carries a sequence
// number; each sink checks it receives them in order with no gap.
//
// # Files
//
//	-dir/checkpoint/, -dir/data/   the file channel; checkpoint/group-N/ holds each group's ring
//	-dir/source.next               the source's cursor: the next number to commit
//	-dir/fast.next, -dir/slow.next the sinks' positions: the next number each expects
//
// Cursor and position files are replaced durably: write name.tmp, fsync,
// rename, fsync the directory. (The fanout of earlier releases kept a
// channel per sink in -dir/fast/ and -dir/slow/; this one leaves those
// alone and starts from #0.)
//
// # One commit reaches both groups
//
// A put commit appends its events to every group's queue at once, so
// there is nothing to replicate and no window in which one sink's copy is
// committed and the other's is not. The only crash window left is the
// one any source has: after a commit returned and before the source saved
// its cursor, a crash makes the source send that batch again on restart,
// into the channel once, so to both groups alike. A sink sees such a
// repeat as numbers below its position and skips them (counted as
// "redelivered"), as it does a batch it delivered but whose take commit
// the crash interrupted; a number above its position is a gap, a lost
// event, and stops the run with an error.
//
// # A full group
//
// Each group holds up to -capacity events, so the fast sink can run ahead
// of the slow one by that much. With the default policy (-slow-when-full
// block) a Put waits for room in every group: until the slow sink commits
// a batch, or for KeepAlive, after which it returns ErrChannelFull naming
// the group and the source rolls the batch back and tries again, for as
// long as it takes. (Rolling back gives back the room the half-put batch
// held: with several sources, batches that each hold part of a full group
// could otherwise wait for each other forever.) From then on both sinks
// move at the slow sink's pace, as with Flume's required channels.
//
// With -slow-when-full drop-oldest the slow group drops its oldest events
// to make room, and with drop-newest it misses new batches while it is
// full; either way the source and the fast sink never wait for the slow
// one, and the slow sink counts the numbers it never receives as
// "dropped" instead of stopping at a gap. The fast group always blocks.
//
// # A filtered group
//
// The source tags event #n with the header tag = TagA, TagB, ... TagJ for
// n mod 10 = 0, 1, ... 9. -slow-filter gives the slow group a filter (a CEL
// expression over headers, GroupConfig.Filter; "" = every event): its
// sink then receives only the events it matches, and the put commits
// queue nothing else in it, so that the rest takes no room there and
// never makes the source wait for it. RocketMQ's "TagA || TagC" is
//
//	-slow-filter 'headers["tag"] in ["TagA", "TagC"]'
//
// (what channel.TagFilter("tag", "TagA", "TagC") builds). The slow sink
// counts the numbers it never receives as "filtered out" instead of
// stopping at a gap, and the run ends with what each group's filter kept
// out of it since Open (GroupStats.FilteredOut). The filter is stored with
// the group: a run with another -slow-filter applies it to the events
// committed from then on, and -slow-filter "" removes it.
//
// The source times its own Puts ("blocked"): the channel's Stats and
// metrics describe one group (the unnamed one, or else the first), so
// they cannot say how long Puts waited for the slow group.
//
// # The disk
//
// Each event is in the data logs once. A log file is deleted only by a
// checkpoint (every 30 s), and only once no group queues or holds an event
// in it: the log holds every file from the slow group's oldest event on,
// the events the fast sink delivered long ago included, plus what was
// written since the last checkpoint. The slow group's capacity bounds its
// backlog (-capacity events, in whole files of -max-file-size); with a
// drop policy the source runs at full speed, and the log grows by what it
// writes between two checkpoints.
//
// The channel keeps -min-free (default 500 MiB, the channel's
// MinimumRequiredSpace; 0 = none) free on the data dir's disk. A batch
// refused for space is rolled back and retried every 0.5s after a
// checkpoint, while the sinks drain (takes are never refused for space);
// the progress line counts the refusals ("(3x no disk space, retried)").
// On a small disk, lower -min-free and -max-file-size: a checkpoint never
// deletes the file being written.
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
	"github.com/flumego/filechannel/examples/internal/minfree"
	"github.com/flumego/filechannel/examples/internal/progress"
	"github.com/flumego/filechannel/examples/internal/syncwriter"
)

type options struct {
	dir          string
	events       int64         // events the source sends this run (0 = until stopped)
	duration     time.Duration // stop after this long (0 = until stopped)
	batch        int           // events per transaction, for the source and both sinks
	size         int           // event body size in bytes
	slowDelay    time.Duration // the slow sink's pause per batch
	capacity     int           // events each group holds
	slowWhenFull channel.FullPolicy
	slowFilter   string // the slow group's GroupConfig.Filter; "" = every event
	maxFileSize  int64
	// minFree is the free space the channel keeps on the data dir's disk
	// (MinimumRequiredSpace): the source waits below it. 0 = no minimum
	// (the flag's default is minfree.Default, 500 MiB).
	minFree minfree.Bytes
	verbose bool

	// Test knobs, no flags.
	keepAlive time.Duration // the channel's KeepAlive; 0 = 1s
	// afterCommit, if set, is called after the put commit of the batch
	// starting at #from returned and before the source saves its cursor:
	// the window a crash makes the source send that batch again. A
	// non-nil error stops the source there.
	afterCommit func(from int64) error
}

// groups are the consumer groups, and their sinks, in the order the
// progress line shows them.
var groups = []string{"fast", "slow"}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "fanoutdata", "directory for the channel and the cursor files")
	flag.Int64Var(&o.events, "events", 0, "events the source sends this run; stop when both sinks have them (0 = until Ctrl-C)")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long (0 = until Ctrl-C)")
	flag.IntVar(&o.batch, "batch", 100, "events per transaction")
	flag.IntVar(&o.size, "size", 256, "event body size in bytes")
	flag.DurationVar(&o.slowDelay, "slow-delay", 50*time.Millisecond, "the slow sink's pause per batch")
	flag.IntVar(&o.capacity, "capacity", 100_000, "events each group holds before it is full")
	flag.TextVar(&o.slowWhenFull, "slow-when-full", channel.Block, "what the slow group does when it is full: block (the source waits), drop-oldest or drop-newest")
	flag.StringVar(&o.slowFilter, "slow-filter", "", `the slow group's filter, a CEL expression over headers (the source sets "tag" to TagA..TagJ, one in ten each), e.g. 'headers["tag"] in ["TagA", "TagC"]'; "" = every event`)
	flag.Int64Var(&o.maxFileSize, "max-file-size", 64<<20, "size of a data log file; a file is deleted once no group holds an event in it")
	o.minFree = minfree.Default
	flag.Var(&o.minFree, "min-free", minfree.Usage+"; the source waits below it")
	flag.BoolVar(&o.verbose, "v", false, "log the channel's activity to stderr")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
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
	case o.maxFileSize < 0:
		return fmt.Errorf("-max-file-size %d: must not be negative", o.maxFileSize)
	}
	return nil
}

// setDefaults fills in the options left zero that have a default.
func (o *options) setDefaults() {
	if o.keepAlive == 0 {
		o.keepAlive = time.Second
	}
	if o.maxFileSize == 0 {
		o.maxFileSize = 64 << 20
	}
}

func run(ctx context.Context, o options, w io.Writer) (err error) {
	if err := o.validate(); err != nil {
		return err
	}
	o.setDefaults()
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
	if _, err := os.Stat(filepath.Join(o.dir, "fast", "checkpoint")); err == nil {
		fmt.Fprintf(out, "fanout: %s/fast and %s/slow are the channels of an earlier fanout (one per sink); left alone\n", o.dir, o.dir)
	}

	ch, err := openChannel(o, logger)
	if err != nil {
		return fmt.Errorf("open the channel: %w", err)
	}
	defer func() {
		if ch != nil {
			err = errors.Join(err, ch.Close())
		}
	}()

	src, err := newSource(ch, o, out)
	if err != nil {
		return err
	}
	sinks, err := newSinks(ch, o, out)
	if err != nil {
		return err
	}
	printResume(out, src, sinks)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// srcDone ends when the source has committed its last event (or the
	// run ends): a sink whose group drops events stops waiting then.
	srcDone, finished := context.WithCancel(ctx)
	defer finished()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 1+len(sinks))
	wg.Go(func() {
		err := src.run(ctx)
		if err == nil {
			finished()
		}
		errs <- err
	})
	for _, s := range sinks {
		wg.Go(func() { errs <- s.run(ctx, srcDone, src.target, start) })
	}

	rep := &reporter{out: out, ch: ch, src: src, sinks: sinks, start: start, lastT: start}
	firstErr := waitAll(errs, 1+len(sinks), rep, cancel)
	wg.Wait()
	rep.report(true)
	held := make([]string, len(sinks))
	for i, s := range sinks {
		held[i] = fmt.Sprintf("%d for %s", s.g.Len(), s.name)
	}
	err = ch.Close()
	ch = nil
	fmt.Fprintf(out, "fanout: stopped; the channel holds %s for the next run\n", strings.Join(held, " and "))
	printFilteredOut(out, sinks)
	if err != nil {
		return errors.Join(firstErr, err)
	}
	return firstErr
}

// openChannel opens the channel in o.dir, with a group per sink.
func openChannel(o options, logger *slog.Logger) (*channel.FileChannel, error) {
	return channel.Open(channel.Config{
		Name:                 "fanout",
		CheckpointDir:        filepath.Join(o.dir, "checkpoint"),
		DataDirs:             []string{filepath.Join(o.dir, "data")},
		Capacity:             o.capacity,
		TransactionCapacity:  o.batch,
		MaxFileSize:          o.maxFileSize,
		MinimumRequiredSpace: o.minFree.Config(),
		KeepAlive:            o.keepAlive,
		Logger:               logger,
		Groups: []channel.GroupConfig{
			{Name: "fast"}, // Capacity 0: Config.Capacity; WhenFull 0: Block
			{Name: "slow", WhenFull: o.slowWhenFull, Filter: o.slowFilter},
		},
	})
}

// newSource returns the source, resuming at the cursor its last run saved.
func newSource(ch *channel.FileChannel, o options, out io.Writer) (*source, error) {
	src := &source{ch: ch, cursorPath: filepath.Join(o.dir, "source.next"), batch: o.batch, size: o.size, afterCommit: o.afterCommit,
		space: &minfree.Waiter{Out: out, Prefix: "fanout: ", MakeRoom: ch.Checkpoint,
			Hint: fmt.Sprintf("on a small disk, lower -min-free (%s) and -max-file-size (%d)", o.minFree, o.maxFileSize)}}
	var err error
	if src.cursor, err = counter.Load(src.cursorPath); err != nil {
		return nil, err
	}
	if o.events > 0 {
		src.target = src.cursor + o.events
	}
	return src, nil
}

// newSinks returns a sink per group, each expecting the event its last run
// saved.
func newSinks(ch *channel.FileChannel, o options, out io.Writer) ([]*sink, error) {
	var sinks []*sink
	for _, name := range groups {
		g, err := ch.Group(name)
		if err != nil {
			return nil, err
		}
		s := &sink{name: name, g: g, statePath: filepath.Join(o.dir, name+".next"), batch: o.batch, out: out,
			check: fmt.Sprintf("check the channel's files with fcreplay verify --checkpoint-dir %s --data-dirs %s", filepath.Join(o.dir, "checkpoint"), filepath.Join(o.dir, "data"))}
		if name == "slow" {
			s.delay, s.drops, s.filtered = o.slowDelay, o.slowWhenFull != channel.Block, o.slowFilter != ""
		}
		next, err := counter.Load(s.statePath)
		if err != nil {
			return nil, err
		}
		s.next.Store(next)
		sinks = append(sinks, s)
	}
	return sinks, nil
}

// printFilteredOut prints, for each group, the events its filter kept out
// of it since Open, and the filter.
func printFilteredOut(out io.Writer, sinks []*sink) {
	parts := make([]string, len(sinks))
	for i, s := range sinks {
		st := s.g.Stats()
		filter := "no filter"
		if st.Filter != "" {
			filter = "filter " + st.Filter
		}
		parts[i] = fmt.Sprintf("%s %d (%s)", s.name, st.FilteredOut, filter)
	}
	fmt.Fprintf(out, "fanout: filtered out this run: %s\n", strings.Join(parts, ", "))
}

// printResume prints where the source and each sink resume.
func printResume(out io.Writer, src *source, sinks []*sink) {
	fmt.Fprintf(out, "fanout: source resumes at #%d", src.cursor)
	for _, s := range sinks {
		fmt.Fprintf(out, "; %s group holds %d events, its sink expects #%d", s.name, s.g.Len(), s.next.Load())
	}
	fmt.Fprintln(out)
}

// waitAll receives the results of the running goroutines from errs, with
// a progress line every second, and returns the first error; that error
// cancels the run.
func waitAll(errs <-chan error, running int, rep *reporter, cancel context.CancelFunc) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var firstErr error
	for running > 0 {
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
	return firstErr
}

// reporter prints the progress lines; it keeps the time the source had
// spent in Put at the last one, for the share of the interval it waited.
type reporter struct {
	out   io.Writer
	ch    *channel.FileChannel
	src   *source
	sinks []*sink
	start time.Time
	lastT time.Time
	last  time.Duration // the source's blocked time at the last line
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
	for i, s := range r.sinks {
		if i > 0 {
			b.WriteString(" |")
		}
		queued, capacity := s.g.Len(), s.g.Cap()
		fmt.Fprintf(&b, " %s: queued %6d/%d %3.0f%%  delivered %8d", s.name, queued, capacity,
			100*float64(queued)/float64(capacity), s.delivered.Load())
		if d := s.redelivered.Load(); d > 0 {
			fmt.Fprintf(&b, " (+%d redelivered, skipped)", d)
		}
		if d := s.missed.Load(); d > 0 {
			fmt.Fprintf(&b, " (%d %s)", d, s.missedWhy())
		}
	}
	st := r.ch.Stats()
	blocked := r.src.blocked()
	part := blocked - r.last
	if final {
		part = blocked
	}
	r.last = blocked
	files := "files"
	if st.LogFiles == 1 {
		files = "file"
	}
	fmt.Fprintf(&b, " | log %s in %d %s | source at #%d, blocked %s", progress.Bytes(float64(st.LogBytes)), st.LogFiles, files,
		r.src.sent.Load(), progress.Share(part, since))
	if n := r.src.full.Load(); n > 0 {
		fmt.Fprintf(&b, " (%dx full, retried)", n)
	}
	if n := r.src.space.Count(); n > 0 {
		fmt.Fprintf(&b, " (%dx no disk space, retried)", n)
	}
	b.WriteByte('\n')
	io.WriteString(r.out, b.String())
	r.lastT = now
}
