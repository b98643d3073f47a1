package main

import (
	"bufio"
	"bytes"
	"context"
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
	// ctx ends at shutdown (stop), and so do the waits for a retry, for
	// room or for an item (get t=); stopped is its Done channel.
	ctx     context.Context
	stop    context.CancelFunc
	stopped <-chan struct{}
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
	noreplyRefused           atomic.Int64 // noreply commands refused, without a reply
	notStored                atomic.Int64 // sets refused NOT_STORED: the queue was full
	openReads                atomic.Int64 // items held open (get /open), all connections
	canceledReads            atomic.Int64 // open items given back: /abort, a closed connection, a failed /close

	// refuseLog logs what clients can cause at will (full queues, too
	// many queues or groups); noreplyLog the refusals no client was told of.
	rejectLog, noMemoryLog, refuseLog, noreplyLog throttledLog
}

func newServer(o options, qs *queues, log *slog.Logger) *server {
	ctx, stop := context.WithCancel(context.Background())
	return &server{
		o: o, qs: qs, log: log, start: time.Now(),
		ctx: ctx, stop: stop, stopped: ctx.Done(),
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
	// reads are the items the connection holds open (get /open), by
	// target; only its own goroutine uses them.
	reads map[string]*openRead
}

// shutdown stops accepting, interrupts idle connections, waits up to
// shutdownGrace for commands in progress, then closes what is left. The
// queues are closed by the caller once shutdown returns.
func (s *server) shutdown(ln net.Listener) {
	s.connsMu.Lock()
	s.closing.Store(true)
	s.stop()
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
		s.releaseReads(c)
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
		s.reply(c, w, cmd, err.Error()+"\r\n")
		return !skipped
	}
	switch cmd.name {
	case "get", "gets":
		return s.get(c, w, cmd)
	case "set":
		reply, quit := s.set(c, r, cmd)
		s.reply(c, w, cmd, reply)
		return quit
	case "delete":
		s.reply(c, w, cmd, s.delete(cmd))
	case "stats":
		s.writeStats(w)
	case "version":
		w.WriteString("VERSION " + version + "\r\n")
	case "quit":
		return true
	}
	return false
}

// reply writes the reply line of cmd, unless cmd ends in noreply: then
// nothing is written, as with memcached, whatever the reply (a client
// that sent noreply reads no reply, and would take one for the reply to
// its next command). A refusal kept from the client is counted (STAT
// noreply_refused) and logged.
func (s *server) reply(c *conn, w *bufio.Writer, cmd command, line string) {
	if !cmd.noreply {
		w.WriteString(line)
		return
	}
	if isRefusal(line) {
		n := s.noreplyRefused.Add(1)
		s.noreplyLog.warn(s.log, "refused a noreply command; the client was not told", "command", cmd.name,
			"reply", strings.TrimSuffix(line, "\r\n"), "remote", c.RemoteAddr().String(), "noreply_refused", n)
	}
}

