package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/channel/kafka"
)

// sinkGroup is the Kafka consumer group of the pipeline's sink.
const sinkGroup = "pipeline-sink"

// openKafka opens the channel on the Kafka cluster o.kafka, or on a fake
// cluster started here (-kafka-fake), closed with the channel.
func openKafka(o options, logger *slog.Logger, reg *prometheus.Registry, out io.Writer) (backend[*kafka.Transaction], error) {
	var none backend[*kafka.Transaction]
	brokers := strings.Split(o.kafka, ",")
	var fake *kfake.Cluster
	stateDir := filepath.Join(o.dir, "kafka-"+o.topic)
	if o.kafkaFake {
		var err error
		fake, err = kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, o.topic))
		if err != nil {
			return none, fmt.Errorf("kafka-fake: %w", err)
		}
		brokers = fake.ListenAddrs()
		stateDir = "" // the fake cluster starts empty: so do the positions
		fmt.Fprintf(out, "pipeline: a fake Kafka cluster (kfake, in this process, in memory) at %s, topic %s with 3 partitions\n", strings.Join(brokers, ","), o.topic)
	}
	closeFake := func() {
		if fake != nil {
			fake.Close()
		}
	}
	kc, err := kafka.Open(kafka.Config{
		Brokers: brokers,
		Topic:   o.topic,
		// Every event has the header source=pipeline: one key, so one
		// partition, in order, for the sink's sequence check.
		KeyHeader:  "source",
		Name:       "pipeline",
		Logger:     logger,
		Registerer: reg,
	})
	if err != nil {
		closeFake()
		return none, err
	}
	g, err := kc.Group(sinkGroup)
	if err != nil {
		kc.Close()
		closeFake()
		return none, err
	}
	b := backend[*kafka.Transaction]{
		name:      fmt.Sprintf("Kafka topic %s (%d partitions), sink group %s", o.topic, kc.Partitions(), sinkGroup),
		begin:     kc.Begin,
		sinkBegin: g.Begin,
		check: fmt.Sprintf("look at topic %s's retention and consumer group %s's committed offsets (docs/kafka.md)",
			o.topic, sinkGroup),
		queued: func() int { return -1 },
		stats:  func() (channel.Stats, bool) { return channel.Stats{}, false },
		health: func() error { return nil },
		close: func() error {
			err := kc.Close()
			closeFake()
			return err
		},
	}
	if stateDir != "" {
		if err := os.MkdirAll(stateDir, 0o755); err != nil {
			return none, errors.Join(err, b.close())
		}
		b.srcPath = filepath.Join(stateDir, "source.next")
		b.sinkPath = filepath.Join(stateDir, "sink.next")
	}
	return b, nil
}
