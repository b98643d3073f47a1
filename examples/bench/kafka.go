package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/channel/kafka"
)

// The Kafka measurement: what channel/kafka's transactions cost over the
// franz-go calls they are made of. One in-process kfake cluster (3
// brokers) serves both sides of both comparisons:
//
//   - put commits of batch 100 × 1 KiB through a kafka.Channel (Begin, 100
//     Puts, Commit) against a raw transactional kgo.Client doing what a put
//     commit does (BeginTransaction, 100 Produces with a promise, wait for
//     every ack, EndTransaction(TryCommit)), into the same 1-partition
//     topic. The raw client gets ProducerLinger(0), as the channel's has:
//     with franz-go's default linger (10 ms) every transaction of one batch
//     would wait it out before its records are sent, on both sides alike,
//     and the channel's own work would not show;
//   - take commits of batch 100 through a kafka.Channel (TakeContext for the
//     first event, Take for the rest up to 100, Commit) against a raw
//     consumer-group kgo.Client (PollRecords(ctx, 100), CommitRecords,
//     AllowRebalance), each in its own consumer group, both draining the
//     same backlog of sz.kafkaTakes events, put in transactions of 100
//     beforehand into a topic of kafkaTakePartitions partitions.
//
// The raw clients get the options the channel gives its own (acks from all
// in-sync replicas; read_committed, no auto-commit, rebalances held from a
// poll to AllowRebalance, a new group at the start of the topic, the same
// fetch max wait) and franz-go's defaults for the rest, as the channel's
// do. The brokers run in this process: their CPU time weighs on both sides
// alike.

// kafkaBatch is the batch of every Kafka transaction measured.
const kafkaBatch = 100

// kafkaTakePartitions is the partition count of the take topic, which both
// consumers read: as many as brokers, so that a consumer usually fetches
// from more than one at once (kfake picks each partition's leader at
// random). The put topic has one partition. With one take partition the
// ratio of the takes comes out about the same.
const kafkaTakePartitions = 3

// Topics of the cluster.
const (
	kafkaPutTopic  = "bench-puts"
	kafkaTakeTopic = "bench-takes"
)

// kafkaWait bounds each Kafka call of the step: a call that takes longer
// means the step is broken, not slow.
const kafkaWait = 30 * time.Second

// kafkaFetchMaxWait is channel/kafka's fetch max wait (group.go), given to
// the raw consumer too.
const kafkaFetchMaxWait = 500 * time.Millisecond

// kafkaID is the ID of the result of side (channel or raw) and op (put or
// take).
func kafkaID(side, op string) string {
	return fmt.Sprintf("kafka/%s/%s/batch=%d", side, op, kafkaBatch)
}

// kafkaSystem is the System of side's results.
func kafkaSystem(side string) string {
	if side == "channel" {
		return "filechannel/kafka"
	}
	return "franz-go"
}