// isRefusal reports whether reply line says a command was not done.
func isRefusal(line string) bool {
	for _, p := range []string{"ERROR", "CLIENT_ERROR", "SERVER_ERROR", "NOT_STORED"} {
		if strings.HasPrefix(line, p) {
			return true
		}
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
// the reply, which set returns. The first set that stores an item in a
// queue creates it: a set that creates one and fails removes it again.
func (s *server) set(c *conn, r *bufio.Reader, cmd command) (reply string, quit bool) {
	s.cmdSet.Add(1)
	if cmd.dataLen > s.o.maxValue {
		skipped := s.skipBlock(c, r, cmd.dataLen)
		return fmt.Sprintf("CLIENT_ERROR value too large: %d bytes, the limit is %d (-max-value)\r\n", cmd.dataLen, s.o.maxValue), !skipped
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
		return reply, !skipped
	}
	defer s.pending.release(cmd.dataLen) // once the put is done with data
	s.valueDeadline(c)
	data := make([]byte, cmd.dataLen+2)
	if _, err := io.ReadFull(r, data); err != nil {
		s.valueReadFailed(c, cmd.dataLen, err)
		return "", true
	}
	if !bytes.HasSuffix(data, crlf) {
		// Too long a block: its end is on this line. Too short a block: we
		// read into the next command and cannot get back in step with a
		// client that miscounts.
		if data[len(data)-1] != '\n' {
			if _, err := readLine(r); err != nil && !errors.Is(err, errLineTooLong) {
				return "", true
			}
		}
		return "CLIENT_ERROR bad data chunk\r\n", false
	}
	name := cmd.keys[0]
	q, created, err := s.qs.use(name, true)
	if err == nil {
		err = put(q.ch, cmd.flags, data[:cmd.dataLen])
		q.mu.RUnlock()
		if err != nil && created {
			s.qs.removeIfEmpty(q)
		}
	}
	if err != nil {
		return s.setError(name, err), false
	}
	s.totalItems.Add(1)
	return "STORED\r\n", false
}

// setError returns the reply to a set that failed with err: NOT_STORED
// for a full queue (back-pressure: memcached's reply for an item it did
// not store, which clients take as a failed store, not a failed server),
// CLIENT_ERROR for -max-queues, SERVER_ERROR (serverError) for the rest.
func (s *server) setError(queue string, err error) string {
	switch {
	case errors.Is(err, channel.ErrChannelFull):
		n := s.notStored.Add(1)
		s.refuseLog.warn(s.log, "refused a set: the queue is full", "queue", queue, "not_stored", n)
		return "NOT_STORED\r\n"
	case errors.Is(err, errTooManyQueues):
		s.refuseLog.warn(s.log, "refused a set: too many queues", "queue", queue, "max_queues", s.o.maxQueues)
		return "CLIENT_ERROR " + err.Error() + "\r\n"
	}
	return s.serverError("set", queue, err)
}

// delete removes an empty queue or group: DELETED, NOT_FOUND if there is
// none, CLIENT_ERROR if it holds items (queued or open): a delete never
// discards an item.
func (s *server) delete(cmd command) string {
	k := cmd.reads[0]
	var err error
	if k.group == "" {
		err = s.qs.remove(k.queue)
	} else {
		err = s.qs.removeGroup(k.queue, k.group)
	}
	var ne *errNotEmpty
	switch {
	case err == nil:
		return "DELETED\r\n"
	case errors.Is(err, errNoQueue):
		return "NOT_FOUND\r\n"
	case errors.As(err, &ne):
		return "CLIENT_ERROR " + err.Error() + "\r\n"
	}
	return s.serverError("delete", k.target(), err)
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

// serverError logs err and returns the reply line for it.
func (s *server) serverError(op, queue string, err error) string {
	s.log.Warn(op+" failed", "queue", queue, "err", err)
	switch {
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

// queueStat is one line of a queue's (or group's) stats.
type queueStat struct {
	name  string
	value int64
}

// queueStats returns q's stats lines and its items (all groups): items,
// bytes and open_transactions, then items and open_transactions of each
// named group as queue_<queue>+<group>_*; nothing if q is being removed.
func queueStats(q *queue) (lines []queueStat, items int64, onDisk int64) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.removed {
		return nil, 0, 0
	}
	onDisk = q.ch.Stats().LogBytes
	for _, name := range q.ch.GroupNames() {
		g, err := q.ch.Group(name)
		if err != nil {
			continue
		}
		st := g.Stats()
		prefix := "queue_" + q.name
		if name != "" {
			prefix += "+" + name
		}
		lines = append(lines, queueStat{prefix + "_items", int64(st.Queued)})
		if name == "" {
			lines = append(lines, queueStat{prefix + "_bytes", onDisk})
		}
		lines = append(lines, queueStat{prefix + "_open_transactions", int64(st.InflightTakes)})
		items += int64(st.Queued)
	}
	return lines, items, onDisk
}

// writeStats writes the stats reply: memcached's names where they fit a
// queue, and Kestrel-style per-queue lines.
func (s *server) writeStats(w *bufio.Writer) {
	qs := s.qs.snapshot()
	var items, onDisk int64
	var perQueue []queueStat
	for _, q := range qs {
		lines, n, b := queueStats(q)
		perQueue = append(perQueue, lines...)
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
	stat("queues", len(qs))
	stat("binary_refused", s.binaryRefused.Load())
	stat("max_connections", s.o.maxConns)
	stat("rejected_connections", s.rejectedConns.Load())
	stat("accept_errors", s.acceptErrors.Load())
	stat("pending_bytes", s.pending.inUse())
	stat("store_no_memory", s.storeNoMemory.Load())
	stat("value_timeouts", s.valueTimeouts.Load())
	stat("not_stored", s.notStored.Load())
	stat("noreply_refused", s.noreplyRefused.Load())
	stat("open_transactions", s.openReads.Load())
	stat("canceled_transactions", s.canceledReads.Load())
	for _, l := range perQueue {
		stat(l.name, l.value)
	}
	w.WriteString("END\r\n")
}
