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

// testConfig is a Config for cluster c with short timeouts.
func testConfig(t testing.TB, c *cluster) Config {
	return Config{
		Brokers:       c.brokers,
		Topic:         c.topic,
		CommitTimeout: 10 * time.Second,
		OpenTimeout:   5 * time.Second,
		CloseTimeout:  2 * time.Second,
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

// drain takes and commits everything begin's group gets until nothing
// comes for quiet, in transactions of up to batch, and returns the seqs.
func drain(t testing.TB, begin func() (*Transaction, error), batch int, quiet time.Duration) []int {
	t.Helper()
	var seqs []int
	for {
		evs, tx := takeN(t, begin, batch, quiet)
		for _, e := range evs {
			seqs = append(seqs, seqOf(t, e))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if len(evs) < batch {
			return seqs
		}
	}
}

func isClosed(err error) bool { return errors.Is(err, channel.ErrClosed) }
