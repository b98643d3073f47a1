package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flumego/filechannel/channel"
)

// replayConfig is a config whose events carry their partition
// (RawValues) and spread over the partitions by seq.
func replayConfig(t *testing.T, cl *cluster) Config {
	cfg := testConfig(t, cl)
	cfg.KeyHeader = "seq"
	cfg.RawValues = true
	return cfg
}

// putSplit puts 0..49, then 50..99 in another millisecond, and returns a
// time between them: AtTime of it is exactly 50..99.
func putSplit(t *testing.T, ch *Channel) time.Time {
	t.Helper()
	putN(t, ch, 0, 50, 25)
	time.Sleep(5 * time.Millisecond)
	mid := time.Now()
	time.Sleep(5 * time.Millisecond)
	putN(t, ch, 50, 100, 25)
	return mid
}

// takeSeqs takes and commits everything group g has for up to testWait
// (want events, then quiet), checks that each partition's events come in
// seq order, and returns the seqs sorted.
func takeSeqs(t *testing.T, g *Group, want int) []int {
	t.Helper()
	var seqs []int
	last := map[string]int{}
	deadline := time.Now().Add(testWait)
	for {
		n, wait := 50, quiet
		if len(seqs) < want {
			n, wait = min(n, want-len(seqs)), time.Until(deadline)
		}
		evs, tx := takeN(t, g.Begin, n, max(wait, 0))
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 && (len(seqs) >= want || time.Now().After(deadline)) {
			break
		}
		for _, e := range evs {
			s, p := seqOf(t, e), e.Headers[HeaderPartition]
			if prev, ok := last[p]; ok && s <= prev {
				t.Fatalf("group %s: partition %s gave %d after %d", g.Name(), p, s, prev)
			}
			last[p] = s
			seqs = append(seqs, s)
		}
	}
	slices.Sort(seqs)
	return seqs
}

func seqRange(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func wantSeqs(t *testing.T, what string, got, want []int) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: took %d events %v, want %d events %v", what, len(got), got, len(want), want)
	}
}

func TestStartAtOfANewGroup(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 3)
	cfg := replayConfig(t, cl)
	ch := open(t, cfg)
	mid := putSplit(t, ch)
	cfg.StartAt = map[string]channel.Position{
		"earliest": channel.Earliest(),
		"latest":   channel.Latest(),
		"time":     channel.AtTime(mid),
		"past":     channel.AtTime(time.Time{}), // before 1970: every event
		"future":   channel.AtTime(time.Now().Add(time.Hour)),
	}
	takers := open(t, cfg)
	cfg.StartAt["time"] = channel.Latest() // the caller's map, not the channel's
	for _, c := range []struct {
		group string
		want  []int
	}{
		{"earliest", seqRange(0, 100)},
		{"unnamed", seqRange(0, 100)}, // not in StartAt: earliest, as before
		{"time", seqRange(50, 100)},
		{"past", seqRange(0, 100)},
	} {
		g, err := takers.Group(c.group)
		if err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, "StartAt "+c.group, takeSeqs(t, g, len(c.want)), c.want)
	}
	// Latest and a time after every event: only the events put after the
	// group joined. Put more until one arrives, then none of the first 100
	// may have.
	for _, name := range []string{"latest", "future"} {
		g, err := takers.Group(name)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int
		next := 1000
		waitFor(t, name+" taking new events", func() bool {
			putN(t, ch, next, next+3, 3)
			next += 3
			evs, tx := takeN(t, g.Begin, 10, 200*time.Millisecond)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				seqs = append(seqs, seqOf(t, e))
			}
			return len(seqs) > 0
		})
		if slices.Min(seqs) < 100 {
			t.Fatalf("group %s (StartAt %s) took %v: events of before its join", name, cfg.StartAt[name], seqs)
		}
	}
}

