package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flumego/filechannel/channel"
)

// The reset measurements (issue 30): what FileChannel.ResetGroup costs
// over retained logs. A channel with Retention{MaxAge: 24h} and one named
// group "r" (Capacity resetFill, so that Block takes a reset of every
// event) is filled with resetFill events of 1 KiB in put commits of
// 1,000 (the last one of resetNearEnd events), its MaxFileSize set so that
// the fill rolls about 16 files. Then r takes every event and the channel
// checkpoints: no group holds the full log files any more, and retention
// keeps them. These are the retained logs the resets read. On that channel,
// in this order:
//
//  1. near the end: ResetGroup("r", AtTime(t)), t read just before the
//     fill's last put commit (so resetNearEnd events are queued again),
//     against a plain read of one full log file (seqReader), interleaved,
//     first from the page cache, then with the log files dropped from it
//     before every slice (dropLogs); dropped, the bytes each side read
//     from the disk (/proc/self/io read_bytes).
//  2. earliest: ResetGroup("r", Earliest()) (every event queued again)
//     against a plain read of all the channel's log files, interleaved, from
//     the page cache and dropped, as above.
//  3. memory: one more reset to Earliest, untimed, with the heap it
//     allocated and the peak of the heap's objects meanwhile.
//
// Before every timed reset an untimed ResetGroup("r", Latest()) empties
// r's queue, so that each timed one rebuilds it from nothing. A reset
// appends its own records to the log (take or move records of 8 bytes
// per pointer, a commit record, an fsync that the reset's time includes);
// the read side lists the log files again at each slice, so both read the
// files as they are, and the earliest ratio compares the time per log byte.

// resetMaxAge is the channel's Retention.MaxAge: longer than any run.
const resetMaxAge = 24 * time.Hour

// resetFileSize is the channel's MaxFileSize for a fill of n events of
// 1 KiB: about 16 files (64 MiB in full mode, 4 MiB quick).
func resetFileSize(n int) int64 {
	return max(int64(n)*1024/16, channel.MinMaxFileSize)
}

// resetNearEnd is the number of events of the fill's last put commit, the
// events a reset to a time just before it queues again.
func resetNearEnd(n int) int { return max(min(1000, n/100), 1) }

// resetID is the ID of the timed resets to pos ("earliest", "near-end")
// with the log files in cache ("page-cache", "dropped").
func resetID(pos, cache string) string { return "filechannel/reset/" + pos + "/" + cache }

// resetReadID is the ID of the plain reads beside the resets to pos.
func resetReadID(pos, cache string) string { return "disk/read/beside-reset-" + pos + "/" + cache }

var resetCaches = []string{"page-cache", "dropped"}

// ResetReport is the reset step's channel and the heap of its resets.
type ResetReport struct {
	Events        int   `json:"events"`        // filled, then taken by r
	MaxFileSize   int64 `json:"max_file_size"` // the channel's: one log file's worth
	LogFiles      int   `json:"log_files"`     // after the fill was taken and checkpointed
	RetainedFiles int   `json:"retained_files"`
	RetainedBytes int64 `json:"retained_bytes"`
	// Memory is the heap of one reset to Earliest at the default GOGC and
	// at GOGC 10.
	Memory []ResetMemory `json:"memory"`
}

// ResetMemory is the heap of one reset of a group to Earliest.
type ResetMemory struct {
	GOGC     int `json:"gogc"`     // debug.SetGCPercent during the reset (100: the default)
	Events   int `json:"events"`   // queued by the reset
	Capacity int `json:"capacity"` // the group's (its ring: 8 bytes per slot, allocated at Open)
	// AllocBytes and Mallocs are what the process allocated during the
	// reset (runtime.MemStats TotalAlloc and Mallocs).
	AllocBytes uint64 `json:"alloc_bytes"`
	Mallocs    uint64 `json:"mallocs"`
	// PeakGrowth is the most the heap's objects (live, and dead not yet
	// swept) grew over their size before the reset (after a GC), sampled
	// every millisecond; Retained what they grew by after the reset and a
	// GC.
	PeakGrowth int64 `json:"peak_growth_bytes"`
	Retained   int64 `json:"retained_bytes"`
}

