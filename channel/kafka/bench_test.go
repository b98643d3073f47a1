package kafka

import (
	"context"
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
