package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flumego/filechannel/channel"
)

// Transaction is a put or a take transaction, as on a FileChannel: Puts are
// held in memory and sent at Commit as one Kafka transaction; Takes hold
// the group's member until Commit (an offset commit) or Rollback (a
// rewind). It belongs to one goroutine.
type Transaction struct {
	c        *Channel
	g        *Group // its takes' group; for c.Begin(), set at the first take
	takeOnly bool

	puts  []*kgo.Record
	arena arena         // the bytes of puts' bodies
	recs  []*kgo.Record // taken, in take order
	owns  bool          // t holds g's member
	gen   uint64        // g.gen when t acquired the member
	done  bool
	busy  atomic.Bool
	start time.Time
}

var _ channel.Tx = (*Transaction)(nil)

func (t *Transaction) enter() error {
	if !t.busy.CompareAndSwap(false, true) {
		return channel.ErrConcurrentUse
	}
	if t.done {
		t.busy.Store(false)
		return channel.ErrTransactionDone
	}
	return nil
}

func (t *Transaction) leave() { t.busy.Store(false) }

// Put adds e to the transaction. The event is copied: the caller may reuse
// its buffers at once.
func (t *Transaction) Put(e channel.Event) error { return t.PutContext(context.Background(), e) }

// PutContext is Put; a Put never waits (the events wait for Commit), so ctx
// is only checked.
func (t *Transaction) PutContext(ctx context.Context, e channel.Event) error {
	c := t.c
	c.m.putAttempts.Inc()
	if err := t.enter(); err != nil {
		c.m.putErrors.WithLabelValues(reasonMisuse).Inc()
		return err
	}
	defer t.leave()
	switch {
	case c.closed.Load():
		c.m.putErrors.WithLabelValues(reasonClosed).Inc()
		return channel.ErrClosed
	case t.takeOnly || len(t.recs) > 0 || t.owns:
		c.m.putErrors.WithLabelValues(reasonMisuse).Inc()
		return channel.ErrMixedTransaction
	case len(t.puts) >= c.cfg.TransactionCapacity:
		c.m.putErrors.WithLabelValues(reasonTransactionFull).Inc()
		return channel.ErrTransactionFull
	}
	if ctx != nil && ctx.Err() != nil {
		c.m.putErrors.WithLabelValues(reasonCanceled).Inc()
		return ctx.Err()
	}
	r, err := t.record(e)
	if err != nil {
		c.m.putErrors.WithLabelValues(reasonTooLarge).Inc()
		return err
	}
	if len(t.puts) == 0 {
		t.start = time.Now()
		if t.puts == nil {
			t.puts = make([]*kgo.Record, 0, 128)
		}
	}
	t.puts = append(t.puts, r)
	return nil
}

// record is e as a Kafka record: the body is the value, the headers are
// record headers (sorted by name), and the KeyHeader's value is the key.
func (t *Transaction) record(e channel.Event) (*kgo.Record, error) {
	c := t.c
	if size := eventSize(e, c.cfg.KeyHeader); size > int64(c.cfg.MaxEventSize) {
		return nil, fmt.Errorf("%w: %d bytes as a Kafka record batch (body %d bytes, headers %d); Config.MaxEventSize is %d", channel.ErrEventTooLarge, size, len(e.Body), len(e.Headers), c.cfg.MaxEventSize)
	}
	r := &kgo.Record{Topic: c.cfg.Topic}
	if e.Body != nil {
		r.Value = t.arena.copy(e.Body)
	}
	if len(e.Headers) > 0 {
		r.Headers = make([]kgo.RecordHeader, 0, len(e.Headers))
		for k, v := range e.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		slices.SortFunc(r.Headers, func(a, b kgo.RecordHeader) int { return strings.Compare(a.Key, b.Key) })
		if c.cfg.KeyHeader != "" {
			if v, ok := e.Headers[c.cfg.KeyHeader]; ok {
				r.Key = []byte(v)
			}
		}
	}
	return r, nil
}

// Metadata headers of RawValues.
const (
	HeaderTopic     = "kafka.topic"
	HeaderPartition = "kafka.partition"
	HeaderOffset    = "kafka.offset"
	HeaderTimestamp = "kafka.timestamp"
	HeaderKey       = "kafka.key"
)

