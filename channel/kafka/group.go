package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flumego/filechannel/channel"
)

// fetchMaxWait is how long a broker holds a fetch that found no data.
const fetchMaxWait = 500 * time.Millisecond

// outsideWait is how long a waiting take sleeps, while the member is
// outside the group, before it looks again.
const outsideWait = 100 * time.Millisecond

// Group is a Kafka consumer group the channel takes for: one member of it,
// with its own client. Its take transactions hold the member one at a time,
// and no rebalance moves its partitions while one is open
// (BlockRebalanceOnPoll). The end of a transaction allows them again; if
// the member fetched records that transaction did not take, it keeps them
// for the next one and gives them back as soon as a rebalance waits.
type Group struct {
	c    *Channel
	name string
	gm   groupMetrics

	// owner is held (a value in it) by the take transaction that owns the
	// member, from its first take to its end.
	owner chan struct{}

	// mu serializes the calls on cl with Close; each call ends promptly
	// once the channel's context is canceled, so Close never waits long.
	mu     sync.Mutex
	cl     *kgo.Client
	stop   context.CancelFunc // cancels cl's own context, after the leave
	closed bool

	// outside: a commit learned that the group moved on without this
	// member (it held a transaction past the rebalance timeout). Until the
	// client has joined again (its next assignment), takes get nothing:
	// what it would fetch belongs to another member now.
	outside atomic.Bool

	// buf[head:] are records polled and not taken yet (under mu). While
	// there are some, rebalances stay blocked between transactions too;
	// rebalance is set when one waits for this member.
	buf       []*kgo.Record
	head      int
	rebalance atomic.Bool

	// gen counts the resets of the group by this channel (written under
	// mu): a take transaction that acquired the member at another gen
	// cannot take or commit (channel.ErrGroupReset).
	gen atomic.Uint64
	// kick ends a poll waiting under mu when a reset starts: the reset
	// cancels it, then replaces it under mu.
	kick atomic.Pointer[kick]
}

// kick is a cancelable signal to a waiting poll.
type kick struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newKick() *kick {
	ctx, cancel := context.WithCancel(context.Background())
	return &kick{ctx: ctx, cancel: cancel}
}

// newGroup joins the consumer group name (the client starts the join at
// once) and reads committed records only.
func (c *Channel) newGroup(name string) (*Group, error) {
	g := &Group{c: c, name: name, gm: c.m.group(name), owner: make(chan struct{}, 1)}
	g.kick.Store(newKick())
	if err := g.connectLocked(); err != nil {
		return nil, err
	}
	c.cfg.Logger.Info("filechannel/kafka: joining consumer group", "topic", c.cfg.Topic, "group", name)
	return g, nil
}

// connectLocked makes the member's client, which starts to join the group
// at once; the caller holds mu, or g is not shared yet.
func (g *Group) connectLocked() error {
	c, name := g.c, g.name
	ctx, stop := context.WithCancel(context.Background())
	opts := append(c.clientOpts(),
		kgo.WithContext(ctx),
		kgo.ConsumeTopics(c.cfg.Topic),
		kgo.ConsumerGroup(name),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Where a partition without a committed offset starts
		// (Config.StartAt); a committed offset the topic's retention has
		// deleted resumes at the log start, as before StartAt existed.
		kgo.ConsumeStartOffset(c.startOffset(name)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Java's fetch.max.wait.ms, not franz-go's 5s: a fetch waiting on
		// idle partitions holds back partitions of the same broker that
		// become ready meanwhile (after a join, an offset validation), and
		// a rewind waits for it too.
		kgo.FetchMaxWait(fetchMaxWait),
		// Called (in a goroutine of its own) when a rebalance waits for
		// this member to allow it.
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { g.rebalanceBlocked() }),
		// Called after every join (gated by BlockRebalanceOnPoll, so never
		// under an open take transaction), with the partitions added.
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			if g.outside.Swap(false) {
				c.cfg.Logger.Info("filechannel/kafka: back in the consumer group", "group", name)
			}
		}),
	)
	opts = append(opts, c.cfg.KgoOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		stop()
		return fmt.Errorf("filechannel/kafka: group %s: %w", name, err)
	}
	g.cl, g.stop = cl, stop
	return nil
}

// Name is the consumer group's id.
func (g *Group) Name() string { return g.name }

// Begin starts a take transaction on the group (Put: ErrMixedTransaction).
func (g *Group) Begin() (*Transaction, error) {
	if g.c.closed.Load() {
		return nil, channel.ErrClosed
	}
	return &Transaction{c: g.c, g: g, takeOnly: true}, nil
}

