package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

// testServer is run() serving on 127.0.0.1:0 in the background.
type testServer struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
	out    bytes.Buffer // run's output; read it only after stop
	once   sync.Once
	err    error
}

func startServer(t *testing.T, o options) *testServer {
	t.Helper()
	o.addr = "127.0.0.1:0"
	if o.maxQueues == 0 {
		o.maxQueues = 8
	}
	if o.maxGroups == 0 {
		o.maxGroups = 8
	}
	if o.maxValue == 0 {
		o.maxValue = 1 << 20
	}
	if o.maxConns == 0 {
		o.maxConns = 64
	}
	if o.maxPendingBytes == 0 {
		o.maxPendingBytes = max(64<<20, o.maxValue)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &testServer{cancel: cancel, done: make(chan error, 1)}
	addr := make(chan string, 1)
	o.onListen = func(a net.Addr) { addr <- a.String() }
	go func() { s.done <- run(ctx, o, &s.out) }()
	select {
	case s.addr = <-addr:
	case err := <-s.done:
		t.Fatalf("run: %v\n%s", err, s.out.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not start listening")
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("run: %v\n%s", err, s.out.String())
		}
	})
	return s
}

// stop shuts the server down and returns run's error.
func (s *testServer) stop() error {
	s.once.Do(func() {
		s.cancel()
		select {
		case s.err = <-s.done:
		case <-time.After(15 * time.Second):
			s.err = errors.New("run did not return after the context ended")
		}
	})
	return s.err
}

func (s *testServer) client() *memcache.Client {
	c := memcache.New(s.addr)
	c.Timeout = 10 * time.Second // fsyncs under -race on a busy machine
	c.MaxIdleConns = 8
	return c
}

func TestFIFOAcrossManySets(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	c := s.client()
	const n = 200
	for i := range n {
		if err := c.Set(&memcache.Item{Key: "jobs", Value: fmt.Appendf(nil, "job-%04d", i), Flags: uint32(i % 3)}); err != nil {
			t.Fatalf("set %d: %v", i, err)
		}
	}
	for i := range n {
		it, err := c.Get("jobs")
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if want := fmt.Sprintf("job-%04d", i); string(it.Value) != want || it.Flags != uint32(i%3) {
			t.Fatalf("get %d: %q flags %d, want %q flags %d", i, it.Value, it.Flags, want, i%3)
		}
	}
	if _, err := c.Get("jobs"); !errors.Is(err, memcache.ErrCacheMiss) {
		t.Fatalf("get on an empty queue: %v, want ErrCacheMiss", err)
	}
	if _, err := c.Get("never-set"); !errors.Is(err, memcache.ErrCacheMiss) {
		t.Fatalf("get on a queue that does not exist: %v, want ErrCacheMiss", err)
	}
}

