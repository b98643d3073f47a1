package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// With KAFKA_BROKERS=host:port[,host:port...] set, every test of this
// package runs against that cluster instead of kfake, each on a topic of
// its own (filechannel-test-<random>, the broker's default replication
// factor), deleted at its end; the tests that stop or move brokers are
// skipped. docs/kafka.md, "Testing against a real cluster", shows how:
//
//	KAFKA_BROKERS=localhost:9092 go test -count=1 ./channel/kafka/
//
// The cluster must allow topic creation and deletion and transactions
// (a single-broker test cluster needs transaction.state.log.replication.factor=1
// and transaction.state.log.min.isr=1).
func realCluster(t testing.TB, brokers []string, partitions int) *cluster {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	topic := "filechannel-test-" + hex.EncodeToString(b[:])
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = int32(partitions)
	rt.ReplicationFactor = -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		admin.Close()
		t.Fatalf("create topic %s on %v: %v", topic, brokers, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		del := kmsg.NewPtrDeleteTopicsRequest()
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		del.Topics = append(del.Topics, dt)
		del.TopicNames = append(del.TopicNames, topic)
		del.TimeoutMillis = 30_000
		if _, err := del.RequestWith(ctx, admin); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
	return &cluster{brokers: brokers, topic: topic}
}
