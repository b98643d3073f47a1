package channel

import (
	"fmt"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// appendRecords writes t's batch of put frames followed by extra records to
// t's data dir in one write (writeBatch). It returns where the records
// went and the pointers of the put frames. The caller holds commitMu
// shared. t's batch is consumed; after a failure it holds its puts again.
func (c *FileChannel) appendRecords(t *Transaction, extra []logfile.Record, after []logfile.Mark, completes []uint32) (logfile.Appended, []eventqueue.Pointer, error) {
	b := t.scratch().batch
	nputs := b.Len()
	a, err := c.writeBatch(t.dir, b, extra, after, completes, t.kind == txTake)
	if err != nil {
		return logfile.Appended{}, nil, err
	}
	ptrs := t.s.ptrs[:0]
	for i := range nputs {
		ptrs = append(ptrs, eventqueue.NewPointer(a.W.ID(), uint32(a.Base+int64(b.Offset(i)))))
	}
	t.s.ptrs = ptrs
	b.Reset()
	return a, ptrs, nil
}

// writeRecords writes recs, a transaction of the channel's own (a move of
// dead letters, a redrive, the group catalog), to data dir dir in one
// write, through a batch of its own. completes and drain are the batch's
// (see logfile.Batch). The caller holds commitMu and syncs.
func (c *FileChannel) writeRecords(dir int, recs []logfile.Record, completes []uint32, drain bool) (logfile.Appended, error) {
	return c.writeBatch(dir, c.logs.NewBatch(), recs, nil, completes, drain)
}

// writeBatch adds extra to b and appends b to data dir dir in one write
// (logfile.Set.Append, which gives every record the next write-order id).
// after, completes and drain are the batch's (see logfile.Batch): the
// spilled puts a put commit counts, the files holding the events its
// records complete, whether it consumes events. If it fails, b holds only
// what it held before.
func (c *FileChannel) writeBatch(dir int, b *logfile.Batch, extra []logfile.Record, after []logfile.Mark, completes []uint32, drain bool) (logfile.Appended, error) {
	n := b.Len()
	for i := range extra {
		if err := b.Add(&extra[i]); err != nil {
			b.Truncate(n)
			return logfile.Appended{}, err
		}
	}
	b.After, b.Completes, b.Drain = after, completes, drain
	a, err := c.logs.Append(dir, b)
	if err != nil {
		b.Truncate(n)
		return logfile.Appended{}, err
	}
	c.metrics.bytesWritten.Add(float64(b.Size()))
	return a, nil
}

// spillFiles returns the log files holding t's spilled puts, which its
// commit record completes.
func (t *Transaction) spillFiles() []uint32 {
	var ids []uint32
	for _, m := range t.spills {
		if n := len(ids); n == 0 || ids[n-1] != m.W.ID() {
			ids = append(ids, m.W.ID())
		}
	}
	return ids
}

// takeFiles returns the log files holding the events t took, which its take
// record completes (consecutive duplicates dropped; the set keeps a set).
func (t *Transaction) takeFiles() []uint32 {
	ids := t.s.files[:0]
	for _, p := range t.takes {
		if n := len(ids); n == 0 || ids[n-1] != p.FileID() {
			ids = append(ids, p.FileID())
		}
	}
	t.s.files = ids
	return ids
}

// sync makes a's records durable (shared with concurrent committers),
// unless the channel was configured with NoSync.
func (c *FileChannel) sync(a logfile.Appended) error {
	if c.cfg.NoSync {
		return nil
	}
	if err := c.logs.Sync(a); err != nil {
		return fmt.Errorf("sync %s: %w", a.W.Path(), err)
	}
	return nil
}
