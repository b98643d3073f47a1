package kafka

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/flumego/filechannel/channel"
)

func TestRoundTripHeaders(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	for _, parts := range []int{1, 3} {
		t.Run(map[int]string{1: "1 partition", 3: "3 partitions"}[parts], func(t *testing.T) {
			cl := newCluster(t, 3, parts)
			ch := open(t, testConfig(t, cl))
			if ch.Partitions() != parts {
				t.Fatalf("Partitions() = %d, want %d", ch.Partitions(), parts)
			}
			before := time.Now().Add(-time.Millisecond) // record timestamps are in milliseconds
			tx, _ := ch.Begin()
			in := []channel.Event{
				{Headers: map[string]string{"seq": "0", "a": "1", "b": ""}, Body: []byte("hello")},
				{Headers: map[string]string{"seq": "1"}, Body: []byte{}},
				{Headers: map[string]string{"seq": "2", "bin": "\x00\xff"}, Body: bytes.Repeat([]byte{0, 1, 2}, 1000)},
			}
			for _, e := range in {
				if err := tx.Put(e); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			got, tx := takeN(t, ch.Begin, 3, testWait)
			if len(got) != 3 {
				t.Fatalf("took %d events, want 3", len(got))
			}
			bySeq := map[int]channel.Event{}
			for _, e := range got {
				bySeq[seqOf(t, e)] = e
			}
			for i, want := range in {
				e := bySeq[i]
				if !bytes.Equal(e.Body, want.Body) || len(e.Headers) != len(want.Headers) {
					t.Fatalf("event %d = %+v, want %+v", i, e, want)
				}
				if e.Time.Before(before) || e.Time.After(time.Now()) {
					t.Fatalf("event %d: Time %v, want the put's record timestamp (after %v)", i, e.Time, before)
				}
				for k, v := range want.Headers {
					if e.Headers[k] != v {
						t.Fatalf("event %d header %q = %q, want %q", i, k, e.Headers[k], v)
					}
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRolledBackPutInvisible(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	ch := open(t, testConfig(t, cl))
	tx, _ := ch.Begin()
	for i := range 10 {
		tx.Put(ev(1000 + i))
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	putN(t, ch, 0, 5, 5)
	seqs := takeAll(t, 5, 100, ch.Begin)
	if len(seqs) != 5 {
		t.Fatalf("took %v, want 0..4 only", seqs)
	}
	for i, s := range seqs {
		if s != i {
			t.Fatalf("took %v, want 0..4 in order", seqs)
		}
	}
}

func TestTakeRollbackRedeliversInOrder(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 3, 1)
	ch := open(t, testConfig(t, cl))
	putN(t, ch, 0, 2000, 100)
	next := 0
	for round := 0; next < 2000; round++ {
		evs, tx := takeN(t, ch.Begin, min(150, 2000-next), testWait)
		for i, e := range evs {
			if s := seqOf(t, e); s != next+i {
				t.Fatalf("round %d: event %d is #%d, want #%d", round, i, s, next+i)
			}
		}
		if round%2 == 0 {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			continue // the same events again
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		next += len(evs)
	}
}

func TestCommittedTakesDoNotComeBackAfterReopen(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 3, 3)
	cfg := testConfig(t, cl)
	ch := open(t, cfg)
	putN(t, ch, 0, 300, 50)
	evs, tx := takeN(t, ch.Begin, 120, testWait)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Taken and not committed: these come back.
	_, open2 := takeN(t, ch.Begin, 30, testWait)
	_ = open2
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	done := map[int]bool{}
	for _, e := range evs {
		done[seqOf(t, e)] = true
	}
	ch2 := open(t, cfg)
	rest := takeAll(t, 300-len(evs), 100, ch2.Begin)
	if len(rest) != 300-len(evs) {
		t.Fatalf("after reopen took %d events, want %d", len(rest), 300-len(evs))
	}
	for _, s := range rest {
		if done[s] {
			t.Fatalf("#%d came back after its take committed", s)
		}
		done[s] = true
	}
	if len(done) != 300 {
		t.Fatalf("%d distinct events, want 300", len(done))
	}
}

func TestCloseWithOpenTransactions(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	cfg := testConfig(t, cl)
	ch := open(t, cfg)
	putN(t, ch, 0, 10, 10)
	took, take := takeN(t, ch.Begin, 10, testWait)
	if len(took) != 10 {
		t.Fatalf("took %d", len(took))
	}
	put, _ := ch.Begin()
	put.Put(ev(99))
	waiting, _ := ch.Begin()
	waitErr := make(chan error, 1)
	go func() {
		_, err := waiting.TakeContext(context.Background())
		waitErr <- err
	}()
	start := time.Now()
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*cfg.CloseTimeout+slack {
		t.Fatalf("Close took %v with open transactions", d)
	}
	select {
	case err := <-waitErr:
		if err != channel.ErrClosed && !isClosed(err) {
			t.Fatalf("TakeContext during Close: %v, want ErrClosed", err)
		}
	case <-time.After(testWait):
		t.Fatal("TakeContext still waits after Close")
	}
	if err := take.Commit(); !isClosed(err) {
		t.Fatalf("take Commit after Close: %v, want ErrClosed", err)
	}
	if err := put.Commit(); !isClosed(err) {
		t.Fatalf("put Commit after Close: %v, want ErrClosed", err)
	}
	ch2 := open(t, cfg)
	seqs := takeAll(t, 10, 100, ch2.Begin)
	if len(seqs) != 10 {
		t.Fatalf("after Close the open take's events: %v, want 0..9 back (and never #99)", seqs)
	}
}

// Put copies the event: the caller may reuse its buffers at once, and the
// copies of a rolled-back or committed transaction (whose buffers are
// recycled) never show up in another transaction's events.
func TestPutCopiesTheEvent(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	ch := open(t, testConfig(t, cl))
	buf := make([]byte, 40<<10)
	want := map[int][]byte{}
	for round := range 6 {
		tx, _ := ch.Begin()
		for i := range 20 {
			seq := round*20 + i
			n := []int{0, 1, 1000, 20 << 10, 40 << 10}[i%5] // small, chunk-sized and large bodies
			body := buf[:n]
			for j := range body {
				body[j] = byte(seq + j)
			}
			e := ev(seq)
			e.Body = body
			if err := tx.Put(e); err != nil {
				t.Fatal(err)
			}
			clear(buf) // reused at once
			want[seq] = bytes.Clone(body)
			for j := range want[seq] {
				want[seq][j] = byte(seq + j)
			}
		}
		if round%3 == 1 {
			tx.Rollback()
			for i := range 20 {
				delete(want, round*20+i)
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	got, tx := takeN(t, ch.Begin, len(want), testWait)
	defer tx.Commit()
	if len(got) != len(want) {
		t.Fatalf("took %d events, want %d", len(got), len(want))
	}
	for _, e := range got {
		s := seqOf(t, e)
		if !bytes.Equal(e.Body, want[s]) {
			t.Fatalf("event #%d: body of %d bytes differs from what was put (%d bytes)", s, len(e.Body), len(want[s]))
		}
	}
}
