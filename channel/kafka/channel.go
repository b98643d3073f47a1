package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flumego/filechannel/channel"
)

// ErrOutcomeUnknown is matched (errors.Is) by the error of a put Commit
// that asked Kafka to commit the transaction and saw no answer in time: its
// events may or may not become visible. Putting them again gives
// at-least-once delivery, as after any failed Commit.
var ErrOutcomeUnknown = errors.New("filechannel/kafka: the transaction's outcome is unknown")

// Channel is a channel whose events live in a Kafka topic: the put and take
// transactions of a FileChannel, with a put commit as one Kafka
// transaction and a take commit as an offset commit of a consumer group.
// It is safe for concurrent use; a Transaction belongs to one goroutine.
type Channel struct {
	cfg        Config
	partitions int
	m          *metrics

	ctx    context.Context // canceled by Close: every wait ends
	cancel context.CancelFunc
	closed atomic.Bool
	close  sync.Once
	wg     sync.WaitGroup // the producer's loop, until its commit in progress is done

	prod *producer

	mu     sync.Mutex
	groups map[string]*Group
}

// Open checks cfg, connects to the brokers and checks that the topic
// exists, within Config.OpenTimeout. It joins no consumer group: the
// first take of a group (or c.Group) does.
func Open(cfg Config) (*Channel, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.TransactionalID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		cfg.TransactionalID = "filechannel-" + cfg.Topic + "-" + hex.EncodeToString(b[:])
	}
	c := &Channel{cfg: cfg, groups: map[string]*Group{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.m = newMetrics(c)
	c.prod = &producer{c: c, reqs: make(chan *commitReq)}
	cl, err := c.prod.client()
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("filechannel/kafka: open: %w", err)
	}
	if limit := producerBatchLimit(cl, cfg.Topic, cfg.TransactionalID); int64(cfg.MaxEventSize) > limit {
		c.prod.close(cfg.CloseTimeout)
		c.cancel()
		return nil, &ConfigError{Field: "MaxEventSize", Reason: fmt.Sprintf("%d: the producer sends record batches of at most %d bytes (kgo.ProducerBatchMaxBytes, kgo.BrokerMaxWriteBytes or kgo.MaxBufferedBytes in KgoOptions)", cfg.MaxEventSize, limit)}
	}
	ctx, cancel := context.WithTimeout(c.ctx, cfg.OpenTimeout)
	defer cancel()
	if c.partitions, err = topicPartitions(ctx, cl, cfg.Topic); err != nil {
		c.prod.close(cfg.CloseTimeout)
		c.cancel()
		return nil, fmt.Errorf("filechannel/kafka: open %s: %w", cfg.Topic, err)
	}
	// Initializing the transactional producer now checks that the cluster
	// allows it, and fences a previous run with the same TransactionalID:
	// Kafka aborts the transaction it left open at once.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		c.prod.close(cfg.CloseTimeout)
		c.cancel()
		return nil, fmt.Errorf("filechannel/kafka: open %s: initialize the transactional producer %s: %w", cfg.Topic, cfg.TransactionalID, err)
	}
	if err := c.m.register(cfg.Registerer, cfg.Name); err != nil {
		c.prod.close(cfg.CloseTimeout)
		c.cancel()
		return nil, err
	}
	c.wg.Go(c.prod.loop)
	cfg.Logger.Info("filechannel/kafka: open", "topic", cfg.Topic, "partitions", c.partitions,
		"group", cfg.Group, "transactional_id", cfg.TransactionalID)
	return c, nil
}

// topicPartitions asks the brokers for topic and returns its partition count.
func topicPartitions(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("no broker answered within the open timeout (%w): %v", ctx.Err(), err)
		}
		return 0, err
	}
	if len(resp.Topics) != 1 {
		return 0, fmt.Errorf("the metadata answer has %d topics", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("the topic does not exist; create it first: %w", err)
		}
		return 0, err
	}
	if len(resp.Topics[0].Partitions) == 0 {
		return 0, errors.New("the topic has no partitions")
	}
	return len(resp.Topics[0].Partitions), nil
}

// Partitions is the topic's partition count, as Open found it.
func (c *Channel) Partitions() int { return c.partitions }

// Begin starts a transaction: its Puts go to the topic, its Takes come from
// the consumer group Config.Group.
func (c *Channel) Begin() (*Transaction, error) {
	if c.closed.Load() {
		return nil, channel.ErrClosed
	}
	return &Transaction{c: c}, nil
}