// acquire makes t the owner of the member, waiting until ctx ends (nil:
// not at all). It reports whether t owns it.
func (g *Group) acquire(ctx context.Context) (bool, error) {
	select {
	case g.owner <- struct{}{}:
		return true, nil
	default:
	}
	if ctx == nil {
		return false, nil
	}
	select {
	case g.owner <- struct{}{}:
		return true, nil
	case <-g.c.ctx.Done():
		return false, channel.ErrClosed
	case <-ctx.Done():
		return false, nil
	}
}

// pollBatch is the most records one poll fetches into the member's buffer.
const pollBatch = 256

// poll returns the group's next record: the next of the member's buffer,
// or of a poll that refills it, waiting until ctx ends (nil: only what the
// client has fetched already). A nil record with a nil error: none came.
// taken is how many records the owning transaction holds: with none and an
// empty buffer, an empty poll allows rebalances again at once. gen is the
// gen the transaction acquired the member at: after a reset, the
// transaction gets channel.ErrGroupReset.
func (g *Group) poll(ctx context.Context, taken int, gen uint64) (*kgo.Record, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, channel.ErrClosed
	}
	if g.gen.Load() != gen {
		return nil, fenced(g.name)
	}
	if g.outside.Load() {
		if taken == 0 {
			g.cl.AllowRebalance() // let the join through
		}
		if ctx != nil { // a waiting take: not a busy loop until the join
			t := time.NewTimer(outsideWait)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		return nil, nil
	}
	if r := g.next(); r != nil {
		return r, nil
	}
	if ctx != nil { // a reset starting ends the wait (kick)
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(g.kick.Load().ctx, cancel)()
	}
	fs := g.cl.PollRecords(ctx, pollBatch)
	fs.EachRecord(func(r *kgo.Record) { g.buf = append(g.buf, r) })
	var ferr error
	fs.EachError(func(topic string, p int32, err error) {
		switch {
		case errors.Is(err, kgo.ErrClientClosed):
			ferr = channel.ErrClosed
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			// our wait ended
		case ferr == nil:
			ferr = fmt.Errorf("filechannel/kafka: take from %s[%d] for group %s: %w", topic, p, g.name, err)
		}
	})
	r := g.next()
	if r == nil {
		if taken == 0 {
			g.cl.AllowRebalance() // nothing held: nothing to protect
		}
		return nil, ferr
	}
	if ferr != nil && !errors.Is(ferr, channel.ErrClosed) {
		g.c.cfg.Logger.Warn("filechannel/kafka: fetch error", "group", g.name, "err", ferr)
	}
	return r, nil
}

// next pops the buffer's first record (nil: empty).
func (g *Group) next() *kgo.Record {
	if g.head == len(g.buf) {
		return nil
	}
	r := g.buf[g.head]
	g.buf[g.head] = nil
	g.head++
	if g.head == len(g.buf) {
		g.buf, g.head = g.buf[:0], 0
	}
	return r
}

// buffered is the records fetched and not taken yet, in fetch order.
func (g *Group) buffered() []*kgo.Record { return g.buf[g.head:] }

// dropBuffer forgets the buffered records (the position is moved back, or
// the partitions are someone else's).
func (g *Group) dropBuffer() {
	clear(g.buf)
	g.buf, g.head = g.buf[:0], 0
}

// commit commits the group's offsets past recs (in take order) and then
// releases the member. If the commit fails, the group's position goes back
// to recs first, so that they come back to its next take; unless the
// group no longer counts this member in (it took too long): then the
// partitions are someone else's, who resumes from the committed offsets.
// A transaction that acquired the member before a reset (gen) commits
// nothing: channel.ErrGroupReset.
func (g *Group) commit(recs []*kgo.Record, gen uint64) error {
	ctx, cancel := context.WithTimeout(g.c.ctx, g.c.cfg.CommitTimeout)
	defer cancel()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return channel.ErrClosed
	}
	if g.gen.Load() != gen {
		g.releaseLocked()
		return fenced(g.name)
	}
	err := g.cl.CommitRecords(ctx, recs...)
	if err != nil {
		if lostMembership(err) {
			g.outside.Store(true)
			g.dropBuffer()
			g.c.cfg.Logger.Warn("filechannel/kafka: the consumer group moved on without this member (a take transaction outlived the rebalance timeout); its takes get nothing until it has joined again", "group", g.name, "err", err)
		} else {
			g.rewindLocked(recs)
		}
		if g.c.closed.Load() {
			err = fmt.Errorf("%w (%v)", channel.ErrClosed, err)
		}
	}
	g.releaseLocked()
	return err
}

// lostMembership tells the errors of a commit from a member the group has
// moved on without.
func lostMembership(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) ||
		errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.FencedInstanceID)
}

