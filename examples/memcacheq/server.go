package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/channel"
)

// version is what the version command and STAT version report: this
// server's own version, not a memcached version. It is numeric because
// clients parse it as <major>.<minor>.<patch> (libmemcached, and so memcping
// and memcstat, refuses anything else and also a major version of 0; the
// npm memcached client throws). The name is in STAT implementation.
const version = "1.0.0"

// implementation is the server's name, reported by STAT implementation.
const implementation = "memcacheq-filechannel"

// maxSkip is the longest data block the server reads and throws away to
// stay in step with a client after refusing its command (a value over
// -max-value, add, cas, ...). A longer block closes the connection.
const maxSkip = 64 << 20

// shutdownGrace is how long a shutdown waits for commands in progress
// before it closes their connections.
const shutdownGrace = 5 * time.Second

var crlf = []byte("\r\n")

// errLineTooLong is a command line longer than maxLine; the line is
// skipped and the connection stays usable.
var errLineTooLong = errors.New("line too long")

type server struct {
	o     options
	qs    *queues
	log   *slog.Logger
	start time.Time

	closing atomic.Bool
	stopped chan struct{}  // closed by shutdown: ends waits for a retry or for room
	conns   sync.WaitGroup // one per connection being served
	pending *pendingBytes  // -max-pending-bytes

	// connsMu guards open (and orders closing against conns.Add).
	connsMu sync.Mutex
	open    map[*conn]struct{}

	currConns, totalConns    atomic.Int64
	cmdGet, getHits, getMiss atomic.Int64
	cmdSet, totalItems       atomic.Int64
	binaryRefused            atomic.Int64 // the first is logged, the rest only counted
	acceptErrors             atomic.Int64 // accepts that failed and were retried
	rejectedConns            atomic.Int64 // connections refused beyond -max-conns
	storeNoMemory            atomic.Int64 // sets refused beyond -max-pending-bytes
	valueTimeouts            atomic.Int64 // connections closed mid-value after -value-timeout

	rejectLog, noMemoryLog throttledLog
}

func newServer(o options, qs *queues, log *slog.Logger) *server {
	return &server{
		o: o, qs: qs, log: log, start: time.Now(),
		stopped: make(chan struct{}),
		pending: newPendingBytes(o.maxPendingBytes),
		open:    map[*conn]struct{}{},
	}
}

// conn is one client connection.
type conn struct {
	net.Conn
	// mu guards busy: a shutdown interrupts a connection waiting for its
	// next command at once, and lets one that is running a command finish.
	mu   sync.Mutex
	busy bool
}

// shutdown stops accepting, interrupts idle connections, waits up to
// shutdownGrace for commands in progress, then closes what is left. The
// queues are closed by the caller once shutdown returns.
func (s *server) shutdown(ln net.Listener) {
	s.connsMu.Lock()
	s.closing.Store(true)
	close(s.stopped)
	open := make([]*conn, 0, len(s.open))
	for c := range s.open {
		open = append(open, c)
	}
	s.connsMu.Unlock()
	ln.Close()
	for _, c := range open {
		c.mu.Lock()
		if !c.busy {
			c.SetReadDeadline(time.Now()) // wakes its read; it sees closing and ends
		}
		c.mu.Unlock()
	}
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		s.log.Warn("closing connections still busy after the shutdown grace period", "grace", shutdownGrace)
		for _, c := range open {
			c.Close()
		}
		<-done
	}
}

// idle marks c as waiting for a command; false means the server is
// shutting down and c should end.
func (s *server) idle(c *conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	if s.closing.Load() {
		return false
	}
	s.extendRead(c)
	return true
}

func (s *server) setBusy(c *conn) {
	c.mu.Lock()
	c.busy = true
	c.mu.Unlock()
}

func (s *server) extendRead(c *conn) {
	if s.o.idleTimeout > 0 {
		c.SetReadDeadline(time.Now().Add(s.o.idleTimeout))
	}
}

// extendWrite gives the replies of the command starting now -idle-timeout
// to leave: a deadline left over from the previous command could expire in
// the middle of a get's reply, after its take is committed.
func (s *server) extendWrite(c *conn) {
	if s.o.idleTimeout > 0 {
		c.SetWriteDeadline(time.Now().Add(s.o.idleTimeout))
	}
}

// valueDeadline gives the data block that the server starts to read now
// -value-timeout to arrive (-idle-timeout without it).
func (s *server) valueDeadline(c *conn) {
	if s.o.valueTimeout > 0 {
		c.SetReadDeadline(time.Now().Add(s.o.valueTimeout))
		return
	}
	s.extendRead(c)
}