// Group returns the consumer group name, joining it on first use: every
// group receives every event of the topic (broadcast); the members of one
// group (channels of this or other processes) share its events. A new group
// starts at the earliest record the topic retains, or at its
// Config.StartAt. A name that cannot be a
// consumer group id ("" among them: Kafka has no unnamed group) is a
// *ConfigError that also matches channel.ErrNoGroup.
func (c *Channel) Group(name string) (*Group, error) {
	if err := checkGroup(name); err != nil {
		return nil, &ConfigError{Field: "Group", Reason: err.Error(), err: channel.ErrNoGroup}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, channel.ErrClosed
	}
	if g := c.groups[name]; g != nil {
		return g, nil
	}
	g, err := c.newGroup(name)
	if err != nil {
		return nil, err
	}
	c.groups[name] = g
	return g, nil
}

// Close ends every wait of every transaction, leaves the consumer groups
// (waiting up to Config.CloseTimeout for each) and closes the clients. It
// returns promptly even with transactions open: their takes are not
// committed, so their events come back to the group; their puts are never
// visible. Every later call returns channel.ErrClosed.
func (c *Channel) Close() error {
	c.close.Do(func() {
		c.closed.Store(true)
		c.cancel()
		c.mu.Lock()
		groups := c.groups
		c.mu.Unlock()
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Go(g.close)
		}
		wg.Wait()
		done := make(chan struct{})
		go func() { c.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(c.cfg.CloseTimeout):
			c.cfg.Logger.Warn("filechannel/kafka: close: a put commit is still running; closing its client under it")
		}
		c.prod.close(c.cfg.CloseTimeout)
		c.m.unregister()
		c.cfg.Logger.Info("filechannel/kafka: closed", "topic", c.cfg.Topic)
	})
	return nil
}

// clientOpts are the options every client of the channel starts from.
func (c *Channel) clientOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.WithLogger(kgoLogger{c.cfg.Logger}),
		kgo.ClientID("filechannel"),
	}
}

// producer is the channel's transactional client. Kafka runs one
// transaction at a time per transactional id, so put commits take turns:
// one goroutine (loop) runs them, from BeginTransaction to EndTransaction.
type producer struct {
	c    *Channel
	reqs chan *commitReq
	mu   sync.Mutex
	cl   *kgo.Client // nil after a failure that left it in doubt

	closing sync.WaitGroup // discarded clients being closed
}

// client returns the producer's client, making one if the last one was
// discarded. A new client with the same transactional id fences the old
// one: Kafka aborts a transaction it left open.
func (p *producer) client() (*kgo.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cl != nil {
		return p.cl, nil
	}
	cfg := p.c.cfg
	opts := append(p.c.clientOpts(),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(max(10_000, cfg.TransactionCapacity)),
		kgo.RecordDeliveryTimeout(cfg.CommitTimeout),
		// Commit produces all of a transaction's records at once and then
		// waits for them: lingering for more only delays it.
		kgo.ProducerLinger(0),
	)
	// A batch holds the largest event Put takes (size.go), and never more
	// than the topic's max.message.bytes allows when that is at least
	// MaxEventSize: events near the limit commit together too.
	opts = append(opts, kgo.ProducerBatchMaxBytes(int32(max(cfg.MaxEventSize, minBatchMaxBytes))))
	opts = append(opts, cfg.KgoOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	p.cl = cl
	return cl, nil
}

// discard closes the client in the background (Close of a client whose
// cluster is gone can take a while); the next commit makes a new one.
func (p *producer) discard() {
	p.mu.Lock()
	cl := p.cl
	p.cl = nil
	p.mu.Unlock()
	if cl != nil {
		p.closing.Go(cl.Close)
	}
}

// close closes the client and waits up to timeout for it and for the
// clients discarded earlier to be closed.
func (p *producer) close(timeout time.Duration) {
	p.discard()
	done := make(chan struct{})
	go func() { p.closing.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		p.c.cfg.Logger.Warn("filechannel/kafka: close: the producer's client did not close in time", "timeout", timeout)
	}
}

// commit stages of a put commit, for the deadline's verdict.
const (
	stageProducing int32 = iota
	stageEnding          // EndTransaction(TryCommit) is asked: the outcome is Kafka's
	stageAbandoned       // the deadline passed first: it will not be asked
)

// commitReq is one put commit handed to the producer's loop.
type commitReq struct {
	ctx   context.Context // its deadline
	recs  []*kgo.Record
	arena arena // their bodies' bytes
	stage atomic.Int32
	res   chan error
}

// loop runs the channel's put commits one after another until Close. One
// long-lived goroutine: its stack has grown to what a commit needs once.
func (p *producer) loop() {
	for {
		select {
		case req := <-p.reqs:
			err := p.run(req.ctx, req.recs, &req.stage)
			if err == nil {
				// Every record was acknowledged: franz-go is done with
				// their bytes. After a failure it may not be (a client
				// discarded under records in flight): those go to the GC.
				req.arena.free()
			}
			req.res <- err
		case <-p.c.ctx.Done():
			return
		}
	}
}

// commit runs recs as one Kafka transaction and returns once Kafka
// committed it, or with an error by the deadline at the latest. The
// transaction runs on the producer's loop, so a franz-go call that does
// not honour its context delays the next commit, never the return of this
// one.
func (p *producer) commit(recs []*kgo.Record, a arena) error {
	c := p.c
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.CommitTimeout)
	defer cancel()
	req := &commitReq{ctx: ctx, recs: recs, arena: a, res: make(chan error, 1)}
	select {
	case p.reqs <- req:
	case <-ctx.Done():
		if c.closed.Load() {
			return channel.ErrClosed
		}
		return fmt.Errorf("filechannel/kafka: commit: the previous put commit did not finish within the commit timeout (%v); nothing was sent: %w", c.cfg.CommitTimeout, ctx.Err())
	}
	select {
	case err := <-req.res:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-req.res: // it finished as the deadline passed
		return err
	default:
	}
	if req.stage.CompareAndSwap(stageProducing, stageAbandoned) {
		if c.closed.Load() {
			return fmt.Errorf("filechannel/kafka: commit: %w (the transaction is aborted, none of its events will be visible)", channel.ErrClosed)
		}
		return fmt.Errorf("filechannel/kafka: commit: the records were not all acknowledged within %v; the transaction is aborted, none of its events will be visible: %w", c.cfg.CommitTimeout, ctx.Err())
	}
	return fmt.Errorf("filechannel/kafka: commit: Kafka did not confirm the commit within %v: %w (%w)", c.cfg.CommitTimeout, ErrOutcomeUnknown, ctx.Err())
}

