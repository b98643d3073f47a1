// Command memcacheq is a queue server that speaks the memcached text
// protocol, with a file channel behind each queue: fqueue's (and Kestrel's)
// idea with filechannel's durability. Any memcached client can produce and
// consume: set appends an item to a queue, get takes the item at its head.
//
//	go run ./examples/memcacheq            # listens on 127.0.0.1:22133, data in ./memcacheqdata
//	go run ./examples/memcacheq -addr :22133 -dir /var/lib/memcacheq -max-queues 100
//
// A session:
//
//	$ printf 'set jobs 0 0 5\r\nhello\r\nset jobs 0 0 5\r\nworld\r\n' | nc -q1 127.0.0.1 22133
//	STORED
//	STORED
//	$ printf 'get jobs jobs jobs\r\n' | nc -q1 127.0.0.1 22133
//	VALUE jobs 0 5
//	hello
//	VALUE jobs 0 5
//	world
//	END
//	$ printf 'get jobs\r\ndelete jobs\r\nstats\r\n' | nc -q1 127.0.0.1 22133
//	END
//	CLIENT_ERROR delete is not supported by a queue; get takes an item
//	STAT pid 4242
//	...
//	STAT curr_items 0
//	STAT total_items 2
//	...
//	STAT queue_jobs_items 0
//	STAT queue_jobs_bytes 256
//	END
//
// # Commands
//
//	set <queue> <flags> <exptime> <bytes> [noreply]
//	        put one item and commit it; STORED once the commit is durable (fsync'd).
//	        flags are kept and returned by get; exptime is ignored (queued items do not expire).
//	get <queue> [<queue> ...]
//	        take one item per name (a name given twice takes two), each take committed
//	        before the reply is written; a queue that is empty or does not exist is a miss.
//	gets    the same, with a cas field of 0.
//	stats   pid, uptime, time, version, curr_connections, total_connections, cmd_get
//	        (names asked for), cmd_set, get_hits, get_misses, curr_items (items queued,
//	        all queues), total_items (stored since start), bytes (Stats().LogBytes: the queues'
//	        data log files, which still hold taken items until their file is deleted),
//	        queues, and queue_<name>_items, queue_<name>_bytes for each queue.
//	version, quit
//
// add, replace, append, prepend, cas, delete, incr, decr, touch, gat, gats,
// flush_all and verbosity get CLIENT_ERROR with the reason (the data block
// of a storage command is read and skipped); any other word gets ERROR.
//
// # Queues
//
// A queue is a file channel in -dir/<name>/ (checkpoint/ and data/). The
// first set that names a queue creates it; a start opens every queue found
// under -dir. Names are 1 to 64 of A-Z a-z 0-9 _ . - (not "." or "..").
// -max-queues caps how many queues exist: a set that would create one more
// gets SERVER_ERROR. Each queue holds up to -capacity items; a set to a full
// queue waits a second for room, then gets SERVER_ERROR.
//
// # Delivery
//
// A set is durable when the client reads STORED. A client that loses the
// connection before the reply does not know, and a retry can store the
// item twice: at-least-once, as with any queue.
//
// A get is at-most-once: the take is committed (fsync'd) before the VALUE
// is written, so if the connection breaks or the server dies between the
// commit and the client reading the reply, that item is gone. Committing
// after the client has the reply would make it at-least-once but needs a
// protocol extension (Kestrel's get <queue>/open and /close); this example
// keeps plain memcached semantics.
//
// # Bad input
//
// An unknown command gets ERROR; a malformed one CLIENT_ERROR. The
// connection stays usable after a line longer than 8192 bytes (skipped), a
// value over -max-value (its data block is skipped when it is at most 64
// MiB; past that the connection is closed) and a data block not followed by
// \r\n (CLIENT_ERROR bad data chunk; the rest of that line is skipped). A
// client that sends fewer bytes than it declared is out of step with the
// server, as with memcached. A connection idle for -idle-timeout is closed.
//
// # Shutdown
//
// On Ctrl-C or SIGTERM the server stops accepting, closes the connections
// that wait for a command, lets commands in progress finish (up to 5s),
// then closes every queue (which writes a checkpoint).
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
	"github.com/flumego/filechannel/examples/internal/syncwriter"
)

type options struct {
	addr        string
	dir         string
	maxQueues   int
	maxValue    int64
	capacity    int
	idleTimeout time.Duration
	verbose     bool

	// onListen, if set, is called with the listening address before the
	// first connection is accepted (tests listen on 127.0.0.1:0).
	onListen func(net.Addr)
}

// maxMaxValue is the largest -max-value: an item is one event, and an
// event is at most channel.MaxEventSize encoded (a few dozen bytes go to
// the record's own fields and the flags header).
const maxMaxValue = channel.MaxEventSize - 1024

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:22133", "address to listen on")
	flag.StringVar(&o.dir, "dir", "memcacheqdata", "directory holding one subdirectory per queue")
	flag.IntVar(&o.maxQueues, "max-queues", 64, "most queues that may exist")
	flag.Int64Var(&o.maxValue, "max-value", 1<<20, "largest item in bytes")
	flag.IntVar(&o.capacity, "capacity", 1_000_000, "items each queue holds")
	flag.DurationVar(&o.idleTimeout, "idle-timeout", 5*time.Minute, "close a connection idle this long (0 = never)")
	flag.BoolVar(&o.verbose, "v", false, "log connections' errors and the queues' activity in detail")
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
	case o.maxValue < 1 || o.maxValue > maxMaxValue:
		return fmt.Errorf("-max-value %d: must be in [1, %d]", o.maxValue, maxMaxValue)
	case o.capacity <= 0:
		return fmt.Errorf("-capacity %d: must be positive", o.capacity)
	case o.idleTimeout < 0:
		return fmt.Errorf("-idle-timeout %v: must not be negative", o.idleTimeout)
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

	qs, err := openQueues(o.dir, o.maxQueues, o.capacity, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return errors.Join(err, qs.close())
	}
	names, chans := qs.snapshot()
	fmt.Fprintf(out, "memcacheq: listening on %s; %d queues in %s", ln.Addr(), len(names), o.dir)
	for _, name := range names {
		fmt.Fprintf(out, ", %s (%d items)", name, chans[name].Len())
	}
	fmt.Fprintln(out)
	if o.onListen != nil {
		o.onListen(ln.Addr())
	}

	s := &server{o: o, qs: qs, log: logger, start: time.Now(), open: map[*conn]struct{}{}}
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
	names, chans = qs.snapshot()
	items := 0
	for _, name := range names {
		items += chans[name].Len()
	}
	err = errors.Join(serveErr, qs.close())
	fmt.Fprintf(out, "memcacheq: stopped; %d items in %d queues\n", items, len(names))
	return err
}
