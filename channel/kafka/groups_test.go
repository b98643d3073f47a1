package kafka

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestTwoGroupsBothReceiveEverything(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 3, 3)
	ch := open(t, testConfig(t, cl))
	putN(t, ch, 0, 500, 50)
	a, err := ch.Group("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ch.Group("b")
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := ch.Group("a"); g != a {
		t.Fatal("Group(a) twice gave two members")
	}
	for _, g := range []*Group{a, b} {
		seqs := takeAll(t, 500, 64, g.Begin)
		slices.Sort(seqs)
		if len(seqs) != 500 || seqs[0] != 0 || seqs[499] != 499 || len(slices.Compact(seqs)) != 500 {
			t.Fatalf("group %s took %d events (%d distinct), want each of 0..499 once", g.Name(), len(seqs), len(slices.Compact(seqs)))
		}
	}
	// The default group (c.Begin's) is a third one.
	if seqs := takeAll(t, 500, 100, ch.Begin); len(seqs) != 500 {
		t.Fatalf("the default group took %d events, want 500", len(seqs))
	}
}

// Two channels in one group, taking while the other joins, commits and
// rolls back: every event is taken (committed) by exactly one of them, and
// both take some.
func TestTwoChannelsOneGroupShareTheEvents(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 3, 3)
	cfg := testConfig(t, cl)
	cfg.KeyHeader = "seq" // events in every partition, so both members get some
	producer := open(t, cfg)
	const total = 3000
	putN(t, producer, 0, total/2, 100)
	x, y := open(t, cfg), open(t, cfg)
	var mu sync.Mutex
	got := map[int]int{}  // seq -> takes committed
	per := make([]int, 2) // events committed per channel
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i, ch := range []*Channel{x, y} {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				tx, _ := ch.Begin()
				tctx, tcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				var seqs []int
				for len(seqs) < 50 {
					e, err := tx.TakeContext(tctx)
					if err != nil {
						break
					}
					seqs = append(seqs, seqOf(t, e))
				}
				tcancel()
				if (n+i)%5 == 0 { // some rollbacks
					tx.Rollback()
					continue
				}
				if err := tx.Commit(); err != nil {
					// A rebalance may fence a commit; its events come back.
					t.Logf("commit: %v", err)
					continue
				}
				mu.Lock()
				for _, s := range seqs {
					got[s]++
				}
				per[i] += len(seqs)
				mu.Unlock()
			}
		})
	}
	// The rest arrives while both take, and more until both have taken
	// some: however slow the joins, events are left for the second
	// member. The backlog stays under 1,000.
	state := func() (taken int, both bool) {
		mu.Lock()
		defer mu.Unlock()
		return len(got), per[0] > 0 && per[1] > 0
	}
	put := total / 2
	waitFor(t, "both members taking", func() bool {
		taken, both := state()
		if both && put >= total {
			return true
		}
		if put-taken < 1000 {
			putN(t, producer, put, put+100, 100)
			put += 100
		}
		return false
	})
	waitFor(t, "every event taken", func() bool { taken, _ := state(); return taken == put })
	close(done)
	wg.Wait()
	for s, n := range got {
		if n != 1 {
			t.Fatalf("#%d committed by %d takes, want 1", s, n)
		}
	}
	t.Logf("%d events; committed per channel: %v", put, per)
}

// A take transaction owns the group's member: another transaction of the
// same channel finds it empty (Take) or waits (TakeContext) until the first
// ends, and then gets the events in order.
func TestOneTakeTransactionAtATime(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	ch := open(t, testConfig(t, cl))
	putN(t, ch, 0, 10, 10)
	first, tx1 := takeN(t, ch.Begin, 3, testWait)
	if len(first) != 3 {
		t.Fatalf("took %d", len(first))
	}
	tx2, _ := ch.Begin()
	if _, ok, err := tx2.Take(); ok || err != nil {
		t.Fatalf("second transaction's Take: ok=%v err=%v, want empty", ok, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if _, err := tx2.TakeContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second transaction's TakeContext while the first is open: %v", err)
	}
	cancel()
	got := make(chan int, 1)
	go func() {
		e, err := tx2.TakeContext(context.Background())
		if err != nil {
			got <- -1
			return
		}
		got <- seqOf(t, e)
	}()
	waitFor(t, "the second transaction's TakeContext waiting", tx2.busy.Load)
	if err := tx1.Rollback(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != 0 {
			t.Fatalf("after the rollback the next take got #%d, want #0", s)
		}
	case <-time.After(testWait):
		t.Fatal("TakeContext did not get the member after the first transaction ended")
	}
	if err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}
	rest := takeAll(t, 9, 100, ch.Begin)
	if !slices.Equal(rest, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("then took %v, want 1..9", rest)
	}
}