// resets runs the three reset measurements.
func (b *bench) resets() error {
	n := b.sz.resetFill
	near := resetNearEnd(n)
	name := "reset"
	dataDir := fcConfig(filepath.Join(b.root, name)).DataDirs[0]
	c, closeC, err := b.openChannel(name, func(cfg *channel.Config) {
		cfg.Capacity = max(n, channel.DefaultCapacity)
		cfg.Groups = []channel.GroupConfig{{Name: "r", Capacity: cfg.Capacity}}
		cfg.MaxFileSize = resetFileSize(n)
		cfg.Retention = channel.Retention{MaxAge: resetMaxAge}
		cfg.CheckpointInterval = time.Hour
	})
	if err != nil {
		return err
	}
	err = func() error {
		if err := fill(c, b.body, n-near, 1000); err != nil {
			return err
		}
		t := time.Now()
		if err := fill(c, b.body, near, near); err != nil {
			return err
		}
		g, err := c.Group("r")
		if err != nil {
			return err
		}
		if err := errors.Join(groupTake(g, n, 1000), c.Checkpoint()); err != nil {
			return err
		}
		st := c.Stats()
		if st.RetainedFiles == 0 {
			return fmt.Errorf("reset fill: no log file retained after r took every event (%d log files)", st.LogFiles)
		}
		b.rep.Reset = &ResetReport{Events: n, MaxFileSize: resetFileSize(n), LogFiles: st.LogFiles,
			RetainedFiles: st.RetainedFiles, RetainedBytes: st.RetainedBytes}
		b.logf("  %d events in %d log files of up to %d KiB, %d retained (%.0f MiB)", n, st.LogFiles,
			resetFileSize(n)>>10, st.RetainedFiles, mib(st.RetainedBytes))
		logs, err := logFiles(dataDir)
		if err != nil {
			return err
		}
		for _, cache := range resetCaches {
			if err := b.resetVsRead(c, dataDir, "near-end", cache, channel.AtTime(t), near, logs[:1]); err != nil {
				return err
			}
		}
		for _, cache := range resetCaches {
			if err := b.resetVsRead(c, dataDir, "earliest", cache, channel.Earliest(), n, nil); err != nil {
				return err
			}
		}
		return errors.Join(b.resetMemory(c, n, 100), b.resetMemory(c, n, 10))
	}()
	return errors.Join(err, closeC())
}

