package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flumego/filechannel/channel"
)

// The consumer-group measurements (issue 14): what groups cost a producer,
// what they give consumers, and what they add to checkpoints and to Open.
// Each compares channels that differ only in their groups (Config.Groups:
// named groups g0, g1, ...; "unnamed" is Config.Groups nil, a channel
// without groups), side by side in one run.

// groupConfigs returns n named groups g0 to g(n-1); n = 0 is nil (the
// unnamed group alone).
func groupConfigs(n int) []channel.GroupConfig {
	if n == 0 {
		return nil
	}
	gs := make([]channel.GroupConfig, n)
	for i := range gs {
		gs[i].Name = fmt.Sprintf("g%d", i)
	}
	return gs
}

// withGroups is an openChannel edit that sets n named groups.
func withGroups(n int) func(*channel.Config) {
	return func(cfg *channel.Config) { cfg.Groups = groupConfigs(n) }
}

// groupsOf returns c's groups: the named ones, or the unnamed group.
func groupsOf(c *channel.FileChannel) ([]*channel.Group, error) {
	var gs []*channel.Group
	for _, name := range c.GroupNames() {
		g, err := c.Group(name)
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	return gs, nil
}

func groupsName(n int) string {
	if n == 0 {
		return "unnamed"
	}
	return fmt.Sprintf("groups=%d", n)
}

// dirBytes returns the bytes of the regular files under dirs.
func dirBytes(dirs ...string) (int64, error) {
	var n int64
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// groupTakeTx commits one take transaction of up to n events of g and
// returns how many it took.
func groupTakeTx(g *channel.Group, n int) (int, error) { return takeTxOf(g.Begin, n, nil) }

// groupTake takes n events of g in transactions of batch.
func groupTake(g *channel.Group, n, batch int) error {
	for n > 0 {
		k, err := groupTakeTx(g, min(n, batch))
		if err != nil {
			return err
		}
		if k == 0 {
			return fmt.Errorf("group %q ran dry with %d events to take", g.Name(), n)
		}
		n -= k
	}
	return nil
}

// withCPU wraps m's run to add, over its slices, the CPU time of the
// process (user and system, every goroutine's, the channel's background
// work included) to m.res.CPUSeconds, and the CPU time the whole machine
// was busy (from /proc/stat: every process's) to m.res.MachineCPUSeconds.
func withCPU(m *meter) *meter {
	run := m.run
	m.run = func(budget time.Duration, max int64) (int64, error) {
		p0, m0 := processCPU(), machineBusy()
		n, err := run(budget, max)
		m.res.CPUSeconds += (processCPU() - p0).Seconds()
		m.res.MachineCPUSeconds += machineBusy() - m0
		return n, err
	}
	return m
}

// processCPU returns the CPU time the process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy returns the seconds of CPU time the machine's CPUs have been
// busy, from the first line of /proc/stat (in USER_HZ ticks, 100 a second
// on Linux), or 0: user, nice, system, irq, softirq and steal (time the
// hypervisor gave to other guests), not idle nor iowait (nor guest, which
// user includes).
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0
		}
		if i != 3 && i != 4 && i < 8 {
			busy += n
		}
	}
	return float64(busy) / 100
}

// groupPuts measures put commits of one producer at batch 100 to channels
// with the unnamed group alone and with 1, 2 and 4 named groups, and the
// fan-out that groups replace (2 channels, each batch committed to one,
// then to the other), interleaved. Each result also gets the bytes its
// data dirs grew by per event put.
func (b *bench) groupPuts() error {
	const batch = 100
	ev := channel.Event{Body: b.body}
	var ms []*meter
	var closers []func() error
	var dataDirs [][]string
	err := func() error {
		for _, n := range []int{0, 1, 2, 4} {
			name := fmt.Sprintf("groups-put-%d", n)
			c, closeC, err := b.openChannel(name, withGroups(n))
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			m := b.putMeter(c, batch, 1)
			m.res.ID = fmt.Sprintf("filechannel/%s/put/batch=%d", groupsName(n), batch)
			m.res.Op, m.res.Groups = fmt.Sprintf("%s: put commit", groupsName(n)), max(n, 1)
			ms = append(ms, withCPU(m))
			dataDirs = append(dataDirs, fcConfig(filepath.Join(b.root, name)).DataDirs)
		}
		var fan []*channel.FileChannel
		var dirs []string
		for i := range 2 {
			name := fmt.Sprintf("groups-fanout-%d", i)
			c, closeC, err := b.openChannel(name, nil)
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			fan = append(fan, c)
			dirs = append(dirs, fcConfig(filepath.Join(b.root, name)).DataDirs...)
		}
		ms = append(ms, withCPU(&meter{
			res: Result{ID: "filechannel/fanout=2/put/batch=100", System: "filechannel",
				Op: "fan-out to 2 channels: put commit to each", Batch: batch, Producers: 1, Groups: 2,
				Note: "fan-out: each batch is committed to one channel, then to the other; an event counts once"},
			max: b.sz.maxEvents,
			run: func(budget time.Duration, max int64) (int64, error) {
				var n int64
				for start := time.Now(); until(start, budget, n, batch, max); n += batch {
					for _, c := range fan {
						if err := putTx(c.Begin, ev, batch); err != nil {
							return n, err
						}
					}
				}
				return n, nil
			},
		}))
		dataDirs = append(dataDirs, dirs)
		return b.interleaveGrowth(b.sz.dur, ms, dataDirs, "", nil)
	}()
	return errors.Join(err, closeAll(closers))
}

