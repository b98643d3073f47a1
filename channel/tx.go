package channel

import "context"

// Tx is a transaction of any backend: a *Transaction of a FileChannel, or a
// *kafka.Transaction of a channel on Kafka (package channel/kafka). Code
// that moves events (a source, a sink) is written once against it, taking
// a begin function such as (*FileChannel).Begin, (*Group).Begin or their
// Kafka counterparts:
//
//	func drain[T channel.Tx](begin func() (T, error)) error { ... }
//	drain(fc.Begin)  // a FileChannel
//	drain(kc.Begin)  // a channel on Kafka
//
// Every method has the meaning documented on Transaction.
type Tx interface {
	Put(e Event) error
	PutContext(ctx context.Context, e Event) error
	Take() (Event, bool, error)
	TakeContext(ctx context.Context) (Event, error)
	Commit() error
	Rollback() error
}

var _ Tx = (*Transaction)(nil)