// resetVsRead measures ResetGroup("r", p), which must queue want events,
// against a plain read of files (nil: all of dataDir's log files, listed
// again at each slice), interleaved, from the page cache or dropped from
// it (cache). Dropped, each side also counts the bytes it read from the
// disk.
func (b *bench) resetVsRead(c *channel.FileChannel, dataDir, pos, cache string, p channel.Position, want int, files []string) error {
	logsNow := func() ([]string, error) {
		if files != nil {
			return files, nil
		}
		return logFiles(dataDir)
	}
	dropped := cache == "dropped"
	drop := func() error {
		if dropped {
			return dropLogs(dataDir)
		}
		return nil
	}
	if !dropped {
		// Bring every log file into the page cache, untimed.
		logs, err := logFiles(dataDir)
		if err != nil {
			return err
		}
		if _, _, err := readFiles(logs); err != nil {
			return err
		}
	}
	what := map[string]string{"near-end": "AtTime(the fill's last commit)", "earliest": "Earliest()"}[pos]
	note := "resets: each timed ResetGroup follows an untimed ResetGroup(Latest()); dropped: before each slice the log files " +
		"are dropped from the page cache (posix_fadvise DONTNEED); the hypervisor may still cache the disk"
	// The untimed resets to Latest, timed apart: they read nothing and
	// write what the timed ones write (a record of the pointers, a
	// commit, an fsync), the floor of a reset's time.
	latest := Result{ID: resetID("latest-after-"+pos, cache), System: "filechannel",
		Op: fmt.Sprintf("ResetGroup(Latest()) after ResetGroup(%s), %s", what, cache), Producers: 1, Note: note}
	first := true
	var logBytes int64 // the log files' bytes before the next timed reset (earliest)
	reset := &meter{
		res: Result{ID: resetID(pos, cache), System: "filechannel", Op: fmt.Sprintf("ResetGroup(%s), %s", what, cache),
			Producers: 1, Note: note},
		before: func() error {
			start := time.Now()
			if _, err := c.ResetGroup("r", channel.Latest()); err != nil {
				return err
			}
			if first {
				first = false // it drops what the step before left queued
			} else {
				latest.Seconds += time.Since(start).Seconds()
				latest.Events += int64(want)
			}
			if files == nil {
				logs, err := logFiles(dataDir)
				if err != nil {
					return err
				}
				if logBytes, err = sizeOf(logs); err != nil {
					return err
				}
			}
			return drop()
		},
	}
	reset.run = func(time.Duration, int64) (int64, error) {
		k, err := c.ResetGroup("r", p)
		if err == nil && k < want {
			err = fmt.Errorf("ResetGroup(%s) queued %d events, want %d", p, k, want)
		}
		reset.res.Bytes += logBytes
		return int64(k), err
	}
	read := &meter{
		res: Result{ID: resetReadID(pos, cache), System: "disk", Op: fmt.Sprintf("read logs, %s, beside ResetGroup(%s)", cache, what),
			Producers: 1, Note: "log reads are plain sequential reads of the channel's log files, 1 MiB preads"},
		before: drop,
	}
	read.run = func(time.Duration, int64) (int64, error) {
		logs, err := logsNow()
		if err != nil {
			return 0, err
		}
		k, _, err := readFiles(logs)
		read.res.Bytes += k
		return int64(want), err
	}
	ms := []*meter{withRounds(reset), withRounds(read)}
	if dropped {
		ms = []*meter{withDiskReads(ms[0]), withDiskReads(ms[1])}
	}
	rounds := b.sz.rounds
	if pos == "near-end" {
		rounds = max(rounds, 5) // each slice is short
	}
	if err := b.interleave(rounds, time.Hour, ms); err != nil {
		return err
	}
	b.add(latest)
	return nil
}

// resetMemory measures the heap of a reset of r to Earliest, queueing
// every one of the n events again, from an empty queue, with the garbage
// collector's GOGC set to gogc (at 10, the heap's peak is close to what
// the reset holds live; at the default 100, it is what a process sees).
func (b *bench) resetMemory(c *channel.FileChannel, n, gogc int) error {
	if _, err := c.ResetGroup("r", channel.Latest()); err != nil {
		return err
	}
	defer debug.SetGCPercent(debug.SetGCPercent(gogc))
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	base := heapObjects()
	stop, peakc := make(chan struct{}), make(chan uint64)
	go func() {
		peak := base
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				peakc <- peak
				return
			case <-tick.C:
				peak = max(peak, heapObjects())
			}
		}
	}()
	k, err := c.ResetGroup("r", channel.Earliest())
	close(stop)
	peak := max(<-peakc, heapObjects())
	runtime.ReadMemStats(&m1)
	if err != nil {
		return err
	}
	if k != n {
		return fmt.Errorf("reset memory: ResetGroup(Earliest) queued %d events, want %d", k, n)
	}
	runtime.GC()
	m := ResetMemory{GOGC: gogc, Events: k, Capacity: max(n, channel.DefaultCapacity), AllocBytes: m1.TotalAlloc - m0.TotalAlloc,
		Mallocs: m1.Mallocs - m0.Mallocs, PeakGrowth: int64(peak) - int64(base), Retained: int64(heapObjects()) - int64(base)}
	b.rep.Reset.Memory = append(b.rep.Reset.Memory, m)
	per := func(x int64) float64 { return float64(x) / float64(k) }
	b.logf("  reset memory, GOGC %d: %d events: allocated %.1f B/event (%d mallocs), heap peak +%.1f B/event, after GC %+.1f B/event",
		gogc, k, per(int64(m.AllocBytes)), m.Mallocs, per(m.PeakGrowth), per(m.Retained))
	return nil
}