// No rebalance moves partitions under an open take transaction: a member
// joining while one holds events of every partition gets none of them, and
// the open transaction's commit succeeds after the join.
func TestNoRebalanceUnderAnOpenTake(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 3, 3)
	cfg := testConfig(t, cl)
	cfg.KeyHeader = "seq" // events in every partition
	x := open(t, cfg)
	putN(t, x, 0, 300, 100)
	held, tx := takeN(t, x.Begin, 300, testWait)
	if len(held) != 300 {
		t.Fatalf("took %d", len(held))
	}
	y := open(t, cfg)
	if _, err := y.Group(DefaultGroup); err != nil { // y joins
		t.Fatal(err)
	}
	xg, _ := x.Group(DefaultGroup)
	waitFor(t, "the rebalance of y's join waiting for x", xg.rebalance.Load)
	// Meanwhile y takes for longer than a heartbeat interval (3s).
	got, ytx := takeN(t, y.Begin, 1000, 5*time.Second)
	if len(got) > 0 {
		t.Fatalf("y took %d events (#%d first) that x's open transaction holds", len(got), seqOf(t, got[0]))
	}
	ytx.Rollback()
	if err := tx.Commit(); err != nil {
		t.Fatalf("x's commit after y joined: %v", err)
	}
	// From now on the group shares new events; x's never come back.
	putN(t, x, 300, 600, 100)
	all := map[int]bool{}
	for _, s := range takeAll(t, 300, 100, y.Begin, x.Begin) {
		if s < 300 {
			t.Fatalf("#%d came back after x committed it", s)
		}
		all[s] = true
	}
	if len(all) != 300 {
		t.Fatalf("the group took %d distinct new events, want 300", len(all))
	}
}

