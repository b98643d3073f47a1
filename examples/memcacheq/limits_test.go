package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flumego/filechannel/examples/internal/syncwriter"
)

// flakyListener fails its next fails Accepts with err, then accepts.
type flakyListener struct {
	net.Listener
	err   error
	fails atomic.Int64
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

func newFlakyListener(t *testing.T, err error, fails int64) *flakyListener {
	t.Helper()
	ln, err2 := net.Listen("tcp", "127.0.0.1:0")
	if err2 != nil {
		t.Fatal(err2)
	}
	l := &flakyListener{Listener: ln, err: err}
	l.fails.Store(fails)
	return l
}

// acceptErr is what net's Accept returns when accept4(2) fails with errno.
func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// servedServer is a server whose accept loop runs on a listener of the
// test's choosing.
type servedServer struct {
	*server
	ln     net.Listener
	served chan error
	log    bytes.Buffer // read only after stop
}

func serveOn(t *testing.T, ln net.Listener) *servedServer {
	t.Helper()
	ss := &servedServer{ln: ln, served: make(chan error, 1)}
	logger := slog.New(slog.NewTextHandler(syncwriter.New(&ss.log), nil))
	qs, err := openQueues(t.TempDir(), 8, 0, 0, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := options{maxQueues: 8, maxValue: 1 << 20, maxConns: 8, maxPendingBytes: 1 << 20, idleTimeout: time.Minute}
	ss.server = newServer(o, qs, logger)
	go func() { ss.served <- ss.serve(ln) }()
	t.Cleanup(func() {
		ss.stop()
		if err := qs.close(); err != nil {
			t.Error(err)
		}
	})
	return ss
}

// stop shuts the server down, once.
func (ss *servedServer) stop() {
	if !ss.closing.Load() {
		ss.shutdown(ss.ln)
	}
}

// Accept errors that pass (out of descriptors, a connection aborted before
// it was accepted, a timeout) are retried: the server goes on serving, and
// counts and logs them.
func TestAcceptRetriesTemporaryErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"emfile", acceptErr(syscall.EMFILE)},
		{"enfile", acceptErr(syscall.ENFILE)},
		{"econnaborted", acceptErr(syscall.ECONNABORTED)},
		{"enobufs", acceptErr(syscall.ENOBUFS)},
		{"eproto", acceptErr(syscall.EPROTO)},
		{"timeout", &net.OpError{Op: "accept", Net: "tcp", Err: os.ErrDeadlineExceeded}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const fails = 5
			ln := newFlakyListener(t, tt.err, fails)
			ss := serveOn(t, ln)
			c := dial(t, ln.Addr().String())
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c, "version\r\n")
				c.r.ReadString('\n')
			}()
			select {
			case err := <-ss.served:
				t.Fatalf("serve returned %v after an accept error", err)
			case <-done:
			}
			c.exchange("set", "set q 0 0 2\r\nhi\r\n", "STORED\r\n")
			if got := c.stats()["accept_errors"]; got != strconv.Itoa(fails) {
				t.Errorf("STAT accept_errors %s, want %d", got, fails)
			}
			ss.stop()
			if err := <-ss.served; err != nil {
				t.Errorf("serve: %v", err)
			}
			log := ss.log.String()
			if strings.Count(log, "accept failed; retrying") != 1 || !strings.Contains(log, "accepting connections again") {
				t.Errorf("want one line for the run of failed accepts and one when they work again; log:\n%s", log)
			}
		})
	}
}

