package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/examples/internal/counter"
)

// sink drains one consumer group in batches and delivers the events in
// sequence. Its position (the next number it expects) is saved before each
// take commits, so a crash in between makes the group hand the batch out
// again and the sink skips it: the destination gets every event once.
type sink struct {
	name      string
	g         *channel.Group
	statePath string
	batch     int
	delay     time.Duration // a slow destination: the pause per batch
	drops     bool          // the group drops events when full, or has a filter: a gap is counted, not an error
	filtered  bool          // the group has a filter (its gaps are events it did not match)
	out       io.Writer
	check     string // what a gap's error tells the operator to run

	next        atomic.Int64 // the next number expected
	delivered   atomic.Int64 // events delivered this run
	redelivered atomic.Int64 // events seen again and skipped
	missed      atomic.Int64 // numbers the group never received (dropped, or filtered out), this run
}

// run drains the group until the run ends or, with target > 0, until the
// sink has delivered every event below target. A sink whose group drops
// events or has a filter stops when the source is done (srcDone) and the
// group is empty: what it has not received by then was dropped or
// filtered out.
func (s *sink) run(ctx, srcDone context.Context, target int64, start time.Time) error {
	wait := ctx
	if s.gaps() {
		wait = srcDone
	}
	for {
		if ctx.Err() != nil {
			return nil // stopping, events left or not
		}
		if target > 0 && s.next.Load() >= target {
			s.done(target, start)
			return nil
		}
		err := s.deliverBatch(ctx, wait)
		switch {
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return nil
		case s.gaps() && errors.Is(err, context.Canceled) && srcDone.Err() != nil:
			// Everything the group will ever receive up to target is
			// delivered: the rest was dropped while it was full, or
			// filtered out.
			if missed := target - s.next.Load(); missed > 0 {
				s.missed.Add(missed)
				if err := counter.Save(s.statePath, target); err != nil {
					return fmt.Errorf("%s sink: %w", s.name, err)
				}
				s.next.Store(target)
			}
		case err != nil:
			return fmt.Errorf("%s sink: %w", s.name, err)
		}
	}
}

// gaps reports whether the group may skip numbers: it drops events when
// full, or has a filter.
func (s *sink) gaps() bool { return s.drops || s.filtered }

// missedWhy says why the group never received the numbers s.missed counts.
func (s *sink) missedWhy() string {
	switch {
	case s.drops && s.filtered:
		return "filtered out or dropped while full"
	case s.filtered:
		return "filtered out"
	}
	return "dropped while full"
}

func (s *sink) done(target int64, start time.Time) {
	if d := s.missed.Load(); d > 0 {
		fmt.Fprintf(s.out, "fanout: %s sink has reached #%d, after %.2fs; its group never received %d events (%s)\n",
			s.name, target-1, time.Since(start).Seconds(), d, s.missedWhy())
		return
	}
	fmt.Fprintf(s.out, "fanout: %s sink has delivered every event up to #%d, after %.2fs\n",
		s.name, target-1, time.Since(start).Seconds())
}

// deliverBatch is one take transaction: it waits (until wait ends) for the
// first event, takes what else is there up to a batch, delivers, saves the
// position and commits. On any failure before the commit it rolls back,
// and the events return to the head of the group for the next attempt.
func (s *sink) deliverBatch(ctx, wait context.Context) (err error) {
	tx, err := s.g.Begin()
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	ev, err := tx.TakeContext(wait)
	if err != nil {
		return err
	}
	events := []channel.Event{ev}
	for len(events) < s.batch {
		ev, ok, err := tx.Take()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		events = append(events, ev)
	}

	next := s.next.Load()
	var fresh, repeats, missed int64
	for _, ev := range events {
		seq, err := parseSeq(ev.Body)
		if err != nil {
			return err // a processing error: roll back, nothing is lost
		}
		switch {
		case seq < next:
			repeats++ // already delivered: a source re-send or a take the last run did not commit
		case seq > next && !s.gaps():
			return fmt.Errorf("gap: expected #%d, got #%d: events #%d..#%d are missing; the batch is rolled back and the run stopped: %s (to accept the loss and go on from #%d: echo %d > %s)",
				next, seq, next, seq-1, s.check, seq, seq, s.statePath)
		default:
			missed += seq - next // the group was full (a drop policy), or its filter did not match
			next = seq + 1
			fresh++
		}
	}
	if s.delay > 0 { // "delivering" to a slow destination
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := counter.Save(s.statePath, next); err != nil {
		return err
	}
	// Delivered: from here on these numbers are repeats, whatever the
	// commit does.
	s.next.Store(next)
	s.delivered.Add(fresh)
	s.redelivered.Add(repeats)
	s.missed.Add(missed)
	committed = true // a failed Commit rolls back by itself
	return tx.Commit()
}

func parseSeq(body []byte) (int64, error) {
	for i, b := range body {
		if b == ' ' {
			return strconv.ParseInt(string(body[:i]), 10, 64)
		}
	}
	return 0, fmt.Errorf("event without a sequence number: %.20q", body)
}
