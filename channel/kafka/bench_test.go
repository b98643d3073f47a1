package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flumego/filechannel/channel"
)

// BenchmarkPutCommit is put commits of 100 × 1 KiB on a kfake cluster of 3
// brokers: the channel, and raw franz-go doing what a put commit does
// (examples/bench compares the two side by side, with the takes).
func BenchmarkPutCommit(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, testTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	body := make([]byte, 1024)
	b.Run("channel", func(b *testing.B) {
		ch, err := Open(Config{Brokers: c.ListenAddrs(), Topic: testTopic, KgoOptions: []kgo.Opt{kgo.DisableClientMetrics()}})
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		b.SetBytes(100 * 1024)
		for b.Loop() {
			tx, _ := ch.Begin()
			for range 100 {
				tx.Put(channel.Event{Body: body})
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(testTopic),
			kgo.TransactionalID("raw"), kgo.ProducerLinger(0), kgo.DisableClientMetrics())
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		b.SetBytes(100 * 1024)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for b.Loop() {
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{}, 100)
			for range 100 {
				cl.Produce(ctx, &kgo.Record{Value: body}, func(*kgo.Record, error) { done <- struct{}{} })
			}
			for range 100 {
				<-done
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTakeCommit is take commits of batch 100 on a kfake cluster of 3
// brokers, from a backlog put beforehand: the channel, and raw franz-go's
// poll and offset commit, each in its own consumer group.
func BenchmarkTakeCommit(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, testTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const backlog = 200_000
	fill, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(testTopic),
		kgo.ProducerLinger(0), kgo.DisableClientMetrics())
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for range backlog / 1000 {
		recs := make([]*kgo.Record, 1000)
		for i := range recs {
			recs[i] = &kgo.Record{Value: body}
		}
		if err := fill.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	fill.Close()
	ctx := context.Background()
	b.Run("channel", func(b *testing.B) {
		ch, err := Open(Config{Brokers: c.ListenAddrs(), Topic: testTopic, Group: fmt.Sprint("bench-channel-", b.N, time.Now().UnixNano()), KgoOptions: []kgo.Opt{kgo.DisableClientMetrics()}})
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		b.SetBytes(100 * 1024)
		var tk, cm time.Duration
		for b.Loop() {
			t0 := time.Now()
			tx, _ := ch.Begin()
			if _, err := tx.TakeContext(ctx); err != nil {
				b.Fatal(err)
			}
			for range 99 {
				if _, ok, err := tx.Take(); err != nil || !ok {
					break
				}
			}
			t1 := time.Now()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			tk += t1.Sub(t0)
			cm += time.Since(t1)
		}
		b.ReportMetric(float64(tk.Microseconds())/float64(b.N), "take-us")
		b.ReportMetric(float64(cm.Microseconds())/float64(b.N), "commit-us")
	})
	b.Run("raw", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(testTopic),
			kgo.ConsumerGroup(fmt.Sprint("bench-raw-", b.N, time.Now().UnixNano())), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(fetchMaxWait),
			kgo.DisableClientMetrics())
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		b.SetBytes(100 * 1024)
		var tk, cm time.Duration
		for b.Loop() {
			t0 := time.Now()
			fs := cl.PollRecords(ctx, 100)
			t1 := time.Now()
			if err := cl.CommitRecords(ctx, fs.Records()...); err != nil {
				b.Fatal(err)
			}
			cl.AllowRebalance()
			tk += t1.Sub(t0)
			cm += time.Since(t1)
		}
		b.ReportMetric(float64(tk.Microseconds())/float64(b.N), "take-us")
		b.ReportMetric(float64(cm.Microseconds())/float64(b.N), "commit-us")
	})
}
