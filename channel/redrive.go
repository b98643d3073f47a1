package channel

import (
	"errors"
	"fmt"
	"slices"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// redriveBatch bounds the events one redrive transaction moves.
const redriveBatch = 4096

// Redrive moves up to n events from the head of the dead-letter group
// from to the tail of group to, the group whose dead-letter group it is
// (the SQS "redrive"), in their order, and
// returns how many it moved: fewer when from holds fewer or to has room
// for fewer (Redrive never drops an event of to to make room). Their
// delivery counts start again at zero. Events from's open transactions
// hold are not moved. Each batch of moves is durable (fsync, unless
// NoSync) before the next starts; on an error, the count says how many
// were moved.
func (c *FileChannel) Redrive(from, to string, n int) (int, error) {
	if n < 0 {
		return 0, fmt.Errorf("filechannel: Redrive: n %d is negative", n)
	}
	src, err := c.Group(from)
	if err != nil {
		return 0, err
	}
	dst, err := c.Group(to)
	if err != nil {
		return 0, err
	}
	switch {
	case !src.g.dlqOnly:
		return 0, fmt.Errorf("filechannel: Redrive: %s is not a dead-letter group", groupLabel(from))
	case dst.g.cfg.DeadLetter != from:
		// Its events left that group, and that group only: any other
		// may hold them still (every group receives every put).
		return 0, fmt.Errorf("filechannel: Redrive: %s is not the dead-letter group of %s: redrive moves dead letters back to the group they left",
			groupLabel(from), groupLabel(to))
	}
	total := 0
	for total < n {
		k, err := c.redrive(src.g, dst.g, min(n-total, redriveBatch))
		total += k
		if err != nil {
			return total, err
		}
		if k == 0 {
			break
		}
	}
	if total > 0 {
		src.g.counts.redriven.Add(int64(total))
		c.log.Info("redrive: events moved back", "from", from, "to", to, "events", total)
	}
	return total, nil
}

// redriveHead removes, under queueMu, up to n events from src's head, as
// many as dst has free permits for (taken here: a redrive never drops).
func (c *FileChannel) redriveHead(src, dst *groupState, n int) ([]eventqueue.Pointer, error) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if src.removed || dst.removed {
		return nil, fmt.Errorf("%w: a group of the redrive was removed", ErrNoGroup)
	}
	k := min(n, src.queue.Size(), dst.gate.free())
	for k > 0 && !dst.gate.tryAcquire(k) {
		k = min(n, src.queue.Size(), dst.gate.free())
	}
	ptrs := make([]eventqueue.Pointer, 0, max(k, 0))
	for range k {
		p, _ := src.queue.RemoveHead()
		ptrs = append(ptrs, p)
	}
	return ptrs, nil
}

// redrive moves up to n events from src's head to dst's tail in one
// durable take transaction.
func (c *FileChannel) redrive(src, dst *groupState, n int) (int, error) {
	c.commitMu.RLock()
	defer c.commitMu.RUnlock()
	if c.closed.Load() {
		return 0, ErrClosed
	}
	ptrs, err := c.redriveHead(src, dst, n)
	if err != nil {
		return 0, err
	}
	if len(ptrs) == 0 {
		return 0, nil
	}
	tx := c.nextTxID.Add(1) - 1
	m := movePlan{to: dst, accept: len(ptrs), acquired: len(ptrs)}
	// Their counts in dst start again: no journal entry of an earlier stay
	// in dst may come back after a crash.
	err = c.eraseDeliveries(dst, slices.Values(ptrs))
	if err == nil {
		var a logfile.Appended
		dir := int(tx % uint64(c.logs.NumDirs())) // as a transaction's (Begin)
		if a, err = c.writeRecords(dir, moveRecords(tx, src, ptrs, &m), filesOf(nil, ptrs), true); err == nil {
			err = c.sync(a)
		}
	}
	var qerr error
	func() {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		if err != nil {
			for i := len(ptrs) - 1; i >= 0; i-- {
				qerr = errors.Join(qerr, src.queue.AddHead(ptrs[i]))
			}
			return
		}
		qerr = c.landQueue(&m, ptrs)
	}()
	if err != nil {
		dst.gate.release(len(ptrs))
		if qerr != nil {
			c.log.Error("queue refused events a failed redrive had taken", "group", src.cfg.Name, "err", qerr)
		}
		return 0, opErrNote("redrive", err, " (the events stay where they were)")
	}
	c.landed(&m, qerr)
	src.gate.release(len(ptrs))
	return len(ptrs), nil
}
