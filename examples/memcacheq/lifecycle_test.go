package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/flumego/filechannel/channel"
)

// A command that ends in noreply gets no reply, errors included, as with
// memcached: a client that sent noreply reads no reply, and would take an
// error line for the reply to its next command (pymemcache then lost the
// item that command took). Every refusal is counted instead.
func TestNoreplyNeverReplies(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), maxValue: 1000, capacity: 1})
	c := dial(t, s.addr)
	refused := []string{
		"set q 0 0 2000 noreply\r\n" + strings.Repeat("v", 2000) + "\r\n", // too large
		"set ../x 0 0 1 noreply\r\nx\r\n",                                 // bad name
		"set q x 0 1 noreply\r\nx\r\n",                                    // bad flags
		"set q+g 0 0 1 noreply\r\nx\r\n",                                  // a group
		"set q 0 0 3 noreply\r\nabcXY\r\n",                                // bad data chunk
		"add q 0 0 1 noreply\r\nx\r\n",                                    // not for a queue
		"incr q 1 noreply\r\n",
		"touch q 10 noreply\r\n",
		"flush_all noreply\r\n",
	}
	for _, cmd := range refused {
		if _, err := c.Write([]byte(cmd)); err != nil {
			t.Fatal(err)
		}
	}
	c.exchange("stored_after_refusals", "set q 0 0 4 noreply\r\njob1\r\nversion\r\n", "VERSION "+version+"\r\n")
	c.exchange("full_and_not_empty", "set q 0 0 4 noreply\r\njob2\r\ndelete q noreply\r\nget q\r\n", "VALUE q 0 4\r\njob1\r\nEND\r\n")
	c.exchange("deleted", "delete q noreply\r\ndelete q noreply\r\nget q\r\n", "END\r\n")
	stats := c.stats()
	if want := fmt.Sprint(len(refused) + 2); stats["noreply_refused"] != want {
		t.Errorf("STAT noreply_refused %s, want %s (the refusals above, the full queue and the delete of a queue with an item)", stats["noreply_refused"], want)
	}
	if stats["queues"] != "0" || stats["total_items"] != "1" {
		t.Errorf("STAT queues %s, total_items %s; want 0 (deleted) and 1", stats["queues"], stats["total_items"])
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.out.String(), "refused a noreply command; the client was not told") {
		t.Errorf("no log line for the refusals:\n%s", s.out.String())
	}
}

// A full queue is back-pressure, memcached's NOT_STORED: the npm memcached
// client takes SERVER_ERROR for a failing server and stops using it, gets
// included, so nothing would drain the queue.
func TestFullQueueIsNotStored(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), capacity: 2})
	c := dial(t, s.addr)
	c.exchange("fill", "set q 0 0 2\r\nm1\r\nset q 0 0 2\r\nm2\r\n", "STORED\r\nSTORED\r\n")
	start := time.Now()
	c.exchange("full", "set q 0 0 2\r\nm3\r\n", "NOT_STORED\r\n")
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("NOT_STORED after %v: a set waits a second for room first", d)
	}
	c.exchange("drain", "get q\r\nset q 0 0 2\r\nm3\r\n", "VALUE q 0 2\r\nm1\r\nEND\r\nSTORED\r\n")
	if st := c.stats(); st["not_stored"] != "1" || st["queue_q_items"] != "2" {
		t.Errorf("STAT not_stored %s, queue_q_items %s; want 1, 2", st["not_stored"], st["queue_q_items"])
	}
}

// A queue exists once a set has stored an item in it: gets, deletes and
// sets that fail create none.
func TestOnlyAStoredItemCreatesAQueue(t *testing.T) {
	dir := t.TempDir()
	var noSpace atomic.Bool
	s := startServer(t, options{dir: dir, maxValue: 10, configureQueue: func(cfg *channel.Config) {
		if noSpace.Load() {
			cfg.MinimumRequiredSpace = 1 << 50 // every put refused: ErrInsufficientSpace
		}
	}})
	c := dial(t, s.addr)
	c.exchange("gets", "get a\r\ngets a/open\r\nget a+g\r\nget a/t=20\r\nget a/peek\r\nget a/close\r\nget a/abort\r\n",
		strings.Repeat("END\r\n", 7))
	c.exchange("delete", "delete a\r\ndelete a+g\r\n", "NOT_FOUND\r\nNOT_FOUND\r\n")
	c.exchange("refused_sets", "set a 0 0 11\r\n01234567890\r\nset a 0 0 1\r\nxy\r\n",
		"CLIENT_ERROR value too large: 11 bytes, the limit is 10 (-max-value)\r\nCLIENT_ERROR bad data chunk\r\n")
	noSpace.Store(true)
	c.exchange("no_space", "set a 0 0 1\r\nx\r\n", "SERVER_ERROR out of disk space\r\n")
	if st := c.stats(); st["queues"] != "0" {
		t.Errorf("STAT queues %s, want 0", st["queues"])
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("-dir holds %v (%v), want nothing", entries, err)
	}
	noSpace.Store(false)
	c.exchange("stored", "set a 0 0 1\r\nx\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n")
	if st := c.stats(); st["queues"] != "1" {
		t.Errorf("STAT queues %s after a set stored, want 1", st["queues"])
	}
}

