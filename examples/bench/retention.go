package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/flumego/filechannel/channel"
)

// The retention measurement: what Config.Retention costs a producer. A put
// looks at its data dir's retained files before its space checks (to delete
// some if the put would otherwise be refused): with retained files there,
// two atomic loads and the cached free space. The step compares put commits
// of batch 100 to a channel with Retention{MaxAge: time.Hour} and to one
// without, side by side in one run; both first took every event of a fill,
// so that the first retains those log files while the second deleted them.

// retentionID is the ID of the put commits to the channel with Retention
// (on) or without.
func retentionID(on bool) string {
	if on {
		return "filechannel/retention=1h/put/batch=100"
	}
	return "filechannel/retention=none/put/batch=100"
}

// retentionFileSize is both channels' MaxFileSize for a fill of n events:
// small enough that the fill rolls about 4 files, which the retaining
// channel keeps; at most 16 MiB.
func retentionFileSize(n int) int64 {
	return min(max(int64(n)*1024/4, channel.MinMaxFileSize), 16<<20)
}

// retentionPuts measures durable put commits of batch 100 × 1 KiB with and
// without Retention, interleaved, after a fill of takeEvents/4 events that
// was taken in full and checkpointed.
func (b *bench) retentionPuts() error {
	const batch = 100
	var ms []*meter
	var closers []func() error
	var dataDirs [][]string
	err := func() error {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("retention-%v", on)
			n := b.sz.takeEvents / 4
			c, closeC, err := b.openChannel(name, func(cfg *channel.Config) {
				cfg.MaxFileSize = retentionFileSize(n)
				if on {
					cfg.Retention = channel.Retention{MaxAge: time.Hour}
				}
			})
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			if err := fill(c, b.body, n, 1000); err != nil {
				return err
			}
			for took := 0; took < n; {
				k, err := takeTx(c, 1000)
				if err != nil {
					return err
				}
				if k == 0 {
					return fmt.Errorf("retention fill ran dry after %d of %d events", took, n)
				}
				took += k
			}
			if err := c.Checkpoint(); err != nil {
				return err
			}
			st := c.Stats()
			if on != (st.RetainedFiles > 0) {
				return fmt.Errorf("retention %v: %d retained log files after the fill was taken", on, st.RetainedFiles)
			}
			b.logf("  retention %v: %d log files, %d retained (%d bytes)", on, st.LogFiles, st.RetainedFiles, st.RetainedBytes)
			m := b.putMeter(c, batch, 1)
			m.res.ID = retentionID(on)
			m.res.Op = "put commit, without Retention"
			if on {
				m.res.Op = "put commit, Retention{MaxAge: 1h}"
			}
			m.res.Note = fmt.Sprintf("MaxFileSize %d KiB; the channel took a fill of %d events before (retained, or deleted)",
				retentionFileSize(n)>>10, n)
			ms = append(ms, withRounds(withCPU(m)))
			dataDirs = append(dataDirs, fcConfig(filepath.Join(b.root, name)).DataDirs)
		}
		return b.interleaveGrowth(b.sz.dur, ms, dataDirs, "", nil)
	}()
	return errors.Join(err, closeAll(closers))
}

// retentionTargets checks the retention target on the run's numbers: put
// commits of batch 100 with Retention{MaxAge: 1h} >= 0.95 of those without
// (the ratio of the rates over all rounds, with the rounds' median and
// range).
func retentionTargets(r *Report) []Target {
	return ratioTarget(r, "retention: put commits batch 100, Retention{MaxAge: 1h} / without", retentionID(true), retentionID(false), 0.95)
}

// ratioTarget is the target name: the rate of the result withID over that
// of withoutID (rateRatio) at least least.
func ratioTarget(r *Report, name, withID, withoutID string, least float64) []Target {
	want := fmt.Sprintf(">= %.2f", least)
	with, okw := r.result(withID)
	without, oko := r.result(withoutID)
	if !okw || !oko || without.EventsPerSec == 0 {
		return []Target{{Name: name, Want: want, Got: "not measured", Status: "-"}}
	}
	q, got := rateRatio(with, without)
	st := "MISS"
	if q >= least {
		st = "PASS"
	}
	return []Target{{Name: name, Want: want, Got: got, Status: st}}
}
