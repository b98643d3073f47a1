package channel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/seal"
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
	perms  []permit
	bodies []unsafe.Pointer
	counts []uint32
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
	// failed is why the transaction's buffered puts can no longer be
	// written (a spill whose batch could not be restored): Put and
	// Commit refuse with ErrTransactionFailed; Rollback ends it.
	failed error

	// permits counts, per Block group, the capacity permits the puts hold
	// (one per event in each Block group that existed at its Put).
	permits []permit

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
	// notes are the dead letters the current Commit or Rollback moved:
	// Config.OnDeadLetter is told of them last (notifyDeadLetters), once
	// the call has done everything else, so that a panic in it leaves
	// nothing half done.
	notes []DeadLetter

	// s is the pooled memory behind buf, frames and takes (nil until the
	// first Put or Take).
	s *scratch
}

// scratch returns t's pooled memory, taking it from the pool if needed.
func (t *Transaction) scratch() *scratch {
	if t.s == nil {
		t.s = t.c.scratch.Get().(*scratch)
		t.buf, t.frames, t.takes, t.bodies = t.s.buf[:0], t.s.frames[:0], t.s.takes[:0], t.s.bodies[:0]
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
	s.buf, s.frames, s.takes = t.buf[:0], t.frames[:0], t.takes[:0]
	clear(t.bodies) // no event body outlives its transaction here
	s.bodies = t.bodies[:0]
	clear(t.permits[:cap(t.permits)]) // no pointer to a group outlives its transaction
	s.perms = t.permits[:0]
	t.permits = nil
	if cap(s.buf) > maxPooledBuf {
		s.buf = nil
	}
	t.buf, t.frames, t.takes, t.bodies = nil, nil, nil, nil
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

// insufficientSpace is the error of a put refused by the space check of
// data dir: free bytes there, need for the put (its event and the events
// the transaction buffers), min the MinimumRequiredSpace. It says what the
// check counted (the put's own bytes, when they are what falls short) and
// what to do.
func insufficientSpace(dir string, free, need, min int64) error {
	const todo = "free space there, or lower MinimumRequiredSpace"
	switch {
	case free < min:
		return fmt.Errorf("%w: %s has %d bytes free, below MinimumRequiredSpace %d: %s",
			ErrInsufficientSpace, dir, free, min, todo)
	case need > free:
		return fmt.Errorf("%w: %s has %d bytes free, too few for this put's %d (with the events the transaction holds) and MinimumRequiredSpace %d: %s",
			ErrInsufficientSpace, dir, free, need, min, todo)
	default:
		return fmt.Errorf("%w: this put (%d bytes with the events the transaction holds) would leave %s %d bytes free, below MinimumRequiredSpace %d: %s",
			ErrInsufficientSpace, need, dir, free-need, min, todo)
	}
}

func (t *Transaction) put1(ctx context.Context, e Event) error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	if err := t.use(txPut); err != nil {
		return err
	}
	if t.failed != nil {
		return fmt.Errorf("%w: a spill of its puts failed (%v); roll it back", ErrTransactionFailed, t.failed)
	}
	c := t.c
	if t.puts >= c.cfg.TransactionCapacity {
		return fmt.Errorf("%w: %d puts; commit more often or raise TransactionCapacity", ErrTransactionFull, t.puts)
	}
	rec := logfile.Record{Type: logfile.RecordPut, TxID: t.id, Headers: e.Headers, Body: e.Body}
	size := rec.EncodedSize()
	if c.logs.Encrypted() {
		size += seal.Overhead // the seal's tag
	}
	if size-logfile.FrameHeaderSize > logfile.MaxPayloadSize {
		return fmt.Errorf("%w: %d bytes encoded, the limit is %d", ErrEventTooLarge, size, logfile.MaxPayloadSize)
	}
	if c.logs.Full(t.dir) {
		return fmt.Errorf("%w: %s is full: its room is kept for take commits until a checkpoint frees room for its space reserve",
			ErrInsufficientSpace, c.logs.DirPath(t.dir))
	}
	need := int64(len(t.buf) + size)
	ok, free, err := c.logs.SpaceOK(t.dir, need, c.cfg.MinimumRequiredSpace)
	if err != nil {
		return opErr("put", err)
	}
	if !ok {
		return insufficientSpace(c.logs.DirPath(t.dir), free, need, c.cfg.MinimumRequiredSpace)
	}
	t.scratch()
	held, err := t.acquirePermit(ctx)
	if err != nil {
		return err
	}
	off := len(t.buf)
	encode := logfile.AppendUnsealed
	if c.logs.Encrypted() {
		encode = logfile.AppendUnsealedEncrypted // with room for the body's seal
	}
	buf, err := encode(t.buf, &rec) // sealed by appendRecords
	if err != nil {
		releaseBlock(held, 1)
		return opErr("put", err)
	}
	t.buf = buf
	t.frames = append(t.frames, off)
	t.puts++
	if len(t.buf) >= min(spillBytes, int(c.cfg.MaxFileSize/4)) {
		if err := t.spill(); err != nil {
			// A Put that fails adds nothing: the event leaves the buffer,
			// which a failed spill leaves as it was (logfile.Set.Append),
			// so the transaction can go on and commit what it holds.
			t.buf, t.frames, t.puts = t.buf[:off], t.frames[:len(t.frames)-1], t.puts-1
			releaseBlock(held, 1)
			if errors.Is(err, logfile.ErrBatchLost) {
				t.failed = err
			}
			return opErr("put", err)
		}
	}
	t.addPermits(held)
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
	c.addInflightPuts(t.id, ptrs)
	t.spilled = true
	return nil
}

// Take removes the event at the head of the channel and returns it; ok is
// false when the channel is empty. The event is invisible to other takers
// until the transaction commits (it is gone) or rolls back (it returns to
// the head). A damaged event is never returned: it is logged, counted and
// consumed by this transaction, and does not count toward
// TransactionCapacity.
func (t *Transaction) Take() (Event, bool, error) {
	if err := t.enter(); err != nil {
		t.c.metrics.takeAttempts.Inc()
		t.c.metrics.takeErrors.WithLabelValues(reasonMisuse).Inc()
		return Event{}, false, err
	}
	defer t.leave()
	return t.takeCounted()
}

// takeCounted is Take, t entered, with its metrics.
func (t *Transaction) takeCounted() (Event, bool, error) {
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
		if n := len(t.takes) - t.skipped; n >= c.cfg.TransactionCapacity {
			return Event{}, false, fmt.Errorf("%w: %d takes; commit more often or raise TransactionCapacity", ErrTransactionFull, n)
		}
		if len(t.takes) >= MaxTransactionCapacity {
			// The damaged events skipped count toward the take record,
			// which must fit one log record.
			return Event{}, false, fmt.Errorf("%w: %d takes, %d of them damaged events skipped: the take record is full; commit",
				ErrTransactionFull, len(t.takes), t.skipped)
		}
		t.scratch()
		if t.grp == nil {
			if t.grp = c.unnamedGroup(); t.grp == nil {
				return Event{}, false, fmt.Errorf("%w: this channel has no unnamed group: take from a named one (FileChannel.Group)", ErrNoGroup)
			}
		}
		p, ok, err := c.takeHead(t.grp, t.id)
		if err != nil || !ok {
			return Event{}, false, err
		}
		t.takes = append(t.takes, p)
		ev, err := c.readEvent(p)
		if err == nil {
			if t.grp.counting() {
				// Counted once read, before it is returned: a read that
				// fails counts nothing.
				n, notes, err := c.deliver(t, p)
				if len(notes) > 0 || err != nil {
					t.takes = t.takes[:len(t.takes)-1]
				}
				if len(notes) > 0 {
					// It had reached MaxDeliveries: now a dead letter.
					// The move is complete and t no longer holds it,
					// so a panic in OnDeadLetter leaves t as it was
					// before this Take.
					c.notifyDeadLetters(notes)
					continue
				}
				if err != nil {
					uerr := c.untake(t.grp, t.id, p)
					t.grp.avail.broadcast()
					if c.closed.Load() {
						return Event{}, false, ErrClosed
					}
					if errors.Is(err, ErrNoGroup) {
						return Event{}, false, err
					}
					return Event{}, false, opErrNote("take", errors.Join(err, uerr), " (the event was not delivered: its delivery could not be counted)")
				}
				ev.Deliveries = n
			}
			t.noteBody(ev.Body)
			return ev, true, nil
		}
		if c.closed.Load() || !errors.Is(err, ErrCorrupt) {
			// Not damage but a failure to read (Close may have closed
			// the file under the read): put the event back.
			t.takes = t.takes[:len(t.takes)-1]
			uerr := c.untake(t.grp, t.id, p)
			t.grp.avail.broadcast()
			if c.closed.Load() {
				return Event{}, false, ErrClosed
			}
			return Event{}, false, opErr("take", errors.Join(err, uerr))
		}
		t.noteBody(nil)
		t.skipped++
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
	if rec.Sealed != nil {
		// Open checked every key it could read: this file's key record is
		// damaged, so no key opens its events.
		return Event{}, &CorruptError{File: r.Path(), Offset: int64(p.Offset()),
			Reason: "an encrypted event whose key is unknown: the file's key record is damaged"}
	}
	return Event{Headers: rec.Headers, Body: rec.Body}, nil
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
	}
	if err != nil {
		typ := "put"
		if t.kind == txTake || t.takeOnly {
			typ = "take"
		}
		c.metrics.commitErrors.WithLabelValues(typ).Inc()
		if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoGroup) {
			c.log.Error("commit failed", "type", typ, "err", err)
		}
	}
	t.notifyDeadLetters()
	return err
}

