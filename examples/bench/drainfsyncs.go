package main

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/prometheus/client_golang/prometheus"
)

// The fsyncs a drain adds (issue 33, target 3): producers committing put
// batches into one data dir, alone and with a drain taking batches beside
// them, on fresh channels alike, counting the fsyncs of data log files
// (filechannel_fsync_duration_seconds). A take commit that meets the
// producers' commits shares their fsync (the group commit); the target is
// that a drain adds at most 10 % to theirs. The drain takes full batches of
// 100 from a backlog put first, and then whenever 100 events are queued,
// until the producers are done. With Config.TakeSyncDelay the
// take commits lead no fsync of their own while put commits keep coming.
// (channel's TestDrainBesideProducersFsyncs is the same measurement.)

// DrainFsyncs is one configuration's counts, summed over the rounds.
type DrainFsyncs struct {
	TakeSyncDelayMillis float64 `json:"take_sync_delay_ms"`
	Rounds              int     `json:"rounds"`
	// Alone and With are the fsyncs of the producers' commits alone and
	// with the drain beside them; TakeCommits the drain's commits.
	Alone       int64 `json:"fsyncs_alone"`
	With        int64 `json:"fsyncs_with_drain"`
	TakeCommits int64 `json:"take_commits"`
}

// Ratio is the fsyncs with the drain over the producers' alone.
func (x DrainFsyncs) Ratio() float64 { return float64(x.With) / float64(max(x.Alone, 1)) }

const (
	drainProducers = 4   // producers committing put batches
	drainPutBatch  = 10  // events per put commit
	drainBacklog   = 100 // put batches of 100 queued for the drain first
)

// drainFsyncs measures the fsyncs a drain adds, by default and with
// TakeSyncDelay 10 ms, in rounds alternating alone and with the drain.
func (b *bench) drainFsyncs() error {
	commits := max(50, int(b.sz.maxEvents/int64(drainProducers*drainPutBatch*20)))
	for _, delay := range []time.Duration{0, 10 * time.Millisecond} {
		x := DrainFsyncs{TakeSyncDelayMillis: float64(delay) / float64(time.Millisecond), Rounds: b.sz.rounds}
		for range b.sz.rounds {
			for _, drain := range []bool{false, true} {
				n, takes, err := b.drainRound(delay, commits, drain)
				if err != nil {
					return err
				}
				if drain {
					x.With += n
					x.TakeCommits += takes
				} else {
					x.Alone += n
				}
			}
		}
		b.rep.DrainFsyncs = append(b.rep.DrainFsyncs, x)
		b.logf("  TakeSyncDelay %v: %d producers x %d commits of %d, %d rounds: %d fsyncs alone, %d with a drain of %d take commits (%.2fx)",
			delay, drainProducers, commits, drainPutBatch, x.Rounds, x.Alone, x.With, x.TakeCommits, x.Ratio())
	}
	return nil
}

// drainRound opens a fresh channel with TakeSyncDelay delay and counts the
// fsyncs of its data log files while drainProducers producers each commit
// commits put batches, with a drain beside them if drain. It returns the fsyncs and
// the drain's take commits.
func (b *bench) drainRound(delay time.Duration, commits int, drain bool) (int64, int64, error) {
	reg := prometheus.NewRegistry()
	c, closeC, err := b.openChannel("drain-fsyncs", func(cfg *channel.Config) {
		cfg.TakeSyncDelay = delay
		cfg.Registerer = reg
	})
	if err != nil {
		return 0, 0, err
	}
	n, takes, err := countDrainFsyncs(c, reg, b.body, commits, drain)
	return n, takes, errors.Join(err, closeC())
}

// countDrainFsyncs is drainRound's measurement on c (registered on reg).
func countDrainFsyncs(c *channel.FileChannel, reg *prometheus.Registry, body []byte, commits int, drain bool) (int64, int64, error) {
	if drain {
		if err := fill(c, body, drainBacklog*100, 100); err != nil {
			return 0, 0, err
		}
	}
	before, _, err := countFsyncs(reg)
	if err != nil {
		return 0, 0, err
	}
	ev := channel.Event{Body: body}
	errs := make([]error, drainProducers+1)
	stop := func() (int64, error) { return 0, nil }
	if drain { // only full batches: it keeps up with the producers
		stop = consume(c, 100, 99)
	}
	var wg sync.WaitGroup
	for p := range drainProducers {
		wg.Go(func() {
			for range commits {
				if errs[p] = putTx(c.Begin, ev, drainPutBatch); errs[p] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	takes, err := stop()
	errs[drainProducers] = err
	after, _, err := countFsyncs(reg)
	if err := errors.Join(append(errs, err)...); err != nil {
		return 0, 0, fmt.Errorf("drain fsyncs: %w", err)
	}
	return after - before, takes, nil
}
