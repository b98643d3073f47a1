package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/examples/internal/counter"
)

// source produces numbered events and replicates every batch into each
// leg's channel, in order, saving that leg's cursor after each commit.
type source struct {
	legs           []*leg
	batch, size    int
	target         int64 // stop before this number; 0 = never
	betweenCommits func(from int64) error

	sent    atomic.Int64 // every channel holds the events below this number
	payload []byte
}

// lead is the number to continue from: the leading cursor. A channel whose
// cursor is behind it missed events when the last run stopped between two
// commits.
func (s *source) lead() int64 {
	var lead int64
	for _, l := range s.legs {
		lead = max(lead, l.cursor)
	}
	return lead
}

func (s *source) run(ctx context.Context) error {
	s.payload = make([]byte, s.size)
	for i := range s.payload {
		s.payload[i] = 'a' + byte(i%26)
	}
	// First the lagging channels get what they missed, and only they.
	lead := s.lead()
	for _, l := range s.legs {
		for l.cursor < lead {
			if err := s.send(ctx, l, l.cursor, int(min(int64(s.batch), lead-l.cursor))); err != nil {
				return stopped(ctx, err)
			}
		}
	}
	s.sent.Store(lead)
	for next := lead; s.target == 0 || next < s.target; {
		n := s.batch
		if s.target > 0 {
			n = int(min(int64(n), s.target-next))
		}
		for i, l := range s.legs {
			if err := s.send(ctx, l, next, n); err != nil {
				return stopped(ctx, err)
			}
			if i == 0 && s.betweenCommits != nil {
				if err := s.betweenCommits(next); err != nil {
					return err
				}
			}
		}
		next += int64(n)
		s.sent.Store(next)
	}
	return nil
}

// stopped turns the error of an interrupted send into nil when the run is
// ending.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// send commits events #from..#from+n-1 to l's channel and then saves l's
// cursor. A full channel does not drop the batch: send retries it until
// the sink makes room or the run ends.
func (s *source) send(ctx context.Context, l *leg, from int64, n int) error {
	for {
		err := s.put(ctx, l.ch, from, n)
		if err == nil {
			break
		}
		if !errors.Is(err, channel.ErrChannelFull) {
			return fmt.Errorf("source: %s channel: %w", l.name, err)
		}
		// Put already waited KeepAlive for room (the channel counted it);
		// the batch was rolled back whole, so a retry cannot duplicate part
		// of it.
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	l.cursor = from + int64(n)
	return counter.Save(l.cursorPath, l.cursor)
}

// put is one put transaction: all n events or none. A Put blocks while
// the channel is full; the channel counts and times the wait.
func (s *source) put(ctx context.Context, ch *channel.FileChannel, from int64, n int) error {
	tx, err := ch.Begin()
	if err != nil {
		return err
	}
	for i := range int64(n) {
		if err := tx.PutContext(ctx, s.event(from+i)); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// event is event #seq: its number, a space, the payload. The same number
// always gives the same event, which is what makes a re-send possible.
func (s *source) event(seq int64) channel.Event {
	body := make([]byte, 0, 20+len(s.payload))
	body = strconv.AppendInt(body, seq, 10)
	body = append(body, ' ')
	body = append(body, s.payload...)
	return channel.Event{Headers: map[string]string{"source": "fanout"}, Body: body}
}