// groupTakes measures take commits of batch 100 from a channel with one
// named group, drained by one goroutine, and from one with 4 named groups,
// each drained by its own goroutine at the same time, interleaved. Each
// channel holds takeEvents events (put once, so 4 × takeEvents to take in
// the second), put just before: the takes read the page cache. Each result
// also gets the bytes its data dir grew by per event taken (the take
// records; every group writes its own).
func (b *bench) groupTakes() error {
	n := b.sz.takeEvents
	var ms []*meter
	var closers []func() error
	var dataDirs [][]string
	err := func() error {
		for _, groups := range []int{1, 4} {
			name := fmt.Sprintf("groups-take-%d", groups)
			c, closeC, err := b.openChannel(name, withGroups(groups))
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			dataDirs = append(dataDirs, fcConfig(filepath.Join(b.root, name)).DataDirs)
			if err := fill(c, b.body, n, 1000); err != nil {
				return err
			}
			gs, err := groupsOf(c)
			if err != nil {
				return err
			}
			left := make([]int, len(gs)) // each group's events not taken yet
			for i := range left {
				left[i] = n
			}
			ms = append(ms, withCPU(&meter{
				res: Result{ID: fmt.Sprintf("filechannel/%s/take/batch=100", groupsName(groups)), System: "filechannel",
					Op: fmt.Sprintf("%s: take commit, a goroutine per group", groupsName(groups)), Batch: 100,
					Producers: groups, Groups: groups, Note: "takes read the log from the page cache"},
				max: int64(n * groups),
				run: func(_ time.Duration, max int64) (int64, error) {
					share := int((max + int64(len(gs)) - 1) / int64(len(gs)))
					took := make([]int, len(gs))
					errs := make([]error, len(gs))
					var wg sync.WaitGroup
					for i, g := range gs {
						wg.Go(func() {
							took[i] = min(share, left[i])
							errs[i] = groupTake(g, took[i], 100)
						})
					}
					wg.Wait()
					var sum int64
					for i := range gs {
						left[i] -= took[i]
						sum += int64(took[i])
					}
					return sum, errors.Join(errs...)
				},
			}))
		}
		return b.interleaveGrowth(time.Hour, ms, dataDirs, " taken", func(m *meter) bool { return m.res.Events == m.max })
	}()
	return errors.Join(err, closeAll(closers))
}

// groupCheckpoints times Checkpoint on channels with the unnamed group
// alone and with 1, 2 and 4 named groups, each of the default capacity
// (1,000,000 per group) and holding stallFill events in every group. In
// each of ckptRounds rounds, each channel in turn gets ckptChurn puts (batch
// 100) and ckptChurn takes from every group (batch 100), untimed, then one
// timed Checkpoint: a backlog that stays, and pages to write. The size is
// the bytes of the files in the checkpoint dir.
func (b *bench) groupCheckpoints() error {
	type subject struct {
		groups int
		c      *channel.FileChannel
		gs     []*channel.Group
		dir    string
		times  []float64
	}
	var subs []*subject
	var closers []func() error
	edit := func(n int) func(*channel.Config) {
		return func(cfg *channel.Config) {
			withGroups(n)(cfg)
			cfg.CheckpointInterval = time.Hour
		}
	}
	err := func() error {
		for _, n := range []int{0, 1, 2, 4} {
			name := fmt.Sprintf("groups-ckpt-%d", n)
			c, closeC, err := b.openChannel(name, edit(n))
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			gs, err := groupsOf(c)
			if err != nil {
				return err
			}
			if err := errors.Join(fill(c, b.body, b.sz.stallFill, 1000), c.Checkpoint()); err != nil {
				return err
			}
			subs = append(subs, &subject{groups: n, c: c, gs: gs, dir: fcConfig(filepath.Join(b.root, name)).CheckpointDir})
		}
		for range b.sz.ckptRounds {
			for _, s := range subs {
				if err := fill(s.c, b.body, b.sz.ckptChurn, 100); err != nil {
					return err
				}
				for _, g := range s.gs {
					if err := groupTake(g, b.sz.ckptChurn, 100); err != nil {
						return err
					}
				}
				start := time.Now()
				if err := s.c.Checkpoint(); err != nil {
					return err
				}
				s.times = append(s.times, ms(time.Since(start)))
			}
		}
		for _, s := range subs {
			total, err := dirBytes(s.dir)
			if err != nil {
				return err
			}
			var perGroup int64
			if s.groups == 0 {
				perGroup = total
			} else if perGroup, err = dirBytes(filepath.Join(s.dir, "group-1")); err != nil {
				return err
			}
			slices.Sort(s.times)
			gc := GroupCheckpoint{Groups: s.groups, Queued: b.sz.stallFill, Capacity: s.c.Cap(), Churn: b.sz.ckptChurn,
				Checkpoints: len(s.times), Millis: s.times[len(s.times)/2], MinMs: s.times[0], MaxMs: s.times[len(s.times)-1],
				Bytes: total, GroupBytes: perGroup}
			if s.groups > 0 {
				// The checkpoint dir's own files: with named groups only,
				// the unnamed group's ring, which no group uses.
				gc.TopBytes = total - int64(s.groups)*perGroup
			}
			b.rep.GroupCheckpoints = append(b.rep.GroupCheckpoints, gc)
			b.logf("  checkpoint, %-8s %7d queued: median %.1f ms (%.1f-%.1f), %.1f MiB in the dir (%.1f MiB per group)",
				groupsName(s.groups), gc.Queued, gc.Millis, gc.MinMs, gc.MaxMs, mib(gc.Bytes), mib(gc.GroupBytes))
		}
		return nil
	}()
	return errors.Join(err, closeAll(closers))
}

