package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flumego/filechannel/channel"
)

const testTopic = "events"

// cluster is where a test runs: a kfake cluster of its own, or, with
// KAFKA_BROKERS set, the real cluster there (realcluster_test.go) with a
// topic made for the test.
type cluster struct {
	*kfake.Cluster // nil on a real cluster
	brokers        []string
	topic          string
}

// newCluster starts a kfake cluster of brokers brokers with testTopic of
// partitions partitions, closed at the end of the test; with KAFKA_BROKERS
// set it makes a new topic of partitions partitions there instead.
func newCluster(t testing.TB, brokers, partitions int) *cluster {
	t.Helper()
	if real := os.Getenv("KAFKA_BROKERS"); real != "" {
		return realCluster(t, strings.Split(real, ","), partitions)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(int32(partitions), testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &cluster{Cluster: c, brokers: c.ListenAddrs(), topic: testTopic}
}

// fake skips a test that injects faults into the cluster when it runs on a
// real one.
func (c *cluster) fake(t testing.TB) *kfake.Cluster {
	t.Helper()
	if c.Cluster == nil {
		t.Skip("needs a kfake cluster (it stops or changes brokers)")
	}
	return c.Cluster
}

// testLogger logs to the test's output with -v and FC_KAFKA_LOG set.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("FC_KAFKA_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(tbWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ t testing.TB }

func (w tbWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// Waits in tests are on events, bounded generously: a loaded CI machine
// (the suite beside other suites on 2 cores) is slow, and a wait whose
// event comes returns at once.
const (
	// testWait bounds the wait for something that must happen: events to
	// arrive, a member to join, a rebalance to finish.
	testWait = 60 * time.Second
	// quiet is how long a take waits, once a test has what it expects, for
	// events that should not come.
	quiet = 500 * time.Millisecond
	// slack is how late a call with a bound (Commit, Open, Close) may
	// return on a loaded machine: the tests of bounds check that a call
	// does not hang, not the scheduler's punctuality.
	slack = 10 * time.Second
)

// testConfig is a Config for cluster c. Its timeouts are what a loaded
// machine needs; the tests that exercise a timeout set their own.
func testConfig(t testing.TB, c *cluster) Config {
	return Config{
		Brokers:       c.brokers,
		Topic:         c.topic,
		CommitTimeout: 30 * time.Second,
		OpenTimeout:   30 * time.Second,
		CloseTimeout:  5 * time.Second,
		Logger:        testLogger(t),
	}
}

func open(t testing.TB, cfg Config) *Channel {
	t.Helper()
	ch, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

func ev(i int) channel.Event {
	return channel.Event{Headers: map[string]string{"seq": strconv.Itoa(i)}, Body: fmt.Appendf(nil, "event %d", i)}
}

func seqOf(t testing.TB, e channel.Event) int {
	t.Helper()
	n, err := strconv.Atoi(e.Headers["seq"])
	if err != nil {
		t.Fatalf("event without a seq header: %+v", e)
	}
	return n
}

// putN commits events from..to-1 in transactions of batch.
func putN(t testing.TB, ch *Channel, from, to, batch int) {
	t.Helper()
	for i := from; i < to; i += batch {
		tx, err := ch.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for j := i; j < min(i+batch, to); j++ {
			if err := tx.Put(ev(j)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// takeN takes n events in one transaction of begin, waiting up to
// timeout for them, and returns them with the open transaction.
func takeN(t testing.TB, begin func() (*Transaction, error), n int, timeout time.Duration) ([]channel.Event, *Transaction) {
	t.Helper()
	tx, err := begin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []channel.Event
	for len(out) < n {
		e, err := tx.TakeContext(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out, tx
}

// takeAll takes and commits, in transactions of up to batch going round
// the members' begins, until want events are committed, waiting up to
// testWait for them; then each member takes once more for quiet, for
// events beyond want. It returns the seqs in take order: a test that
// expects want events gets them however slow the machine, and sees any
// extra ones.
func takeAll(t testing.TB, want, batch int, begins ...func() (*Transaction, error)) []int {
	t.Helper()
	var seqs []int
	take := func(begin func() (*Transaction, error), n int, wait time.Duration) int {
		evs, tx := takeN(t, begin, n, wait)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			seqs = append(seqs, seqOf(t, e))
		}
		return len(evs)
	}
	deadline := time.Now().Add(testWait)
	for len(seqs) < want && time.Now().Before(deadline) {
		for _, begin := range begins {
			// One member waits for all of it; several take turns, since a
			// member may hold none of the partitions with events.
			wait := time.Until(deadline)
			if len(begins) > 1 {
				wait = min(wait, time.Second)
			}
			take(begin, min(batch, want-len(seqs)), max(wait, 0))
			if len(seqs) >= want {
				break
			}
		}
	}
	for _, begin := range begins {
		for take(begin, batch, quiet) > 0 {
		}
	}
	return seqs
}

// waitFor polls cond until it holds, and fails the test if it does not
// within testWait.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, testWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isClosed(err error) bool { return errors.Is(err, channel.ErrClosed) }