func (t *Transaction) commitPuts() error {
	c := t.c
	qerr, err := t.writePutCommit()
	if err != nil {
		t.abortPuts()
		return err
	}
	if qerr != nil {
		// The capacity gate makes this impossible; if it happens anyway the
		// events are durable and the next Open recovers them.
		c.log.Error("queue refused committed events", "err", qerr)
		return opErr("commit", qerr)
	}
	return nil
}

// writePutCommit writes and syncs t's commit record (after any puts still
// buffered) and queues the events, all under commitMu shared. err is a
// failure to write (nothing was queued), qerr the queue's refusal.
func (t *Transaction) writePutCommit() (qerr, err error) {
	c := t.c
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	plan := c.planFanout(t)
	recs := plan.records(t.id)
	recs = append(recs, logfile.Record{Type: logfile.RecordCommit, TxID: t.id, CommitType: logfile.RecordPut, Count: uint64(t.puts)})
	// A commit counts puts spilled to earlier files of the dir too: they
	// must be durable first (after), and this file must outlive them
	// (completes), as it must the files of the events it drops.
	var after []logfile.Mark
	completes := plan.dropFiles(t.s.files[:0])
	if t.spilled {
		after, completes = t.spills, append(completes, t.spillFiles()...)
	}
	a, ptrs, err := c.appendRecords(t, recs, after, completes)
	if err == nil {
		err = c.sync(a)
	}
	if err != nil {
		c.undoFanout(plan)
		return nil, opErrNote("commit", err, " (the transaction was rolled back)")
	}
	return c.queuePuts(t, plan, ptrs), nil
}