func TestGetMultiTakesOnePerQueue(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	c := s.client()
	for _, it := range []*memcache.Item{{Key: "a", Value: []byte("a1")}, {Key: "a", Value: []byte("a2")}, {Key: "b", Value: []byte("b1")}} {
		if err := c.Set(it); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.GetMulti([]string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["a"].Value) != "a1" || string(got["b"].Value) != "b1" {
		t.Fatalf("GetMulti = %v, want a=a1 b=b1", got)
	}
	it, err := c.Get("a")
	if err != nil || string(it.Value) != "a2" {
		t.Fatalf("get a after GetMulti: %v %v, want a2", it, err)
	}
}

// A multi-get that names a queue more than once takes one item from it:
// clients that key a multi-get's replies by name (npm memcached's getMulti,
// gomemcache's GetMulti) would keep one VALUE and lose the items taken for
// the others.
func TestGetRepeatedNameTakesOneItem(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	c := dial(t, s.addr)
	c.exchange("set", "set mq 0 0 2\r\nm1\r\nset mq 0 0 2\r\nm2\r\nset mq 0 0 2\r\nm3\r\n", "STORED\r\nSTORED\r\nSTORED\r\n")
	c.exchange("get_thrice", "get mq mq mq\r\n", "VALUE mq 0 2\r\nm1\r\nEND\r\n")
	c.exchange("gets_with_another", "gets mq none mq\r\n", "VALUE mq 0 2 0\r\nm2\r\nEND\r\n")

	got, err := s.client().GetMulti([]string{"mq", "mq"})
	if err != nil || len(got) != 1 || string(got["mq"].Value) != "m3" {
		t.Fatalf("GetMulti(mq, mq) = %v, %v; want mq=m3", got, err)
	}
	// Every name asked for is a hit or a miss: 1 + 2 + 1 distinct names.
	stats := c.stats()
	for name, want := range map[string]string{"cmd_get": "4", "get_hits": "3", "get_misses": "1", "curr_items": "0"} {
		if stats[name] != want {
			t.Errorf("STAT %s = %q, want %q", name, stats[name], want)
		}
	}
}

// The version is <major>.<minor>.<patch>, as clients parse it: libmemcached
// (memcping, memcstat) fails on anything else and on a major version of 0,
// and npm memcached's version() throws.
func TestVersionIsNumeric(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	c := dial(t, s.addr)
	reply := c.line("version\r\n")
	m := regexp.MustCompile(`^VERSION ([0-9]+)\.([0-9]+)\.([0-9]+)\r\n$`).FindStringSubmatch(reply)
	if m == nil {
		t.Fatalf("version: %q, want VERSION <major>.<minor>.<patch>", reply)
	}
	for i, part := range m[1:] {
		n, err := strconv.Atoi(part)
		if err != nil || n > 255 || (i == 0 && n == 0) {
			t.Fatalf("version %q: each part must be in [0, 255] (libmemcached keeps a uint8), the major not 0", reply)
		}
	}
	stats := c.stats()
	if want := strings.TrimSuffix(strings.TrimPrefix(reply, "VERSION "), "\r\n"); stats["version"] != want {
		t.Errorf("STAT version %q, want %q", stats["version"], want)
	}
	if stats["implementation"] != "memcacheq-filechannel" {
		t.Errorf("STAT implementation %q, want memcacheq-filechannel", stats["implementation"])
	}
}

// Producers and consumers on several connections: every item comes out
// exactly once, and each producer's items in the order it set them.
func TestConcurrentClients(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	const producers, consumers, each = 4, 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, producers+consumers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := s.client()
			for i := range each {
				if err := c.Set(&memcache.Item{Key: "work", Value: fmt.Appendf(nil, "%d-%d", p, i)}); err != nil {
					errs <- fmt.Errorf("producer %d set %d: %w", p, i, err)
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	seen := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := s.client()
			last := map[int]int{}
			for {
				mu.Lock()
				total := len(seen)
				mu.Unlock()
				if total == producers*each {
					return
				}
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("consumers saw %d of %d items before the deadline", total, producers*each)
					return
				}
				it, err := c.Get("work")
				if errors.Is(err, memcache.ErrCacheMiss) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				var p, i int
				if _, err := fmt.Sscanf(string(it.Value), "%d-%d", &p, &i); err != nil {
					errs <- fmt.Errorf("item %q: %w", it.Value, err)
					return
				}
				if prev, ok := last[p]; ok && i <= prev {
					errs <- fmt.Errorf("one consumer got producer %d's item %d after its item %d", p, i, prev)
					return
				}
				last[p] = i
				mu.Lock()
				seen[string(it.Value)]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("item %s came out %d times", v, n)
		}
	}
	if len(seen) != producers*each {
		t.Errorf("%d distinct items came out, want %d", len(seen), producers*each)
	}
}

func TestItemsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir})
	c := s.client()
	for i := range 30 {
		if err := c.Set(&memcache.Item{Key: "durable", Value: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if it, err := c.Get("durable"); err != nil || string(it.Value) != strconv.Itoa(i) {
			t.Fatalf("get %d: %v %v", i, it, err)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.out.String(), "stopped; 20 items in 1 queues") {
		t.Fatalf("first run's output:\n%s", s.out.String())
	}

	s = startServer(t, options{dir: dir})
	c = s.client()
	for i := 10; i < 30; i++ {
		if it, err := c.Get("durable"); err != nil || string(it.Value) != strconv.Itoa(i) {
			t.Fatalf("after the restart, get %d: %v %v", i, it, err)
		}
	}
	if _, err := c.Get("durable"); !errors.Is(err, memcache.ErrCacheMiss) {
		t.Fatalf("after the restart, get on the drained queue: %v", err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.out.String(), "1 queues in "+dir+", durable (20 items)") {
		t.Fatalf("second run did not open the queue:\n%s", s.out.String())
	}
}

// rawConn is a plain connection for the exchanges a real client would
// never send.
type rawConn struct {
	t *testing.T
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, Conn: nc, r: bufio.NewReader(nc)}
}

// send writes s and reads back as many bytes as want holds.
func (c *rawConn) exchange(name, send, want string) {
	c.t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, send); err != nil {
		c.t.Fatalf("%s: write: %v", name, err)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c.r, got); err != nil {
		c.t.Fatalf("%s: read %q so far: %v", name, got, err)
	}
	if string(got) != want {
		c.t.Fatalf("%s: got %q, want %q", name, got, want)
	}
}

// line sends s and returns the first reply line.
func (c *rawConn) line(send string) string {
	c.t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, send); err != nil {
		c.t.Fatal(err)
	}
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read reply to %.40q: %q, %v", send, l, err)
	}
	return l
}