// rollback puts the group's position back at the first record of each
// partition in recs (or in the buffer), and releases the member: the next
// take of the group gets them again, in order; unless the group was reset
// since the transaction acquired the member (gen): the reset decided the
// position.
func (g *Group) rollback(recs []*kgo.Record, gen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return // nothing committed: they come back from the committed offsets
	}
	if g.gen.Load() == gen {
		g.rewindLocked(recs)
	}
	g.releaseLocked()
}

// release ends a transaction that took nothing.
func (g *Group) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.releaseLocked()
	}
}

// releaseLocked ends the owner's hold on the member. With records still
// buffered, rebalances stay blocked, so that the next transaction takes
// them; the member gives them back (settle) when a rebalance asks for it.
func (g *Group) releaseLocked() {
	if len(g.buffered()) == 0 || g.rebalance.Load() {
		g.settleLocked()
	}
	select {
	case <-g.owner:
	default:
	}
}

// settleLocked lets a rebalance through: the buffered records go back (the
// position of their partitions moves back to them), then rebalances are
// allowed. Only with no transaction holding the member.
func (g *Group) settleLocked() {
	g.rewindLocked(nil)
	g.rebalance.Store(false)
	g.cl.AllowRebalance()
}

// rebalanceBlocked is called (in a goroutine of its own) when a rebalance
// waits for this member. If a transaction holds the member, its end
// settles; otherwise this does, once no transaction holds it.
func (g *Group) rebalanceBlocked() {
	g.rebalance.Store(true)
	select {
	case g.owner <- struct{}{}:
	case <-g.c.ctx.Done():
		return
	}
	g.mu.Lock()
	if !g.closed && g.rebalance.Load() {
		g.settleLocked()
	}
	g.mu.Unlock()
	<-g.owner
}

// rewindLocked sets the position of each partition of recs and of the
// buffer to its first record there, and empties the buffer. SetOffsets
// drops what the client fetched beyond it; it is called before
// AllowRebalance, while the partitions are surely ours.
func (g *Group) rewindLocked(recs []*kgo.Record) {
	buf := g.buffered()
	if len(recs) == 0 && len(buf) == 0 {
		return
	}
	to := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range slices.Concat(recs, buf) {
		ps := to[r.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			to[r.Topic] = ps
		}
		if _, ok := ps[r.Partition]; !ok {
			ps[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
		}
	}
	g.dropBuffer()
	g.cl.SetOffsets(to)
}

// close leaves the group (up to CloseTimeout) and closes its client. Open
// transactions' takes are not committed: their events come back to the
// group. The channel's context is canceled already, so a take or commit
// in progress gives up mu promptly.
func (g *Group) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	g.leaveLocked()
	g.gm.inflight.Set(0)
}

// leaveLocked leaves the group (up to CloseTimeout) and closes the
// member's client.
func (g *Group) leaveLocked() {
	g.cl.AllowRebalance()
	ctx, cancel := context.WithTimeout(context.Background(), g.c.cfg.CloseTimeout)
	if err := g.cl.LeaveGroupContext(ctx); err != nil {
		g.c.cfg.Logger.Warn("filechannel/kafka: leaving the consumer group did not finish; its partitions move after the session timeout", "group", g.name, "err", err)
	}
	cancel()
	g.stop()
	g.cl.Close()
	// Close's last step is a poll (PollFetches(nil), to drain fetches),
	// which counts as a poller under BlockRebalanceOnPoll. A leave still
	// running in the background (its context ran out: a cluster gone)
	// waits for pollers to end, and would wait forever.
	g.cl.AllowRebalance()
}

// reset moves the group to p with this member out of it: it fences the
// open take transaction (gen), leaves, commits the offsets of p (if no
// other member is left), and joins again with a new client.
func (g *Group) reset(p channel.Position) (int, error) {
	g.kick.Load().cancel() // a poll waiting under mu returns
	g.mu.Lock()
	defer g.mu.Unlock()
	g.kick.Store(newKick())
	if g.closed {
		return 0, channel.ErrClosed
	}
	g.gen.Add(1)
	g.dropBuffer()
	g.leaveLocked()
	g.rebalance.Store(false)
	g.outside.Store(false)
	n, err := g.c.resetOffsets(g.name, p)
	// Join again even if the reset failed (the member left) or Close
	// waits for mu (it closes the new client).
	if cerr := g.connectLocked(); cerr != nil {
		g.closed = true // takes get ErrClosed; Close has nothing left to do
		return 0, errors.Join(err, fmt.Errorf("join again: %w", cerr))
	}
	return n, err
}

// fenced is the error of a take transaction open across a reset.
func fenced(group string) error {
	return fmt.Errorf("%w: group %s, while this take transaction was open; its takes changed nothing", channel.ErrGroupReset, group)
}