// heapObjects returns the bytes of the heap's objects, live and dead not
// yet swept (runtime/metrics; no stop of the world).
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// withDiskReads wraps m's run to add the bytes the process read from the
// disk during it (/proc/self/io read_bytes: what the block layer fetched,
// read-ahead included, page-cache hits not) to m.res.DiskReadBytes.
func withDiskReads(m *meter) *meter {
	run := m.run
	m.run = func(budget time.Duration, max int64) (int64, error) {
		r0, err := diskReadBytes()
		if err != nil {
			return 0, err
		}
		n, err := run(budget, max)
		r1, rerr := diskReadBytes()
		m.res.DiskReadBytes += r1 - r0
		return n, errors.Join(err, rerr)
	}
	return m
}

// diskReadBytes returns the process's read_bytes from /proc/self/io.
func diskReadBytes() (int64, error) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "read_bytes:"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.Join(sc.Err(), errors.New("/proc/self/io: no read_bytes"))
}

// sizeOf returns the total size of the files at paths.
func sizeOf(paths []string) (int64, error) {
	var total int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		total += st.Size()
	}
	return total, nil
}

// resetTargets checks the reset targets on the run's numbers: a reset to
// Earliest takes at most twice the time of a plain read of the same log
// bytes, from the page cache and dropped from it; a reset to a time near
// the end at most twice the time of a plain read of one full log file,
// and, dropped, reads at most MaxFileSize bytes from the disk; a reset's
// heap, at GOGC 10, grows by at most 8 bytes per event it queues (the
// ring's bound per slot).
func resetTargets(r *Report) []Target {
	var ts []Target
	add := func(name, want, got string, pass bool) {
		st := "MISS"
		if pass {
			st = "PASS"
		}
		ts = append(ts, Target{Name: name, Want: want, Got: got, Status: st})
	}
	notMeasured := func(name, want string) {
		ts = append(ts, Target{Name: name, Want: want, Got: "not measured", Status: "-"})
	}
	secsPer := func(x Result) float64 { return x.Seconds / float64(max(x.Bytes, 1)) }
	// floor says what a reset to Latest of the same events took, which
	// reads nothing and writes as much.
	floor := func(id string, perReset int64) string {
		x, ok := r.result(id)
		if !ok || x.Events == 0 || perReset == 0 {
			return ""
		}
		return fmt.Sprintf("; a reset that reads nothing (to Latest, as many events): %.1f ms",
			x.Seconds*1e3/float64(x.Events/perReset))
	}
	for _, cache := range resetCaches {
		name := fmt.Sprintf("reset: ResetGroup(Earliest) / plain read of the same log bytes (%s)", cache)
		reset, okr := r.result(resetID("earliest", cache))
		read, okp := r.result(resetReadID("earliest", cache))
		if !okr || !okp || reset.Seconds == 0 || read.Seconds == 0 {
			notMeasured(name, "time <= 2")
			continue
		}
		// The time per log byte: each reset appends its records, and each
		// side reads the files as they are at its slice.
		q := secsPer(reset) / secsPer(read)
		got := fmt.Sprintf("%.2f (%.0f / %.0f MB/s of log, %d events, %.0f MiB of log per reset)",
			q, reset.MBPerSec, read.MBPerSec, reset.Events/int64(max(len(reset.RoundEventsPerSec), 1)),
			mib(reset.Bytes/int64(max(len(reset.RoundEventsPerSec), 1))))
		if qs := roundRatios(read, reset); len(qs) > 0 {
			got += fmt.Sprintf("; rounds: median %.2f, %.2f-%.2f", median(qs), qs[0], qs[len(qs)-1])
		}
		if cache == "dropped" {
			got += fmt.Sprintf("; from the disk: %.0f / %.0f MiB", mib(reset.DiskReadBytes), mib(read.DiskReadBytes))
		}
		got += floor(resetID("latest-after-earliest", cache), reset.Events/int64(max(len(reset.RoundEventsPerSec), 1)))
		add(name, "time <= 2", got, q <= 2)
	}
	for _, cache := range resetCaches {
		name := fmt.Sprintf("reset: ResetGroup(AtTime near the end) / plain read of one log file (%s)", cache)
		reset, okr := r.result(resetID("near-end", cache))
		read, okp := r.result(resetReadID("near-end", cache))
		if !okr || !okp || reset.Seconds == 0 || read.Seconds == 0 {
			notMeasured(name, "time <= 2")
			continue
		}
		rounds := int64(max(len(read.RoundEventsPerSec), 1))
		q := reset.Seconds / read.Seconds
		got := fmt.Sprintf("%.2f (%.1f / %.1f ms per reset / read of %.1f MiB, %d events)", q,
			reset.Seconds*1e3/float64(rounds), read.Seconds*1e3/float64(rounds), mib(read.Bytes/rounds), reset.Events/rounds)
		if qs := roundRatios(read, reset); len(qs) > 0 {
			got += fmt.Sprintf("; rounds: median %.2f, %.2f-%.2f", median(qs), qs[0], qs[len(qs)-1])
		}
		got += floor(resetID("latest-after-near-end", cache), reset.Events/rounds)
		add(name, "time <= 2", got, q <= 2)
		if cache == "dropped" && r.Reset != nil {
			file := r.Reset.MaxFileSize
			per := reset.DiskReadBytes / rounds
			add("reset: ResetGroup(AtTime near the end), bytes read from the disk (dropped)", "<= 1 log file (MaxFileSize)",
				fmt.Sprintf("%.2f MiB per reset, %.2f x MaxFileSize %.1f MiB (the plain read of one full file: %.2f MiB)",
					mib(per), float64(per)/float64(file), mib(file), mib(read.DiskReadBytes/rounds)), per <= file)
		}
	}
	const memName, memWant = "reset: heap a ResetGroup(Earliest) adds, per event queued, GOGC 10", "peak <= 8 B (the ring's bound per slot)"
	var mems []ResetMemory
	if r.Reset != nil {
		mems = r.Reset.Memory
	}
	if !slices.ContainsFunc(mems, func(m ResetMemory) bool { return m.GOGC == 10 }) {
		notMeasured(memName, memWant)
	}
	for _, m := range mems {
		per := func(x int64) float64 { return float64(x) / float64(max(m.Events, 1)) }
		q := per(m.PeakGrowth)
		got := fmt.Sprintf("peak %.1f B/event (+%.1f MiB over %d events; sampled every ms); allocated %.1f B/event "+
			"in %d mallocs; %+.1f B/event after GC (the ring of %d slots was allocated at Open)",
			q, mib(m.PeakGrowth), m.Events, per(int64(m.AllocBytes)), m.Mallocs, per(m.Retained), m.Capacity)
		if m.GOGC == 10 {
			add(memName, memWant, got, q <= 8)
		} else {
			ts = append(ts, Target{Name: fmt.Sprintf("reset: heap a ResetGroup(Earliest) adds, per event queued, GOGC %d", m.GOGC),
				Want: "-", Got: got, Status: "INFO"})
		}
	}
	return ts
}