func (c *rawConn) wantClosed(what string) {
	c.t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if b, err := c.r.ReadByte(); err == nil {
		c.t.Fatalf("%s: connection still open (read %q)", what, b)
	} else if isTimeout(err) {
		c.t.Fatalf("%s: connection still open after 10s", what)
	}
}

// stats sends stats and returns the reply as a map of name to value.
func (c *rawConn) stats() map[string]string {
	c.t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "stats\r\n"); err != nil {
		c.t.Fatal(err)
	}
	stats := map[string]string{}
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("stats: %v (so far %v)", err, stats)
		}
		if l == "END\r\n" {
			return stats
		}
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "STAT" || !strings.HasSuffix(l, "\r\n") {
			c.t.Fatalf("stats line %q", l)
		}
		stats[f[1]] = f[2]
	}
}

// Bad input on one connection: each case gets its error reply and leaves
// the connection usable for the next.
func TestBadInputKeepsTheConnectionUsable(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), maxValue: 1000})
	c := dial(t, s.addr)
	tests := []struct{ name, send, wantPrefix string }{
		{"garbage", "hello world\r\n", "ERROR\r\n"},
		{"empty_line", "\r\n", "ERROR\r\n"},
		{"binary", "\x00\xff\x01\x02\r\n", "ERROR\r\n"},
		{"bare_newline", "bogus\n", "ERROR\r\n"},
		{"set_without_length", "set q 0 0\r\n", "CLIENT_ERROR bad command line format"},
		{"set_bad_length", "set q 0 0 five\r\n", "CLIENT_ERROR bad data length"},
		{"set_bad_flags", "set q x 0 1\r\na\r\n", "CLIENT_ERROR bad flags"},
		{"set_bad_name", "set ../etc 0 0 1\r\na\r\n", "CLIENT_ERROR bad queue name"},
		{"data_too_long", "set q 0 0 3\r\nhello\r\n", "CLIENT_ERROR bad data chunk\r\n"},
		{"data_without_terminator", "set q 0 0 3\r\nabcXY\r\n", "CLIENT_ERROR bad data chunk\r\n"},
		{"value_too_large", "set q 0 0 2000\r\n" + strings.Repeat("v", 2000) + "\r\n", "CLIENT_ERROR value too large: 2000 bytes, the limit is 1000"},
		{"add", "add q 0 0 2\r\nhi\r\n", "CLIENT_ERROR add is not supported"},
		{"cas", "cas q 0 0 2 17\r\nhi\r\n", "CLIENT_ERROR cas is not supported"},
		{"delete_with_option", "delete q/open\r\n", "CLIENT_ERROR delete takes a queue or a group, without options"},
		{"incr", "incr q 1\r\n", "CLIENT_ERROR incr is not supported"},
		{"get_without_key", "get\r\n", "CLIENT_ERROR get needs at least one queue name"},
		{"line_too_long", "get " + strings.Repeat("q ", maxLine) + "\r\n", "CLIENT_ERROR line too long\r\n"},
		{"nothing_stored_by_the_above", "get q\r\n", "END\r\n"},
	}
	for _, tt := range tests {
		if got := c.line(tt.send); !strings.HasPrefix(got, tt.wantPrefix) {
			t.Fatalf("%s: got %q, want %q...", tt.name, got, tt.wantPrefix)
		}
	}
	c.exchange("set_noreply", "set q 0 0 2 noreply\r\nok\r\nget q q\r\n", "VALUE q 0 2\r\nok\r\nEND\r\n")
	c.exchange("pipelined", "set q 9 0 1\r\nx\r\ngets q\r\nversion\r\n", "STORED\r\nVALUE q 9 1 0\r\nx\r\nEND\r\nVERSION "+version+"\r\n")
	c.exchange("quit", "quit\r\n", "")
	c.wantClosed("after quit")

	// A declared length past what the server will skip: the reply, then
	// the connection closes (the server cannot stay in step).
	c = dial(t, s.addr)
	c.exchange("huge_value", "set q 0 0 100000000\r\n", "CLIENT_ERROR value too large: 100000000 bytes, the limit is 1000 (-max-value)\r\n")
	c.wantClosed("after a huge value")

	// The server is fine.
	c = dial(t, s.addr)
	c.exchange("still_serving", "version\r\n", "VERSION "+version+"\r\n")
}

