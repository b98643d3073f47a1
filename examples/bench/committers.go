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
	dto "github.com/prometheus/client_model/go"
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

// committersSteadyID is the ID of the committers in the steady state:
// beside a consumer, every new log file a recycled one.
var committersSteadyID = fmt.Sprintf("filechannel/put/committers=%d/batch=1/steady-recycle", committers)

// manyCommitters measures committers goroutines each committing one 1 KiB
// event at a time, every commit timed, interleaved with the overwrite
// baseline at batch committers (what one fsync covers when it serves all
// of them: a perfect merge of their commits), every fdatasync timed. It
// measures two channels: one alone, whose log files are laid out with
// zeros as it goes (every byte written twice), and one in the steady state
// (steady.go: a consumer beside it, consumed files recycled), whose
// commits overwrite old bytes as the baseline's do.
func (b *bench) manyCommitters() error {
	var closers []func() error
	err := func() error {
		var syncs []time.Duration
		base, err := b.diskMeterTimed(&closers, true, committers, "committers", &syncs)
		if err != nil {
			return err
		}
		alone, err := b.committersMeter(&closers, false)
		if err != nil {
			return err
		}
		steady, err := b.committersMeter(&closers, true)
		if err != nil {
			return err
		}
		base = withCPU(base)
		if err := b.interleave(b.sz.rounds, b.sz.dur, []*meter{base, alone.m, steady.m}); err != nil {
			return err
		}
		slices.Sort(syncs)
		for _, c := range []*committersRun{alone, steady} {
			x, err := c.stats(syncs)
			if err != nil {
				return err
			}
			if c == alone {
				b.rep.Committers = x
			} else {
				b.rep.CommittersSteady = x
			}
			b.logf("  %s: commit p50 %.2f ms, p99 %.2f ms; baseline fdatasync p50 %.2f ms, p99 %.2f ms; "+
				"%.1f commits per channel fsync, an fsync in flight %.0f%% of the time; CPU %.1f us per commit, %.2f cores (machine %.2f)",
				c.m.res.ID, x.P50, x.P99, x.FsyncP50, x.FsyncP99, x.CommitsPerFsync(), 100*x.ChannelFsyncBusy,
				c.m.res.CPUSeconds*1e6/float64(max(c.m.res.Events, 1)), c.m.res.CPUSeconds/c.m.res.Seconds, c.m.res.MachineCPUSeconds/c.m.res.Seconds)
		}
		return nil
	}()
	return errors.Join(err, closeAll(closers))
}

// committersRun is one channel of the many-committers step: its meter,
// the latencies of its commits, and its registry's fsyncs before.
type committersRun struct {
	m       *meter
	lats    []time.Duration
	reg     *prometheus.Registry
	fsyncs0 int64
	busy0   time.Duration
}

// committersMeter opens the channel of the many-committers step, alone or
// in the steady state (with a consumer), and returns its run.
func (b *bench) committersMeter(closers *[]func() error, steady bool) (*committersRun, error) {
	x := &committersRun{reg: prometheus.NewRegistry()}
	id := fmt.Sprintf("filechannel/put/committers=%d/batch=1", committers)
	op := fmt.Sprintf("put commit, %d committers", committers)
	var c *channel.FileChannel
	backlog := 0
	var err error
	if steady {
		var closeC func() error
		id, op = committersSteadyID, op+fmt.Sprintf(" beside a consumer, RecycleLogFiles %d, TakeSyncDelay", steadyRecycle)
		if c, closeC, backlog, err = b.openSteady("committers-steady", true, true, x.reg); err != nil {
			return nil, err
		}
		*closers = append(*closers, b.closeSteady(c, closeC, id, x.reg))
	} else {
		var closeC func() error
		if c, closeC, err = b.openChannel("committers", func(cfg *channel.Config) { cfg.Registerer = x.reg }); err != nil {
			return nil, err
		}
		*closers = append(*closers, closeC)
	}
	ev := channel.Event{Body: b.body}
	x.m = withCPU(withRounds(&meter{
		res: Result{ID: id, System: "filechannel", Op: op, Batch: 1, Producers: committers},
		max: b.sz.maxEvents,
		run: func(budget time.Duration, max int64) (int64, error) {
			stop := func() (int64, error) { return 0, nil }
			if steady {
				stop = consume(c, 100, backlog)
			}
			n, l, err := timedCommitters(c, ev, committers, budget, max)
			x.lats = append(x.lats, l...)
			_, cerr := stop()
			return n, errors.Join(err, cerr)
		},
	}))
	x.fsyncs0, x.busy0, err = countFsyncs(x.reg)
	return x, err
}

// stats returns the latencies of x's commits, beside the baseline's
// fdatasyncs (sorted), and the fsyncs its channel issued meanwhile.
func (x *committersRun) stats(syncs []time.Duration) (*Committers, error) {
	fsyncs, busy, err := countFsyncs(x.reg)
	if err != nil {
		return nil, err
	}
	if len(x.lats) == 0 || len(syncs) == 0 {
		return nil, errors.New("many committers: no commits or no baseline fdatasyncs timed")
	}
	out := &Committers{Committers: committers, Commits: len(x.lats), ChannelFsyncs: fsyncs - x.fsyncs0, Fsyncs: len(syncs),
		ChannelFsyncBusy: (busy - x.busy0).Seconds() / x.m.res.Seconds}
	slices.Sort(x.lats)
	out.P50, out.P99, out.Max = ms(pct(x.lats, 0.50)), ms(pct(x.lats, 0.99)), ms(x.lats[len(x.lats)-1])
	out.FsyncP50, out.FsyncP99 = ms(pct(syncs, 0.50)), ms(pct(syncs, 0.99))
	return out, nil
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
	n, sum := histogramSum(reg, "filechannel_fsync_duration_seconds", "")
	if n == 0 {
		if mfs, err := reg.Gather(); err != nil || !slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool {
			return mf.GetName() == "filechannel_fsync_duration_seconds"
		}) {
			return 0, 0, errors.Join(err, errors.New("no filechannel_fsync_duration_seconds on the registry"))
		}
	}
	return n, sum, nil
}