func TestResetGroupToEachPosition(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 3)
	ch := open(t, replayConfig(t, cl))
	mid := putSplit(t, ch)
	g, err := ch.Group("g")
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "first pass", takeSeqs(t, g, 100), seqRange(0, 100))
	for _, c := range []struct {
		to   channel.Position
		want []int
	}{
		{channel.Earliest(), seqRange(0, 100)},
		{channel.AtTime(mid), seqRange(50, 100)},
		{channel.AtTime(time.Time{}), seqRange(0, 100)},
		{channel.AtTime(mid.Add(-time.Hour)), seqRange(0, 100)},
		{channel.AtTime(time.Now().Add(time.Hour)), nil},
		{channel.Latest(), nil},
	} {
		n, err := ch.ResetGroup("g", c.to)
		if err != nil {
			t.Fatalf("reset to %s: %v", c.to, err)
		}
		// An upper bound: the offsets count each put commit's control
		// record in each partition it wrote (4 commits, 3 partitions).
		if n < len(c.want) || n > len(c.want)+4*3 {
			t.Fatalf("reset to %s: %d events queued, want %d (+ up to 12 control records)", c.to, n, len(c.want))
		}
		wantSeqs(t, "after a reset to "+c.to.String(), takeSeqs(t, g, len(c.want)), c.want)
	}
	// After Latest, the events put next.
	putN(t, ch, 100, 110, 5)
	wantSeqs(t, "after latest", takeSeqs(t, g, 10), seqRange(100, 110))
}

// A group this channel has not joined: its offsets are committed from
// outside, and the first take starts there.
func TestResetGroupNotJoinedHere(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 3)
	ch := open(t, replayConfig(t, cl))
	if n, err := ch.ResetGroup("empty-topic", channel.Earliest()); err != nil || n != 0 {
		t.Fatalf("reset on an empty topic: %d, %v; want 0 events", n, err)
	}
	mid := putSplit(t, ch)
	if _, err := ch.ResetGroup("new", channel.AtTime(mid)); err != nil {
		t.Fatal(err)
	}
	g, err := ch.Group("new")
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "a new group reset to mid", takeSeqs(t, g, 50), seqRange(50, 100))
}

// A take transaction open across a reset cannot take or commit, and its
// commit changes nothing; its Rollback does not move the reset position.
func TestTakeOpenAcrossResetIsFenced(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 1)
	ch := open(t, replayConfig(t, cl))
	putN(t, ch, 0, 100, 50)
	g, err := ch.Group("g")
	if err != nil {
		t.Fatal(err)
	}
	for _, end := range []string{"commit", "rollback"} {
		first, tx := takeN(t, g.Begin, 10, testWait)
		if err := tx.Commit(); err != nil || len(first) != 10 {
			t.Fatalf("took %d: %v", len(first), err)
		}
		evs, tx := takeN(t, g.Begin, 10, testWait)
		if len(evs) != 10 || seqOf(t, evs[0]) != 10 {
			t.Fatalf("took %d events from %d, want 10 from 10", len(evs), seqOf(t, evs[0]))
		}
		if _, err := ch.ResetGroup("g", channel.Earliest()); err != nil {
			t.Fatal(err)
		}
		// The member here has joined again before the fenced transaction
		// ends: a rewind of its records would move the new position.
		waitFor(t, "the member back in the group", func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			_, gen := g.cl.GroupMetadata()
			return gen > 0
		})
		time.Sleep(quiet) // its offsets fetched
		if _, _, err := tx.Take(); !errors.Is(err, channel.ErrGroupReset) {
			t.Fatalf("Take after the reset: %v, want ErrGroupReset", err)
		}
		if end == "commit" {
			if err := tx.Commit(); !errors.Is(err, channel.ErrGroupReset) {
				t.Fatalf("Commit after the reset: %v, want ErrGroupReset", err)
			}
		} else if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		// Every event again, from the first: the transaction changed
		// nothing.
		wantSeqs(t, "after "+end+" of a fenced transaction", takeSeqs(t, g, 100), seqRange(0, 100))
		if _, err := ch.ResetGroup("g", channel.Earliest()); err != nil {
			t.Fatal(err)
		}
	}
}

