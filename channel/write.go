package channel

import (
	"fmt"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// appendRecords writes t's buffered put frames followed by extra records to
// t's data dir in one write (logfile.Set.Append, which gives every record
// the next write-order id). after and completes are the batch's (see
// logfile.Batch): the spilled puts a put commit counts, and the files
// holding the events its records complete. It returns where the records
// went and the pointers of the put frames. The caller holds commitMu
// shared. t's buffer is consumed.
func (c *FileChannel) appendRecords(t *Transaction, extra []logfile.Record, after []logfile.Mark, completes []uint32) (logfile.Appended, []eventqueue.Pointer, error) {
	buf, frames := t.buf, t.frames
	nputs := len(frames)
	for i := range extra {
		frames = append(frames, len(buf))
		var err error
		if buf, err = logfile.AppendUnsealed(buf, &extra[i]); err != nil {
			return logfile.Appended{}, nil, err
		}
	}
	a, err := c.logs.Append(t.dir, &logfile.Batch{Buf: buf, Frames: frames, After: after, Completes: completes,
		Drain: t.kind == txTake, Encrypted: c.logs.Encrypted()})
	if err != nil {
		return logfile.Appended{}, nil, err
	}
	c.metrics.bytesWritten.Add(float64(len(buf)))
	ptrs := t.scratch().ptrs[:0]
	for _, off := range frames[:nputs] {
		ptrs = append(ptrs, eventqueue.NewPointer(a.W.ID(), uint32(a.Base+int64(off))))
	}
	t.s.ptrs = ptrs
	t.buf, t.frames = buf[:0], frames[:0]
	return a, ptrs, nil
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
