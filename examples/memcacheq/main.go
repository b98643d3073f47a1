package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/examples/internal/minfree"
	"github.com/flumego/filechannel/examples/internal/syncwriter"
)

type options struct {
	addr        string
	dir         string
	maxQueues   int
	maxGroups   int // named groups per queue (get <queue>+<group>)
	maxValue    int64
	capacity    int // 0: defaultCapacity for a new queue, the recorded one for an existing queue
	idleTimeout time.Duration
	verbose     bool
	// minFree is -min-free, every queue's MinimumRequiredSpace (0 = no
	// minimum; the flag's default is minfree.Default, 500 MiB).
	minFree minfree.Bytes

	// maxConns is the most connections served at once; one more is sent
	// SERVER_ERROR too many connections and closed (accept.go).
	maxConns int
	// maxPendingBytes bounds the bytes of values held at once, from the
	// start of a set's data block to its commit (pending.go).
	maxPendingBytes int64
	// valueTimeout is how long a set's data block may take to arrive
	// (0 = -idle-timeout).
	valueTimeout time.Duration

	// onListen, if set, is called with the listening address before the
	// first connection is accepted (tests listen on 127.0.0.1:0).
	onListen func(net.Addr)
	// configureQueue, if set, adjusts each queue's channel config before
	// it opens (tests).
	configureQueue func(*channel.Config)
}

// maxMaxValue is the largest -max-value: an item is one event, and an
// event is at most channel.MaxEventSize encoded (a few dozen bytes go to
// the record's own fields and the flags header).
const maxMaxValue = channel.MaxEventSize - 1024

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:22133", "address to listen on")
	flag.StringVar(&o.dir, "dir", "memcacheqdata", "directory holding one subdirectory per queue")
	flag.IntVar(&o.maxQueues, "max-queues", 64, "most queues that may exist; a set that needs one more removes the least recently used empty queue without groups, or gets CLIENT_ERROR too many queues")
	flag.IntVar(&o.maxGroups, "max-groups", 4, "most groups (get <queue>+<group>) each queue may have; a get that would create one more gets CLIENT_ERROR too many groups")
	flag.Int64Var(&o.maxValue, "max-value", 1<<20, "largest item in bytes")
	flag.IntVar(&o.capacity, "capacity", 0, "items each queue holds (0 = 100000 for a new queue, the recorded capacity for an existing one)")
	flag.DurationVar(&o.idleTimeout, "idle-timeout", 5*time.Minute, "close a connection idle this long (0 = never)")
	flag.IntVar(&o.maxConns, "max-conns", 1024, "most connections served at once; one more gets SERVER_ERROR too many connections and is closed")
	flag.Int64Var(&o.maxPendingBytes, "max-pending-bytes", 64<<20, "most bytes of values being received or committed at once, all connections together; a set beyond it waits 1s, then gets SERVER_ERROR out of memory storing object")
	flag.DurationVar(&o.valueTimeout, "value-timeout", 30*time.Second, "close a connection whose set's data block has not all arrived this long after the server began to read it (0 = -idle-timeout)")
	flag.BoolVar(&o.verbose, "v", false, "log connections' errors and the queues' activity in detail")
	o.minFree = minfree.Default
	flag.Var(&o.minFree, "min-free", minfree.Usage+"; sets are refused below it")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "memcacheq:", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	switch {
	case o.maxQueues <= 0:
		return fmt.Errorf("-max-queues %d: must be positive", o.maxQueues)
	case o.maxGroups < 0:
		return fmt.Errorf("-max-groups %d: must not be negative", o.maxGroups)
	case o.maxValue < 1 || o.maxValue > maxMaxValue:
		return fmt.Errorf("-max-value %d: must be in [1, %d]", o.maxValue, maxMaxValue)
	case o.capacity < 0:
		return fmt.Errorf("-capacity %d: must not be negative", o.capacity)
	case o.idleTimeout < 0:
		return fmt.Errorf("-idle-timeout %v: must not be negative", o.idleTimeout)
	case o.maxConns <= 0:
		return fmt.Errorf("-max-conns %d: must be positive", o.maxConns)
	case o.maxPendingBytes < o.maxValue:
		return fmt.Errorf("-max-pending-bytes %d: must be at least -max-value (%d), or the largest items could never be set", o.maxPendingBytes, o.maxValue)
	case o.valueTimeout < 0:
		return fmt.Errorf("-value-timeout %v: must not be negative", o.valueTimeout)
	}
	return nil
}

// run serves until ctx ends, then shuts down gracefully.
func run(ctx context.Context, o options, w io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	out := syncwriter.New(w)
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))

	qs, err := openQueues(o.dir, o.maxQueues, o.capacity, o.minFree.Config(), logger, o.configureQueue)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return errors.Join(err, qs.close())
	}
	all := qs.snapshot()
	fmt.Fprintf(out, "memcacheq: listening on %s; %d queues in %s", ln.Addr(), len(all), o.dir)
	for _, q := range all {
		fmt.Fprintf(out, ", %s (%d items)", q.name, q.ch.Len())
	}
	fmt.Fprintln(out)
	if o.onListen != nil {
		o.onListen(ln.Addr())
	}

	warnFDLimit(o, logger)
	s := newServer(o, qs, logger)
	served := make(chan error, 1)
	go func() { served <- s.serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	s.shutdown(ln)
	if serveErr == nil {
		serveErr = <-served
	}
	all = qs.snapshot()
	items := 0
	for _, q := range all {
		items += q.ch.Len()
	}
	err = errors.Join(serveErr, qs.close())
	fmt.Fprintf(out, "memcacheq: stopped; %d items in %d queues\n", items, len(all))
	return err
}

// Descriptors a queue holds open: its checkpoint file and its active log
// file, a lock file in each of its two directories, and a few more for a
// moment (a checkpoint being written, older log files read by gets); and
// one more for each group (its ring's file).
const fdsPerQueue = 8

// fdsReserved are descriptors for the rest: the listener, the runtime's
// poller, standard streams, a queue being created.
const fdsReserved = 32

// warnFDLimit warns when -max-conns connections and -max-queues queues
// need more descriptors than the process may open: accepts would then fail
// with "too many open files" (retried, STAT accept_errors) before -max-conns
// is reached, and so would sets that create a queue.
func warnFDLimit(o options, log *slog.Logger) {
	limit, ok := fdLimit()
	need := uint64(o.maxConns) + uint64(o.maxQueues)*(fdsPerQueue+uint64(o.maxGroups)) + fdsReserved
	if ok && limit < need {
		log.Warn("the descriptor limit is below what -max-conns, -max-queues and -max-groups need: lower -max-conns or raise ulimit -n",
			"limit", limit, "need", need, "max_conns", o.maxConns, "max_queues", o.maxQueues, "max_groups", o.maxGroups)
	}
}
