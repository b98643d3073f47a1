package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/flumego/filechannel/channel"
)

// The filter measurements (issue 31): what group filters cost a producer,
// and what they save a consumer. Every event carries a "tag" header,
// drawn from a seeded generator, so that the channels compared get the
// same events in the same order.
//
//   - puts: durable put commits of batch 100 × 1 KiB to a channel with 4
//     named groups g0-g3, g<i> filtering on headers["tag"] == "t<i>" (the
//     tags t0-t3 drawn evenly: each group matches ~25%), against the same
//     channel with 4 unfiltered groups, interleaved. Each Put evaluates the
//     4 filters; the commit queues each event in one group instead of 4
//     and writes a filter skip record per group.
//   - takes: one channel with an unfiltered group "all" and a group
//     "tenth" whose filter, TagFilter("tag", "x"), matches the ~10% of the
//     fill's events tagged x; each group is drained in take commits of
//     batch 100, interleaved, and the time and CPU of each are counted per
//     event *put* (the fill's), not per event taken: what a consumer pays
//     per event of the stream.

// filterHeader is the header the filters read.
const filterHeader = "tag"

// filterGroupsN is the number of groups of the put measurement.
const filterGroupsN = 4

// filterPutID is the ID of the put commits to the channel with 4 filtered
// groups (filtered) or with 4 unfiltered ones.
func filterPutID(filtered bool) string {
	if filtered {
		return fmt.Sprintf("filechannel/groups=%d/filtered/put/batch=100", filterGroupsN)
	}
	return fmt.Sprintf("filechannel/groups=%d/unfiltered/put/batch=100", filterGroupsN)
}

// filterTakeID is the ID of the takes of group "tenth" (filtered) or "all".
func filterTakeID(filtered bool) string {
	if filtered {
		return "filechannel/filter=10%/take/batch=100"
	}
	return "filechannel/filter=none/take/batch=100"
}

// taggedEvents returns an event of body for each tag, with the header
// filterHeader set to it.
func taggedEvents(body []byte, tags ...string) []channel.Event {
	evs := make([]channel.Event, len(tags))
	for i, t := range tags {
		evs[i] = channel.Event{Headers: map[string]string{filterHeader: t}, Body: body}
	}
	return evs
}

// filterGroupConfigs returns groups g0 to g(filterGroupsN-1), g<i> with the
// filter headers["tag"] == "t<i>" if filtered.
func filterGroupConfigs(filtered bool) []channel.GroupConfig {
	gs := groupConfigs(filterGroupsN)
	if filtered {
		for i := range gs {
			gs[i].Filter = fmt.Sprintf(`headers[%q] == "t%d"`, filterHeader, i)
		}
	}
	return gs
}

