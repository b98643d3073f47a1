package channel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// spillBytes bounds the encoded puts a transaction holds in memory; beyond
// it they are written to the log (not synced) and tracked as in flight.
// A commit of 1,000 events of 1 KiB stays below it, so it is one write.
const spillBytes = 4 << 20

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
	size := c.logs.EncodedSize(&rec)
	if size-logfile.FrameHeaderSize > logfile.MaxPayloadSize {
		return fmt.Errorf("%w: %d bytes encoded, the limit is %d", ErrEventTooLarge, size, logfile.MaxPayloadSize)
	}
	b := t.scratch().batch
	need := int64(b.Size() + size)
	c.makeRoom(t.dir, need)
	if c.logs.Full(t.dir) {
		return fmt.Errorf("%w: %s is full: its room is kept for take commits until a checkpoint frees room for its space reserve",
			ErrInsufficientSpace, c.logs.DirPath(t.dir))
	}
	ok, free, err := c.logs.SpaceOK(t.dir, need, c.cfg.MinimumRequiredSpace)
	if err != nil {
		return opErr("put", err)
	}
	if !ok {
		return insufficientSpace(c.logs.DirPath(t.dir), free, need, c.cfg.MinimumRequiredSpace)
	}
	t.markFilters(c.currentGroups(), e.Headers, t.puts)
	t.noteDedup(e.Headers, t.puts)
	t.markKeys(c.currentGroups(), e.Headers, t.puts)
	held, err := t.acquirePermit(ctx)
	if err != nil {
		t.unmarkFilters(t.puts)
		return err
	}
	n := b.Len()
	if err := b.Add(&rec); err != nil { // sealed by appendRecords
		t.releasePut(held)
		t.unmarkFilters(t.puts)
		return opErr("put", err)
	}
	t.puts++
	if b.Size() >= min(spillBytes, int(c.cfg.MaxFileSize/4)) {
		if err := t.spill(); err != nil {
			// A Put that fails adds nothing: the event leaves the batch,
			// which a failed spill leaves as it was (logfile.Set.Append),
			// so the transaction can go on and commit what it holds.
			b.Truncate(n)
			t.puts--
			t.releasePut(held)
			t.unmarkFilters(t.puts)
			if errors.Is(err, logfile.ErrBatchLost) {
				t.failed = err
			}
			return opErr("put", err)
		}
	}
	t.addPermits(held, t.puts-1)
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
	now := c.commitTime()
	t.checkDups(now)
	plan := c.planFanout(t)
	recs := t.dupRecord(plan.records(t.id))
	if !t.spilled {
		// Its puts all go in this batch: each holds the commit's time.
		// A transaction that spilled keeps 0 in all of them, and its
		// commit is noted in the log set (noteSpilledCommit).
		t.scratch().batch.SetPutTimes(t.scratch().batch.Len(), now)
	}
	recs = append(recs, logfile.Record{Type: logfile.RecordCommit, TxID: t.id, CommitType: logfile.RecordPut, Count: uint64(t.puts), Time: now})
	nbuffered := t.scratch().batch.Len()
	nframes := nbuffered + len(recs)
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
	c.pinSpilledPuts(t, plan, a.W.ID())
	c.noteCommit(t, a, nframes, nbuffered, now)
	t.commitDups(now)
	return c.queuePuts(t, plan, ptrs), nil
}

// noteCommit tells the log set about put commit t, appended as a (its
// last of nframes frames the commit record, after nbuffered puts) at
// time now: the files its events are in (Set.NoteEvents) and, if it
// spilled, its commit for the ids and times of its events
// (Set.NoteSpilledCommit).
func (c *FileChannel) noteCommit(t *Transaction, a logfile.Appended, nframes, nbuffered int, now int64) {
	woid := a.FirstWOID + uint64(nframes-1)
	files := t.s.files[:0]
	if t.spilled {
		files = append(files, t.spillFiles()...)
	}
	if nbuffered > 0 && !slices.Contains(files, a.W.ID()) {
		files = append(files, a.W.ID())
	}
	t.s.files = files
	if t.spilled {
		c.logs.NoteSpilledCommit(files, t.id, logfile.SpilledCommit{WriteOrderID: woid, Time: now})
	}
	c.logs.NoteEvents(files, woid, now)
}

// commitTime is the time a put commit records: the wall clock (or the
// tests' Config.clock) in Unix nanoseconds, at least 1 (0 in a put means
// "see the commit").
func (c *FileChannel) commitTime() int64 {
	if c.cfg.clock != nil {
		return max(c.cfg.clock(), 1)
	}
	return max(time.Now().UnixNano(), 1)
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
	t.clearFilterMarks()
	t.clearKeyMarks()
	t.releaseDups()
	t.clearBatch()
}

// clearBatch drops the puts t has not written.
func (t *Transaction) clearBatch() {
	if t.batch != nil {
		t.batch.Reset()
	}
}

// writeRollback writes the rollback record of a put transaction that
// spilled, under commitMu shared: a hint for replay, without an fsync;
// losing it is harmless.
func (t *Transaction) writeRollback() {
	c := t.c
	t.clearBatch()
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

// The put path's steps under queueMu, unlocked with defer as take.go's.

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