// valueReadFailed counts and logs a data block that did not arrive in
// time; the caller closes the connection.
func (s *server) valueReadFailed(c *conn, n int64, err error) {
	if isTimeout(err) {
		s.valueTimeouts.Add(1)
		s.log.Info("closed a connection stalled in a value", "remote", c.RemoteAddr().String(), "bytes", n, "value_timeout", s.o.valueTimeout)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *server) handle(c *conn) {
	defer func() {
		c.Close()
		s.currConns.Add(-1)
		s.connsMu.Lock()
		delete(s.open, c)
		s.connsMu.Unlock()
		s.conns.Done()
	}()
	r := bufio.NewReaderSize(c, maxLine)
	w := bufio.NewWriter(c)
	for s.idle(c) {
		if b, err := r.Peek(1); err != nil {
			return // EOF, idle timeout, shutdown, or a broken connection
		} else if b[0] == binaryReqMagic {
			s.setBusy(c)
			s.refuseBinary(c, r)
			return
		}
		line, err := readLine(r)
		if err != nil && !errors.Is(err, errLineTooLong) {
			return // EOF, idle timeout, shutdown, or a broken connection
		}
		s.setBusy(c)
		s.extendWrite(c)
		quit := false
		if err != nil {
			w.WriteString("CLIENT_ERROR line too long\r\n")
		} else {
			quit = s.exec(c, line, r, w)
		}
		s.extendWrite(c)
		if err := w.Flush(); err != nil || quit {
			return
		}
	}
}

// readLine reads one command line and returns it without its terminator
// (\r\n, or a bare \n). A line longer than maxLine is skipped up to its end
// and reported as errLineTooLong.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if err != nil {
			return nil, err
		}
		return nil, errLineTooLong
	}
	if err != nil {
		return nil, err // a partial last line is dropped
	}
	line = line[:len(line)-1]
	return bytes.TrimSuffix(line, []byte{'\r'}), nil
}

// exec runs one command and writes its reply to w; true means close the
// connection.
func (s *server) exec(c *conn, line []byte, r *bufio.Reader, w *bufio.Writer) (quit bool) {
	cmd, err := parseCommand(line)
	if err != nil {
		if cmd.name == "set" {
			s.cmdSet.Add(1)
		}
		skipped := cmd.dataLen < 0 || s.skipBlock(c, r, cmd.dataLen)
		w.WriteString(err.Error() + "\r\n")
		return !skipped
	}
	switch cmd.name {
	case "get", "gets":
		s.get(w, cmd)
	case "set":
		return s.set(c, r, w, cmd)
	case "stats":
		s.writeStats(w)
	case "version":
		w.WriteString("VERSION " + version + "\r\n")
	case "quit":
		return true
	}
	return false
}

// skipBlock reads and discards a refused command's data block and its
// terminator; false means it could not (too long, or the read failed).
func (s *server) skipBlock(c *conn, r *bufio.Reader, n int64) bool {
	if n > maxSkip {
		return false
	}
	s.valueDeadline(c)
	if _, err := io.CopyN(io.Discard, r, n+2); err != nil {
		s.valueReadFailed(c, n, err)
		return false
	}
	return true
}

// set stores one item: one put transaction, committed (fsync'd) before
// the reply.
func (s *server) set(c *conn, r *bufio.Reader, w *bufio.Writer, cmd command) (quit bool) {
	s.cmdSet.Add(1)
	if cmd.dataLen > s.o.maxValue {
		skipped := s.skipBlock(c, r, cmd.dataLen)
		fmt.Fprintf(w, "CLIENT_ERROR value too large: %d bytes, the limit is %d (-max-value)\r\n", cmd.dataLen, s.o.maxValue)
		return !skipped
	}
	if !s.pending.acquire(cmd.dataLen, pendingWait, s.stopped) {
		reply := "SERVER_ERROR shutting down\r\n"
		if !s.closing.Load() {
			reply = outOfMemoryReply
			n := s.storeNoMemory.Add(1)
			s.noMemoryLog.warn(s.log, "refused a set: too many bytes of values pending", "bytes", cmd.dataLen,
				"max_pending_bytes", s.o.maxPendingBytes, "store_no_memory", n)
		}
		skipped := s.skipBlock(c, r, cmd.dataLen)
		w.WriteString(reply)
		return !skipped
	}
	defer s.pending.release(cmd.dataLen) // once the put is done with data
	s.valueDeadline(c)
	data := make([]byte, cmd.dataLen+2)
	if _, err := io.ReadFull(r, data); err != nil {
		s.valueReadFailed(c, cmd.dataLen, err)
		return true
	}
	if !bytes.HasSuffix(data, crlf) {
		// Too long a block: its end is on this line. Too short a block: we
		// read into the next command and cannot get back in step with a
		// client that miscounts.
		if data[len(data)-1] != '\n' {
			if _, err := readLine(r); err != nil && !errors.Is(err, errLineTooLong) {
				return true
			}
		}
		w.WriteString("CLIENT_ERROR bad data chunk\r\n")
		return false
	}
	name := cmd.keys[0]
	ch, err := s.qs.create(name)
	if err == nil {
		err = put(ch, cmd.flags, data[:cmd.dataLen])
	}
	if err != nil {
		w.WriteString(s.serverError("set", name, err))
		return false
	}
	s.totalItems.Add(1)
	if !cmd.noreply {
		w.WriteString("STORED\r\n")
	}
	return false
}

