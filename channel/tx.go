package channel

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

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

type txKind uint8

const (
	txNone txKind = iota
	txPut
	txTake
)

// maxPooledBuf is the largest encode buffer kept for reuse.
const maxPooledBuf = spillBytes + spillBytes/4

// scratch is a transaction's reusable memory: the batch its records are
// encoded in, the pointers of a write and the taken events. Transactions take
// one from the channel's pool when they first need it and give it back when
// they end, so a steady stream of transactions allocates nothing for them.
type scratch struct {
	batch  *logfile.Batch // of c.logs; nil until first needed
	ptrs   []eventqueue.Pointer
	words  []uint64
	takes  []eventqueue.Pointer
	files  []uint32
	perms  []permit
	bodies []unsafe.Pointer
	counts []uint32
	// With Config.Dedup (dedupput.go): each put's id, the put indices the
	// commit drops, the ids it keeps, and the ids seen by the commit.
	dslots []dedupSlot
	// kmarks: per keyed group, each put's key tag (keytags.go).
	kmarks []keyMark
	dups   []uint32
	dkeep  []dedupID
	seen   map[dedupID]struct{}
}

// Transaction is a put or a take transaction. It belongs to one goroutine:
// a call made while another call on it is in progress returns
// ErrConcurrentUse. Its records all go to one data dir.
type Transaction struct {
	c    *FileChannel
	id   uint64
	dir  int // the index of its data dir in the log set
	kind txKind
	done bool

	// busy is set while one of its methods runs (enter, leave): it guards
	// every field of the transaction against a second goroutine.
	busy atomic.Bool

	// Put side: the batch of the puts not yet written (encoded as the log
	// set's files need them), the number of events put (each holds a
	// capacity permit), whether some were already written.
	batch   *logfile.Batch
	puts    int
	spilled bool
	// spills: where each spill ended, to check at commit that a writer
	// which failed since did not take them back (see logfile.Batch.After).
	spills []logfile.Mark
	// failed is why the transaction's buffered puts can no longer be
	// written (a spill whose batch could not be restored): Put and
	// Commit refuse with ErrTransactionFailed; Rollback ends it.
	failed error

	// permits counts, per Block group, the capacity permits the puts hold
	// (one per event in each Block group that existed at its Put).
	permits []permit
	// fmarks: per filtered group, the puts its filter keeps out
	// (filterput.go).
	fmarks []filterMark

	// Take side: the group taken from (nil until the first Take of
	// c.Begin()'s transaction: the unnamed group); takeOnly for a
	// Group.Begin transaction. The events taken, in order; skipped of
	// them are damaged events that Take stepped over (they do not count
	// toward TransactionCapacity, but the commit's take record lists them).
	grp      *groupState
	takeOnly bool
	takes    []eventqueue.Pointer
	skipped  int
	// With a dead-letter group: bodies has, per take, the data of the
	// Body it returned (nil for none), to find an event Reject is given;
	// rejected the indexes in takes Reject marked; rejectHeld the
	// permits they hold in a Block dead-letter group.
	bodies     []unsafe.Pointer
	rejected   []int
	rejectHeld int
	// retried: the takes Transaction.Retry marked, with their delays.
	retried []retryMark
	// notes are the dead letters the current Commit or Rollback moved:
	// Config.OnDeadLetter is told of them last (notifyDeadLetters), once
	// the call has done everything else, so that a panic in it leaves
	// nothing half done.
	notes []DeadLetter

	// s is the pooled memory behind batch and takes (nil until the first
	// Put or Take).
	s *scratch
}

// scratch returns t's pooled memory, taking it from the pool if needed.
func (t *Transaction) scratch() *scratch {
	if t.s == nil {
		t.s = t.c.scratch.Get().(*scratch)
		if t.s.batch == nil {
			t.s.batch = t.c.logs.NewBatch()
		}
		t.batch, t.takes, t.bodies = t.s.batch, t.s.takes[:0], t.s.bodies[:0]
		if len(t.permits) == 0 {
			t.permits = t.s.perms[:0]
		}
	}
	return t.s
}

// recycle gives t's memory back to the pool once t has ended.
func (t *Transaction) recycle() {
	s := t.s
	if s == nil {
		return
	}
	t.s = nil
	s.batch.Reset()
	s.takes = t.takes[:0]
	clear(t.bodies) // no event body outlives its transaction here
	s.bodies = t.bodies[:0]
	clear(t.permits[:cap(t.permits)]) // no pointer to a group outlives its transaction
	s.perms = t.permits[:0]
	t.permits = nil
	if s.batch.Cap() > maxPooledBuf {
		s.batch = nil
	}
	t.batch, t.takes, t.bodies = nil, nil, nil
	t.c.scratch.Put(s)
}