// putDrawn commits a put transaction of batch events, each evs[pick()].
func putDrawn(c *channel.FileChannel, evs []channel.Event, pick func() int, batch int) error {
	tx, err := c.Begin()
	if err != nil {
		return err
	}
	for range batch {
		if err := tx.Put(evs[pick()]); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// filterPuts measures durable put commits of batch 100 to a channel with 4
// filtered groups and to one with 4 unfiltered groups, interleaved, each
// putting the same sequence of tagged events.
func (b *bench) filterPuts() error {
	const batch = 100
	var ms []*meter
	var closers []func() error
	var dataDirs [][]string
	var chans []*channel.FileChannel
	err := func() error {
		evs := taggedEvents(b.body, "t0", "t1", "t2", "t3")
		for _, filtered := range []bool{false, true} {
			name := fmt.Sprintf("filters-put-%v", filtered)
			c, closeC, err := b.openChannel(name, func(cfg *channel.Config) { cfg.Groups = filterGroupConfigs(filtered) })
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			chans = append(chans, c)
			rng := rand.New(rand.NewPCG(31, 1))
			pick := func() int { return rng.IntN(len(evs)) }
			what := "4 unfiltered groups"
			if filtered {
				what = `4 groups, g<i> filtering on headers["tag"] == "t<i>"`
			}
			ms = append(ms, withRounds(withCPU(&meter{
				res: Result{ID: filterPutID(filtered), System: "filechannel", Op: what + ": put commit",
					Batch: batch, Producers: 1, Groups: filterGroupsN,
					Note: "every event has a tag header, t0-t3 drawn evenly (the same sequence for both channels)"},
				max: b.sz.maxEvents,
				run: func(budget time.Duration, max int64) (int64, error) {
					var n int64
					for start := time.Now(); until(start, budget, n, batch, max); n += batch {
						if err := putDrawn(c, evs, pick, batch); err != nil {
							return n, err
						}
					}
					return n, nil
				},
			})))
			dataDirs = append(dataDirs, fcConfig(filepath.Join(b.root, name)).DataDirs)
		}
		if err := b.interleaveGrowth(b.sz.dur, ms, dataDirs, "", nil); err != nil {
			return err
		}
		return b.logGroupLens(chans[1])
	}()
	return errors.Join(err, closeAll(closers))
}

// logGroupLens logs what each group of c holds and filtered out.
func (b *bench) logGroupLens(c *channel.FileChannel) error {
	gs, err := groupsOf(c)
	if err != nil {
		return err
	}
	for _, g := range gs {
		st := g.Stats()
		b.logf("  group %s (%s): %d queued, %d filtered out", g.Name(), st.Filter, g.Len(), st.FilteredOut)
	}
	return nil
}

// filterTakes measures take commits of batch 100 draining group "all"
// (unfiltered) and group "tenth" (a filter that matches ~10% of the
// events) of one channel filled with takeEvents events just before (the
// takes read the page cache), interleaved. A meter's events are put
// events: in each round a group takes its share of what it received.
func (b *bench) filterTakes() error {
	n := b.sz.takeEvents
	var ms []*meter
	c, closeC, err := b.openChannel("filters-take", func(cfg *channel.Config) {
		cfg.Groups = []channel.GroupConfig{{Name: "all"}, {Name: "tenth", Filter: channel.TagFilter(filterHeader, "x")}}
	})
	if err != nil {
		return err
	}
	err = func() error {
		evs := taggedEvents(b.body, "x", "y")
		rng := rand.New(rand.NewPCG(31, 2))
		pick := func() int { return min(rng.IntN(10), 1) } // x: 1 in 10
		for i := 0; i < n; i += 1000 {
			if err := putDrawn(c, evs, pick, min(1000, n-i)); err != nil {
				return fmt.Errorf("fill: %w", err)
			}
		}
		if err := b.logGroupLens(c); err != nil {
			return err
		}
		for _, name := range []string{"all", "tenth"} {
			g, err := c.Group(name)
			if err != nil {
				return err
			}
			ms = append(ms, withRounds(withCPU(filterTakeMeter(g, n, name == "tenth"))))
		}
		if err := b.interleave(b.sz.rounds, time.Hour, ms); err != nil {
			return err
		}
		return b.logGroupLens(c)
	}()
	return errors.Join(err, closeC())
}

// filterTakeMeter drains g, which received total of the n events put, in
// take commits of 100: a slice of max put events takes g's share of them
// (all it has left in the last one).
func filterTakeMeter(g *channel.Group, n int, filtered bool) *meter {
	total := g.Len()
	var done int64 // put events covered
	taken := 0
	what := "unfiltered group: take commit"
	if filtered {
		what = `group whose filter (headers["tag"] in ["x"]) matches ~10%: take commit`
	}
	return &meter{
		res: Result{ID: filterTakeID(filtered), System: "filechannel", Op: what, Batch: 100, Producers: 1, Groups: 2,
			Note: fmt.Sprintf("events are put events: the group received %d of the %d put and drains them all; "+
				"takes read the log from the page cache", total, n)},
		max: int64(n),
		run: func(_ time.Duration, max int64) (int64, error) {
			done += max
			want := int(int64(total) * done / int64(n)) // taken by the end of this slice
			for taken < want {
				k, err := groupTakeTx(g, min(100, want-taken))
				taken += k
				if err != nil {
					return max, err
				}
				if k == 0 {
					return max, fmt.Errorf("group %q ran dry after %d of %d events", g.Name(), taken, total)
				}
			}
			return max, nil
		},
	}
}

// filterTargets checks the filter targets on the run's numbers: put
// commits with 4 filtered groups >= 0.9 of those with 4 unfiltered ones;
// the time a group whose filter matches 10% takes per event put <= 1/5 of
// an unfiltered group's (its rate in put events per second >= 5 times).
// Both say the CPU per event of each side.
func filterTargets(r *Report) []Target {
	cpu := func(x Result) float64 { return x.CPUSeconds * 1e6 / float64(max(x.Events, 1)) }
	var ts []Target
	for _, x := range []struct {
		name       string
		aID, bID   string
		least      float64
		cpuPerWhat string
	}{
		{"filters: puts batch 100, 4 groups each filtering on a header (~25% each) / 4 unfiltered groups",
			filterPutID(true), filterPutID(false), 0.9, "event"},
		{"filters: takers' time per event put, unfiltered group / group whose filter matches 10%",
			filterTakeID(true), filterTakeID(false), 5, "event put"},
	} {
		want := fmt.Sprintf(">= %g", x.least)
		a, oka := r.result(x.aID)
		bb, okb := r.result(x.bID)
		if !oka || !okb || a.EventsPerSec == 0 || bb.EventsPerSec == 0 {
			ts = append(ts, Target{Name: x.name, Want: want, Got: "not measured", Status: "-"})
			continue
		}
		q, got := rateRatio(a, bb)
		got += fmt.Sprintf("; CPU %.2f / %.2f us/%s (%.2fx)", cpu(a), cpu(bb), x.cpuPerWhat, cpu(bb)/max(cpu(a), 1e-9))
		st := "MISS"
		if q >= x.least {
			st = "PASS"
		}
		ts = append(ts, Target{Name: x.name, Want: want, Got: got, Status: st})
	}
	return ts
}