func TestStats(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	mc := s.client()
	for _, v := range []string{"one", "two", "three"} {
		if err := mc.Set(&memcache.Item{Key: "q", Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mc.GetMulti([]string{"q", "empty"}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Get("q"); err != nil {
		t.Fatal(err)
	}
	stats := dial(t, s.addr).stats()
	for name, want := range map[string]string{
		"curr_items": "1", "total_items": "3", "cmd_set": "3", "cmd_get": "3", "get_hits": "2", "get_misses": "1",
		"queues": "1", "queue_q_items": "1", "version": version, "implementation": "memcacheq-filechannel",
		"binary_refused": "0",
	} {
		if stats[name] != want {
			t.Errorf("STAT %s = %q, want %q", name, stats[name], want)
		}
	}
	if n, err := strconv.Atoi(stats["bytes"]); err != nil || n <= 0 || stats["queue_q_bytes"] != stats["bytes"] {
		t.Errorf("STAT bytes %q, queue_q_bytes %q: want equal and positive", stats["bytes"], stats["queue_q_bytes"])
	}
}

func TestMaxQueues(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir, maxQueues: 2})
	c := dial(t, s.addr)
	c.exchange("first", "set a 0 0 1\r\n1\r\n", "STORED\r\n")
	c.exchange("second", "set b 0 0 1\r\n1\r\n", "STORED\r\n")
	c.exchange("third", "set c 0 0 1\r\n1\r\n", "CLIENT_ERROR too many queues: the limit is 2 (-max-queues), and none is empty\r\n")
	c.exchange("existing", "set a 0 0 1\r\n2\r\nget c\r\n", "STORED\r\nEND\r\n")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	// A lower limit at the next start: the queues on disk all open.
	s = startServer(t, options{dir: dir, maxQueues: 1})
	c = dial(t, s.addr)
	c.exchange("reopened", "get a b\r\n", "VALUE a 0 1\r\n1\r\nVALUE b 0 1\r\n1\r\nEND\r\n")
	c.exchange("still_capped", "set d 0 0 1\r\n1\r\n", "CLIENT_ERROR too many queues: the limit is 1 (-max-queues), and none is empty\r\n")

	// An empty queue makes room for a new one: a drained queue is removed
	// (b went at the refused set above, a goes now), directory and all.
	c.exchange("drain_a", "get a\r\n", "VALUE a 0 1\r\n2\r\nEND\r\n")
	c.exchange("room_made", "set d 0 0 1\r\n1\r\n", "STORED\r\n")
	if st := c.stats(); st["queues"] != "1" || st["queue_d_items"] != "1" {
		t.Errorf("after the eviction: STAT queues %s, queue_d_items %s; want 1, 1", st["queues"], st["queue_d_items"])
	}
	for _, gone := range []string{"a", "b"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the evicted queue %s's directory: %v, want it gone", gone, err)
		}
	}
	c.exchange("gone_is_a_miss", "get a b d\r\n", "VALUE d 0 1\r\n1\r\nEND\r\n")
}

// Shutdown closes idle connections at once and finishes without waiting
// for the idle timeout.
func TestShutdownClosesIdleConnections(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), idleTimeout: time.Hour})
	c := dial(t, s.addr)
	c.exchange("set", "set q 0 0 2\r\nhi\r\n", "STORED\r\n")
	start := time.Now()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > shutdownGrace {
		t.Fatalf("shutdown took %v", d)
	}
	c.wantClosed("after shutdown")
	if !strings.Contains(s.out.String(), "stopped; 1 items in 1 queues") {
		t.Fatalf("output:\n%s", s.out.String())
	}
}

func TestIdleTimeout(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), idleTimeout: 200 * time.Millisecond})
	c := dial(t, s.addr)
	c.exchange("version", "version\r\n", "VERSION "+version+"\r\n")
	c.wantClosed("after the idle timeout")
}
