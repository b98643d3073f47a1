package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flumego/filechannel/channel"
)

func TestBadConfig(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	good := testConfig(t, cl)
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "Brokers"},
		{"empty broker", func(c *Config) { c.Brokers = []string{" "} }, "Brokers"},
		{"no topic", func(c *Config) { c.Topic = "" }, "Topic"},
		{"bad topic", func(c *Config) { c.Topic = "a/b" }, "Topic"},
		{"topic ..", func(c *Config) { c.Topic = ".." }, "Topic"},
		{"long topic", func(c *Config) { c.Topic = strings.Repeat("t", 250) }, "Topic"},
		{"group space", func(c *Config) { c.Group = " g" }, "Group"},
		{"group control", func(c *Config) { c.Group = "g\n" }, "Group"},
		{"negative capacity", func(c *Config) { c.TransactionCapacity = -1 }, "TransactionCapacity"},
		{"negative size", func(c *Config) { c.MaxEventSize = -1 }, "MaxEventSize"},
		{"huge size", func(c *Config) { c.MaxEventSize = 1 << 31 }, "MaxEventSize"},
		{"size over the batch limit", func(c *Config) {
			c.MaxEventSize = 2000
			c.KgoOptions = []kgo.Opt{kgo.ProducerBatchMaxBytes(1999)}
		}, "MaxEventSize"},
		{"size over the write limit", func(c *Config) {
			c.MaxEventSize = 2000
			c.KgoOptions = []kgo.Opt{kgo.ProducerBatchMaxBytes(2000), kgo.BrokerMaxWriteBytes(2000)}
		}, "MaxEventSize"},
		{"size over the buffer limit", func(c *Config) {
			c.MaxEventSize = 2000
			c.KgoOptions = []kgo.Opt{kgo.MaxBufferedBytes(1999)}
		}, "MaxEventSize"},
		{"negative timeout", func(c *Config) { c.CommitTimeout = -time.Second }, "CommitTimeout"},
		{"negative poll", func(c *Config) { c.PollTimeout = -1 }, "PollTimeout"},
		{"lease", func(c *Config) { c.LeaseTimeout = time.Second }, "LeaseTimeout"},
		{"expiry", func(c *Config) { c.ExpireAfter = time.Hour }, "ExpireAfter"},
		{"retry delays", func(c *Config) { c.RetryDelays = []time.Duration{time.Second} }, "RetryDelays"},
		{"order key", func(c *Config) { c.OrderKey = "customer" }, "OrderKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			_, err := Open(cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrBadConfig) {
				t.Fatalf("Open: %v, want a ConfigError on %s", err, tc.field)
			}
		})
	}
	t.Run("missing topic", func(t *testing.T) {
		cfg := good
		cfg.Topic = "nope"
		_, err := Open(cfg)
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("Open of a missing topic: %v", err)
		}
	})
	t.Run("no broker listening", func(t *testing.T) {
		cfg := good
		cfg.Brokers = []string{"127.0.0.1:1"}
		cfg.OpenTimeout = time.Second
		start := time.Now()
		_, err := Open(cfg)
		if err == nil {
			t.Fatal("Open with no broker succeeded")
		}
		if d := time.Since(start); d > cfg.OpenTimeout+slack {
			t.Fatalf("Open took %v with a 1s OpenTimeout", d)
		}
		t.Log(err)
	})
	t.Run("bad group name", func(t *testing.T) {
		ch := open(t, good)
		// Code written against both backends tells a missing group by
		// channel.ErrNoGroup: Kafka has no unnamed group, and no group of
		// a name it refuses.
		for _, name := range []string{"", " g", strings.Repeat("g", 256)} {
			_, err := ch.Group(name)
			if !errors.Is(err, ErrBadConfig) || !errors.Is(err, channel.ErrNoGroup) {
				t.Fatalf("Group(%q): %v, want an error matching ErrBadConfig and channel.ErrNoGroup", name, err)
			}
		}
	})
}

