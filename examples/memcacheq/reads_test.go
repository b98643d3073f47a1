package main

import (
	"strings"
	"testing"
	"time"
)

// Kestrel's reliable reads: /open holds the item on the connection,
// invisible to others; /close commits it, /abort gives it back to the head.
func TestReliableReadOpenCloseAbort(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	a, b := dial(t, s.addr), dial(t, s.addr)
	a.exchange("set", "set q 0 0 2\r\nm1\r\nset q 7 0 2\r\nm2\r\nset q 0 0 2\r\nm3\r\n", "STORED\r\nSTORED\r\nSTORED\r\n")
	a.exchange("open", "get q/open\r\n", "VALUE q/open 0 2\r\nm1\r\nEND\r\n")
	b.exchange("invisible", "gets q/peek\r\n", "VALUE q/peek 7 2 0\r\nm2\r\nEND\r\n")
	if st := b.stats(); st["open_transactions"] != "1" || st["queue_q_open_transactions"] != "1" || st["queue_q_items"] != "2" {
		t.Errorf("STAT open_transactions %s, queue_q_open_transactions %s, queue_q_items %s; want 1, 1, 2",
			st["open_transactions"], st["queue_q_open_transactions"], st["queue_q_items"])
	}
	a.exchange("abort", "get q/abort\r\n", "END\r\n")
	b.exchange("back_at_the_head", "get q/open\r\n", "VALUE q/open 0 2\r\nm1\r\nEND\r\n")
	a.exchange("next", "get q/t=1000/open\r\n", "VALUE q/t=1000/open 7 2\r\nm2\r\nEND\r\n")
	b.exchange("close_open", "get q/close/open\r\n", "VALUE q/close/open 0 2\r\nm3\r\nEND\r\n")
	b.exchange("close_open_empty", "get q/close/open\r\nget q/close\r\nget q/abort\r\n", "END\r\nEND\r\nEND\r\n")
	a.exchange("close", "get q/close\r\nget q/close\r\nget q\r\n", "END\r\nEND\r\nEND\r\n")
	st := a.stats()
	for name, want := range map[string]string{
		"open_transactions": "0", "canceled_transactions": "1", "queue_q_items": "0", "queue_q_open_transactions": "0",
		// the peek and four opens found an item, the last close/open and
		// get found none; close and abort alone fetch nothing.
		"cmd_get": "7", "get_hits": "5", "get_misses": "2",
	} {
		if st[name] != want {
			t.Errorf("STAT %s %s, want %s", name, st[name], want)
		}
	}
}

// An open item whose client dies (its connection closes) goes back to the
// head of the queue, in order: the next reader once the server has seen
// the connection close gets it first.
func TestReliableReadOfADeadClientComesBack(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	c := dial(t, s.addr)
	c.exchange("set", "set q 0 0 2\r\nm1\r\nset q 0 0 2\r\nm2\r\nset q 0 0 2\r\nm3\r\nset q 0 0 2\r\nm4\r\n", strings.Repeat("STORED\r\n", 4))

	dead := dial(t, s.addr)
	dead.exchange("open", "get q/open\r\n", "VALUE q/open 0 2\r\nm1\r\nEND\r\n")
	dead.Close() // the client dies holding m1
	waitStat(t, c, "open_transactions", "0")
	c.exchange("first_back", "get q/t=5000/open\r\n", "VALUE q/t=5000/open 0 2\r\nm1\r\nEND\r\n")

	// Two clients hold one item each and die, the first first: each item
	// goes back to the head as its connection closes.
	d1, d2 := dial(t, s.addr), dial(t, s.addr)
	d1.exchange("open_m2", "get q/open\r\n", "VALUE q/open 0 2\r\nm2\r\nEND\r\n")
	d2.exchange("open_m3", "get q/open\r\n", "VALUE q/open 0 2\r\nm3\r\nEND\r\n")
	d2.Close()
	waitStat(t, c, "open_transactions", "2") // c's m1 and d1's m2
	d1.Close()
	waitStat(t, c, "open_transactions", "1")
	c.exchange("in_order", "get q/close/open\r\nget q/close/open\r\nget q/close/open\r\nget q/close/open\r\n",
		"VALUE q/close/open 0 2\r\nm2\r\nEND\r\nVALUE q/close/open 0 2\r\nm3\r\nEND\r\nVALUE q/close/open 0 2\r\nm4\r\nEND\r\nEND\r\n")
	if st := c.stats(); st["canceled_transactions"] != "3" || st["queue_q_items"] != "0" {
		t.Errorf("STAT canceled_transactions %s, queue_q_items %s; want 3, 0", st["canceled_transactions"], st["queue_q_items"])
	}
}

