package channel

import (
	"fmt"
	"math"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// appendRecords writes t's buffered put frames followed by extra records to
// t's data dir in one write, giving every record the next write-order id.
// It returns the writer, the end offset to sync to, and the pointers of the
// put frames. The caller holds commitMu shared. t's buffer is consumed.
func (c *FileChannel) appendRecords(t *Transaction, extra []logfile.Record) (*logfile.Writer, int64, []eventqueue.Pointer, error) {
	buf, frames := t.buf, t.frames
	nputs := len(frames)
	for i := range extra {
		frames = append(frames, len(buf))
		var err error
		if buf, err = logfile.AppendUnsealed(buf, &extra[i]); err != nil {
			return nil, 0, nil, err
		}
	}
	d := t.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil || d.w.Err() != nil ||
		(d.w.Size() > logfile.HeaderSize && d.w.Size()+int64(len(buf)) > c.cfg.MaxFileSize) {
		if err := c.rollLocked(d); err != nil {
			return nil, 0, nil, err
		}
	}
	w := d.w
	if len(extra) > 0 && extra[0].Type == logfile.RecordCommit {
		// Puts spilled to an earlier file of this dir must be durable
		// before a commit record counts them: that file was synced when
		// it was rolled, unless its writer failed and cut them off. (Those
		// in w itself are covered by the commit's own fsync.)
		for _, m := range t.spills {
			if m.w != w {
				if err := m.w.SyncTo(m.end); err != nil {
					return nil, 0, nil, fmt.Errorf("spilled puts in %s were lost: %w", m.w.Path(), err)
				}
			}
		}
	}
	base := w.Size()
	if base+int64(len(buf)) > math.MaxUint32 {
		return nil, 0, nil, fmt.Errorf("records of %d bytes do not fit a log file", len(buf))
	}
	first := c.nextWOID.Add(uint64(len(frames))) - uint64(len(frames))
	ptrs := t.scratch().ptrs[:0]
	for range nputs {
		ptrs = append(ptrs, 0)
	}
	t.s.ptrs = ptrs
	for i, off := range frames {
		logfile.SetWriteOrderID(buf[off:], first+uint64(i))
		if i < nputs {
			ptrs[i] = eventqueue.NewPointer(w.ID(), uint32(base+int64(off)))
		}
	}
	// Remember which files this file's records complete transactions for
	// (take records, and commits of puts spilled to older files): log
	// deletion keeps this file while those exist, so that a full replay
	// never resurrects a taken event or drops a committed one.
	switch {
	case len(extra) > 0 && extra[0].Type == logfile.RecordTake:
		c.queueMu.Lock()
		for _, p := range extra[0].Pointers {
			if f := eventqueue.Pointer(p).FileID(); f != w.ID() {
				replay.AddTakesFrom(c.takesFrom, w.ID(), f)
			}
		}
		c.queueMu.Unlock()
	case len(extra) > 0 && extra[0].Type == logfile.RecordCommit && t.spilled:
		c.queueMu.Lock()
		for _, p := range c.inflightPuts.Get(t.id) {
			if f := p.FileID(); f != w.ID() {
				replay.AddTakesFrom(c.takesFrom, w.ID(), f)
			}
		}
		c.queueMu.Unlock()
	}
	off, err := w.Write(buf)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("write %s: %w", w.Path(), err)
	}
	d.free.Add(-int64(len(buf)))
	c.metrics.bytesWritten.Add(float64(len(buf)))
	t.buf, t.frames = buf[:0], frames[:0]
	return w, off + int64(len(buf)), ptrs, nil
}

// sync makes w durable up to end (shared with concurrent committers), unless
// the channel was configured with NoSync.
func (c *FileChannel) sync(w *logfile.Writer, end int64) error {
	if c.cfg.NoSync {
		return nil
	}
	if err := w.SyncTo(end); err != nil {
		return fmt.Errorf("sync %s: %w", w.Path(), err)
	}
	return nil
}

// spillMark records where a spill of a transaction's puts ended.
type spillMark struct {
	w   *logfile.Writer
	end int64
}