// A reset does not wait for a take that waits for events: the take ends
// with ErrGroupReset.
func TestResetEndsAWaitingTake(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 1)
	ch := open(t, replayConfig(t, cl))
	g, err := ch.Group("g")
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := g.Begin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*testWait)
	defer cancel()
	took := make(chan error, 1)
	go func() { _, err := tx.TakeContext(ctx); took <- err }()
	waitFor(t, "the take waiting", func() bool { return len(g.owner) == 1 })
	time.Sleep(quiet) // in its poll
	start := time.Now()
	if _, err := ch.ResetGroup("g", channel.Earliest()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > slack {
		t.Fatalf("the reset took %v with a take waiting", d)
	}
	if err := <-took; !errors.Is(err, channel.ErrGroupReset) {
		t.Fatalf("the waiting take: %v, want ErrGroupReset", err)
	}
	tx.Rollback()
	putN(t, ch, 0, 5, 5)
	wantSeqs(t, "after the reset", takeSeqs(t, g, 5), seqRange(0, 5))
}

func TestResetRefusesWhatKafkaCannotDo(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 3)
	cfg := replayConfig(t, cl)
	id, err := channel.ParseEventID("7")
	if err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.StartAt = map[string]channel.Position{"g": channel.AfterEvent(id)}
	if _, err := Open(bad); !errors.Is(err, ErrUnsupported) || !errors.Is(err, ErrBadConfig) {
		t.Fatalf("Open with StartAt AfterEvent: %v, want ErrUnsupported and ErrBadConfig", err)
	}
	bad.StartAt = map[string]channel.Position{"": channel.Earliest()}
	if _, err := Open(bad); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("Open with StartAt of group \"\": %v, want ErrBadConfig", err)
	}
	ch := open(t, cfg)
	if _, err := ch.ResetGroup("g", channel.AfterEvent(id)); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("ResetGroup to AfterEvent: %v, want ErrUnsupported", err)
	}
	// AfterEvent of the zero id is every event: Earliest.
	if _, err := ch.ResetGroup("g", channel.AfterEvent(channel.EventID{})); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.ResetGroup("", channel.Earliest()); !errors.Is(err, channel.ErrNoGroup) {
		t.Fatalf("ResetGroup of \"\": %v, want ErrNoGroup", err)
	}
	ch.Close()
	if _, err := ch.ResetGroup("g", channel.Earliest()); !isClosed(err) {
		t.Fatalf("ResetGroup after Close: %v, want ErrClosed", err)
	}
}