// waitStat waits for STAT name to read want.
func waitStat(t *testing.T, c *rawConn, name, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.stats()[name]
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("STAT %s %s, want %s", name, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An open item survives a restart of the server: shutdown gives it back.
func TestReliableReadOpenAtShutdownComesBack(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir})
	c := dial(t, s.addr)
	c.exchange("open", "set q 0 0 2\r\nm1\r\nget q/open\r\n", "STORED\r\nVALUE q/open 0 2\r\nm1\r\nEND\r\n")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, options{dir: dir})
	dial(t, s.addr).exchange("back", "get q\r\n", "VALUE q 0 2\r\nm1\r\nEND\r\n")
}

// Kestrel's rule: a get that would take from a queue the connection holds
// an item of (get q, or get q/open without close) is refused, and the
// connection is closed, which gives the item back. A refused get takes
// nothing, even from the keys before the one refused.
func TestReliableReadSecondTakeIsRefused(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	c := dial(t, s.addr)
	c.exchange("set", "set q 0 0 2\r\nm1\r\nset q 0 0 2\r\nm2\r\nset p 0 0 2\r\np1\r\n", strings.Repeat("STORED\r\n", 3))
	for _, get := range []string{"get q", "get q/open", "get p q/t=10", "gets p/open q/open", "get q/abort q/open q"} {
		c := dial(t, s.addr)
		c.exchange("open", "get q/open\r\n", "VALUE q/open 0 2\r\nm1\r\nEND\r\n")
		reply := c.line(get + "\r\n")
		if !strings.HasPrefix(reply, "CLIENT_ERROR q has an item open on this connection") {
			t.Fatalf("%s with q open: %q, want CLIENT_ERROR", get, reply)
		}
		c.wantClosed(get + " with q open")
		waitStat(t, dial(t, s.addr), "open_transactions", "0")
	}
	// What may go with an open item: peek, close, abort, other queues,
	// and a key after one that closed it.
	c.exchange("open", "get q/open\r\n", "VALUE q/open 0 2\r\nm1\r\nEND\r\n")
	c.exchange("peek_other", "get q/peek p/peek\r\n", "VALUE q/peek 0 2\r\nm2\r\nVALUE p/peek 0 2\r\np1\r\nEND\r\n")
	c.exchange("abort_then_take", "get q/abort q\r\n", "VALUE q 0 2\r\nm1\r\nEND\r\n")
	c.exchange("open_close_open", "get q/open q/close/open p\r\n", "VALUE q/open 0 2\r\nm2\r\nVALUE p 0 2\r\np1\r\nEND\r\n")
	c.exchange("bad_options", "get q/peek/open\r\n", `CLIENT_ERROR options of "q/peek/open" do not go together: peek and abort go with neither open nor close, nor with each other`+"\r\n")
	c.exchange("still_open", "version\r\n", "VERSION "+version+"\r\n")
}

