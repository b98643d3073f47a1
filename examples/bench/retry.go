package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/flumego/filechannel/channel"
)

// The retry-delay measurement (issue 32): takes from a group with
// GroupConfig.RetryDelays while 100,000 of its events wait for their delay
// (an hour away), against the same group with none waiting, side by side
// in one run. The waiting events are a heap beside the group's ring: a
// Take peeks at its top and takes the ring's head.

// retryWaiting is the number of events made to wait.
const retryWaiting = 100_000

// retryID is the ID of the take commits of g0 with waiting events waiting.
func retryID(waiting int) string {
	return fmt.Sprintf("filechannel/retry-waiting=%d/take/batch=100", waiting)
}

// withRetryDelays is an openChannel edit: one named group g0 with a retry
// delay of an hour, room for waiting plus fillN events, and take
// transactions of up to 10,000 (to make events wait quickly).
func withRetryDelays(waiting, fillN int) func(*channel.Config) {
	return func(cfg *channel.Config) {
		cfg.Capacity = max(waiting+fillN+1000, 10_000)
		cfg.TransactionCapacity = 10_000
		cfg.Groups = []channel.GroupConfig{{Name: "g0", RetryDelays: []time.Duration{time.Hour}}}
	}
}

// makeRetryWaiting puts n events and rolls back their takes from g, in
// transactions of 10,000: they wait for g's delay.
func makeRetryWaiting(c *channel.FileChannel, g *channel.Group, body []byte, n int) error {
	for i := 0; i < n; i += 10_000 {
		k := min(10_000, n-i)
		if err := fill(c, body, k, k); err != nil {
			return err
		}
		tx, err := g.Begin()
		if err != nil {
			return err
		}
		for range k {
			if _, ok, err := tx.Take(); err != nil || !ok {
				return errors.Join(fmt.Errorf("take to make events wait: %v", ok), err, tx.Rollback())
			}
		}
		if err := tx.Rollback(); err != nil {
			return err
		}
	}
	return nil
}

// retryTakes measures durable take commits of batch 100 × 1 KiB from g0
// with 100,000 events waiting for their retry delay and with none,
// interleaved: a channel each, filled just before (so the takes read the
// page cache), then drained in take transactions of 100.
func (b *bench) retryTakes() error {
	var ms []*meter
	var closers []func() error
	err := func() error {
		fillN := b.sz.takeEvents
		for _, waiting := range []int{0, retryWaiting} {
			name := fmt.Sprintf("retry-waiting-%d", waiting)
			c, closeC, err := b.openChannel(name, withRetryDelays(waiting, fillN))
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			g, err := c.Group("g0")
			if err != nil {
				return err
			}
			if err := makeRetryWaiting(c, g, b.body, waiting); err != nil {
				return err
			}
			if err := fill(c, b.body, fillN, 1000); err != nil {
				return err
			}
			run := func(budget time.Duration, max int64) (int64, error) {
				if err := groupTake(g, int(max), 100); err != nil {
					return 0, err
				}
				return max, nil
			}
			m := &meter{
				res: Result{ID: retryID(waiting), System: "filechannel", Op: fmt.Sprintf("g0, %d waiting: take commit", waiting),
					Batch: 100, Producers: 1, Groups: 1,
					Note: "takes read the log from the page cache; the waiting events (an hour away) are a heap beside the ring"},
				max: int64(fillN),
				run: run,
			}
			ms = append(ms, withRounds(withCPU(m)))
		}
		return b.interleave(b.sz.rounds, b.sz.dur, ms)
	}()
	return errors.Join(err, closeAll(closers))
}

// retryTargets checks the retry-delay target: take commits with 100,000
// events waiting >= 0.9 of the rate with none.
func retryTargets(r *Report) []Target {
	name := fmt.Sprintf("retry delays: take commits batch 100, %d waiting / none", retryWaiting)
	with, okw := r.result(retryID(retryWaiting))
	without, oko := r.result(retryID(0))
	if !okw || !oko || without.EventsPerSec == 0 {
		return []Target{{Name: name, Want: ">= 0.9", Got: "not measured", Status: "-"}}
	}
	q, got := rateRatio(with, without)
	st := "MISS"
	if q >= 0.9 {
		st = "PASS"
	}
	return []Target{{Name: name, Want: ">= 0.9", Got: got, Status: st}}
}