func put(ch *channel.FileChannel, flags uint32, body []byte) error {
	tx, err := ch.Begin()
	if err != nil {
		return err
	}
	var headers map[string]string
	if flags != 0 {
		headers = map[string]string{"flags": strconv.FormatUint(uint64(flags), 10)}
	}
	if err := tx.Put(channel.Event{Headers: headers, Body: body}); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// get takes one item per key, in order (the parser has dropped repeated
// names), each in its own take transaction committed (fsync'd) before the
// reply is written: a client that loses the connection, or a server that
// dies before the reply leaves, loses that item. A take that fails ends the
// reply there: SERVER_ERROR if no VALUE was written yet, else END after the
// values taken so far.
func (s *server) get(w *bufio.Writer, cmd command) {
	values := 0
	for _, name := range cmd.keys {
		s.cmdGet.Add(1)
		ev, ok, err := s.take(name)
		if err != nil {
			msg := s.serverError("get", name, err)
			if values == 0 {
				w.WriteString(msg)
				return
			}
			break
		}
		if !ok {
			s.getMiss.Add(1)
			continue
		}
		s.getHits.Add(1)
		values++
		flags := ev.Headers["flags"]
		if flags == "" {
			flags = "0"
		}
		fmt.Fprintf(w, "VALUE %s %s %d", name, flags, len(ev.Body))
		if cmd.name == "gets" {
			w.WriteString(" 0") // a cas unique, which the cas command (refused) would use
		}
		w.Write(crlf)
		w.Write(ev.Body)
		w.Write(crlf)
	}
	w.WriteString("END\r\n")
}

// take removes the item at the head of queue name; ok is false when the
// queue is empty or does not exist.
func (s *server) take(name string) (ev channel.Event, ok bool, err error) {
	ch, err := s.qs.lookup(name)
	if err != nil || ch == nil {
		return channel.Event{}, false, err
	}
	tx, err := ch.Begin()
	if err != nil {
		return channel.Event{}, false, err
	}
	ev, ok, err = tx.Take()
	if err != nil || !ok {
		return channel.Event{}, false, errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return channel.Event{}, false, err // rolled back: the item stays queued
	}
	return ev, true, nil
}

// serverError logs err and returns the reply line for it.
func (s *server) serverError(op, queue string, err error) string {
	s.log.Warn(op+" failed", "queue", queue, "err", err)
	switch {
	case errors.Is(err, errTooManyQueues):
		return fmt.Sprintf("SERVER_ERROR too many queues: the limit is %d (-max-queues)\r\n", s.o.maxQueues)
	case errors.Is(err, channel.ErrChannelFull):
		return "SERVER_ERROR queue " + queue + " is full\r\n"
	case errors.Is(err, channel.ErrInsufficientSpace):
		return "SERVER_ERROR out of disk space\r\n"
	case errors.Is(err, channel.ErrClosed):
		return "SERVER_ERROR shutting down\r\n"
	}
	msg := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, err.Error())
	return "SERVER_ERROR " + msg + "\r\n"
}

// writeStats writes the stats reply: memcached's names where they fit a
// queue, and Kestrel-style per-queue lines.
func (s *server) writeStats(w *bufio.Writer) {
	names, chans := s.qs.snapshot()
	var items, onDisk int64
	perQueue := make([][2]int64, len(names))
	for i, name := range names {
		n, b := int64(chans[name].Len()), chans[name].Stats().LogBytes
		perQueue[i] = [2]int64{n, b}
		items += n
		onDisk += b
	}
	now := time.Now()
	stat := func(name string, v any) { fmt.Fprintf(w, "STAT %s %v\r\n", name, v) }
	stat("pid", os.Getpid())
	stat("uptime", int64(now.Sub(s.start).Seconds()))
	stat("time", now.Unix())
	stat("version", version)
	stat("implementation", implementation)
	stat("curr_connections", s.currConns.Load())
	stat("total_connections", s.totalConns.Load())
	stat("cmd_get", s.cmdGet.Load())
	stat("cmd_set", s.cmdSet.Load())
	stat("get_hits", s.getHits.Load())
	stat("get_misses", s.getMiss.Load())
	stat("curr_items", items)
	stat("total_items", s.totalItems.Load())
	stat("bytes", onDisk)
	stat("queues", len(names))
	stat("binary_refused", s.binaryRefused.Load())
	stat("max_connections", s.o.maxConns)
	stat("rejected_connections", s.rejectedConns.Load())
	stat("accept_errors", s.acceptErrors.Load())
	stat("pending_bytes", s.pending.inUse())
	stat("store_no_memory", s.storeNoMemory.Load())
	stat("value_timeouts", s.valueTimeouts.Load())
	for i, name := range names {
		stat("queue_"+name+"_items", perQueue[i][0])
		stat("queue_"+name+"_bytes", perQueue[i][1])
	}
	w.WriteString("END\r\n")
}