// abortPuts forgets the transaction's puts after a failed commit or a
// rollback.
func (t *Transaction) abortPuts() {
	c := t.c
	if t.spilled {
		c.forgetInflightPuts(t.id)
	}
	for _, p := range t.permits {
		p.g.gate.release(p.n)
	}
	t.puts, t.spills, t.permits = 0, nil, t.permits[:0]
	t.buf, t.frames = t.buf[:0], t.frames[:0]
}

func (t *Transaction) commitTakes() error {
	notes, err := t.writeTakeCommit()
	if err != nil {
		t.returnTakes()
		return err
	}
	g := t.grp
	g.gate.release(len(t.takes))
	g.counts.taken.Add(int64(len(t.takes) - len(notes)))
	g.counts.deadRejected.Add(int64(len(notes)))
	if len(notes) > 0 {
		t.c.log.Warn("rejected events moved to the dead-letter group", "group", g.cfg.Name, "dead_letter", g.dlq.cfg.Name,
			"events", len(notes))
	}
	t.takes, t.rejected, t.rejectHeld = t.takes[:0], t.rejected[:0], 0
	t.notes = append(t.notes, notes...)
	return nil
}

// writeTakeCommit writes and syncs t's take and commit records (and the
// move record of the events it rejected) and ends its takes in the queue,
// all under commitMu shared. It returns the dead letters it moved. If
// RemoveGroup removed t's group it writes nothing (ErrNoGroup): RemoveGroup
// holds commitMu exclusively, so the removal is before this check or after
// the whole commit.
func (t *Transaction) writeTakeCommit() ([]DeadLetter, error) {
	c := t.c
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if c.groupRemoved(t.grp) {
		return nil, errRemoved(t.grp)
	}
	var m movePlan
	var rejected []eventqueue.Pointer
	var counts []int
	if len(t.rejected) > 0 {
		var err error
		if m, rejected, counts, err = t.rejectPlan(); err != nil {
			return nil, err
		}
	}
	ptrs := t.s.words[:0]
	for _, p := range t.takes {
		ptrs = append(ptrs, uint64(p))
	}
	t.s.words = ptrs
	recs := []logfile.Record{{Type: logfile.RecordTake, TxID: t.id, Group: t.grp.id, Pointers: ptrs}}
	completes := t.takeFiles()
	if len(m.drops) > 0 {
		recs = append(recs, logfile.Record{Type: logfile.RecordTake, TxID: t.id, Group: m.to.id, Pointers: pointerWords(m.drops)})
		completes = filesOf(slices.Clone(completes), m.drops)
	}
	if m.accept > 0 {
		recs = append(recs, logfile.Record{Type: logfile.RecordMove, TxID: t.id, Group: m.to.id, Pointers: pointerWords(rejected[:m.accept])})
	}
	recs = append(recs, logfile.Record{Type: logfile.RecordCommit, TxID: t.id, CommitType: logfile.RecordTake,
		Count: uint64(len(ptrs) + len(m.drops))})
	a, _, err := c.appendRecords(t, recs, nil, completes)
	if err == nil {
		err = c.sync(a)
	}
	if err != nil {
		if m.to != nil {
			c.undoMove(&m)
		}
		return nil, opErrNote("commit", err, " (the taken events were returned to the channel)")
	}
	c.committedTakes(t.grp, t.id, t.takes)
	if m.to == nil {
		return nil, nil
	}
	moved := rejected[:m.moved()]
	var qerr error
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		qerr = c.landQueue(&m, moved)
	}()
	c.landed(&m, qerr)
	return deadLetterNotes(t.grp, moved, counts, m.accept, true), nil
}