// A member that is never idle (every take transaction finds events) still
// lets a joining member in: each transaction's end allows the rebalance.
func TestBusyMemberLetsAJoinThrough(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 3)
	cfg := testConfig(t, cl)
	cfg.KeyHeader = "seq"
	x := open(t, cfg)
	producer := open(t, cfg)
	putN(t, producer, 0, 1000, 500)
	var (
		taken atomic.Int64
		stop  = make(chan struct{})
		busy  = make(chan struct{}) // x committed a take
		wg    sync.WaitGroup
	)
	// The producer keeps x's backlog between 500 and 1,000 events, so x is
	// never idle however long the join takes on a slow machine.
	wg.Go(func() {
		for put := 1000; ; {
			select {
			case <-stop:
				return
			default:
			}
			if put-int(taken.Load()) > 500 {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			tx, _ := producer.Begin()
			for i := put; i < put+500; i++ {
				tx.Put(ev(i))
			}
			if err := tx.Commit(); err != nil {
				t.Errorf("put commit: %v", err)
				return
			}
			put += 500
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			evs, tx := takeN(t, x.Begin, 5, quiet)
			time.Sleep(20 * time.Millisecond) // "delivering"
			if err := tx.Commit(); err != nil {
				t.Logf("x commit: %v", err)
				continue
			}
			taken.Add(int64(len(evs)))
			if len(evs) > 0 {
				select {
				case <-busy:
				default:
					close(busy)
				}
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	select {
	case <-busy:
	case <-time.After(testWait):
		t.Fatal("x took nothing")
	}
	y := open(t, cfg)
	got, ytx := takeN(t, y.Begin, 1, testWait)
	if len(got) == 0 {
		t.Fatalf("a joining member got nothing in %v while the other was busy", testWait)
	}
	ytx.Commit()
}

// A take transaction held past the group's rebalance timeout while another
// member waits to join: Kafka removes the slow member, its Commit returns
// the error (Flume's KafkaChannel logs and swallows it), and its events go
// to the member that took over.
//
// The rebalance timeout is short (2s), as that is how long x is held before
// the group removes it; every wait of the test is for an event, bounded by
// testWait. The session timeout stays franz-go's (45s), so that no member
// is removed for a heartbeat late on a loaded machine. There, a member may
// still miss a later rebalance's 2s and be removed: the last part counts
// only committed takes, and its failed commits' events come back.
func TestTakeCommitAfterLosingThePartitionsFails(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	cl.fake(t)
	cfg := testConfig(t, cl)
	cfg.KgoOptions = []kgo.Opt{kgo.RebalanceTimeout(2 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond)}
	x := open(t, cfg)
	putN(t, x, 0, 10, 10)
	held, tx := takeN(t, x.Begin, 10, testWait)
	if len(held) != 10 {
		t.Fatalf("took %d", len(held))
	}
	y := open(t, cfg)
	// y waits for x's removal (a rebalance timeout after its join).
	got, ytx := takeN(t, y.Begin, 10, testWait)
	if len(got) != 10 || seqOf(t, got[0]) != 0 {
		t.Fatalf("the member that took over got %d events, want x's 10 from #0", len(got))
	}
	if err := ytx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("x's take commit succeeded after the group removed x")
	} else {
		t.Logf("x's commit: %v", err)
	}
	// x joins again; the group goes on with both: the 10 new events are
	// committed once each, and none of x's 10 comes back.
	xg, err := x.Group(DefaultGroup)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "x back in the group", func() bool { return !xg.outside.Load() })
	putN(t, x, 10, 20, 10)
	committed := map[int]bool{}
	deadline := time.Now().Add(testWait)
	for len(committed) < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("after x's failed commit the group committed %d of the 10 new events in %v", len(committed), testWait)
		}
		for _, ch := range []*Channel{x, y} {
			evs, tx := takeN(t, ch.Begin, 10-len(committed), time.Second)
			for _, e := range evs {
				if s := seqOf(t, e); s < 10 {
					t.Fatalf("#%d delivered again", s)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Logf("a commit of %d events failed (they come back): %v", len(evs), err)
				continue
			}
			for _, e := range evs {
				s := seqOf(t, e)
				if committed[s] {
					t.Fatalf("#%d committed twice", s)
				}
				committed[s] = true
			}
			if len(committed) == 10 {
				break
			}
		}
	}
	for _, ch := range []*Channel{x, y} {
		if evs, tx := takeN(t, ch.Begin, 1, quiet); len(evs) > 0 {
			t.Fatalf("#%d delivered again", seqOf(t, evs[0]))
		} else {
			tx.Rollback()
		}
	}
}

// A member keeps what it fetched beyond its takes for its next transaction,
// with rebalances blocked meanwhile. Idle with such records, it must still
// let a joining member in (it gives them back when the rebalance asks), and
// what it gave back is neither lost nor delivered twice.
func TestIdleMemberWithFetchedRecordsLetsAJoinThrough(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 3)
	cfg := testConfig(t, cl)
	cfg.KeyHeader = "seq" // events in every partition
	x := open(t, cfg)
	putN(t, x, 0, 300, 100)
	first, tx := takeN(t, x.Begin, 1, testWait)
	if len(first) != 1 {
		t.Fatal("took nothing")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := len(x.groups[DefaultGroup].buffered()); n == 0 {
		t.Fatal("x fetched nothing beyond its take: the test needs records held back")
	}
	y := open(t, cfg)
	got, ytx := takeN(t, y.Begin, 1, testWait)
	if len(got) == 0 {
		t.Fatalf("a joining member got nothing in %v while the other sat on fetched records", testWait)
	}
	if err := ytx.Commit(); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{seqOf(t, first[0]): true, seqOf(t, got[0]): true}
	for _, s := range takeAll(t, 300-len(seen), 50, x.Begin, y.Begin) {
		if seen[s] {
			t.Fatalf("#%d delivered twice", s)
		}
		seen[s] = true
	}
	if len(seen) != 300 {
		t.Fatalf("%d of 300 events delivered", len(seen))
	}
}