// run is one transaction on the producer's client, under the token.
func (p *producer) run(ctx context.Context, recs []*kgo.Record, stage *atomic.Int32) error {
	cl, err := p.client()
	if err != nil {
		return fmt.Errorf("filechannel/kafka: commit: %w", err)
	}
	if err := cl.BeginTransaction(); err != nil {
		p.discard()
		return fmt.Errorf("filechannel/kafka: commit: begin: %w", err)
	}
	var (
		left    atomic.Int64
		errOnce sync.Once
		first   error
		acked   = make(chan struct{})
	)
	left.Store(int64(len(recs)))
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			errOnce.Do(func() { first = err })
		}
		if left.Add(-1) == 0 {
			close(acked)
		}
	}
	for _, r := range recs {
		cl.Produce(ctx, r, promise)
	}
	select {
	case <-acked:
	case <-ctx.Done():
	}
	select {
	case <-acked:
		if first != nil {
			return p.abort(cl, fmt.Errorf("filechannel/kafka: commit: produce: %w", first))
		}
	default:
		return p.abort(cl, fmt.Errorf("filechannel/kafka: commit: produce: %w", ctx.Err()))
	}
	if !stage.CompareAndSwap(stageProducing, stageEnding) {
		return p.abort(cl, ctx.Err())
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		// Not known to be committed: abort, which Kafka refuses if the
		// commit did land; either way the caller hears of an error.
		err = fmt.Errorf("filechannel/kafka: commit: end transaction: %w", err)
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ErrOutcomeUnknown)
		}
		return p.abort(cl, err)
	}
	return nil
}

// abort ends the open transaction without committing it and returns
// cause. If the abort fails too, the client is discarded: its successor
// fences it, and Kafka aborts what it left open.
func (p *producer) abort(cl *kgo.Client, cause error) error {
	// Not cut short by Close: a transaction left open holds back every
	// read_committed reader of its partitions until Kafka times it out.
	ctx, cancel := context.WithTimeout(context.Background(), p.c.cfg.CloseTimeout)
	defer cancel()
	err := cl.AbortBufferedRecords(ctx)
	if err == nil {
		err = cl.EndTransaction(ctx, kgo.TryAbort)
	}
	if err != nil {
		p.c.cfg.Logger.Warn("filechannel/kafka: abort failed; the producer is replaced", "err", err)
		p.discard()
	}
	return cause
}