// Begin starts a transaction.
func (c *FileChannel) Begin() (*Transaction, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	id := c.nextTxID.Add(1) - 1
	return &Transaction{c: c, id: id, dir: int(id % uint64(c.logs.NumDirs()))}, nil
}

// enter marks t busy for the call of one of its methods, or returns
// ErrConcurrentUse if another call is in progress. The caller defers leave.
func (t *Transaction) enter() error {
	if !t.busy.CompareAndSwap(false, true) {
		return ErrConcurrentUse
	}
	return nil
}

func (t *Transaction) leave() { t.busy.Store(false) }

func (t *Transaction) use(k txKind) error {
	if t.done {
		return ErrTransactionDone
	}
	if t.c.closed.Load() {
		return ErrClosed
	}
	if (t.kind != txNone && t.kind != k) || (k == txPut && t.takeOnly) {
		return ErrMixedTransaction
	}
	t.kind = k
	return nil
}

// Commit ends the transaction. A put commit returns once its records are
// durable (fsync), then its events become visible; a take commit returns
// once the takes are durable. If Commit fails, the transaction is rolled
// back: the puts are discarded, the taken events return to the head.
//
// After Close, Commit returns ErrClosed and ends the transaction: its
// puts are discarded, and its takes come back at the next Open. A take
// transaction whose group RemoveGroup removed returns an error matching
// ErrNoGroup and writes nothing.
func (t *Transaction) Commit() error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	if t.done {
		return ErrTransactionDone
	}
	t.done = true
	defer t.recycle()
	c := t.c
	if c.closed.Load() {
		t.abort()
		t.notifyDeadLetters()
		return ErrClosed
	}
	start := time.Now()
	var err error
	switch {
	case t.failed != nil:
		t.abort()
		err = fmt.Errorf("%w: a spill of its puts failed (%v) (the transaction was rolled back)", ErrTransactionFailed, t.failed)
	case t.kind == txPut && t.puts > 0:
		n := t.puts
		if err = t.commitPuts(); err == nil {
			c.metrics.observeCommit(true, n, start)
		}
	case t.kind == txTake && len(t.takes) > 0:
		n := len(t.takes)
		if err = t.commitTakes(); err == nil {
			c.metrics.observeCommit(false, n, start)
		}
	case t.grp != nil && c.groupRemoved(t.grp):
		// A take transaction that took nothing: its group is gone all
		// the same.
		err = errRemoved(t.grp)
	case t.grp != nil && t.grp.cfg.LeaseTimeout > 0:
		// All it took left it (dead letters): its lease ends here.
		if f := c.settle(t.grp, t.id); f != fenceNone {
			err = errFenced(t.grp, f)
		}
	}
	if err != nil {
		typ := "put"
		if t.kind == txTake || t.takeOnly {
			typ = "take"
		}
		c.metrics.commitErrors.WithLabelValues(typ).Inc()
		if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoGroup) && !errors.Is(err, ErrGroupReset) && !errors.Is(err, ErrLeaseExpired) {
			c.log.Error("commit failed", "type", typ, "err", err)
		}
	}
	t.notifyDeadLetters()
	return err
}

// notifyDeadLetters tells Config.OnDeadLetter of the dead letters t's
// Commit or Rollback moved. It is the call's last step: whatever the
// callback does, even a panic, the call is complete.
func (t *Transaction) notifyDeadLetters() {
	notes := t.notes
	t.notes = nil
	t.c.notifyDeadLetters(notes)
}

// abort ends t without writing anything: its puts are discarded, its takes
// returned.
func (t *Transaction) abort() {
	switch t.kind {
	case txPut:
		t.abortPuts()
	case txTake:
		t.returnTakes()
	}
}

// Rollback ends the transaction: puts are discarded, taken events return to
// the head of the channel in their original order.
//
// After Close (or when Close ran during it), Rollback returns ErrClosed:
// the puts are discarded all the same, and the taken events are back in
// the channel at the next Open.
func (t *Transaction) Rollback() error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	if t.done {
		return ErrTransactionDone
	}
	t.done = true
	defer t.recycle()
	c := t.c
	switch t.kind {
	case txPut:
		c.metrics.rollbacks.WithLabelValues("put").Inc()
		if t.spilled && !c.closed.Load() {
			t.writeRollback()
		}
	case txTake:
		if t.grp != nil && t.grp.cfg.LeaseTimeout > 0 && c.groupFenced(t.grp, t.id) == fenceLease {
			break // its expired lease returned the events (and counted it): nothing to do
		}
		c.metrics.rollbacks.WithLabelValues("take").Inc()
		if t.grp != nil {
			t.grp.counts.rollbacks.Add(1)
		}
	}
	t.abort()
	var err error
	if c.closed.Load() {
		err = ErrClosed
	}
	t.notifyDeadLetters()
	return err
}