// kafkaBench measures put commits and take commits of a kafka.Channel
// against raw franz-go doing the same, on one kfake cluster: the four put
// meters interleaved for sz.dur each, then the two take meters interleaved,
// each draining sz.kafkaTakes events in its own consumer group. Every side
// runs a transaction before it is measured (the producer id, the group's
// join and first fetch are not measured).
func (b *bench) kafkaBench() error {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3),
		kfake.SeedTopics(1, kafkaPutTopic), kfake.SeedTopics(kafkaTakePartitions, kafkaTakeTopic))
	if err != nil {
		return err
	}
	var closers []func() error
	err = func() error {
		brokers := cluster.ListenAddrs()
		// Without client telemetry, on every client of both sides:
		// franz-go's Close gives its final telemetry push up to a second,
		// for nothing here.
		noMetrics := kgo.DisableClientMetrics()
		open := func(topic, group string, opts ...kgo.Opt) (*kafka.Channel, error) {
			c, err := kafka.Open(kafka.Config{Brokers: brokers, Topic: topic, Group: group,
				CommitTimeout: kafkaWait, KgoOptions: append([]kgo.Opt{noMetrics}, opts...)})
			if err == nil {
				closers = append(closers, c.Close)
			}
			return c, err
		}
		client := func(opts ...kgo.Opt) (*kgo.Client, error) {
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), noMetrics}, opts...)...)
			if err == nil {
				closers = append(closers, func() error { cl.Close(); return nil })
			}
			return cl, err
		}
		producer := func(topic, id string, opts ...kgo.Opt) (*kgo.Client, error) {
			return client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.TransactionalID(id),
				kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
		}

		// Puts.
		ev := channel.Event{Body: b.body}
		var puts []*meter
		c, err := open(kafkaPutTopic, "bench-unused")
		if err != nil {
			return err
		}
		raw, err := producer(kafkaPutTopic, "bench-raw-put", kgo.ProducerLinger(0))
		if err != nil {
			return err
		}
		for _, side := range []struct {
			name, op string
			put      func() error
		}{
			{"channel", "kafka.Channel: put commit", func() error { return putTx(c.Begin, ev, kafkaBatch) }},
			{"raw", "raw transactional produce, ProducerLinger(0)", func() error { return rawPutTx(raw, b.body, kafkaBatch) }},
		} {
			if err := side.put(); err != nil {
				return fmt.Errorf("warm-up put commit, %s: %w", side.op, err)
			}
			put := side.put
			puts = append(puts, withRounds(withCPU(&meter{
				res: Result{ID: kafkaID(side.name, "put"), System: kafkaSystem(side.name), Op: side.op,
					Batch: kafkaBatch, Producers: 1, Note: "an in-process kfake cluster of 3 brokers, a 1-partition topic"},
				max: b.sz.maxEvents,
				run: func(budget time.Duration, max int64) (int64, error) {
					var n int64
					for start := time.Now(); until(start, budget, n, kafkaBatch, max); n += kafkaBatch {
						if err := put(); err != nil {
							return n, err
						}
					}
					return n, nil
				},
			})))
		}
		if err := b.interleave(b.sz.rounds, b.sz.dur, puts); err != nil {
			return err
		}

		// Takes: the backlog of both groups (with their warm-up's batch and
		// one to spare), put in transactions of kafkaBatch, without the
		// linger (the fill is not timed).
		fill, err := producer(kafkaTakeTopic, "bench-fill", kgo.ProducerLinger(0))
		if err != nil {
			return err
		}
		backlog := b.sz.kafkaTakes + 2*kafkaBatch
		for i := 0; i < backlog; i += kafkaBatch {
			if err := rawPutTx(fill, b.body, min(kafkaBatch, backlog-i)); err != nil {
				return fmt.Errorf("fill the take topic: %w", err)
			}
		}
		takeCh, err := open(kafkaTakeTopic, "bench-channel")
		if err != nil {
			return err
		}
		rawCons, err := client(
			kgo.ConsumeTopics(kafkaTakeTopic),
			kgo.ConsumerGroup("bench-raw"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(kafkaFetchMaxWait),
		)
		if err != nil {
			return err
		}
		var takes []*meter
		for _, side := range []struct {
			name, op string
			take     func(n int) (int, error)
		}{
			{"channel", "kafka.Channel: take commit", func(n int) (int, error) { return kafkaTakeTx(takeCh, n) }},
			{"raw", "raw poll + offset commit", func(n int) (int, error) { return rawTakeTx(rawCons, n) }},
		} {
			// A group's first polls may return fewer than kafkaBatch.
			for n := 0; n < kafkaBatch; {
				k, err := side.take(kafkaBatch - n)
				if err != nil {
					return fmt.Errorf("warm-up take commit, %s: %w", side.op, err)
				}
				n += k
			}
			take := side.take
			takes = append(takes, withRounds(withCPU(&meter{
				res: Result{ID: kafkaID(side.name, "take"), System: kafkaSystem(side.name), Op: side.op,
					Batch: kafkaBatch, Producers: 1,
					Note: fmt.Sprintf("each side drains a backlog put beforehand in transactions of %d, "+
						"in its own consumer group; a topic of %d partitions", kafkaBatch, kafkaTakePartitions)},
				max: int64(b.sz.kafkaTakes),
				run: func(_ time.Duration, max int64) (int64, error) {
					var n int64
					for n < max {
						k, err := take(int(min(kafkaBatch, max-n)))
						n += int64(k)
						if err != nil {
							return n, err
						}
					}
					return n, nil
				},
			})))
		}
		if err := b.interleave(b.sz.rounds, time.Hour, takes); err != nil {
			return err
		}
		for _, m := range takes {
			if m.res.Events != int64(b.sz.kafkaTakes) {
				return fmt.Errorf("%s took %d events of %d", m.res.ID, m.res.Events, b.sz.kafkaTakes)
			}
		}
		return nil
	}()
	// The clients first (the last opened first), then the brokers.
	for _, c := range slices.Backward(closers) {
		err = errors.Join(err, c())
	}
	cluster.Close()
	return err
}

// rawPutTx is what a put commit of n events of body does, on cl, a
// transactional client: one Kafka transaction with a record per event,
// committed once every record is acknowledged.
func rawPutTx(cl *kgo.Client, body []byte, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	wg.Add(n)
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: body}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if first != nil {
		return errors.Join(first, cl.AbortBufferedRecords(ctx), cl.EndTransaction(ctx, kgo.TryAbort))
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

// kafkaTakeTx commits one take transaction of up to n events of c's group:
// it waits for the first (up to kafkaWait), then takes what is fetched
// already, up to n. It returns how many it took.
func kafkaTakeTx(c *kafka.Channel, n int) (int, error) {
	tx, err := c.Begin()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	if _, err := tx.TakeContext(ctx); err != nil {
		return 0, errors.Join(fmt.Errorf("the group ran dry: %w", err), tx.Rollback())
	}
	k := 1
	for k < n {
		_, ok, err := tx.Take()
		if err != nil {
			return 0, errors.Join(err, tx.Rollback())
		}
		if !ok {
			break
		}
		k++
	}
	return k, tx.Commit()
}

// rawTakeTx is what a take commit of up to n events does, on cl, a
// consumer-group client that blocks rebalances on poll: a poll of up to n
// records (waiting up to kafkaWait for the first), the commit of their
// offsets, and rebalances allowed again. It returns how many it took.
func rawTakeTx(cl *kgo.Client, n int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	defer cl.AllowRebalance()
	fs := cl.PollRecords(ctx, n)
	if err := fs.Err(); err != nil {
		return 0, fmt.Errorf("poll: %w", err)
	}
	recs := fs.Records()
	if len(recs) == 0 {
		return 0, errors.New("poll: no record")
	}
	if err := cl.CommitRecords(ctx, recs...); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return len(recs), nil
}
