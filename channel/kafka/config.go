package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flumego/filechannel/channel"
)

// Defaults of the zero Config fields.
const (
	DefaultGroup               = "filechannel"
	DefaultTransactionCapacity = 10_000
	DefaultMaxEventSize        = 1_000_000
	DefaultCommitTimeout       = 30 * time.Second
	DefaultOpenTimeout         = 10 * time.Second
	DefaultCloseTimeout        = 5 * time.Second

	// maxEventSize is the largest MaxEventSize: franz-go's largest
	// kgo.ProducerBatchMaxBytes.
	maxEventSize = 1 << 30
)

// Config configures a Channel. Brokers and Topic are required; every other
// field has a default.
type Config struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// Topic holds the events. Required. It must exist: Open checks it (create
	// it with the partitions and replication factor you want; see
	// docs/kafka.md).
	Topic string
	// Group is the consumer group of the takes of c.Begin(); "" =
	// "filechannel". c.Group(name) takes for another group.
	Group string
	// StartAt is where a consumer group starts on a partition where it has
	// no committed offset (Kafka's auto.offset.reset), by group name:
	// channel.Earliest() (the oldest retained record), channel.Latest()
	// (the records committed from its join on) or channel.AtTime(t) (the
	// first record whose timestamp is at or after t, else the end). A
	// group not named here starts at the earliest retained record, as
	// before this field existed: a nil map changes nothing (a FileChannel's
	// new group starts at Latest). channel.AfterEvent is refused
	// (ErrUnsupported): Kafka records have no channel.EventID.
	StartAt map[string]channel.Position
	// LeaseTimeout is channel.GroupConfig.LeaseTimeout, which Kafka does
	// not have: a value other than 0 is refused (ErrUnsupported). A take
	// transaction on Kafka holds its member's partitions until it ends;
	// Kafka's own limit is the member's session (session.timeout.ms) and
	// poll interval.
	LeaseTimeout time.Duration
	// ExpireAfter is channel.GroupConfig.ExpireAfter, which Kafka does not
	// have: a value other than 0 is refused (ErrUnsupported). The topic's
	// retention (retention.ms) is the nearest thing: it deletes old
	// records whether or not they were taken.
	ExpireAfter time.Duration
	// RetryDelays is channel.GroupConfig.RetryDelays, which Kafka does not
	// have: a non-empty list is refused (ErrUnsupported). A rolled-back
	// record comes back at once (the member seeks back to it); Kafka keeps
	// no per-record due time.
	RetryDelays []time.Duration
	// OrderKey is channel.GroupConfig.OrderKey, which Kafka does not
	// have: a value other than "" is refused (ErrUnsupported). Kafka
	// orders per partition: produce a key's records to one partition
	// (the record key) instead.
	OrderKey string

	// TransactionalID is the producer's Kafka transactional.id. "" = a new
	// random one per Open ("filechannel-<topic>-<random>"). Give each agent
	// a stable id of its own to fence a previous run of that agent: Kafka
	// then aborts the transaction a crashed run left open at once, instead
	// of after its transaction timeout, during which readers of the
	// partitions it wrote wait. Two live channels must never share one.
	TransactionalID string
	// KeyHeader, when set, names the event header whose value becomes the
	// record key: events with the same value go to the same partition, in
	// order. "" = no key: the default partitioner sends each batch of a
	// put commit to one partition and the next batch to another.
	KeyHeader string
	// RawValues reads a topic written by other producers: record headers
	// still become event headers, and the record's metadata is added as the
	// headers kafka.topic, kafka.partition, kafka.offset, kafka.timestamp
	// (Unix milliseconds) and kafka.key (when the record has a key).
	RawValues bool
	// Dedup is a FileChannel's idempotent puts (channel.Config.Dedup):
	// not supported on Kafka. Open refuses a Dedup with a Header
	// (a *ConfigError matching ErrUnsupported); use Kafka's idempotent
	// producer and a consumer that tolerates duplicates instead.
	Dedup channel.Dedup

	// TransactionCapacity bounds the events of one transaction; 0 = 10,000.
	TransactionCapacity int
	// MaxEventSize bounds an event's size as a Kafka record batch of its
	// own: its body, header names and values, key, and the batch's and
	// record's framing (76 bytes for an event without headers; size.go has
	// the table). 0 = 1,000,000, under Kafka's default max.message.bytes
	// (1 MiB). A larger Put fails at once with channel.ErrEventTooLarge
	// instead of failing the whole commit. It is also the producer's
	// largest record batch (kgo.ProducerBatchMaxBytes): keep it at most the
	// topic's max.message.bytes, and raise both together.
	MaxEventSize int
	// CommitTimeout bounds each Commit; 0 = 30s. A Commit that runs out of
	// time returns an error; it never reports a success it did not see.
	CommitTimeout time.Duration
	// OpenTimeout bounds Open's check of the brokers and the topic, and the
	// initialization of the transactional producer; 0 = 10s.
	OpenTimeout time.Duration
	// CloseTimeout bounds how long Close waits for each consumer group to
	// be left (so that its partitions move at once, not after the session
	// timeout) and for a put commit in progress; 0 = 5s.
	CloseTimeout time.Duration
	// PollTimeout is how long Take waits for a record when none is fetched
	// yet; 0 = Take does not wait (as on a FileChannel, "empty right
	// now"). TakeContext waits as long as its context allows.
	PollTimeout time.Duration

	// KgoOptions are added to every franz-go client the channel makes,
	// after the channel's own (TLS, SASL, client id, timeouts...). Do not
	// override what the channel relies on: isolation level, auto-commit,
	// BlockRebalanceOnPoll, OnPartitionsAssigned, OnPartitionsCallbackBlocked,
	// consumer group, topics or transactional id.
	KgoOptions []kgo.Opt

	Name       string                // label for metrics and logs; "" = Topic
	Logger     *slog.Logger          // nil = discard
	Registerer prometheus.Registerer // nil = no metrics (never the global registry)
}

