package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/flumego/filechannel/channel"
)

// The dead-letter measurement: what counting deliveries costs a consumer.
// A group with GroupConfig.MaxDeliveries stores each event's new count in
// the delivery journal (a store into a memory mapping, no system call) in
// every Take before it returns the event; a group without does nothing
// per Take. The step compares take commits of the same named group g0
// with MaxDeliveries 16 and without, side by side in one run, at batch 100
// (the target) and at batch 10 and 1 (where the commit's fsync weighs
// most).

// deliveryLimit is the MaxDeliveries of the measured group.
const deliveryLimit = 16

// deliveryBatches are the take batches measured; the target is batch 100's.
var deliveryBatches = []int{1, 10, 100}

// deliveryID is the ID of the take commits of batch from g0 with
// MaxDeliveries md (0: without).
func deliveryID(md, batch int) string {
	return fmt.Sprintf("filechannel/maxdeliveries=%d/take/batch=%d", md, batch)
}

// withMaxDeliveries is an openChannel edit that sets one named group, g0,
// with MaxDeliveries md (0: none). With md > 0 Open creates its dead-letter
// group g0.dlq, which no put feeds.
func withMaxDeliveries(md int) func(*channel.Config) {
	return func(cfg *channel.Config) { cfg.Groups = []channel.GroupConfig{{Name: "g0", MaxDeliveries: md}} }
}

// deliveryFill returns how many events the channels of batch hold, and
// whether the step drains them: at batch 100 it does, in every round its
// share, as the other take steps do; at batch 10 and 1 (commits 10 and 100
// times slower per event) it takes for dur, from fills big enough not to
// run dry.
func (b *bench) deliveryFill(batch int) (fill int, drain bool) {
	switch batch {
	case 100:
		return b.sz.takeEvents, true
	case 10:
		return b.sz.takeEvents / 5, false
	default:
		return b.sz.takeEvents / 50, false
	}
}

// groupDeliveryTakes measures durable take commits (an fsync per commit)
// of batch 1, 10 and 100 × 1 KiB from g0 with MaxDeliveries 16 and from g0
// without, interleaved: a channel for each batch and each, filled just
// before (so the takes read the page cache), then drained in take
// transactions of batch by one goroutine. Each result also gets the CPU
// time it used, its rate in every round, and the bytes its data dir grew
// by per event taken (the take and commit records; the same with
// MaxDeliveries, whose counts go to the journal in the checkpoint dir).
func (b *bench) groupDeliveryTakes() error {
	var ms []*meter
	var closers []func() error
	var dataDirs [][]string
	err := func() error {
		for _, batch := range deliveryBatches {
			fillN, drain := b.deliveryFill(batch)
			for _, md := range []int{0, deliveryLimit} {
				name := fmt.Sprintf("groups-deliver-%d-%d", md, batch)
				c, closeC, err := b.openChannel(name, withMaxDeliveries(md))
				if err != nil {
					return err
				}
				closers = append(closers, closeC)
				dataDirs = append(dataDirs, fcConfig(filepath.Join(b.root, name)).DataDirs)
				if err := fill(c, b.body, fillN, 1000); err != nil {
					return err
				}
				g, err := c.Group("g0")
				if err != nil {
					return err
				}
				what := "without MaxDeliveries"
				if md > 0 {
					what = fmt.Sprintf("MaxDeliveries %d", md)
				}
				run := func(budget time.Duration, max int64) (int64, error) {
					var n int64
					for start := time.Now(); n < max; {
						if !drain && !until(start, budget, n, int64(batch), max) {
							break
						}
						k, err := groupTakeTx(g, int(min(int64(batch), max-n)))
						n += int64(k)
						if err != nil {
							return n, err
						}
						if k == 0 {
							return n, fmt.Errorf("group %q ran dry after %d events", g.Name(), n)
						}
					}
					return n, nil
				}
				if batch == 100 {
					run = b.countAllocs(fmt.Sprintf("filechannel group take, %s (batch 100)", what), run)
				}
				m := &meter{
					res: Result{ID: deliveryID(md, batch), System: "filechannel", Op: "g0, " + what + ": take commit",
						Batch: batch, Producers: 1, Groups: len(c.GroupNames()), // g0, and g0.dlq with MaxDeliveries
						Note: "takes read the log from the page cache; with MaxDeliveries every Take notes its count in the " +
							"delivery journal (a store to a memory mapping), and the dead-letter group g0.dlq, fed by no put, exists"},
					max: int64(fillN),
					run: run,
				}
				ms = append(ms, withRounds(withCPU(m)))
			}
		}
		return b.interleaveGrowth(b.sz.dur, ms, dataDirs, " taken", func(m *meter) bool {
			_, drain := b.deliveryFill(m.res.Batch)
			return !drain || m.res.Events == m.max
		})
	}()
	b.reportAllocs()
	return errors.Join(err, closeAll(closers))
}
