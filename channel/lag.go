package channel

import (
	"sync"
	"time"

	"github.com/flumego/filechannel/eventqueue"
)

// A group's lag is the age of its oldest queued event: the time since the
// put commit of the event at its head (Event.Time). It is what a
// dashboard shows first of a consumer: how far behind the producers the
// group's takers are, in seconds, whatever the event rate.

// headTime caches the commit time of the event at a group's head, so that
// a scrape reads a log record only when the head moved.
type headTime struct {
	mu   sync.Mutex
	ptr  eventqueue.Pointer
	ok   bool      // ptr's time was read
	time time.Time // zero: unknown (a file older than format version 7)
}

// oldestTime returns the commit time of the event at the head of g's queue
// (head, read under queueMu), reading its record once per head; zero when
// the queue is empty (has false), the time is unknown or the record does
// not read.
func (c *FileChannel) oldestTime(g *groupState, head eventqueue.Pointer, has bool) time.Time {
	if !has {
		return time.Time{}
	}
	h := &g.head
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ok && h.ptr == head {
		return h.time
	}
	t, err := c.eventTime(head)
	if err != nil {
		return time.Time{} // damaged, or its file gone since: the next scrape looks again
	}
	h.ptr, h.ok, h.time = head, true, t
	return t
}

// eventTime reads the commit time of the event p points to.
func (c *FileChannel) eventTime(p eventqueue.Pointer) (time.Time, error) {
	r, err := c.logs.Reader(p.FileID())
	if err != nil {
		return time.Time{}, err
	}
	defer r.Release()
	rec, err := r.ReadRecord(int64(p.Offset()))
	if err != nil {
		return time.Time{}, err
	}
	_, t := c.eventStamp(p.FileID(), r.Framing().Timed(), &rec)
	return t, nil
}

// headOf returns the pointer at the head of g's queue; the caller holds
// queueMu.
func (g *groupState) headOf() (eventqueue.Pointer, bool) {
	if g.queue.Size() == 0 {
		return 0, false
	}
	return g.queue.Get(0), true
}
