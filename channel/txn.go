package channel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

type txKind uint8

const (
	txNone txKind = iota
	txPut
	txTake
)

// spillBytes bounds the encoded puts a transaction holds in memory; beyond
// it they are written to the log (not synced) and tracked as in flight.
// A commit of 1,000 events of 1 KiB stays below it, so it is one write.
const spillBytes = 4 << 20

// maxPooledBuf is the largest encode buffer kept for reuse.
const maxPooledBuf = spillBytes + spillBytes/4

// scratch is a transaction's reusable memory: the encode buffer, the frame
// offsets, the pointers of a write and the taken events. Transactions take
// one from the channel's pool when they first need it and give it back when
// they end, so a steady stream of transactions allocates nothing for them.
type scratch struct {
	buf    []byte
	frames []int
	ptrs   []eventqueue.Pointer
	words  []uint64
	takes  []eventqueue.Pointer
	files  []uint32
}

// Transaction is a put or a take transaction. It belongs to one goroutine.
// Its records all go to one data dir.
type Transaction struct {
	c    *FileChannel
	id   uint64
	dir  int // the index of its data dir in the log set
	kind txKind
	done bool

	// Put side: encoded frames not yet written, their offsets in buf, the
	// number of events put (each holds a capacity permit), whether some
	// were already written.
	buf     []byte
	frames  []int
	puts    int
	spilled bool
	// spills: where each spill ended, to check at commit that a writer
	// which failed since did not take them back (see logfile.Batch.After).
	spills []logfile.Mark

	// Take side: the events taken, in order.
	takes []eventqueue.Pointer

	// s is the pooled memory behind buf, frames and takes (nil until the
	// first Put or Take).
	s *scratch
}

