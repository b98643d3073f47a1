package main

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/prometheus/client_golang/prometheus"
)

// committers is the number of goroutines of the many-small-committers step
// (issue 33, target 2): a server that makes every request durable, each
// request one put commit of one event.
const committers = 64

// Committers is the many-small-committers step's latencies: each commit
// of the committers timed one by one, each fdatasync of the overwrite
// baseline at batch committers beside them, and the fsyncs the channel
// issued.
type Committers struct {
	Committers int     `json:"committers"`
	Commits    int     `json:"commits"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	// FsyncP50 and FsyncP99 are the baseline's fdatasyncs (one per batch
	// of committers events).
	Fsyncs   int     `json:"baseline_fsyncs"`
	FsyncP50 float64 `json:"fsync_p50_ms"`
	FsyncP99 float64 `json:"fsync_p99_ms"`
	// ChannelFsyncs is the fsyncs of data log files the channel issued
	// during the commits (its fsync_duration_seconds count): the commits
	// one covers is Commits / ChannelFsyncs, committers at best.
	ChannelFsyncs int64 `json:"channel_fsyncs"`
	// ChannelFsyncBusy is the share of the committers' time the channel
	// had an fsync in flight (the fsyncs' total time / the time): below 1,
	// the disk waited for the next fsync to start.
	ChannelFsyncBusy float64 `json:"channel_fsync_busy"`
}

// CommitsPerFsync is how many commits one of the channel's fsyncs covered
// on average.
func (x *Committers) CommitsPerFsync() float64 {
	return float64(x.Commits) / float64(max(x.ChannelFsyncs, 1))
}

// manyCommitters measures committers goroutines each committing one 1 KiB
// event at a time, every commit timed, interleaved with the overwrite
// baseline at batch committers (what one fsync covers when it serves all
// of them: a perfect merge of their commits), every fdatasync timed.
func (b *bench) manyCommitters() error {
	var closers []func() error
	err := func() error {
		var syncs []time.Duration
		base, err := b.diskMeterTimed(&closers, true, committers, "committers", &syncs)
		if err != nil {
			return err
		}
		reg := prometheus.NewRegistry()
		c, closeC, err := b.openChannel("committers", func(cfg *channel.Config) { cfg.Registerer = reg })
		if err != nil {
			return err
		}
		closers = append(closers, closeC)
		var lats []time.Duration
		ev := channel.Event{Body: b.body}
		m := withCPU(withRounds(&meter{
			res: Result{ID: fmt.Sprintf("filechannel/put/committers=%d/batch=1", committers), System: "filechannel",
				Op: fmt.Sprintf("put commit, %d committers", committers), Batch: 1, Producers: committers},
			max: b.sz.maxEvents,
			run: func(budget time.Duration, max int64) (int64, error) {
				n, l, err := timedCommitters(c, ev, committers, budget, max)
				lats = append(lats, l...)
				return n, err
			},
		}))
		base = withCPU(base)
		fsyncs0, busy0, err := countFsyncs(reg)
		if err != nil {
			return err
		}
		if err := b.interleave(b.sz.rounds, b.sz.dur, []*meter{base, m}); err != nil {
			return err
		}
		fsyncs, busy, err := countFsyncs(reg)
		if err != nil {
			return err
		}
		x := &Committers{Committers: committers, Commits: len(lats), ChannelFsyncs: fsyncs - fsyncs0, Fsyncs: len(syncs),
			ChannelFsyncBusy: (busy - busy0).Seconds() / m.res.Seconds}
		slices.Sort(lats)
		slices.Sort(syncs)
		x.P50, x.P99, x.Max = ms(pct(lats, 0.50)), ms(pct(lats, 0.99)), ms(lats[len(lats)-1])
		x.FsyncP50, x.FsyncP99 = ms(pct(syncs, 0.50)), ms(pct(syncs, 0.99))
		b.rep.Committers = x
		b.logf("  %d committers: commit p50 %.2f ms, p99 %.2f ms; baseline fdatasync p50 %.2f ms, p99 %.2f ms; "+
			"%.1f commits per channel fsync, an fsync in flight %.0f%% of the time; CPU %.1f us per commit, %.2f cores (machine %.2f)",
			committers, x.P50, x.P99, x.FsyncP50, x.FsyncP99, x.CommitsPerFsync(), 100*x.ChannelFsyncBusy,
			m.res.CPUSeconds*1e6/float64(max(m.res.Events, 1)), m.res.CPUSeconds/m.res.Seconds, m.res.MachineCPUSeconds/m.res.Seconds)
		return nil
	}()
	return errors.Join(err, closeAll(closers))
}

// timedCommitters runs n goroutines each committing one event at a time
// until budget passes or about max events are committed, and returns the
// commits and how long each took.
func timedCommitters(c *channel.FileChannel, ev channel.Event, n int, budget time.Duration, max int64) (int64, []time.Duration, error) {
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, n)
	lats := make([][]time.Duration, n)
	start := time.Now()
	for p := range n {
		wg.Go(func() {
			for until(start, budget, done.Load(), 1, max) {
				t := time.Now()
				if err := putTx(c.Begin, ev, 1); err != nil {
					errs[p] = err
					return
				}
				lats[p] = append(lats[p], time.Since(t))
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return done.Load(), slices.Concat(lats...), errors.Join(errs...)
}

// countFsyncs returns the count and the sum of the channel's
// fsync_duration_seconds histogram on reg.
func countFsyncs(reg *prometheus.Registry) (int64, time.Duration, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == "filechannel_fsync_duration_seconds" {
			var n int64
			var sum float64
			for _, m := range mf.GetMetric() {
				n += int64(m.GetHistogram().GetSampleCount())
				sum += m.GetHistogram().GetSampleSum()
			}
			return n, time.Duration(sum * float64(time.Second)), nil
		}
	}
	return 0, 0, errors.New("no filechannel_fsync_duration_seconds on the registry")
}
