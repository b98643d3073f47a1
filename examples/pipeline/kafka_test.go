package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The same source and sink over Kafka: -kafka-fake starts its own cluster.
func TestPipelineOnAFakeKafka(t *testing.T) {
	o := options{dir: t.TempDir(), events: 3000, duration: 60 * time.Second, batch: 100, size: 256, kafkaFake: true, topic: "p"}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	total := lastLine(out.String(), "total")
	if !strings.Contains(out.String(), "Kafka topic p (3 partitions)") || !strings.Contains(total, "gaps 0") {
		t.Fatalf("output:\n%s", out.String())
	}
	// The fake cluster ends with the run: its last line must not promise
	// that the next run resumes where this one stopped.
	if last := lastLine(out.String(), "pipeline: stopped"); strings.Contains(last, "resumes") ||
		!strings.Contains(last, "the fake Kafka cluster is gone, and its events with it: the next run starts again at #0") {
		t.Errorf("last line %q", last)
	}
}

// -kafka on a cluster that outlives the runs (a kfake one here): the second
// run resumes where the first stopped, with no gap, from the positions kept
// in -dir.
func TestPipelineOnKafkaResumes(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := options{dir: t.TempDir(), events: 2000, duration: 60 * time.Second, batch: 100, size: 64,
		kafka: strings.Join(c.ListenAddrs(), ","), topic: "events"}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "sink expects #0\n") || !strings.Contains(lastLine(out.String(), "total"), "gaps 0") {
		t.Fatalf("the second run did not resume, or saw gaps:\n%s", out.String())
	}
}

func TestKafkaFlagsConflict(t *testing.T) {
	o := options{dir: t.TempDir(), batch: 1, capacity: 10, kafka: "x:1", kafkaFake: true}
	if err := run(context.Background(), o, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Fatalf("run with -kafka and -kafka-fake: %v", err)
	}
}