// Another accept error (the listener closed behind the server's back) ends
// serve with it, at once.
func TestAcceptStopsOnOtherErrors(t *testing.T) {
	broken := errors.New("listener broken")
	ss := serveOn(t, newFlakyListener(t, broken, 1))
	select {
	case err := <-ss.served:
		if !errors.Is(err, broken) {
			t.Fatalf("serve: %v, want %v", err, broken)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve goes on after an accept error it cannot retry")
	}
}

// Failed accepts back off up to a second between retries, and a shutdown
// does not wait for the pause to end.
func TestAcceptBackoffIsBoundedAndInterruptible(t *testing.T) {
	ln := newFlakyListener(t, acceptErr(syscall.EMFILE), 1<<40)
	ss := serveOn(t, ln)
	// 5ms, 10ms, ..., 640ms: about 1.3s to the ninth failure, whose pause
	// is the full second.
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for ss.acceptErrors.Load() < 9 {
		if time.Now().After(deadline) {
			t.Fatalf("%d failed accepts after 20s", ss.acceptErrors.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Fatalf("9 failed accepts in %v: the retries do not back off", d)
	}
	start = time.Now()
	ss.stop()
	select {
	case err := <-ss.served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("serve returned %v after the shutdown: it waited for the accept backoff", d)
	}
}

// Beyond -max-conns a connection gets SERVER_ERROR too many connections and
// is closed; the ones being served are not disturbed, and a slot that frees
// up is used again.
func TestMaxConns(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), maxConns: 2})
	a, b := dial(t, s.addr), dial(t, s.addr)
	a.exchange("a", "version\r\n", "VERSION "+version+"\r\n")
	b.exchange("b", "version\r\n", "VERSION "+version+"\r\n")

	third := dial(t, s.addr)
	third.exchange("third", "", "SERVER_ERROR too many connections\r\n")
	third.wantClosed("beyond -max-conns")
	// One that sends its command at once gets the same reply, or a reset.
	fourth := dial(t, s.addr)
	fourth.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(fourth, "get q\r\n")
	if l, err := fourth.r.ReadString('\n'); err == nil && l != "SERVER_ERROR too many connections\r\n" {
		t.Fatalf("fourth connection: %q", l)
	} else if isTimeout(err) {
		t.Fatal("fourth connection: no reply and not closed")
	}

	stats := a.stats()
	for name, want := range map[string]string{"curr_connections": "2", "max_connections": "2", "rejected_connections": "2"} {
		if stats[name] != want {
			t.Errorf("STAT %s = %q, want %q", name, stats[name], want)
		}
	}
	b.exchange("b_still_served", "set q 0 0 1\r\nx\r\n", "STORED\r\n")
	b.exchange("quit", "quit\r\n", "")
	b.wantClosed("after quit")
	deadline := time.Now().Add(10 * time.Second)
	for a.stats()["curr_connections"] != "1" {
		if time.Now().After(deadline) {
			t.Fatal("curr_connections did not drop after a quit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	dial(t, s.addr).exchange("slot_reused", "get q\r\n", "VALUE q 0 1\r\nx\r\nEND\r\n")
}

// A client that sends a set line and stalls mid-value is closed after
// -value-timeout, and the bytes it held are given back. While it holds
// them, -max-pending-bytes refuses a set that does not fit (after a short
// wait) with memcached's out-of-memory reply, and the connection of that
// set stays usable.
func TestStalledValueIsClosedAndPendingBytesAreBounded(t *testing.T) {
	const valueTimeout = 3 * time.Second // more than pendingWait
	s := startServer(t, options{dir: t.TempDir(), maxValue: 600, maxPendingBytes: 1000,
		valueTimeout: valueTimeout, idleTimeout: time.Hour})
	watch := dial(t, s.addr)
	waitStat := func(name, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for watch.stats()[name] != want {
			if time.Now().After(deadline) {
				t.Fatalf("STAT %s = %q after 10s, want %q", name, watch.stats()[name], want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	stalled := dial(t, s.addr)
	stalledAt := time.Now()
	if _, err := io.WriteString(stalled, "set q 0 0 600\r\n"+strings.Repeat("s", 100)); err != nil {
		t.Fatal(err)
	}
	waitStat("pending_bytes", "600")

	other := dial(t, s.addr)
	other.exchange("fits", "set q 0 0 400\r\n"+strings.Repeat("f", 400)+"\r\n", "STORED\r\n")
	start := time.Now()
	other.exchange("does_not_fit", "set q 0 0 600\r\n"+strings.Repeat("o", 600)+"\r\n", outOfMemoryReply)
	if d := time.Since(start); d < pendingWait/2 {
		t.Errorf("refused after %v: want a wait of about %v for room", d, pendingWait)
	}
	other.exchange("still_usable", "version\r\n", "VERSION "+version+"\r\n")

	stalled.wantClosed("stalled mid-value")
	if d := time.Since(stalledAt); d < valueTimeout/2 {
		t.Errorf("stalled connection closed after %v, want about %v", d, valueTimeout)
	}
	waitStat("pending_bytes", "0")
	stats := watch.stats()
	for name, want := range map[string]string{"store_no_memory": "1", "value_timeouts": "1", "curr_items": "1"} {
		if stats[name] != want {
			t.Errorf("STAT %s = %q, want %q", name, stats[name], want)
		}
	}
	other.exchange("fits_now", "set q 0 0 600\r\n"+strings.Repeat("o", 600)+"\r\n", "STORED\r\n")
	other.exchange("items", "get q\r\n", "VALUE q 0 400\r\n"+strings.Repeat("f", 400)+"\r\nEND\r\n")
}

func TestPendingBytes(t *testing.T) {
	p := newPendingBytes(1000)
	never := make(chan struct{})
	if !p.acquire(600, 0, never) || !p.acquire(0, 0, never) {
		t.Fatal("acquire within the bound failed")
	}
	if p.acquire(1001, time.Hour, never) {
		t.Fatal("acquired more than the bound")
	}
	start := time.Now()
	if p.acquire(500, 20*time.Millisecond, never) {
		t.Fatal("acquired past the bound")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("gave up after %v, want the 20ms wait", d)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		p.release(200)
	}()
	if !p.acquire(500, time.Minute, never) {
		t.Fatal("a release did not let a waiting acquire through")
	}
	if got := p.inUse(); got != 900 {
		t.Fatalf("inUse %d, want 900", got)
	}
	stop := make(chan struct{})
	close(stop)
	start = time.Now()
	if p.acquire(500, time.Minute, stop) || time.Since(start) > 10*time.Second {
		t.Fatal("a stopped acquire waited or succeeded")
	}
	p.release(900)
	if got := p.inUse(); got != 0 {
		t.Fatalf("inUse %d after releasing everything", got)
	}
}

func TestValidateLimits(t *testing.T) {
	ok := options{maxQueues: 1, maxValue: 100, maxConns: 1, maxPendingBytes: 100}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(*options)
		want string
	}{
		{"no_conns", func(o *options) { o.maxConns = 0 }, "-max-conns"},
		{"pending_below_value", func(o *options) { o.maxPendingBytes = 99 }, "-max-pending-bytes"},
		{"negative_value_timeout", func(o *options) { o.valueTimeout = -time.Second }, "-value-timeout"},
	} {
		o := ok
		tt.edit(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: validate = %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
}

// A get's reply has -idle-timeout to leave from the start of the get, not
// from the end of the previous command: a deadline left over could expire
// while a large value is on its way to a client that reads slowly, after
// the take is committed, and that item would be lost.
func TestGetReplyGetsAFreshWriteDeadline(t *testing.T) {
	const idle = 2 * time.Second
	const size = 16 << 20 // more than the socket buffers hold
	s := startServer(t, options{dir: t.TempDir(), maxValue: 20 << 20, idleTimeout: idle})
	c := dial(t, s.addr)
	value := bytes.Repeat([]byte("v"), size)
	c.exchange("set", "set big 0 0 "+strconv.Itoa(size)+"\r\n"+string(value)+"\r\n", "STORED\r\n")
	time.Sleep(idle * 8 / 10)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "get big\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle * 6 / 10) // past the previous command's write deadline
	want := "VALUE big 0 " + strconv.Itoa(size) + "\r\n" + string(value) + "\r\nEND\r\n"
	got := make([]byte, len(want))
	if n, err := io.ReadFull(c.r, got); err != nil {
		t.Fatalf("get: read %d of %d bytes: %v", n, len(want), err)
	}
	if string(got) != want {
		t.Fatal("get: wrong reply")
	}
}