// scratch returns t's pooled memory, taking it from the pool if needed.
func (t *Transaction) scratch() *scratch {
	if t.s == nil {
		t.s = t.c.scratch.Get().(*scratch)
		t.buf, t.frames, t.takes = t.s.buf[:0], t.s.frames[:0], t.s.takes[:0]
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
	s.buf, s.frames, s.takes = t.buf[:0], t.frames[:0], t.takes[:0]
	if cap(s.buf) > maxPooledBuf {
		s.buf = nil
	}
	t.buf, t.frames, t.takes = nil, nil, nil
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

func (t *Transaction) use(k txKind) error {
	if t.done {
		return ErrTransactionDone
	}
	if t.c.closed.Load() {
		return ErrClosed
	}
	if t.kind != txNone && t.kind != k {
		return ErrMixedTransaction
	}
	t.kind = k
	return nil
}

// Put adds e to the transaction. It waits up to KeepAlive for room in the
// channel and then returns ErrChannelFull. The event becomes visible to
// takers when Commit returns.
func (t *Transaction) Put(e Event) error {
	return t.put(context.Background(), e)
}

// PutContext is Put that also gives up when ctx ends: it waits for room
// until KeepAlive passes (ErrChannelFull) or ctx is done (ctx.Err()),
// whichever comes first. Events already put stay in the transaction.
func (t *Transaction) PutContext(ctx context.Context, e Event) error {
	if ctx == nil {
		return errors.New("filechannel: PutContext: nil context")
	}
	return t.put(ctx, e)
}

func (t *Transaction) put(ctx context.Context, e Event) error {
	m := t.c.metrics
	m.putAttempts.Inc()
	err := t.put1(ctx, e)
	if err != nil {
		m.putErrors.WithLabelValues(putErrorReason(err)).Inc()
	}
	return err
}

func (t *Transaction) put1(ctx context.Context, e Event) error {
	if err := t.use(txPut); err != nil {
		return err
	}
	c := t.c
	if t.puts >= c.cfg.TransactionCapacity {
		return fmt.Errorf("%w: %d puts; commit more often or raise TransactionCapacity", ErrTransactionFull, t.puts)
	}
	rec := logfile.Record{Type: logfile.RecordPut, TxID: t.id, Headers: e.Headers, Body: e.Body}
	size := rec.EncodedSize()
	if size-logfile.FrameHeaderSize > logfile.MaxPayloadSize {
		return fmt.Errorf("%w: %d bytes encoded, the limit is %d", ErrEventTooLarge, size, logfile.MaxPayloadSize)
	}
	ok, free, err := c.logs.SpaceOK(t.dir, int64(len(t.buf)+size), c.cfg.MinimumRequiredSpace)
	if err != nil {
		return opErr("put", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s has %d bytes free, MinimumRequiredSpace is %d", ErrInsufficientSpace,
			c.logs.DirPath(t.dir), free, c.cfg.MinimumRequiredSpace)
	}
	if err := c.main.gate.acquire(ctx, 1, c.cfg.KeepAlive, c.closing); err != nil {
		if errors.Is(err, ErrChannelFull) {
			return fmt.Errorf("%w: capacity %d reached and no room within %v", ErrChannelFull, c.cfg.Capacity, c.cfg.KeepAlive)
		}
		return err
	}
	t.scratch()
	off := len(t.buf)
	buf, err := logfile.AppendUnsealed(t.buf, &rec) // sealed by appendRecords
	if err != nil {
		c.main.gate.release(1)
		return opErr("put", err)
	}
	t.buf = buf
	t.frames = append(t.frames, off)
	t.puts++
	if len(t.buf) >= min(spillBytes, int(c.cfg.MaxFileSize/4)) {
		if err := t.spill(); err != nil {
			return opErr("put", err)
		}
	}
	return nil
}

// spill writes the buffered puts to the log without syncing them; they stay
// in flight until the transaction commits or rolls back.
func (t *Transaction) spill() error {
	c := t.c
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return ErrClosed
	}
	a, ptrs, err := c.appendRecords(t, nil, nil, nil)
	if err != nil {
		return err
	}
	t.spills = append(t.spills, logfile.Mark{W: a.W, End: a.End})
	c.queueMu.Lock()
	for _, p := range ptrs {
		c.inflightPuts.Add(t.id, p)
	}
	c.queueMu.Unlock()
	t.spilled = true
	return nil
}

// Take removes the event at the head of the channel and returns it; ok is
// false when the channel is empty. The event is invisible to other takers
// until the transaction commits (it is gone) or rolls back (it returns to
// the head). A damaged event is never returned: it is logged, counted and
// consumed by this transaction.
func (t *Transaction) Take() (Event, bool, error) {
	m := t.c.metrics
	m.takeAttempts.Inc()
	ev, ok, err := t.take()
	if err != nil {
		m.takeErrors.WithLabelValues(takeErrorReason(err)).Inc()
	}
	return ev, ok, err
}

func (t *Transaction) take() (Event, bool, error) {
	if err := t.use(txTake); err != nil {
		return Event{}, false, err
	}
	c := t.c
	for {
		if len(t.takes) >= c.cfg.TransactionCapacity {
			return Event{}, false, fmt.Errorf("%w: %d takes; commit more often or raise TransactionCapacity", ErrTransactionFull, len(t.takes))
		}
		t.scratch()
		c.queueMu.Lock()
		p, ok := c.main.takeHead(t.id)
		c.queueMu.Unlock()
		if !ok {
			return Event{}, false, nil
		}
		t.takes = append(t.takes, p)
		ev, err := c.readEvent(p)
		if err == nil {
			return ev, true, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			// Not damage but a failure to read: put the event back.
			t.takes = t.takes[:len(t.takes)-1]
			c.queueMu.Lock()
			if aerr := c.main.untake(t.id, p); aerr != nil {
				err = errors.Join(err, aerr)
			}
			c.queueMu.Unlock()
			c.main.avail.broadcast()
			return Event{}, false, opErr("take", err)
		}
		c.stats.corruptSkipped.Add(1)
		c.metrics.corruptSkipped.Inc()
		c.log.Error("skipping damaged event", "pointer", p.String(), "err", err)
	}
}

func (c *FileChannel) readEvent(p eventqueue.Pointer) (Event, error) {
	r, err := c.logs.Reader(p.FileID())
	if err != nil {
		return Event{}, err
	}
	defer r.Release()
	rec, err := r.ReadRecord(int64(p.Offset()))
	if err != nil {
		return Event{}, err
	}
	if rec.Type != logfile.RecordPut {
		return Event{}, &CorruptError{File: r.Path(), Offset: int64(p.Offset()), Reason: fmt.Sprintf("event pointer refers to a record of type %d, not a put", rec.Type)}
	}
	return Event{Headers: rec.Headers, Body: rec.Body}, nil
}

// Commit ends the transaction. A put commit returns once its records are
// durable (fsync), then its events become visible; a take commit returns
// once the takes are durable. If Commit fails, the transaction is rolled
// back: the puts are discarded, the taken events return to the head.
func (t *Transaction) Commit() error {
	if t.done {
		return ErrTransactionDone
	}
	c := t.c
	if c.closed.Load() {
		return ErrClosed
	}
	t.done = true
	defer t.recycle()
	start := time.Now()
	var err error
	switch {
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
	}
	if err != nil {
		typ := "put"
		if t.kind == txTake {
			typ = "take"
		}
		c.metrics.commitErrors.WithLabelValues(typ).Inc()
		if !errors.Is(err, ErrClosed) {
			c.log.Error("commit failed", "type", typ, "err", err)
		}
	}
	return err
}

func (t *Transaction) commitPuts() error {
	c := t.c
	c.commitMu.RLock()
	if c.closed.Load() {
		c.commitMu.RUnlock()
		t.abortPuts()
		return ErrClosed
	}
	commit := logfile.Record{Type: logfile.RecordCommit, TxID: t.id, CommitType: logfile.RecordPut, Count: uint64(t.puts)}
	// A commit counts puts spilled to earlier files of the dir too: they
	// must be durable first (after), and this file must outlive them
	// (completes).
	var after []logfile.Mark
	var completes []uint32
	if t.spilled {
		after, completes = t.spills, t.spillFiles()
	}
	a, ptrs, err := c.appendRecords(t, []logfile.Record{commit}, after, completes)
	if err == nil {
		err = c.sync(a)
	}
	if err != nil {
		c.commitMu.RUnlock()
		t.abortPuts()
		return opErrNote("commit", err, " (the transaction was rolled back)")
	}
	c.queueMu.Lock()
	err = errors.Join(c.main.add(c.inflightPuts.Remove(t.id)), c.main.add(ptrs))
	c.queueMu.Unlock()
	c.commitMu.RUnlock()
	c.main.avail.broadcast()
	if err != nil {
		// The capacity gate makes this impossible; if it happens anyway the
		// events are durable and the next Open recovers them.
		c.log.Error("queue refused committed events", "err", err)
		return opErr("commit", err)
	}
	return nil
}

// abortPuts forgets the transaction's puts after a failed commit or a
// rollback.
func (t *Transaction) abortPuts() {
	c := t.c
	if t.spilled {
		c.queueMu.Lock()
		c.inflightPuts.Remove(t.id)
		c.queueMu.Unlock()
	}
	c.main.gate.release(t.puts)
	t.puts, t.spills = 0, nil
	t.buf, t.frames = t.buf[:0], t.frames[:0]
}

func (t *Transaction) commitTakes() error {
	c := t.c
	c.commitMu.RLock()
	if c.closed.Load() {
		c.commitMu.RUnlock()
		t.returnTakes()
		return ErrClosed
	}
	ptrs := t.s.words[:0]
	for _, p := range t.takes {
		ptrs = append(ptrs, uint64(p))
	}
	t.s.words = ptrs
	recs := []logfile.Record{
		{Type: logfile.RecordTake, TxID: t.id, Pointers: ptrs},
		{Type: logfile.RecordCommit, TxID: t.id, CommitType: logfile.RecordTake, Count: uint64(len(ptrs))},
	}
	a, _, err := c.appendRecords(t, recs, nil, t.takeFiles())
	if err == nil {
		err = c.sync(a)
	}
	if err != nil {
		c.commitMu.RUnlock()
		t.returnTakes()
		return opErrNote("commit", err, " (the taken events were returned to the channel)")
	}
	c.queueMu.Lock()
	c.main.committed(t.id)
	c.queueMu.Unlock()
	c.commitMu.RUnlock()
	c.main.gate.release(len(t.takes))
	t.takes = t.takes[:0]
	return nil
}

// returnTakes puts the taken events back at the head in their order.
func (t *Transaction) returnTakes() {
	c := t.c
	c.queueMu.Lock()
	err := c.main.returnTakes(t.id, t.takes)
	c.queueMu.Unlock()
	if len(t.takes) > 0 {
		c.main.avail.broadcast()
	}
	if err != nil {
		c.log.Error("queue refused returned events", "err", err)
	}
	t.takes = t.takes[:0]
}

// Rollback ends the transaction: puts are discarded, taken events return to
// the head of the channel in their original order.
func (t *Transaction) Rollback() error {
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
			// A hint for replay; losing it is harmless.
			t.buf, t.frames = t.buf[:0], t.frames[:0]
			c.commitMu.RLock()
			if !c.closed.Load() {
				rb := logfile.Record{Type: logfile.RecordRollback, TxID: t.id}
				if _, _, err := c.appendRecords(t, []logfile.Record{rb}, nil, nil); err != nil {
					c.log.Warn("write rollback record", "err", err)
				}
			}
			c.commitMu.RUnlock()
		}
		t.abortPuts()
	case txTake:
		c.metrics.rollbacks.WithLabelValues("take").Inc()
		t.returnTakes()
	}
	return nil
}
