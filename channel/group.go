package channel

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/flumego/filechannel/logfile"
)

// FullPolicy says what a put commit does to a consumer group that has no
// room for its events.
type FullPolicy int

const (
	// Block (the default): Put waits up to KeepAlive for room in every
	// Block group, then returns ErrChannelFull naming the group; a put
	// refused by one group reaches no group.
	Block FullPolicy = iota
	// DropOldest: the commit drops the group's oldest queued events to
	// make room (counted, logged, recorded in the log so that replay is
	// exact). If in-flight takes hold the room, the group misses the
	// transaction instead, as with DropNewest.
	DropOldest
	// DropNewest: the group misses the transaction's events while it is
	// full (counted). A transaction's events reach a group all together
	// or not at all.
	DropNewest
)

// ParseFullPolicy parses the String form of a FullPolicy: "block",
// "drop-oldest" or "drop-newest".
func ParseFullPolicy(s string) (FullPolicy, error) {
	for p := Block; p <= DropNewest; p++ {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("filechannel: unknown full policy %q (block, drop-oldest or drop-newest)", s)
}

// MarshalText implements encoding.TextMarshaler (the String form).
func (p FullPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (ParseFullPolicy).
func (p *FullPolicy) UnmarshalText(b []byte) error {
	v, err := ParseFullPolicy(string(b))
	if err == nil {
		*p = v
	}
	return err
}

func (p FullPolicy) String() string {
	switch p {
	case Block:
		return "block"
	case DropOldest:
		return "drop-oldest"
	case DropNewest:
		return "drop-newest"
	}
	return fmt.Sprintf("FullPolicy(%d)", int(p))
}

// GroupConfig configures a consumer group. Every group receives every event
// committed after it exists; the take transactions of one group compete
// for its events.
type GroupConfig struct {
	Name          string     // [a-z0-9._-]{1,64}; "" is the unnamed group
	Capacity      int        // 0 = Config.Capacity
	WhenFull      FullPolicy // 0 = Block
	MaxDeliveries int        // 0 = unlimited; > 0: after that many deliveries the event is dead-lettered
	DeadLetter    string     // group that receives dead letters; "" = Name+".dlq" ("dlq" for the unnamed group)
	// StartAt is where a group created by Open or AddGroup starts: the
	// zero Position is Latest (the events committed from then on).
	// Earliest queues every event the logs retain (see Retention) that
	// its Filter matches, as ResetGroup does. It does nothing for a group
	// that exists.
	StartAt Position
	// Filter is a CEL expression (github.com/google/cel-go) of type bool
	// over the variable `headers` (map(string, string)): a put commit
	// queues an event for the group only if it is true for the event's
	// headers. "" = every event. Open and AddGroup refuse one that does
	// not compile, is not bool or may cost too much (ErrBadFilter). A
	// missing header is no match, never an error: headers["x"] == "y" is
	// false for an event without x. A changed filter applies to the
	// events committed afterwards. TagFilter builds the common case.
	Filter string
	// LeaseTimeout bounds how long a take transaction of the group may
	// hold its events: one still open this long after its first Take
	// that returned an event (or stepped over a damaged one) loses them:
	// they go back to the group's head, in order, as after a Rollback
	// (their deliveries stay counted), even if the taker never calls the
	// channel again. Its Take and Commit then return ErrLeaseExpired and
	// change nothing, and its Rollback returns nil. Choose it above the
	// sink's slowest batch (docs/operations.md, "Leases"). 0 = no limit;
	// negative is refused. Stored with the group (in its groups record
	// and the checkpoint's catalog), as the take options below: a group
	// that a later Open does not list in Config.Groups keeps it; one
	// listed takes Config.Groups' value, which is then stored.
	LeaseTimeout time.Duration
	// ExpireAfter: an event still queued this long after its put
	// committed (Event.Time, from the log) is never delivered by the
	// group: it moves to the group's dead-letter group if it has one
	// (MaxDeliveries or DeadLetter), else it is dropped; either way it is
	// counted (GroupStats.Expired), logged and told to
	// Config.OnDeadLetter (Reason "expired"). A Take that finds one skips
	// it so; a sweep before each checkpoint moves or drops those at the
	// head (at most 65,536 per group), so that an idle group's expired
	// events do not keep their log files. Events of log files older than
	// format version 7 (no commit time) never expire. 0 = never; negative
	// is refused. Stored with the group, as LeaseTimeout.
	ExpireAfter time.Duration
	// RetryDelays is the wait before the 1st, 2nd, ... redelivery of an
	// event after a rollback (the last value repeats): the event leaves
	// the group's queue until then, and the group's other events are
	// taken meanwhile (with OrderKey, its key waits with it: the key's
	// later events are held back until it is taken again).
	// nil = back at the head at once. The n-th redelivery is the one
	// after n deliveries: a group with RetryDelays counts deliveries
	// (Event.Deliveries), and an event that reached MaxDeliveries goes to
	// the dead-letter group instead of waiting. A waiting event keeps its
	// place in the group's capacity (it counts against Capacity) and is
	// not in Len; GroupStats.Waiting counts them. An expired lease's
	// events wait the same way. A delay is in the log: it survives Close,
	// a crash and a full replay; a power loss may shorten it, never lose
	// the event. An event past its ExpireAfter is expired when it becomes
	// due. At most 1024 delays, none negative. Stored with the group, as
	// LeaseTimeout; so are the due times of waiting events.
	RetryDelays []time.Duration
	// OrderKey is a header name. Within the group, the events with the
	// same non-empty value of it are never held by two take transactions
	// at once, and are taken in commit order; a rollback or a slow taker
	// holds back only that key's events: a Take skips past the events
	// whose key another open transaction holds (they keep their place,
	// parked once, not re-read) and takes the next free one. Events
	// without the header are free. A keyed group's takes read their
	// events one at a time (the key is in the event). "" = no key order.
	// With RetryDelays or Transaction.Retry a key waits with its event.
	// At most 256 bytes (logfile.MaxOrderKeyLen). Stored with the group,
	// as LeaseTimeout.
	OrderKey string
}

// A group's dead letters (deadletter.go has how they are counted and
// moved): with MaxDeliveries > 0, an event delivered that many times (each
// Take that returned it to the group is one delivery, crashes included) is
// moved to the group's dead-letter group instead of being delivered again.
// DeadLetter names that group; it defaults to Name+".dlq" ("dlq" for the
// unnamed group) when MaxDeliveries is set, and may be set alone, for
// Transaction.Reject without a delivery limit. A dead-letter group is
// created with the group when missing (with the group's capacity and the
// Block policy), or listed in Config.Groups to choose its capacity and
// policy. It is a normal group that no put feeds: its events are only the
// dead letters (and its policy says what a dead letter that finds it full
// does: Block keeps the event in its group, delivered again; DropOldest
// drops the oldest dead letter; DropNewest drops the new one). It has no
// MaxDeliveries or DeadLetter of its own. FileChannel.Redrive moves its
// events back.

// errRemoved is the error of a call on group g after RemoveGroup removed
// it.
func errRemoved(g *groupState) error {
	return fmt.Errorf("%w: %s was removed", ErrNoGroup, groupLabel(g.cfg.Name))
}

var groupNameRE = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)

// groupLabel is how logs and errors name a group: "the unnamed group" or
// `group "x"`, a noun phrase used as it is ("%s: capacity %d reached"),
// never after "consumer".
func groupLabel(name string) string {
	if name == "" {
		return "the unnamed group"
	}
	return fmt.Sprintf("group %q", name)
}

// check validates g and fills in its defaults (capacity from the
// channel's).
func (g GroupConfig) check(channelCapacity int) (GroupConfig, error) {
	bad := func(format string, args ...any) (GroupConfig, error) {
		return g, fmt.Errorf("%s: %s", groupLabel(g.Name), fmt.Sprintf(format, args...))
	}
	if g.Name != "" && !groupNameRE.MatchString(g.Name) {
		return bad("the name must be 1 to 64 of [a-z0-9._-]")
	}
	if g.Capacity == 0 {
		g.Capacity = channelCapacity
	}
	if g.Capacity < 1 || g.Capacity > MaxCapacity {
		return bad("Capacity %d out of range [1, %d]", g.Capacity, MaxCapacity)
	}
	if g.WhenFull < Block || g.WhenFull > DropNewest {
		return bad("unknown WhenFull %d", int(g.WhenFull))
	}
	if g.MaxDeliveries < 0 || g.MaxDeliveries > maxDeliveriesLimit {
		return bad("MaxDeliveries %d out of range [0, %d]", g.MaxDeliveries, maxDeliveriesLimit)
	}
	if g.MaxDeliveries > 0 && g.DeadLetter == "" {
		g.DeadLetter = defaultDeadLetter(g.Name)
		if len(g.DeadLetter) > logfile.MaxGroupNameLen {
			return bad("the default dead-letter group %q is longer than %d bytes: set DeadLetter", g.DeadLetter, logfile.MaxGroupNameLen)
		}
	}
	if g.DeadLetter != "" && !groupNameRE.MatchString(g.DeadLetter) {
		return bad("DeadLetter %q: the name must be 1 to 64 of [a-z0-9._-]", g.DeadLetter)
	}
	if g.DeadLetter != "" && g.DeadLetter == g.Name {
		return bad("DeadLetter names the group itself")
	}
	if g.LeaseTimeout < 0 {
		return bad("LeaseTimeout %v is negative (0 = no limit)", g.LeaseTimeout)
	}
	if g.ExpireAfter < 0 {
		return bad("ExpireAfter %v is negative (0 = never)", g.ExpireAfter)
	}
	if err := checkRetryDelays(g.RetryDelays); err != nil {
		return bad("%v", err)
	}
	// The group's own copy: it is stored with the group, and the
	// caller's slice may change afterwards.
	g.RetryDelays = slices.Clone(g.RetryDelays)
	if len(g.OrderKey) > logfile.MaxOrderKeyLen {
		return bad("OrderKey of %d bytes, at most %d", len(g.OrderKey), logfile.MaxOrderKeyLen)
	}
	if err := checkFilter(g); err != nil {
		return g, err
	}
	return g, nil
}

// maxDeliveriesLimit is the largest MaxDeliveries (a count is 32 bits on
// disk).
const maxDeliveriesLimit = 1<<31 - 1

// defaultDeadLetter is the dead-letter group of the group named name when
// its config names none.
func defaultDeadLetter(name string) string {
	if name == "" {
		return "dlq"
	}
	return name + ".dlq"
}

// info is g as a groups record lists it.
func (g *groupState) info() logfile.GroupInfo {
	return logfile.GroupInfo{ID: g.id, Name: g.cfg.Name, Since: g.since, Capacity: uint64(g.cfg.Capacity),
		Policy: uint8(g.cfg.WhenFull), MaxDeliveries: uint32(g.cfg.MaxDeliveries), DeadLetter: g.cfg.DeadLetter,
		DeadLetterGroup: g.dlqOnly, Filter: g.cfg.Filter,
		OrderKey: g.cfg.OrderKey, RetryDelays: g.cfg.RetryDelays, LeaseTimeout: g.cfg.LeaseTimeout, ExpireAfter: g.cfg.ExpireAfter}
}

// groupConfigOf is the config a groups record gives a group.
func groupConfigOf(gi logfile.GroupInfo) GroupConfig {
	return GroupConfig{Name: gi.Name, Capacity: int(gi.Capacity), WhenFull: FullPolicy(gi.Policy),
		MaxDeliveries: int(min(gi.MaxDeliveries, maxDeliveriesLimit)), DeadLetter: gi.DeadLetter, Filter: gi.Filter,
		OrderKey: gi.OrderKey, RetryDelays: gi.RetryDelays, LeaseTimeout: gi.LeaseTimeout, ExpireAfter: gi.ExpireAfter}
}

// sameTakeOptions reports whether a and b have the same take options
// (OrderKey, RetryDelays, LeaseTimeout, ExpireAfter).
func sameTakeOptions(a, b GroupConfig) bool {
	return a.OrderKey == b.OrderKey && slices.Equal(a.RetryDelays, b.RetryDelays) &&
		a.LeaseTimeout == b.LeaseTimeout && a.ExpireAfter == b.ExpireAfter
}

// Group is a consumer group of a FileChannel: its own queue of the
// channel's events, taken by its own take transactions.
type Group struct {
	c *FileChannel
	g *groupState
}

// Name returns the group's name ("" for the unnamed group).
func (g *Group) Name() string { return g.g.cfg.Name }

// Begin starts a take transaction on the group. A Put on it returns
// ErrMixedTransaction. After RemoveGroup it returns ErrNoGroup, even if a
// group of the same name was added since: a Group is the group as it was
// when FileChannel.Group or AddGroup returned it.
func (g *Group) Begin() (*Transaction, error) {
	if g.c.groupRemoved(g.g) {
		return nil, errRemoved(g.g)
	}
	t, err := g.c.Begin()
	if err != nil {
		return nil, err
	}
	t.grp, t.takeOnly = g.g, true
	return t, nil
}

// Len returns the number of events queued for the group: committed, not
// taken. After RemoveGroup it returns 0.
func (g *Group) Len() int {
	c := g.c
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if g.g.removed {
		return 0
	}
	return g.g.queue.Size() // after Close: the number when Close released the queues
}

// Cap returns the group's capacity in events.
func (g *Group) Cap() int { return g.g.cfg.Capacity }

// Wait blocks until the group has an event queued, ctx ends, the channel
// closes (ErrClosed) or the group is removed (ErrNoGroup).
func (g *Group) Wait(ctx context.Context) error { return g.c.waitGroup(ctx, g.g) }

// groupRemoved reports whether RemoveGroup removed g.
func (c *FileChannel) groupRemoved(g *groupState) bool {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return g.removed
}

// Group returns the consumer group of that name ("" is the unnamed group),
// or ErrNoGroup.
func (c *FileChannel) Group(name string) (*Group, error) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	for _, g := range c.groups {
		if g.cfg.Name == name {
			return &Group{c: c, g: g}, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNoGroup, groupLabel(name))
}

// GroupNames returns the names of the channel's consumer groups, sorted
// ("" is the unnamed group).
func (c *FileChannel) GroupNames() []string {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	names := make([]string, 0, len(c.groups))
	for _, g := range c.groups {
		names = append(names, g.cfg.Name)
	}
	slices.Sort(names)
	return names
}

// currentGroups returns the groups now, by id, without a lock (the list
// publishGroups last stored: each Put reads it). The caller must not
// modify it.
func (c *FileChannel) currentGroups() []*groupState {
	if p := c.groupList.Load(); p != nil {
		return *p
	}
	return nil
}

// publishGroups stores a copy of c.groups for currentGroups. The caller
// holds queueMu and has just changed c.groups.
func (c *FileChannel) publishGroups() {
	gs := slices.Clone(c.groups)
	c.groupList.Store(&gs)
}
