package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flumego/filechannel/channel"
)

// ErrUnsupported is matched (errors.Is) by the error of what a FileChannel
// does and Kafka cannot: a channel.AfterEvent position (Config.StartAt,
// ResetGroup), since Kafka records have no channel.EventID.
// Its text has no package prefix: it comes wrapped in the call's context.
var ErrUnsupported = errors.New("not supported on Kafka")

// ErrGroupActive is matched (errors.Is) by the error of ResetGroup when
// the group has members other than this channel's: Kafka resets only a
// stopped group (its offsets cannot be committed from outside while
// members hold its partitions). Stop those members, or reset from one of
// them. Its text has no package prefix: it comes wrapped in the call's
// context.
var ErrGroupActive = errors.New("the consumer group has active members")

// checkPosition refuses a position Kafka cannot map.
func checkPosition(p channel.Position) error {
	if id, ok := p.Event(); ok {
		return fmt.Errorf("%w: AfterEvent(%s): Kafka records have no channel.EventID; use AtTime, Earliest or Latest", ErrUnsupported, id)
	}
	return nil
}

// startOffset is where a group starts on a partition without a committed
// offset: p of Config.StartAt, earliest for a group it does not name.
func (c *Channel) startOffset(group string) kgo.Offset {
	p, ok := c.cfg.StartAt[group]
	switch t, isTime := p.Time(); {
	case !ok || p.IsEarliest():
		return kgo.NewOffset().AtStart()
	case isTime:
		return kgo.NewOffset().AfterMilli(milli(t))
	}
	return kgo.NewOffset().AtEnd() // Latest (Open refused AfterEvent)
}

// milli is t as a Kafka timestamp to look up: the first millisecond at or
// after t (a record stamped in t's millisecond but before t is before it),
// and 0 for a time before 1970 (Kafka's negative timestamps are special
// values, not times).
func milli(t time.Time) int64 {
	ms := t.UnixMilli() // rounded down
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return max(ms, 0)
}

// ResetGroup moves the consumer group name to p on every partition of the
// topic, by committing its offsets: Earliest is each partition's log start,
// Latest its end (the last stable offset: records of put transactions
// still open come after it), AtTime(t) the first record whose timestamp is
// at or after t (ListOffsets by timestamp), or the end for a partition
// with none. It returns the number of events now queued for the group,
// the sum over the partitions of end minus the new offset: an upper bound,
// since the offsets of a topic written in transactions count their
// control records too. AfterEvent is ErrUnsupported. The group's offsets
// for other topics are untouched.
//
// Kafka resets only a stopped group. If this channel is a member of it
// (c.Group(name) or a take of c.Begin() joined it), the member leaves the
// group for the reset and joins it again afterwards; the group's take
// transaction open across the reset cannot take or commit any more
// (channel.ErrGroupReset) and changes nothing, and Rollback ends it (its
// events do not come back: the reset decided the position). That happens
// even if the reset then fails. If the group has other members (channels
// or consumers elsewhere), the reset fails with an error matching
// ErrGroupActive and commits nothing. A group that does not exist yet is
// created with those offsets. ResetGroup returns within
// Config.CommitTimeout, plus up to CloseTimeout for this member's leave.
func (c *Channel) ResetGroup(name string, p channel.Position) (int, error) {
	if err := checkGroup(name); err != nil {
		return 0, &ConfigError{Field: "Group", Reason: err.Error(), err: channel.ErrNoGroup}
	}
	if err := checkPosition(p); err != nil {
		return 0, fmt.Errorf("filechannel/kafka: ResetGroup %s: %w", name, err)
	}
	if c.closed.Load() {
		return 0, channel.ErrClosed
	}
	c.mu.Lock()
	g := c.groups[name]
	c.mu.Unlock()
	var (
		n   int
		err error
	)
	if g == nil {
		n, err = c.resetOffsets(name, p)
	} else {
		n, err = g.reset(p)
	}
	if err != nil {
		if c.closed.Load() && !errors.Is(err, channel.ErrClosed) {
			err = fmt.Errorf("%w (%v)", channel.ErrClosed, err)
		}
		return 0, fmt.Errorf("filechannel/kafka: ResetGroup %s to %s: %w", name, p, err)
	}
	c.cfg.Logger.Info("filechannel/kafka: consumer group reset", "topic", c.cfg.Topic, "group", name, "to", p.String(), "queued", n)
	return n, nil
}

// resetOffsets commits the offsets of p for group on every partition of
// the topic, with a client of its own (not a member), once the group has
// no members. It commits nothing when a step before the commit fails.
func (c *Channel) resetOffsets(group string, p channel.Position) (int, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.CommitTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append(c.clientOpts(), c.cfg.KgoOptions...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := checkStopped(ctx, adm, group); err != nil {
		return 0, err
	}
	to, end, err := c.listPosition(ctx, adm, p)
	if err != nil {
		return 0, err
	}
	resp, err := adm.CommitOffsets(ctx, group, to)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) {
			// A member joined between the check and the commit.
			err = fmt.Errorf("%w: Kafka resets only a stopped group (%v)", ErrGroupActive, err)
		}
		return 0, fmt.Errorf("commit the offsets: %w", timeoutNote(ctx, err))
	}
	n := int64(0)
	to.Each(func(o kadm.Offset) {
		if e, ok := end.Lookup(o.Topic, o.Partition); ok {
			n += max(e.Offset-o.At, 0)
		}
	})
	return int(n), nil
}

// checkStopped fails with ErrGroupActive when group has members.
func checkStopped(ctx context.Context, adm *kadm.Client, group string) error {
	groups, err := adm.DescribeGroups(ctx, group)
	if err == nil {
		err = groups.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil // no such group yet (Kafka says Dead; kfake says this)
	}
	if err != nil {
		return fmt.Errorf("describe the group: %w", timeoutNote(ctx, err))
	}
	if d, ok := groups[group]; ok && len(d.Members) > 0 {
		return fmt.Errorf("%w: %d member(s), state %s; Kafka resets only a stopped group: stop them, or reset from the only member", ErrGroupActive, len(d.Members), d.State)
	}
	return nil
}

// listPosition lists p's offset and the end (the last stable offset) of
// every partition of the topic.
func (c *Channel) listPosition(ctx context.Context, adm *kadm.Client, p channel.Position) (to kadm.Offsets, end kadm.ListedOffsets, err error) {
	end, err = listed(adm.ListCommittedOffsets(ctx, c.cfg.Topic))
	if err != nil {
		return nil, nil, fmt.Errorf("list the end offsets: %w", timeoutNote(ctx, err))
	}
	at := end
	if t, ok := p.Time(); ok {
		at, err = listed(adm.ListOffsetsAfterMilli(ctx, milli(t), c.cfg.Topic))
	} else if p.IsEarliest() {
		at, err = listed(adm.ListStartOffsets(ctx, c.cfg.Topic))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list the offsets of %s: %w", p, timeoutNote(ctx, err))
	}
	to = make(kadm.Offsets)
	at.Each(func(o kadm.ListedOffset) {
		to.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	return to, end, nil
}

// listed is a listing's error, or the first error of one of its partitions.
func listed(l kadm.ListedOffsets, err error) (kadm.ListedOffsets, error) {
	if err == nil {
		err = l.Error()
	}
	return l, err
}

// timeoutNote says that err came from the reset's deadline, not Kafka.
func timeoutNote(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return err
}