// pointerWords returns ps as a take record's pointers.
func pointerWords(ps []eventqueue.Pointer) []uint64 {
	out := make([]uint64, len(ps))
	for i, p := range ps {
		out[i] = uint64(p)
	}
	return out
}

// returnTakes puts the taken events back at the head in their order. After
// Close released the queue it leaves them: they come back at the next Open
// (the last checkpoint holds them in flight, or in the queue, and no commit
// of their takes was written).
func (t *Transaction) returnTakes() {
	c := t.c
	if t.grp == nil {
		return
	}
	t.releaseRejects()
	notes := t.deadLetterReturned()
	t.logDeliveries(t.takes)
	err := c.returnTakes(t.grp, t.id, t.takes)
	if len(t.takes) > 0 {
		t.grp.avail.broadcast()
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		c.log.Error("queue refused returned events", "err", err)
	}
	t.takes = t.takes[:0]
	t.notes = append(t.notes, notes...)
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

// writeRollback writes the rollback record of a put transaction that
// spilled, under commitMu shared: a hint for replay, without an fsync;
// losing it is harmless.
func (t *Transaction) writeRollback() {
	c := t.c
	t.buf, t.frames = t.buf[:0], t.frames[:0]
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return
	}
	rb := logfile.Record{Type: logfile.RecordRollback, TxID: t.id}
	if _, _, err := c.appendRecords(t, []logfile.Record{rb}, nil, nil); err != nil {
		c.log.Warn("write rollback record", "err", err)
	}
}

// The transactions' steps under queueMu. Each unlocks with defer, so that a
// panic never leaves queueMu held. After Close released the queue
// (released), those that would change the ring return ErrClosed and change
// nothing.

// takeHead moves the event at g's head into tx's in-flight takes.
func (c *FileChannel) takeHead(g *groupState, tx uint64) (eventqueue.Pointer, bool, error) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released {
		return 0, false, ErrClosed
	}
	if g.removed {
		return 0, false, errRemoved(g)
	}
	p, ok := g.takeHead(tx)
	return p, ok, nil
}

// untake puts p, the last event tx took, back at g's head.
func (c *FileChannel) untake(g *groupState, tx uint64, p eventqueue.Pointer) error {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released {
		return ErrClosed
	}
	if g.removed {
		return nil
	}
	return g.untake(tx, p)
}

// returnTakes puts tx's takes back at g's head in their order.
func (c *FileChannel) returnTakes(g *groupState, tx uint64, takes []eventqueue.Pointer) error {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released {
		return ErrClosed
	}
	if g.removed {
		return nil
	}
	return g.returnTakes(tx, takes)
}

// committedTakes ends tx's takes after their commit. The caller holds
// commitMu shared and saw the channel open, so the queue is not released.
func (c *FileChannel) committedTakes(g *groupState, tx uint64, takes []eventqueue.Pointer) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	g.committed(tx, takes)
}

// unnamedGroup returns the unnamed group, or nil.
func (c *FileChannel) unnamedGroup() *groupState {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return c.main
}

// addInflightPuts records puts tx spilled to the log.
func (c *FileChannel) addInflightPuts(tx uint64, ptrs []eventqueue.Pointer) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	for _, p := range ptrs {
		c.inflightPuts.Add(tx, p)
	}
}

// forgetInflightPuts drops tx's spilled puts.
func (c *FileChannel) forgetInflightPuts(tx uint64) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	c.inflightPuts.Remove(tx)
}
