package kafka

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flumego/filechannel/channel"
)

// eventSize is exactly the size of the record batch Put builds for the
// event, encoded by kmsg (61-byte header and record) plus the 4-byte length
// prefix it counts, across the varint boundaries of every field.
func TestEventSizeIsTheEncodedBatch(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("h", n) }
	bodies := []int{0, 1, 63, 64, 8191, 8192, 1<<20 - 1, 1 << 20}
	headers := []map[string]string{
		nil,
		{},
		{"user": "ann"},
		{"user": "", "": "x", long(64): long(8192)},
	}
	many := map[string]string{}
	for i := range 64 {
		many[fmt.Sprintf("h%02d", i)] = long(i)
	}
	headers = append(headers, many)
	for _, keyHeader := range []string{"", "user", "absent"} {
		ch := &Channel{cfg: Config{MaxEventSize: maxEventSize, KeyHeader: keyHeader}}
		for _, n := range bodies {
			for i, h := range headers {
				var body []byte
				if n > 0 || i%2 == 1 { // a nil and an empty body
					body = make([]byte, n)
				}
				e := channel.Event{Headers: h, Body: body}
				r, err := (&Transaction{c: ch}).record(e)
				if err != nil {
					t.Fatal(err)
				}
				want := encodedBatchSize(r)
				if got := eventSize(e, keyHeader); got != want {
					t.Errorf("key header %q, body %d, headers #%d: eventSize %d, encoded %d", keyHeader, n, i, got, want)
				}
			}
		}
	}
}

// encodedBatchSize encodes r alone in a record batch with kmsg and adds the
// batch's length prefix as eventSize counts it (4 bytes below 2^28).
func encodedBatchSize(r *kgo.Record) int64 {
	kr := kmsg.Record{Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	kr.Length = int32(len(kr.AppendTo(nil)) - 1) // what follows a 1-byte length of 0
	rec := kr.AppendTo(nil)
	batch := (&kmsg.RecordBatch{Magic: 2, NumRecords: 1, Records: rec}).AppendTo(nil)
	return int64(len(batch)) + batchLengthPrefix
}

// The issue: an event of exactly MaxEventSize passed Put and failed the
// whole transaction at Commit (MESSAGE_TOO_LARGE). Put must refuse what
// Commit cannot send, and what it accepts must commit, on a topic whose
// max.message.bytes is MaxEventSize itself: alone, and several in one
// transaction. It must not be much stricter than Kafka either: the batch
// the broker receives for the largest event is within a few bytes of the
// limit, and a plain franz-go producer refuses a few bytes more.
func TestPutRefusesWhatCommitCannotSend(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	if os.Getenv("KAFKA_BROKERS") != "" {
		t.Skip("sets the brokers' message.max.bytes: kfake only")
	}
	shapes := []struct {
		name      string
		headers   map[string]string
		keyHeader string
	}{
		{"no headers", nil, ""},
		{"headers and key", map[string]string{"user": "ann", "seq": "7", "trace": strings.Repeat("t", 300)}, "user"},
	}
	for _, limit := range []int{0, 300_000, 2_000_000} { // 0: the default
		maxSize := cmp.Or(limit, DefaultMaxEventSize)
		for _, shape := range shapes {
			t.Run(fmt.Sprintf("%d/%s", maxSize, shape.name), func(t *testing.T) {
				t.Parallel()
				putRefusesWhatCommitCannotSend(t, limit, shape.headers, shape.keyHeader)
			})
		}
	}
}

// putRefusesWhatCommitCannotSend runs TestPutRefusesWhatCommitCannotSend
// for one MaxEventSize (0: the default) and one shape of event.
func putRefusesWhatCommitCannotSend(t *testing.T, limit int, headers map[string]string, keyHeader string) {
	maxSize := cmp.Or(limit, DefaultMaxEventSize)
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, testTopic),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(maxSize)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	var mu sync.Mutex
	largestSent := 0 // the largest record batch a produce request carried
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range tp.Partitions {
				largestSent = max(largestSent, len(p.Records))
			}
		}
		return nil, nil, false // observed only: the cluster handles it
	})
	cl := &cluster{Cluster: fake, brokers: fake.ListenAddrs(), topic: testTopic}
	cfg := testConfig(t, cl)
	cfg.MaxEventSize = limit
	cfg.KeyHeader = keyHeader
	ch := open(t, cfg)
	rng := rand.New(rand.NewChaCha8([32]byte{1})) // incompressible bodies
	event := func(n int) channel.Event {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return channel.Event{Headers: headers, Body: b}
	}
	puts := func(n int) error {
		tx, _ := ch.Begin()
		defer tx.Rollback()
		return tx.Put(event(n))
	}
	if err := puts(maxSize); !errors.Is(err, channel.ErrEventTooLarge) {
		t.Fatalf("Put of a %d-byte body (MaxEventSize): %v, want ErrEventTooLarge", maxSize, err)
	}
	largest := sort.Search(maxSize+1, func(n int) bool { return puts(n) != nil }) - 1
	if err := puts(largest + 1); !errors.Is(err, channel.ErrEventTooLarge) {
		t.Fatalf("Put of %d bytes: %v", largest+1, err)
	}
	if headers == nil && maxSize == DefaultMaxEventSize && largest != DefaultMaxEventSize-76 {
		t.Fatalf("the largest header-less body is %d bytes, docs/kafka.md says %d", largest, DefaultMaxEventSize-76)
	}
	t.Logf("the largest body Put accepts is %d bytes", largest)

	// It commits alone, and three of them in one transaction.
	var want [][]byte
	for _, n := range []int{1, 3} {
		tx, _ := ch.Begin()
		for range n {
			e := event(largest)
			want = append(want, e.Body)
			if err := tx.Put(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit of %d events of the largest size Put accepts: %v", n, err)
		}
	}
	mu.Lock()
	sent := largestSent
	mu.Unlock()
	if sent > maxSize || sent < maxSize-8 {
		t.Fatalf("the broker received a batch of %d bytes for the largest event; MaxEventSize is %d", sent, maxSize)
	}
	t.Logf("the broker received batches of up to %d bytes", sent)
	got, take := takeN(t, ch.Begin, len(want), testWait)
	if len(got) != len(want) {
		t.Fatalf("took %d of %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Body, want[i]) || got[i].Headers["user"] != headers["user"] {
			t.Fatalf("event %d differs from what was put", i)
		}
	}
	if err := take.Commit(); err != nil {
		t.Fatal(err)
	}

	// The limit is real: a plain producer with the same batch limit refuses
	// an event a few bytes larger.
	raw, err := kgo.NewClient(kgo.SeedBrokers(cl.brokers...), kgo.DefaultProduceTopic(cl.topic),
		kgo.ProducerBatchMaxBytes(int32(maxSize)))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for n := largest + 1; n <= largest+4; n++ {
		e := event(n)
		r := &kgo.Record{Value: e.Body}
		for k, v := range e.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		if keyHeader != "" {
			r.Key = []byte(e.Headers[keyHeader])
		}
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		err := raw.ProduceSync(ctx, r).FirstErr()
		cancel()
		switch {
		case errors.Is(err, kerr.MessageTooLarge):
			t.Logf("a plain producer refuses %d bytes", n)
			return
		case err != nil:
			t.Fatal(err)
		}
	}
	t.Fatalf("Put refuses %d bytes, Kafka takes %d", largest+1, largest+4)
}