func TestMisuse(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	cfg := testConfig(t, cl)
	cfg.TransactionCapacity = 3
	cfg.MaxEventSize = 100
	ch := open(t, cfg)

	tx, _ := ch.Begin()
	if err := tx.Put(channel.Event{Body: make([]byte, 101)}); !errors.Is(err, channel.ErrEventTooLarge) {
		t.Fatalf("Put of 101 bytes: %v", err)
	}
	if err := tx.Put(channel.Event{Headers: map[string]string{"k": strings.Repeat("v", 100)}}); !errors.Is(err, channel.ErrEventTooLarge) {
		t.Fatalf("Put of 101 header bytes: %v", err)
	}
	for i := range 3 {
		if err := tx.Put(ev(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Put(ev(3)); !errors.Is(err, channel.ErrTransactionFull) {
		t.Fatalf("fourth Put: %v", err)
	}
	if _, _, err := tx.Take(); !errors.Is(err, channel.ErrMixedTransaction) {
		t.Fatalf("Take in a put transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, channel.ErrTransactionDone) {
		t.Fatalf("second Commit: %v", err)
	}
	if err := tx.Put(ev(9)); !errors.Is(err, channel.ErrTransactionDone) {
		t.Fatalf("Put after Commit: %v", err)
	}
	if err := tx.Rollback(); !errors.Is(err, channel.ErrTransactionDone) {
		t.Fatalf("Rollback after Commit: %v", err)
	}

	evs, take := takeN(t, ch.Begin, 3, testWait)
	if len(evs) != 3 {
		t.Fatalf("took %d", len(evs))
	}
	if err := take.Put(ev(5)); !errors.Is(err, channel.ErrMixedTransaction) {
		t.Fatalf("Put in a take transaction: %v", err)
	}
	if _, _, err := take.Take(); !errors.Is(err, channel.ErrTransactionFull) {
		t.Fatalf("fourth Take: %v", err)
	}
	//lint:ignore SA1012 a nil context is the misuse under test
	if _, err := take.TakeContext(nil); err == nil {
		t.Fatal("TakeContext(nil) succeeded")
	}
	if err := take.Commit(); err != nil {
		t.Fatal(err)
	}
	g, _ := ch.Group("other")
	gtx, _ := g.Begin()
	if err := gtx.Put(ev(1)); !errors.Is(err, channel.ErrMixedTransaction) {
		t.Fatalf("Put on a Group's transaction: %v", err)
	}
	gtx.Rollback()

	// An empty transaction ends cleanly both ways and releases the member.
	for range 3 {
		tx, _ := ch.Begin()
		if _, ok, err := tx.Take(); ok || err != nil {
			t.Fatalf("Take of an empty group: ok=%v err=%v", ok, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx, _ = ch.Begin()
		tx.Take()
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Begin(); !errors.Is(err, channel.ErrClosed) {
		t.Fatalf("Begin after Close: %v", err)
	}
	if _, err := ch.Group("x"); !errors.Is(err, channel.ErrClosed) {
		t.Fatalf("Group after Close: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestConcurrentUseOfOneTransaction(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	ch := open(t, testConfig(t, cl))
	tx, _ := ch.Begin()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tx.TakeContext(ctx) // waits until canceled: the topic is empty
	}()
	waitFor(t, "TakeContext running", tx.busy.Load)
	_, _, err := tx.Take()
	cancel()
	<-done
	if !errors.Is(err, channel.ErrConcurrentUse) {
		t.Fatalf("Take during TakeContext of the same transaction: %v", err)
	}
}

// The cluster goes away under a running channel: Commit returns an error
// within the commit timeout, never a success, and Take returns promptly.
func TestBrokerStoppedMidRun(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 3, 3)
	fake := cl.fake(t)
	cfg := testConfig(t, cl)
	cfg.CommitTimeout = 2 * time.Second
	cfg.CloseTimeout = 2 * time.Second
	ch := open(t, cfg)
	putN(t, ch, 0, 100, 50)
	evs, take := takeN(t, ch.Begin, 10, testWait)
	if len(evs) != 10 {
		t.Fatalf("took %d", len(evs))
	}
	fake.Close()
	for i := range 3 {
		tx, _ := ch.Begin()
		for j := range 10 {
			tx.Put(ev(1000 + 10*i + j))
		}
		start := time.Now()
		err := tx.Commit()
		d := time.Since(start)
		if err == nil {
			t.Fatalf("put Commit %d succeeded with the cluster gone", i)
		}
		if d > cfg.CommitTimeout+slack {
			t.Fatalf("put Commit %d took %v (commit timeout %v): %v", i, d, cfg.CommitTimeout, err)
		}
		t.Logf("put commit %d after %v: %v", i, d.Round(time.Millisecond), err)
	}
	start := time.Now()
	err := take.Commit()
	if err == nil {
		t.Fatal("take Commit succeeded with the cluster gone")
	}
	if d := time.Since(start); d > cfg.CommitTimeout+slack {
		t.Fatalf("take Commit took %v: %v", d, err)
	}
	t.Logf("take commit: %v", err)
	start = time.Now()
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*cfg.CloseTimeout+slack {
		t.Fatalf("Close took %v with the cluster gone", d)
	}
}

// One broker of three goes away: partitions it led move, and the channel
// goes on; every committed event is delivered.
func TestOneBrokerRemoved(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 3, 3)
	cfg := testConfig(t, cl)
	ch := open(t, cfg)
	putN(t, ch, 0, 300, 50)
	fake := cl.fake(t)
	leader := fake.LeaderFor(testTopic, 0)
	if err := fake.RemoveNode(leader); err != nil {
		t.Fatal(err)
	}
	committed := 300
	for i := 300; i < 600; i += 50 {
		tx, _ := ch.Begin()
		for j := i; j < i+50; j++ {
			tx.Put(ev(j))
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("put commit after a broker left: %v", err)
		}
		committed += 50
	}
	seqs := takeAll(t, committed, 100, ch.Begin)
	seen := map[int]bool{}
	for _, s := range seqs {
		seen[s] = true
	}
	if len(seen) != committed {
		t.Fatalf("delivered %d distinct events, want %d", len(seen), committed)
	}
}

func TestRawValuesOfAForeignTopic(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	raw, err := kgo.NewClient(kgo.SeedBrokers(cl.brokers...), kgo.DefaultProduceTopic(cl.topic))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ts := time.UnixMilli(1_700_000_000_123)
	res := raw.ProduceSync(context.Background(),
		&kgo.Record{Key: []byte("k1"), Value: []byte("plain bytes"), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
		&kgo.Record{Value: nil, Timestamp: ts})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, cl)
	cfg.RawValues = true
	ch := open(t, cfg)
	evs, tx := takeN(t, ch.Begin, 2, testWait)
	defer tx.Commit()
	if len(evs) != 2 {
		t.Fatalf("took %d", len(evs))
	}
	e := evs[0]
	want := map[string]string{"h": "v", HeaderTopic: cl.topic, HeaderPartition: "0", HeaderOffset: "0", HeaderTimestamp: "1700000000123", HeaderKey: "k1"}
	if string(e.Body) != "plain bytes" || len(e.Headers) != len(want) {
		t.Fatalf("event %+v, want body %q and headers %v", e, "plain bytes", want)
	}
	for k, v := range want {
		if e.Headers[k] != v {
			t.Fatalf("header %s = %q, want %q", k, e.Headers[k], v)
		}
	}
	if evs[1].Body != nil || evs[1].Headers[HeaderKey] != "" || evs[1].Headers[HeaderOffset] != "1" {
		t.Fatalf("a null value without a key: %+v", evs[1])
	}
}

// KeyHeader: events with one key value land in one partition, in order.
func TestKeyHeaderPartitions(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 3)
	cfg := testConfig(t, cl)
	cfg.KeyHeader = "user"
	ch := open(t, cfg)
	tx, _ := ch.Begin()
	for i := range 60 {
		e := ev(i)
		e.Headers["user"] = []string{"ann", "bob", "cat"}[i%3]
		tx.Put(e)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	cfg2 := cfg
	cfg2.RawValues = true
	reader := open(t, cfg2)
	evs, rtx := takeN(t, reader.Begin, 60, testWait)
	defer rtx.Commit()
	part := map[string]string{}
	last := map[string]int{}
	for _, e := range evs {
		u := e.Headers["user"]
		if p, ok := part[u]; ok && p != e.Headers[HeaderPartition] {
			t.Fatalf("user %s in partitions %s and %s", u, p, e.Headers[HeaderPartition])
		}
		part[u] = e.Headers[HeaderPartition]
		if s := seqOf(t, e); s <= last[u] && last[u] != 0 {
			t.Fatalf("user %s: #%d after #%d", u, s, last[u])
		} else {
			last[u] = s
		}
		if e.Headers[HeaderKey] != u {
			t.Fatalf("key %q, want %q", e.Headers[HeaderKey], u)
		}
	}
	if len(evs) != 60 {
		t.Fatalf("took %d", len(evs))
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel() // each test has a cluster of its own; most of their time is waiting
	cl := newCluster(t, 1, 1)
	cfg := testConfig(t, cl)
	reg := prometheus.NewPedanticRegistry()
	cfg.Registerer = reg
	cfg.Name = "k"
	ch := open(t, cfg)
	putN(t, ch, 0, 20, 10)
	tx, _ := ch.Begin()
	tx.Put(ev(99))
	tx.Rollback()
	_, take := takeN(t, ch.Begin, 5, testWait)
	take.Rollback()
	evs, take := takeN(t, ch.Begin, 20, testWait)
	take.Commit()
	if len(evs) != 20 {
		t.Fatalf("took %d", len(evs))
	}
	m := ch.m
	for name, c := range map[string]struct {
		got  prometheus.Collector
		want float64
	}{
		"put_attempts":         {m.putAttempts, 21},
		"put_success":          {m.putSuccess, 20},
		"take_success":         {m.takeSuccess, 20},
		"put rollbacks":        {m.rollbacks.WithLabelValues(typePut), 1},
		"take rollbacks":       {m.rollbacks.WithLabelValues(typeTake), 1},
		"put commit errors":    {m.commitErrors.WithLabelValues(typePut), 0},
		"group take success":   {m.groupTaken.WithLabelValues(DefaultGroup), 20},
		"group take rollbacks": {m.groupRollbacks.WithLabelValues(DefaultGroup), 1},
		"group inflight":       {m.groupInflight.WithLabelValues(DefaultGroup), 0},
	} {
		if got := testutil.ToFloat64(c.got); got != c.want {
			t.Errorf("%s = %v, want %v", name, got, c.want)
		}
	}
	// Registered with the FileChannel's names, labelled with Config.Name.
	if n, err := testutil.GatherAndCount(reg, "filechannel_put_success_total", "filechannel_rollbacks_total",
		"filechannel_group_take_success_total", "filechannel_commit_duration_seconds"); err != nil || n < 5 {
		t.Fatalf("gather: %d series, %v", n, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP filechannel_put_success_total Events put by committed transactions.
# TYPE filechannel_put_success_total counter
filechannel_put_success_total{channel_name="k"} 20
`), "filechannel_put_success_total"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("a second channel of the same name on the registry: %v", err)
	}
	ch.Close()
	again := open(t, cfg) // Close unregistered
	again.Close()
}
