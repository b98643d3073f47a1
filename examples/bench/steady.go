package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The steady-state measurement (issue 33, target 1): one producer
// committing batches of 100 × 1 KiB, durable, and one consumer taking
// batches of 100, running together at a constant backlog of a few log
// files, so that files roll, are consumed, and are deleted or recycled
// while it runs. It compares the producer's rate with
// Config.RecycleLogFiles on (each new file overwrites a consumed one: every
// byte written once) and off (each new file laid out with zeros ahead of
// the writes, Preallocate: every byte written twice), and against the
// overwrite baseline (pwrite into a file written and fsynced earlier +
// fdatasync, batch 100), interleaved. A consumer's take commit is durable
// by default: a second fdatasync per batch the baseline does not pay; with
// Config.TakeSyncDelay (coldTakeSyncDelay) the take records ride on the
// producer's next fdatasync. Both are measured.

// steadyFileSize is the channels' MaxFileSize: small, so that files roll
// (and are recycled) many times during the measurement: a hundredth of its
// events' bytes, at most 8 MiB.
func steadyFileSize(sz sizes) int64 {
	return min(max(sz.maxEvents*1024/100, channel.MinMaxFileSize), 8<<20)
}

// steadyBacklogFiles is the backlog the consumer keeps, in log files.
const steadyBacklogFiles = 3

// steadyID is the ID of the steady state's put commits with recycling on
// or off, and the consumer's take commits durable or lazy (TakeSyncDelay).
func steadyID(recycle, lazy bool) string {
	id := "filechannel/steady/norecycle"
	if recycle {
		id = "filechannel/steady/recycle"
	}
	if lazy {
		id += "/takesyncdelay"
	}
	return id + "/put/batch=100"
}

// steadyBaselineID is the ID of the overwrite baseline beside it.
var steadyBaselineID = diskID(true, 100) + "/beside-steady"

// steady measures the steady state with recycling on and off and the
// overwrite baseline, interleaved.
func (b *bench) steady() error {
	const batch = 100
	var ms []*meter
	var closers []func() error
	var dataDirs [][]string
	err := func() error {
		w, err := newOverwriter(filepath.Join(b.root, "overwrite-steady"), batch, b.sz.overwrite)
		if err != nil {
			return err
		}
		closers = append(closers, w.close)
		var syncs []time.Duration
		w.syncs = &syncs
		closers = append(closers, func() error {
			b.logf("  %s: %d fdatasyncs, mean %.0f us", steadyBaselineID, len(syncs), meanMicros(syncs))
			return nil
		})
		base := w.meter()
		base.res.ID = steadyBaselineID
		base.res.Note = "beside the steady state's channels"
		for _, v := range []struct{ on, lazy bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			m, closeC, dirs, err := b.steadyMeter(v.on, v.lazy, batch)
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			ms = append(ms, m)
			dataDirs = append(dataDirs, dirs)
		}
		ms = append(ms, withRounds(base))
		dataDirs = append(dataDirs, nil)
		return b.interleaveGrowth(b.sz.dur, ms, dataDirs, "", nil)
	}()
	return errors.Join(err, closeAll(closers))
}

// steadyRecycle is the steady state's Config.RecycleLogFiles: the pool
// must hold the files consumed between two checkpoints (files are deleted
// at checkpoints) for every new file to be a recycled one. Here that is
// about 4 (41 files of 8 MiB a second, a checkpoint every 100 ms); with 2,
// half the new files were created and laid out with zeros.
const steadyRecycle = channel.MaxRecycleLogFiles

// openSteady opens the channel of the steady state named name, with
// recycling on or off and lazy take commits or not, and fills its backlog,
// which it returns.
func (b *bench) openSteady(name string, on, lazy bool, reg *prometheus.Registry) (*channel.FileChannel, func() error, int, error) {
	size := steadyFileSize(b.sz)
	c, closeC, err := b.openChannel(name, func(cfg *channel.Config) {
		cfg.MaxFileSize = size
		// Consumed files go soon: 30 checkpoints in a measurement.
		cfg.CheckpointInterval = max(b.sz.dur/30, time.Millisecond)
		if on {
			cfg.RecycleLogFiles = steadyRecycle
		}
		if lazy {
			cfg.TakeSyncDelay = coldTakeSyncDelay
		}
		if reg != nil {
			cfg.Registerer = reg
		}
	})
	if err != nil {
		return nil, nil, 0, err
	}
	backlog := int(steadyBacklogFiles * size / 1100)
	if err := fill(c, b.body, backlog, 1000); err != nil {
		return nil, nil, 0, errors.Join(err, closeC())
	}
	return c, closeC, backlog, nil
}