// t=<ms> waits for an item, and for the queue's creation; a get that
// waits in vain misses after the time.
func TestGetWaits(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir()})
	c, p := dial(t, s.addr), dial(t, s.addr)
	start := time.Now()
	c.exchange("miss", "get q/t=150\r\n", "END\r\n")
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("a get with t=150 missed after %v", d)
	}
	for _, tt := range []struct{ name, key string }{
		{"created_while_waiting", "q/t=10000"},
		{"set_while_waiting", "q/t=10000/open"},
		{"group_while_waiting", "q+g/t=10000"},
	} {
		if tt.name == "group_while_waiting" {
			// The group is created by the get, and gets the sets from then on.
			p.exchange("create_group", "get q+g\r\n", "END\r\n")
		}
		go func() {
			time.Sleep(100 * time.Millisecond)
			p.Write([]byte("set q 0 0 2\r\nm1\r\n"))
		}()
		start := time.Now()
		reply := c.line("get " + tt.key + "\r\n")
		if want := "VALUE " + tt.key + " 0 2\r\n"; reply != want {
			t.Fatalf("%s: %q, want %q", tt.name, reply, want)
		}
		c.exchange(tt.name, "", "m1\r\nEND\r\n")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: the item came after %v", tt.name, d)
		}
		p.exchange(tt.name+"_stored", "", "STORED\r\n")
		if tt.name == "set_while_waiting" {
			c.exchange("close", "get q/close\r\n", "END\r\n")
		}
		if tt.name == "group_while_waiting" {
			p.exchange("queue_too", "get q\r\n", "VALUE q 0 2\r\nm1\r\nEND\r\n")
		}
	}
	// A shutdown ends a wait at once: a miss.
	go func() {
		time.Sleep(100 * time.Millisecond)
		s.stop()
	}()
	start = time.Now()
	c.exchange("shutdown", "get q/t=60000\r\n", "END\r\n")
	if d := time.Since(start); d > shutdownGrace {
		t.Errorf("a wait ended %v after the shutdown began", d)
	}
}

// Kestrel's fan-out: get q+audit reads group audit of queue q, created by
// the first get that names it; every set of q reaches q and each group,
// which read independently. Groups outlive a restart; -max-groups caps them.
func TestFanoutGroups(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir, maxGroups: 2})
	c := dial(t, s.addr)
	c.exchange("before_the_groups", "set q 0 0 2\r\nm0\r\nget q+audit q+index\r\n", "STORED\r\nEND\r\n")
	c.exchange("set", "set q 0 0 2\r\nm1\r\nset q 0 0 2\r\nm2\r\n", "STORED\r\nSTORED\r\n")
	c.exchange("audit", "get q+audit\r\n", "VALUE q+audit 0 2\r\nm1\r\nEND\r\n")
	c.exchange("each_its_own", "get q q+index q+audit/open\r\n",
		"VALUE q 0 2\r\nm0\r\nVALUE q+index 0 2\r\nm1\r\nVALUE q+audit/open 0 2\r\nm2\r\nEND\r\n")
	c.exchange("too_many", "get q+third\r\n", "CLIENT_ERROR too many groups: queue q has 2, the limit (-max-groups)\r\n")
	c.exchange("set_to_a_group", "set q+audit 0 0 1\r\nx\r\n", `CLIENT_ERROR set "q+audit": set the queue q; each of its groups gets the item`+"\r\n")
	st := c.stats()
	for name, want := range map[string]string{
		"curr_items": "3", "queue_q_items": "2", "queue_q+index_items": "1", "queue_q+audit_items": "0",
		"queue_q+audit_open_transactions": "1",
	} {
		if st[name] != want {
			t.Errorf("STAT %s %q, want %q", name, st[name], want)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, options{dir: dir, maxGroups: 2})
	c = dial(t, s.addr)
	c.exchange("after_restart", "get q+audit q+index q\r\n", "VALUE q+audit 0 2\r\nm2\r\nVALUE q+index 0 2\r\nm2\r\nVALUE q 0 2\r\nm1\r\nEND\r\n")
	c.exchange("still_fanned_out", "set q 0 0 2\r\nm3\r\nget q+audit\r\n", "STORED\r\nVALUE q+audit 0 2\r\nm3\r\nEND\r\n")
}

// A wait is at most -idle-timeout, however long the t= asked for, and the
// reply then has its own time to leave.
func TestGetWaitIsCappedByIdleTimeout(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), idleTimeout: 300 * time.Millisecond})
	c := dial(t, s.addr)
	c.exchange("queue", "set q 0 0 1\r\nx\r\nget q\r\n", "STORED\r\nVALUE q 0 1\r\nx\r\nEND\r\n")
	start := time.Now()
	c.exchange("capped", "get q/t=2147483647/open\r\n", "END\r\n")
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("a get with t=2147483647 and -idle-timeout 300ms ended after %v", d)
	}
}