// Kafka resets only a stopped group: a member elsewhere makes the reset
// fail, and nothing moves. The member here joins again after its leave.
func TestResetOfAGroupWithAnotherMemberFails(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 3)
	cfg := replayConfig(t, cl)
	ch, other := open(t, cfg), open(t, cfg)
	putN(t, ch, 0, 20, 10)
	og, _ := other.Group("g")
	wantSeqs(t, "the other member", takeSeqs(t, og, 20), seqRange(0, 20))
	for _, joinedHere := range []bool{false, true} {
		if joinedHere {
			if _, err := ch.Group("g"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := ch.ResetGroup("g", channel.Earliest())
		if !errors.Is(err, ErrGroupActive) {
			t.Fatalf("reset with another member (joined here: %v): %v, want ErrGroupActive", joinedHere, err)
		}
		// The state is Stable, or PreparingRebalance while this channel's
		// own join (joinedHere) is still rebalancing the group.
		if !strings.Contains(err.Error(), "1 member(s), state ") {
			t.Fatalf("reset with another member: %q does not say how many and the state", err)
		}
		t.Log(err)
	}
	// Nothing moved: the group goes on from its committed offsets.
	putN(t, ch, 20, 30, 10)
	var got []int
	waitFor(t, "the group taking 20..29", func() bool {
		for _, g := range []*Group{og, mustGroup(t, ch, "g")} {
			evs, tx := takeN(t, g.Begin, 10, 200*time.Millisecond)
			tx.Commit()
			for _, e := range evs {
				got = append(got, seqOf(t, e))
			}
		}
		return len(got) >= 10
	})
	slices.Sort(got)
	wantSeqs(t, "after the refused resets", got, seqRange(20, 30))
}

func mustGroup(t *testing.T, ch *Channel, name string) *Group {
	g, err := ch.Group(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A reset races Close: it returns (ErrClosed or done), never hangs, and
// Close returns within its bound.
func TestResetDuringClose(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 3)
	ch := open(t, replayConfig(t, cl))
	putN(t, ch, 0, 20, 10)
	g := mustGroup(t, ch, "g")
	takeSeqs(t, g, 20)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { _, err := ch.ResetGroup("g", channel.Earliest()); errs <- err })
	}
	start := time.Now()
	ch.Close()
	wg.Wait()
	if d := time.Since(start); d > 4*ch.cfg.CloseTimeout+slack {
		t.Fatalf("Close and the resets took %v", d)
	}
	close(errs)
	for err := range errs {
		if err != nil && !isClosed(err) {
			t.Fatalf("a reset during Close: %v, want nil or ErrClosed", err)
		}
	}
	if _, _, err := mustBegin(t, g).Take(); !isClosed(err) {
		t.Fatalf("Take after Close: %v", err)
	}
	// A reset that found the group before Close and reaches it after.
	if _, err := g.reset(channel.Earliest()); !isClosed(err) {
		t.Fatalf("the reset of a closed group: %v, want ErrClosed", err)
	}
}

// Close while a reset waits for Kafka: the reset ends at once, with
// ErrClosed.
func TestCloseDuringAReset(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 3)
	fake := cl.fake(t)
	ch := open(t, replayConfig(t, cl))
	mustGroup(t, ch, "g")
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var once sync.Once
	fake.ControlKey(kmsg.DescribeGroups.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { close(started) })
		fake.SleepControl(func() { <-release })
		return nil, nil, false
	})
	errc := make(chan error, 1)
	go func() { _, err := ch.ResetGroup("g", channel.Earliest()); errc <- err }()
	<-started
	start := time.Now()
	ch.Close()
	if err := <-errc; !isClosed(err) {
		t.Fatalf("a reset cut short by Close: %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > ch.cfg.CloseTimeout+slack {
		t.Fatalf("Close and the reset took %v", d)
	}
}

func mustBegin(t *testing.T, g *Group) *Transaction {
	tx, err := g.Begin()
	if err != nil {
		tx = &Transaction{c: g.c, g: g, takeOnly: true}
	}
	return tx
}

// With the cluster gone, a reset fails within its bound, and the group's
// member here still closes.
func TestResetWithTheClusterDown(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, 1, 3)
	fake := cl.fake(t)
	cfg := replayConfig(t, cl)
	cfg.CommitTimeout = 2 * time.Second
	cfg.CloseTimeout = time.Second
	ch := open(t, cfg)
	putN(t, ch, 0, 10, 10)
	g := mustGroup(t, ch, "g")
	takeSeqs(t, g, 10)
	fake.Close()
	for _, name := range []string{"g", "elsewhere"} {
		start := time.Now()
		_, err := ch.ResetGroup(name, channel.AtTime(time.Now()))
		if err == nil {
			t.Fatalf("reset of %s succeeded with the cluster gone", name)
		}
		if d := time.Since(start); d > cfg.CommitTimeout+cfg.CloseTimeout+slack {
			t.Fatalf("reset of %s took %v: %v", name, d, err)
		}
		t.Logf("reset of %s: %v", name, err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMilli(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{base, 1_700_000_000_000},
		{base.Add(time.Nanosecond), 1_700_000_000_001}, // a record of base's millisecond is before it
		{base.Add(-time.Nanosecond), 1_700_000_000_000},
		{time.Time{}, 0},
		{time.Unix(-5, 0), 0},
	} {
		if got := milli(c.t); got != c.want {
			t.Errorf("milli(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}
