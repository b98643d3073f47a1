package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/examples/internal/counter"
	"github.com/flumego/filechannel/examples/internal/minfree"
)

// source produces numbered events and commits every batch once to the
// channel, which appends it to every group; it saves its cursor after
// each commit.
type source struct {
	ch          *channel.FileChannel
	cursorPath  string
	cursor      int64 // the next number to commit; only the source goroutine touches it after start
	batch, size int
	target      int64 // stop before this number; 0 = never
	afterCommit func(from int64) error

	sent atomic.Int64 // the channel has the events below this number
	full atomic.Int64 // Puts that gave up after KeepAlive (the batch was retried)
	// space waits after a batch refused for disk space, and counts them.
	space   *minfree.Waiter
	putNS   atomic.Int64 // time spent in Puts that returned, in nanoseconds
	inPut   atomic.Int64 // when the Put in progress started (UnixNano), 0 if none
	payload []byte
}

func (s *source) run(ctx context.Context) error {
	s.payload = make([]byte, s.size)
	for i := range s.payload {
		s.payload[i] = 'a' + byte(i%26)
	}
	s.sent.Store(s.cursor)
	for s.target == 0 || s.cursor < s.target {
		if ctx.Err() != nil {
			return nil // stopping; put also looks before every Put
		}
		n := s.batch
		if s.target > 0 {
			n = int(min(int64(n), s.target-s.cursor))
		}
		if err := s.send(ctx, s.cursor, n); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil
			}
			return err
		}
	}
	return nil
}

// send commits events #from..#from+n-1 and then saves the cursor. A full
// group, or a disk short of -min-free, does not drop the batch: send
// retries it until the sink makes room or the run ends.
func (s *source) send(ctx context.Context, from int64, n int) error {
	for {
		err := s.put(ctx, from, n)
		if err == nil {
			break
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return err
		}
		// The batch was rolled back whole, so a retry cannot duplicate
		// part of it.
		switch {
		case errors.Is(err, channel.ErrChannelFull):
			// Put already waited KeepAlive for room in the group the
			// error names.
			s.full.Add(1)
		case errors.Is(err, channel.ErrInsufficientSpace):
			s.space.Wait(ctx, err) // then it checkpoints: the files the sinks drained go
		default:
			return fmt.Errorf("source: %w", err)
		}
	}
	s.sent.Store(from + int64(n))
	if s.afterCommit != nil {
		if err := s.afterCommit(from); err != nil {
			return err
		}
	}
	s.cursor = from + int64(n)
	return counter.Save(s.cursorPath, s.cursor)
}

// put is one put transaction: all n events or none, to every group. A
// Put blocks while a Block group is full.
func (s *source) put(ctx context.Context, from int64, n int) error {
	tx, err := s.ch.Begin()
	if err != nil {
		return err
	}
	for i := range int64(n) {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, tx.Rollback()) // PutContext looks only while it waits
		}
		if err := s.timedPut(ctx, tx, s.event(from+i)); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// timedPut is tx.PutContext, timed: a Put that finds room returns in
// microseconds, so the time in Put is the time the source waited for it.
func (s *source) timedPut(ctx context.Context, tx *channel.Transaction, e channel.Event) error {
	t0 := time.Now()
	s.inPut.Store(t0.UnixNano())
	err := tx.PutContext(ctx, e)
	s.inPut.Store(0) // a report in between misses this Put's time once, never counts it twice
	s.putNS.Add(int64(time.Since(t0)))
	return err
}

// blocked is the time the source has spent in Put, the Put in progress
// included (so it grows while the source waits).
func (s *source) blocked() time.Duration {
	d := time.Duration(s.putNS.Load())
	if t0 := s.inPut.Load(); t0 != 0 {
		d += max(0, time.Since(time.Unix(0, t0)))
	}
	return d
}

// event is event #seq: its number, a space, the payload. The same number
// always gives the same event, which is what makes a re-send possible.
func (s *source) event(seq int64) channel.Event {
	body := make([]byte, 0, 20+len(s.payload))
	body = strconv.AppendInt(body, seq, 10)
	body = append(body, ' ')
	body = append(body, s.payload...)
	return channel.Event{Headers: map[string]string{"source": "fanout", "tag": tagOf(seq)}, Body: body}
}

// tags are the values of the header "tag": event #n has tags[n%10].
var tags = [...]string{"TagA", "TagB", "TagC", "TagD", "TagE", "TagF", "TagG", "TagH", "TagI", "TagJ"}

// tagOf returns the tag of event #seq.
func tagOf(seq int64) string { return tags[seq%int64(len(tags))] }