// steadyMeter opens the channel of the steady state with recycling on or
// off and lazy take commits or not, fills its backlog and returns the meter
// of its producer.
func (b *bench) steadyMeter(on, lazy bool, batch int) (*meter, func() error, []string, error) {
	id := steadyID(on, lazy)
	name := fmt.Sprintf("steady-recycle-%v-lazy-%v", on, lazy)
	reg := prometheus.NewRegistry()
	c, closeC, backlog, err := b.openSteady(name, on, lazy, reg)
	if err != nil {
		return nil, nil, nil, err
	}
	ev := channel.Event{Body: b.body}
	m := &meter{
		res: Result{ID: id, System: "filechannel", Op: "put commit beside a consumer, without RecycleLogFiles",
			Batch: batch, Producers: 1},
		max: b.sz.maxEvents,
		run: func(budget time.Duration, max int64) (int64, error) {
			return steadyRun(c, ev, batch, backlog, budget, max)
		},
	}
	if on {
		m.res.Op = fmt.Sprintf("put commit beside a consumer, RecycleLogFiles %d", steadyRecycle)
	}
	m.res.Note = fmt.Sprintf("MaxFileSize %d KiB, backlog %d events; a consumer takes batches of %d", steadyFileSize(b.sz)>>10, backlog, batch)
	if lazy {
		m.res.Op += fmt.Sprintf(", TakeSyncDelay %v", coldTakeSyncDelay)
	}
	return withRounds(withCPU(m)), b.closeSteady(c, closeC, id, reg), fcConfig(filepath.Join(b.root, name)).DataDirs, nil
}

// closeSteady returns the function that logs what the steady channel c
// (measured as id) recycled, its fsyncs and put commits (from reg, its
// registry), and closes it with closeC. The numbers cover its whole life,
// the fill included.
func (b *bench) closeSteady(c *channel.FileChannel, closeC func() error, id string, reg *prometheus.Registry) func() error {
	return func() error {
		st := c.Stats()
		fsyncs, busy, err := countFsyncs(reg)
		if err != nil {
			return errors.Join(err, closeC())
		}
		commits, commitTime := histogramSum(reg, "filechannel_commit_duration_seconds", "put")
		b.logf("  %s: %d log files recycled, %d pooled, %d files; %d fsyncs of log files, mean %.0f us; %d put commits, mean %.0f us",
			id, st.LogFilesRecycled, st.LogFilesPooled, st.LogFiles, fsyncs, micros(busy, fsyncs), commits, micros(commitTime, commits))
		return closeC()
	}
}

// micros is d / n in microseconds (0 for n 0).
func micros(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}

// meanMicros is the mean of ds in microseconds.
func meanMicros(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return micros(sum, int64(len(ds)))
}

// histogramSum returns the count and the sum of the histogram name on reg
// whose type label is typ (every series when typ is empty); zeros if there
// is none.
func histogramSum(reg *prometheus.Registry, name, typ string) (int64, time.Duration) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, 0
	}
	var n int64
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if typ != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "type" && l.GetValue() == typ }) {
				continue
			}
			n += int64(m.GetHistogram().GetSampleCount())
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return n, time.Duration(sum * float64(time.Second))
}

// steadyRun commits put batches until budget passes or about max events
// are put, while a consumer takes batches whenever more than backlog
// events are queued; it returns the events put.
func steadyRun(c *channel.FileChannel, ev channel.Event, batch, backlog int, budget time.Duration, max int64) (int64, error) {
	stop := consume(c, batch, backlog)
	var n int64
	var err error
	for start := time.Now(); until(start, budget, n, int64(batch), max); n += int64(batch) {
		if err = putTx(c.Begin, ev, batch); err != nil {
			break
		}
	}
	_, cerr := stop()
	return n, errors.Join(err, cerr)
}

// consume starts a consumer that takes batches from c whenever more than
// backlog events are queued; stop ends it and returns the take commits
// that took events, and its error.
func consume(c *channel.FileChannel, batch, backlog int) (stop func() (int64, error)) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var takes int64
	var takeErr error
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if c.Len() <= backlog {
				time.Sleep(100 * time.Microsecond) // the producers are behind
				continue
			}
			n, err := takeTx(c, batch)
			if n > 0 {
				takes++
			}
			if err != nil {
				takeErr = err
				return
			}
		}
	})
	return func() (int64, error) {
		close(done)
		wg.Wait()
		return takes, takeErr
	}
}