// groupReopens fills a channel with one named group and one with 4 with
// groupFill events each (every group holds them all), closes them
// cleanly and times Open, reopens times each, alternating.
func (b *bench) groupReopens() error {
	n := b.sz.groupFill
	type subject struct {
		groups  int
		cfg     channel.Config
		samples []float64
		rec     Recovery
	}
	var subs []*subject
	for _, groups := range []int{1, 4} {
		dir, err := b.fresh(fmt.Sprintf("groups-reopen-%d", groups))
		if err != nil {
			return err
		}
		cfg := fcConfig(dir)
		cfg.Capacity = max(n, channel.DefaultCapacity)
		cfg.Groups = groupConfigs(groups)
		c, err := channel.Open(cfg)
		if err != nil {
			return err
		}
		if err := errors.Join(fill(c, b.body, n, 1000), c.Close()); err != nil {
			return err
		}
		subs = append(subs, &subject{groups: groups, cfg: cfg})
	}
	for range reopens {
		for _, s := range subs {
			rec, err := timedGroupsOpen(s.cfg, s.groups, n)
			if err != nil {
				return err
			}
			s.rec = rec
			s.samples = append(s.samples, rec.Millis)
		}
	}
	for _, s := range subs {
		slices.Sort(s.samples)
		s.rec.Millis, s.rec.MinMs, s.rec.MaxMs = s.samples[len(s.samples)/2], s.samples[0], s.samples[len(s.samples)-1]
		b.addRecovery(s.rec)
		if err := os.RemoveAll(filepath.Dir(s.cfg.CheckpointDir)); err != nil {
			return err
		}
	}
	return nil
}

// timedGroupsOpen is timedOpen for a channel of groups named groups, each
// of which must hold want events after a clean reopen.
func timedGroupsOpen(cfg channel.Config, groups, want int) (Recovery, error) {
	rec, err := timedOpenCheck(cfg, want, func(c *channel.FileChannel) error {
		gs, err := groupsOf(c)
		if err != nil {
			return err
		}
		if len(gs) != groups {
			return fmt.Errorf("reopened with %d groups, want %d", len(gs), groups)
		}
		for _, g := range gs {
			if g.Len() != want {
				return fmt.Errorf("group %q holds %d events after a clean reopen, want %d", g.Name(), g.Len(), want)
			}
		}
		return nil
	})
	if err != nil {
		return rec, err
	}
	if rec.RecoveredFrom != "checkpoint" || rec.Records != 0 {
		return rec, fmt.Errorf("clean reopen recovered from %q reading %d records", rec.RecoveredFrom, rec.Records)
	}
	rec.Kind, rec.Groups = fmt.Sprintf("clean reopen, %d group(s)", groups), groups
	rec.ID = fmt.Sprintf("open/%s/%d", groupsName(groups), want)
	return rec, nil
}

// interleaveGrowth runs ms interleaved (rounds of up to dur each) and sets
// each result's LogBytesPerEvent: what dataDirs[i] grew by per event of
// ms[i] (what, " taken" or "", ends the log line). drained, if set, says
// whether a meter did all its events; one that did not is an error.
func (b *bench) interleaveGrowth(dur time.Duration, ms []*meter, dataDirs [][]string, what string, drained func(*meter) bool) error {
	before := make([]int64, len(ms))
	for i, dirs := range dataDirs {
		var err error
		if before[i], err = dirBytes(dirs...); err != nil {
			return err
		}
	}
	first := len(b.rep.Results)
	if err := b.interleave(b.sz.rounds, dur, ms); err != nil {
		return err
	}
	for i, m := range ms {
		if drained != nil && !drained(m) {
			return fmt.Errorf("%s took %d events of %d", m.res.ID, m.res.Events, m.max)
		}
		after, err := dirBytes(dataDirs[i]...)
		if err != nil {
			return err
		}
		r := &b.rep.Results[first+i]
		r.LogBytesPerEvent = float64(after-before[i]) / float64(max(r.Events, 1))
		b.logf("  %-44s %10.1f data-dir bytes per event%s", r.ID, r.LogBytesPerEvent, what)
	}
	return nil
}