// event is r as an event (a later header of a repeated name wins).
func (c *Channel) event(r *kgo.Record) channel.Event {
	n := len(r.Headers)
	if c.cfg.RawValues {
		n += 5
	}
	var h map[string]string
	if n > 0 {
		h = make(map[string]string, n)
	}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	if c.cfg.RawValues {
		h[HeaderTopic] = r.Topic
		h[HeaderPartition] = strconv.Itoa(int(r.Partition))
		h[HeaderOffset] = strconv.FormatInt(r.Offset, 10)
		h[HeaderTimestamp] = strconv.FormatInt(r.Timestamp.UnixMilli(), 10)
		if r.Key != nil {
			h[HeaderKey] = string(r.Key)
		}
	}
	// Event.Time: the record's timestamp, which the producer set when the
	// put was written (CreateTime; or the broker's LogAppendTime, as the
	// topic says), close to its commit. Event.ID has no Kafka form.
	var at time.Time
	if r.Timestamp.UnixMilli() > 0 {
		at = r.Timestamp
	}
	return channel.Event{Headers: h, Body: r.Value, Time: at}
}

// group is the group of t's takes, joining Config.Group on the first take
// of c.Begin().
func (t *Transaction) group() (*Group, error) {
	if t.g == nil {
		g, err := t.c.Group(t.c.cfg.Group)
		if err != nil {
			return nil, err
		}
		t.g = g
	}
	return t.g, nil
}

// takeCheck refuses a take that cannot be: the channel closed, a put
// transaction, a full one.
func (t *Transaction) takeCheck() error {
	c := t.c
	switch {
	case c.closed.Load():
		c.m.takeErrors.WithLabelValues(reasonClosed).Inc()
		return channel.ErrClosed
	case len(t.puts) > 0:
		c.m.takeErrors.WithLabelValues(reasonMisuse).Inc()
		return channel.ErrMixedTransaction
	case len(t.recs) >= c.cfg.TransactionCapacity:
		c.m.takeErrors.WithLabelValues(reasonTransactionFull).Inc()
		return channel.ErrTransactionFull
	}
	return nil
}

// Take returns the group's next event. ok=false: none is fetched yet (it
// waits up to Config.PollTimeout for one, 0 = not at all), or another
// transaction of this channel holds the group's member.
func (t *Transaction) Take() (channel.Event, bool, error) {
	c := t.c
	c.m.takeAttempts.Inc()
	if err := t.enter(); err != nil {
		c.m.takeErrors.WithLabelValues(reasonMisuse).Inc()
		return channel.Event{}, false, err
	}
	defer t.leave()
	if err := t.takeCheck(); err != nil {
		return channel.Event{}, false, err
	}
	var ctx context.Context // nil: no wait
	if c.cfg.PollTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(c.ctx, c.cfg.PollTimeout)
		defer cancel()
	}
	r, err := t.take(ctx)
	if err != nil || r == nil {
		return channel.Event{}, false, err
	}
	return c.event(r), true, nil
}