// ConfigError names the Config field that is wrong and why. The error of
// Channel.Group for a name that cannot be a consumer group id also matches
// channel.ErrNoGroup, as a FileChannel's Group does for a group it lacks.
type ConfigError struct {
	Field  string
	Reason string

	err error // what it unwraps to besides ErrBadConfig: channel.ErrNoGroup from Group; nil
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("filechannel/kafka: Config.%s: %s", e.Field, e.Reason)
}

// ErrBadConfig is matched (errors.Is) by every *ConfigError.
var ErrBadConfig = errors.New("filechannel/kafka: bad config")

func (e *ConfigError) Is(target error) bool { return target == ErrBadConfig }

// Unwrap returns channel.ErrNoGroup for the error of Channel.Group,
// ErrUnsupported for a StartAt Kafka cannot map or an option it does not
// have (LeaseTimeout, ExpireAfter, RetryDelays, OrderKey), else nil.
func (e *ConfigError) Unwrap() error { return e.err }

// unsupported returns the ConfigError of the first option set that Kafka
// does not have (Dedup, LeaseTimeout, RetryDelays, ExpireAfter, OrderKey), or nil.
func (cfg Config) unsupported() error {
	switch {
	case cfg.Dedup != (channel.Dedup{}):
		return &ConfigError{Field: "Dedup", Reason: "idempotent puts (a deduplication window) are not supported on Kafka", err: ErrUnsupported}
	case cfg.LeaseTimeout != 0:
		return &ConfigError{Field: "LeaseTimeout", Reason: "leases of take transactions are not supported on Kafka (0 = none)", err: ErrUnsupported}
	case len(cfg.RetryDelays) > 0:
		return &ConfigError{Field: "RetryDelays", Reason: "retry delays are not supported on Kafka (nil = back at once)", err: ErrUnsupported}
	case cfg.ExpireAfter != 0:
		return &ConfigError{Field: "ExpireAfter", Reason: "expiry of queued events is not supported on Kafka (0 = none; the topic's retention.ms deletes old records)", err: ErrUnsupported}
	case cfg.OrderKey != "":
		return &ConfigError{Field: "OrderKey", Reason: "order per key is not supported on Kafka (\"\" = none; Kafka orders per partition)", err: ErrUnsupported}
	}
	return nil
}

// withDefaults validates cfg and fills its zero fields.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return cfg, &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if len(cfg.Brokers) == 0 {
		return bad("Brokers", "required: at least one host:port")
	}
	for _, b := range cfg.Brokers {
		if strings.TrimSpace(b) == "" {
			return bad("Brokers", "an empty broker address")
		}
	}
	if err := checkTopic(cfg.Topic); err != nil {
		return bad("Topic", "%v", err)
	}
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	if err := checkGroup(cfg.Group); err != nil {
		return bad("Group", "%v", err)
	}
	cfg.StartAt = maps.Clone(cfg.StartAt) // the caller's map stays theirs
	for name, p := range cfg.StartAt {
		if err := checkGroup(name); err != nil {
			return bad("StartAt", "group %v", err)
		}
		if err := checkPosition(p); err != nil {
			return cfg, &ConfigError{Field: "StartAt", Reason: fmt.Sprintf("group %s: %v", name, err), err: ErrUnsupported}
		}
	}
	if err := cfg.unsupported(); err != nil {
		return cfg, err
	}
	switch {
	case cfg.TransactionCapacity < 0:
		return bad("TransactionCapacity", "%d: must not be negative", cfg.TransactionCapacity)
	case cfg.TransactionCapacity == 0:
		cfg.TransactionCapacity = DefaultTransactionCapacity
	}
	switch {
	case cfg.MaxEventSize < 0:
		return bad("MaxEventSize", "%d: must not be negative", cfg.MaxEventSize)
	case cfg.MaxEventSize == 0:
		cfg.MaxEventSize = DefaultMaxEventSize
	case cfg.MaxEventSize > maxEventSize:
		return bad("MaxEventSize", "%d: at most %d", cfg.MaxEventSize, maxEventSize)
	}
	for _, d := range []struct {
		field string
		v     *time.Duration
		def   time.Duration
	}{
		{"CommitTimeout", &cfg.CommitTimeout, DefaultCommitTimeout},
		{"OpenTimeout", &cfg.OpenTimeout, DefaultOpenTimeout},
		{"CloseTimeout", &cfg.CloseTimeout, DefaultCloseTimeout},
		{"PollTimeout", &cfg.PollTimeout, 0},
	} {
		if *d.v < 0 {
			return bad(d.field, "%v: must not be negative", *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Topic
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// checkTopic applies Kafka's rules for topic names.
func checkTopic(t string) error {
	switch {
	case t == "":
		return errors.New("required")
	case t == "." || t == "..":
		return fmt.Errorf("%q is not a valid topic name", t)
	case len(t) > 249:
		return fmt.Errorf("%d bytes: Kafka allows at most 249", len(t))
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q: Kafka allows only [a-zA-Z0-9._-]", t)
		}
	}
	return nil
}

// checkGroup refuses group ids that cannot be what the user meant.
func checkGroup(g string) error {
	switch {
	case g == "":
		return errors.New("empty")
	case len(g) > 255:
		return fmt.Errorf("%d bytes: at most 255", len(g))
	case strings.TrimSpace(g) != g:
		return fmt.Errorf("%q: leading or trailing space", g)
	}
	for _, r := range g {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%q: a control character", g)
		}
	}
	return nil
}