// delete removes a queue or a group that holds nothing, queued or open,
// and refuses one that holds something: a delete never discards an item.
func TestDeleteRemovesOnlyWhatIsEmpty(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir})
	a, b := dial(t, s.addr), dial(t, s.addr)
	a.exchange("group", "get q+audit\r\n", "END\r\n") // no queue: no group either
	a.exchange("set", "set q 0 0 2\r\nm1\r\nget q+audit\r\nset q 0 0 2\r\nm2\r\n", "STORED\r\nEND\r\nSTORED\r\n")
	a.exchange("queued", "delete q\r\n", "CLIENT_ERROR queue q is not empty: 2 items queued, 0 open; take them first\r\n")
	a.exchange("open", "get q/open\r\n", "VALUE q/open 0 2\r\nm1\r\nEND\r\n")
	b.exchange("open_item", "get q\r\ndelete q\r\n", "VALUE q 0 2\r\nm2\r\nEND\r\n"+"CLIENT_ERROR queue q is not empty: 0 items queued, 1 open; take them first\r\n")
	a.exchange("close", "get q/close\r\n", "END\r\n")
	b.exchange("group_not_empty", "delete q\r\n", "CLIENT_ERROR queue q is not empty: 1 items queued, 0 open; take them first\r\n")
	b.exchange("group_not_empty_too", "delete q+audit\r\n", "CLIENT_ERROR group audit of queue q is not empty: 1 items queued, 0 open; take them first\r\n")
	b.exchange("drain_group", "get q+audit\r\ndelete q+audit\r\ndelete q+audit\r\n", "VALUE q+audit 0 2\r\nm2\r\nEND\r\nDELETED\r\nNOT_FOUND\r\n")
	b.exchange("delete_queue", "delete q\r\ndelete q\r\nget q\r\n", "DELETED\r\nNOT_FOUND\r\nEND\r\n")
	if _, err := os.Stat(filepath.Join(dir, "q")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the deleted queue's directory: %v, want it gone", err)
	}
	b.exchange("again", "set q 0 0 2\r\nm3\r\nget q+audit\r\nget q\r\n", "STORED\r\nEND\r\nVALUE q 0 2\r\nm3\r\nEND\r\n")
	if st := b.stats(); st["queues"] != "1" || st["queue_q+audit_items"] != "0" {
		t.Errorf("STAT queues %s, queue_q+audit_items %q; want 1 and 0 (a new queue, a new group)", st["queues"], st["queue_q+audit_items"])
	}

	// A start deletes what a removal that a crash interrupted left.
	if err := os.MkdirAll(filepath.Join(dir, "old"+removedSuffix, "checkpoint"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, options{dir: dir})
	if _, err := os.Stat(filepath.Join(dir, "old"+removedSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a removed queue's directory left by a crash: %v, want it deleted at the start", err)
	}
	dial(t, s.addr).exchange("reopened", "get q+audit\r\n", "END\r\n")
}

// Sets, gets and deletes of one queue name race: every item a set was
// told STORED comes out exactly once, whatever the deletes did.
func TestDeleteRacingSetsLosesNothing(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), maxQueues: 2})
	const producers, each = 3, 40
	var wg sync.WaitGroup
	var producing atomic.Int64
	producing.Store(producers)
	var stored sync.Map
	errs := make(chan error, producers+2)
	stop := make(chan struct{})
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer producing.Add(-1)
			c := s.client()
			for i := range each {
				v := fmt.Sprintf("%d-%d", p, i)
				if err := c.Set(&memcache.Item{Key: "q", Value: []byte(v)}); err != nil {
					errs <- fmt.Errorf("set %s: %w", v, err)
					return
				}
				stored.Store(v, true)
				time.Sleep(3 * time.Millisecond) // the consumer often empties the queue
			}
		}()
	}
	var deletes atomic.Int64
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		c := s.client()
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := c.Delete("q")
			switch {
			case err == nil:
				deletes.Add(1)
			case errors.Is(err, memcache.ErrCacheMiss), strings.Contains(err.Error(), "not empty"):
			default:
				errs <- fmt.Errorf("delete: %w", err)
				return
			}
		}
	}()
	got := map[string]int{}
	c := s.client()
	deadline := time.Now().Add(30 * time.Second)
	for {
		it, err := c.Get("q")
		if errors.Is(err, memcache.ErrCacheMiss) {
			finished := producing.Load() == 0 // before the check: no set after it
			done := true
			stored.Range(func(k, _ any) bool {
				done = got[k.(string)] > 0
				return done
			})
			if done && finished {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("got %d items before the deadline", len(got))
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got[string(it.Value)]++
	}
	close(stop)
	bg.Wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(got) != producers*each {
		t.Errorf("%d distinct items came out, want %d", len(got), producers*each)
	}
	for v, n := range got {
		if n != 1 {
			t.Errorf("item %s came out %d times", v, n)
		}
	}
	t.Logf("%d deletes succeeded", deletes.Load())
}