// TakeContext waits for the group's next event until ctx ends: it returns
// the event, ctx.Err(), or channel.ErrClosed when the channel closes. It is
// the call for a sink's loop, as on a FileChannel.
func (t *Transaction) TakeContext(ctx context.Context) (channel.Event, error) {
	c := t.c
	if ctx == nil {
		return channel.Event{}, errors.New("filechannel/kafka: TakeContext: nil context")
	}
	c.m.takeAttempts.Inc()
	if err := t.enter(); err != nil {
		c.m.takeErrors.WithLabelValues(reasonMisuse).Inc()
		return channel.Event{}, err
	}
	defer t.leave()
	if err := t.takeCheck(); err != nil {
		return channel.Event{}, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	for {
		r, err := t.take(pctx)
		switch {
		case err != nil:
			return channel.Event{}, err
		case r != nil:
			return c.event(r), nil
		case ctx.Err() != nil:
			c.m.takeErrors.WithLabelValues(reasonCanceled).Inc()
			return channel.Event{}, ctx.Err()
		case c.closed.Load():
			c.m.takeErrors.WithLabelValues(reasonClosed).Inc()
			return channel.Event{}, channel.ErrClosed
		}
	}
}

// take owns the group's member (waiting until ctx ends, nil: not at all)
// and polls one record. nil, nil: none came.
func (t *Transaction) take(ctx context.Context) (*kgo.Record, error) {
	c := t.c
	g, err := t.group()
	if err != nil {
		c.m.takeErrors.WithLabelValues(reasonClosed).Inc()
		return nil, err
	}
	if !t.owns {
		ok, err := g.acquire(ctx)
		if err != nil {
			c.m.takeErrors.WithLabelValues(reasonClosed).Inc()
			return nil, err
		}
		if !ok {
			return nil, nil
		}
		t.owns = true
		t.gen = g.gen.Load()
		t.start = time.Now()
	}
	r, err := g.poll(ctx, len(t.recs), t.gen)
	if err != nil {
		reason := reasonKafka
		switch {
		case errors.Is(err, channel.ErrClosed):
			reason = reasonClosed
		case errors.Is(err, channel.ErrGroupReset):
			reason = reasonReset
		}
		c.m.takeErrors.WithLabelValues(reason).Inc()
		return nil, err
	}
	if r != nil {
		if t.recs == nil {
			t.recs = make([]*kgo.Record, 0, min(128, c.cfg.TransactionCapacity))
		}
		t.recs = append(t.recs, r)
		g.gm.inflight.Inc()
	}
	return r, nil
}

// Commit ends the transaction. A put commit returns once Kafka committed
// the events' transaction (acknowledged by all in-sync replicas); then
// every group can take them. A take commit returns once the group's
// offsets past the taken events are committed; if that fails the events
// come back to the group's next take. Either way, an error means the
// transaction is over and did not (or, with ErrOutcomeUnknown, may not)
// take effect. It returns within Config.CommitTimeout.
func (t *Transaction) Commit() error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	t.done = true
	c := t.c
	switch {
	case len(t.puts) > 0:
		puts, a := t.puts, t.arena
		t.puts, t.arena = nil, arena{}
		if c.closed.Load() {
			c.m.commitErrors.WithLabelValues(typePut).Inc()
			return channel.ErrClosed
		}
		if err := c.prod.commit(puts, a); err != nil {
			c.m.commitErrors.WithLabelValues(typePut).Inc()
			c.cfg.Logger.Warn("filechannel/kafka: put commit failed", "events", len(puts), "err", err)
			return err
		}
		c.m.putSuccess.Add(float64(len(puts)))
		c.m.observeCommit(typePut, t.start, len(puts))
		return nil
	case t.owns:
		recs := t.recs
		t.recs = nil
		t.owns = false
		g := t.g
		g.gm.inflight.Sub(float64(len(recs)))
		if len(recs) == 0 {
			g.release()
			return nil
		}
		if err := g.commit(recs, t.gen); err != nil {
			c.m.commitErrors.WithLabelValues(typeTake).Inc()
			if errors.Is(err, channel.ErrGroupReset) {
				return err
			}
			c.cfg.Logger.Warn("filechannel/kafka: take commit failed; the events come back", "group", g.name, "events", len(recs), "err", err)
			return fmt.Errorf("filechannel/kafka: commit the offsets of group %s: %w", g.name, err)
		}
		c.m.takeSuccess.Add(float64(len(recs)))
		g.gm.taken.Add(float64(len(recs)))
		c.m.observeCommit(typeTake, t.start, len(recs))
	}
	return nil
}

// Rollback ends the transaction: its puts are dropped (never sent), its
// takes come back, in order, to the group's next take.
func (t *Transaction) Rollback() error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	t.done = true
	c := t.c
	switch {
	case len(t.puts) > 0:
		t.puts = nil
		t.arena.free() // never handed to franz-go
		c.m.rollbacks.WithLabelValues(typePut).Inc()
	case t.owns:
		recs := t.recs
		t.recs = nil
		t.owns = false
		t.g.gm.inflight.Sub(float64(len(recs)))
		t.g.rollback(recs, t.gen)
		if len(recs) > 0 {
			c.m.rollbacks.WithLabelValues(typeTake).Inc()
			t.g.gm.rollbacks.Inc()
		}
	}
	return nil
}
