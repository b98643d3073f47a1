package main

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/flumego/filechannel/channel"
)

// The idempotent puts measurement: what Config.Dedup costs a producer. Put
// commits of batch 100 × 1 KiB, each event with its own "id" header, to a
// channel with Dedup on that header and a full window (1,000,000 ids,
// from a fill of as many events, taken since) and to one without Dedup
// that took the same fill, side by side in one run. The heap the window
// takes per id is the difference of the two fills' heap growth.

// dedupIDs is the window's size in the measurement: Dedup's default
// MaxIDs.
const dedupIDs = channel.DefaultDedupMaxIDs

// dedupResultID is the ID of the put commits to the channel with Dedup
// (on) or without.
func dedupResultID(on bool) string {
	if on {
		return "filechannel/dedup=1M/put/batch=100"
	}
	return "filechannel/dedup=none/put/batch=100"
}

// dedupPuts measures durable put commits of batch 100 with and without
// Config.Dedup, interleaved.
func (b *bench) dedupPuts() error {
	var ms []*meter
	var closers []func() error
	err := func() error {
		var grew [2]uint64
		for k, on := range []bool{false, true} {
			before := heapAlloc()
			c, closeC, err := b.openChannel(fmt.Sprintf("dedup-%v", on), func(cfg *channel.Config) {
				cfg.Capacity = 2 * dedupIDs
				if on {
					cfg.Dedup = channel.Dedup{Header: "id", Window: time.Hour}
				}
			})
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			if err := dedupFill(c); err != nil {
				return err
			}
			grew[k] = heapAlloc() - before
			if st := c.Stats(); on && st.DedupIDs != dedupIDs {
				return fmt.Errorf("dedup: the window holds %d ids after the fill, want %d", st.DedupIDs, dedupIDs)
			}
			m := withRounds(dedupMeter(c, b.body, on, b.sz.maxEvents))
			ms = append(ms, m)
		}
		perID := (float64(grew[1]) - float64(grew[0])) / dedupIDs
		b.logf("  the window: %.1f bytes of heap per id (%d ids)", perID, dedupIDs)
		for _, m := range ms {
			m.res.Note = fmt.Sprintf("each event its own id; the window full (%d ids, %.0f B of heap per id)", dedupIDs, perID)
		}
		return b.interleave(b.sz.rounds, b.sz.dur, ms)
	}()
	return errors.Join(err, closeAll(closers))
}

// heapAlloc returns the live heap after a garbage collection.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// dedupFill puts dedupIDs events of 16 bytes, each with its own id, in
// transactions of 1000, then takes them all and checkpoints.
func dedupFill(c *channel.FileChannel) error {
	h := map[string]string{"id": ""}
	ev := channel.Event{Headers: h, Body: make([]byte, 16)}
	for i := 0; i < dedupIDs; i += 1000 {
		tx, err := c.Begin()
		if err != nil {
			return err
		}
		for j := range 1000 {
			h["id"] = "fill-" + strconv.Itoa(i+j)
			if err := tx.Put(ev); err != nil {
				return errors.Join(err, tx.Rollback())
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	for c.Len() > 0 {
		if _, err := takeTx(c, 1000); err != nil {
			return err
		}
	}
	return c.Checkpoint()
}

// dedupMeter is put commits of batch 100 × body to c, each event with a
// new id.
func dedupMeter(c *channel.FileChannel, body []byte, on bool, max int64) *meter {
	const batch = 100
	op := "put commit, without Dedup"
	if on {
		op = "put commit, Dedup with 1M ids in the window"
	}
	h := map[string]string{"id": ""}
	ev := channel.Event{Headers: h, Body: body}
	seq := 0
	return &meter{
		res: Result{ID: dedupResultID(on), System: "filechannel", Op: op, Batch: batch, Producers: 1},
		max: max,
		run: func(budget time.Duration, max int64) (int64, error) {
			start := time.Now()
			var n int64
			for until(start, budget, n, batch, max) {
				tx, err := c.Begin()
				if err != nil {
					return n, err
				}
				for range batch {
					seq++
					h["id"] = "run-" + strconv.Itoa(seq)
					if err := tx.Put(ev); err != nil {
						return n, errors.Join(err, tx.Rollback())
					}
				}
				if err := tx.Commit(); err != nil {
					return n, err
				}
				n += batch
			}
			return n, nil
		},
	}
}

// dedupTargets checks the idempotent puts target on the run's numbers: put
// commits of batch 100 with Dedup and 1M ids in the window >= 0.85 of
// those without.
func dedupTargets(r *Report) []Target {
	return ratioTarget(r, "dedup: put commits batch 100, Dedup with 1M ids / without", dedupResultID(true), dedupResultID(false), 0.85)
}
