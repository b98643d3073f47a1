package main

import (
	"fmt"
	"slices"
	"strings"
)

// target4 marks the rows of issue 33's target 4 ("keep what is met"): the
// cold full replay, the checkpoint stall's p99 and the memory of 4 groups.
const target4 = " [issue 33 target 4]"

// coldReplayNote says the MB/s of log and the CPU per GiB of log of both
// sides of the cold full replay (coldReplay).
func coldReplayNote(replay, read Result) string {
	cpu := func(x Result) float64 { return x.CPUSeconds / (float64(max(x.Bytes, 1)) / (1 << 30)) }
	return fmt.Sprintf("%.0f MiB of log per round, %.0f / %.0f MB/s; CPU %.2f / %.2f s per GiB", mib(read.Bytes)/float64(len(read.RoundEventsPerSec)),
		replay.MBPerSec, read.MBPerSec, cpu(replay), cpu(read))
}

// targets checks the targets on the run's numbers. Each is a ratio
// (or a bound) between measurements of this one run.
func targets(r *Report, sz sizes) []Target {
	var ts []Target
	add := func(name, want, got string, pass bool) {
		st := "MISS"
		if pass {
			st = "PASS"
		}
		ts = append(ts, Target{Name: name, Want: want, Got: got, Status: st})
	}
	info := func(name, got string) { ts = append(ts, Target{Name: name, Want: "-", Got: got, Status: "INFO"}) }
	notMeasured := func(name, want string) {
		ts = append(ts, Target{Name: name, Want: want, Got: "not measured", Status: "-"})
	}
	rate := func(id string) float64 {
		x, _ := r.result(id)
		return x.EventsPerSec
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	// addRatio adds a target on a / b >= least, or "not measured" if a
	// step that -only left out measures a or b.
	addRatio := func(name string, a, b, least float64) {
		if a == 0 || b == 0 {
			notMeasured(name, fmt.Sprintf(">= %g", least))
			return
		}
		q := ratio(a, b)
		add(name, fmt.Sprintf(">= %g", least), fmt.Sprintf("%.2f (%.0f / %.0f ev/s)", q, a, b), q >= least)
	}

	// addRates adds a target on the rates of results aID / bID >= least
	// (an INFO row if least is 0), with the rounds' ratios if both have
	// them, and more (if not nil) appended; "not measured" if a step that
	// -only left out measures either.
	addRates := func(name, aID, bID string, least float64, more func(a, b Result) string) {
		want := "-"
		if least > 0 {
			want = fmt.Sprintf(">= %g", least)
		}
		a, oka := r.result(aID)
		b, okb := r.result(bID)
		if !oka || !okb || a.EventsPerSec == 0 || b.EventsPerSec == 0 {
			notMeasured(name, want)
			return
		}
		q, got := rateRatio(a, b)
		if more != nil {
			got += "; " + more(a, b)
		}
		if least == 0 {
			info(name, got)
			return
		}
		add(name, want, got, q >= least)
	}

	// Durable puts of one producer against the two disk baselines: the
	// append (write+fdatasync, issue 5's) and the overwrite (pwrite into a
	// file written earlier + fdatasync). Batch 100 is checked against both;
	// batch 1000 against the append as issue 5 did; the rest are reported.
	for _, x := range []struct {
		batch                 int
		vsAppend, vsOverwrite float64
	}{{10, 0, 0}, {100, 1.2, 0.9}, {1000, 0.75, 0}} {
		fc := fmt.Sprintf("filechannel/put/batch=%d", x.batch)
		addRates(fmt.Sprintf("puts batch %d / write+fdatasync batch %d", x.batch, x.batch), fc, diskID(false, x.batch), x.vsAppend, nil)
		addRates(fmt.Sprintf("puts batch %d / overwrite+fdatasync batch %d", x.batch, x.batch), fc, diskID(true, x.batch), x.vsOverwrite, nil)
	}
	addRates("puts batch 100: files laid out ahead (Preallocate 4 MiB) / every commit appending (Preallocate off)",
		"filechannel/put/batch=100", "filechannel/put/batch=100/appending", 0, nil)
	// Issue 33, target 1: the steady state writes each byte once. The
	// target is on the consumer with TakeSyncDelay (its take records ride
	// on the producer's fdatasyncs, as the baseline has one per batch);
	// with durable take commits (the default) it is reported.
	recycleName := fmt.Sprintf("RecycleLogFiles %d", steadyRecycle)
	steadyRows := []struct {
		name  string
		a, b  string
		least float64
	}{
		{recycleName + ", TakeSyncDelay / overwrite+fdatasync batch 100", steadyID(true, true), steadyBaselineID, 0.9},
		{recycleName + ", TakeSyncDelay / off (files laid out with zeros)", steadyID(true, true), steadyID(false, true), 0},
		{"RecycleLogFiles off, TakeSyncDelay / overwrite+fdatasync batch 100", steadyID(false, true), steadyBaselineID, 0},
		{recycleName + ", durable takes / overwrite+fdatasync batch 100", steadyID(true, false), steadyBaselineID, 0},
		{recycleName + ", durable takes / off (files laid out with zeros)", steadyID(true, false), steadyID(false, false), 0},
	}
	for _, x := range steadyRows {
		addRates("steady state, puts batch 100 beside a consumer (batch 100): "+x.name, x.a, x.b, x.least, nil)
	}
	addRates("puts batch 100: encrypted (Config.Keys) / not encrypted",
		"filechannel/put/batch=100/encrypted", "filechannel/put/batch=100", 0.85, nil)
	addRatio("group commit: 8 producers / 1 (batch 10)",
		rate("filechannel/put/producers=8/batch=10"), rate("filechannel/put/producers=1/batch=10"), 3)
	addRates(fmt.Sprintf("group commit: 8 producers batch 10 / overwrite+fdatasync batch %d", groupCommitBatch),
		"filechannel/put/producers=8/batch=10", diskID(true, groupCommitBatch)+"/beside-producers", 0.8, nil)
	committersNote := func(x *Committers) func(Result, Result) string {
		return func(Result, Result) string {
			if x == nil {
				return "no latencies"
			}
			return fmt.Sprintf("commit p50/p99 %.2f/%.2f ms, fdatasync p50/p99 %.2f/%.2f ms; %.1f commits per fsync, fsync in flight %.0f%%",
				x.P50, x.P99, x.FsyncP50, x.FsyncP99, x.CommitsPerFsync(), 100*x.ChannelFsyncBusy)
		}
	}
	committersBase := diskID(true, committers) + "/beside-committers"
	addRates(fmt.Sprintf("many committers: %d committing one event each / overwrite+fdatasync batch %d", committers, committers),
		fmt.Sprintf("filechannel/put/committers=%d/batch=1", committers), committersBase, 0.8, committersNote(r.Committers))
	addRates(fmt.Sprintf("many committers in the steady state (a consumer, RecycleLogFiles %d, TakeSyncDelay) / overwrite+fdatasync batch %d",
		steadyRecycle, committers), committersSteadyID, committersBase, 0, committersNote(r.CommittersSteady))
	addRatio("takes batch 100 / go-diskqueue reads",
		rate("filechannel/take/batch=100"), rate("go-diskqueue/read/syncevery=100"), 1.5)
	// Takes from cold log files against a plain read of the same bytes
	// from cold (cold.go), with the log bytes per second of both and the
	// process's CPU per event.
	coldNote := func(take, read Result) string {
		perEvent := float64(read.Bytes) / float64(max(read.Events, 1))
		cpu := func(x Result) float64 { return x.CPUSeconds * 1e6 / float64(max(x.Events, 1)) }
		commits := float64(max(take.Events/int64(max(take.Batch, 1)), 1))
		return fmt.Sprintf("%.0f MiB of log, %.0f / %.0f MB/s; CPU %.2f / %.2f us/event; "+
			"the takes' time: %.2f us/event in Take, %.0f us per Commit (%.0f%%)", mib(read.Bytes),
			take.EventsPerSec*perEvent/1e6, read.MBPerSec, cpu(take), cpu(read),
			(take.Seconds-take.CommitSeconds)*1e6/float64(max(take.Events, 1)), take.CommitSeconds*1e6/commits,
			100*take.CommitSeconds/take.Seconds)
	}
	// The default (every take commit synced) is reported; the target is
	// the drain with Config.TakeSyncDelay (issue 33, target 3).
	addRates("cold takes: drain batch 100 / plain read of the same log, both dropped from the page cache",
		"filechannel/take/cold/batch=100", "disk/read/cold-takes", 0, coldNote)
	addRates(fmt.Sprintf("cold takes: drain batch 100, TakeSyncDelay %v / plain read of the same log, both dropped from the page cache", coldTakeSyncDelay),
		"filechannel/take/cold/batch=100/takesyncdelay", "disk/read/cold-takes", 0.7, coldNote)
	// The fsyncs a drain adds to producers' (drainfsyncs.go; issue 33,
	// target 3): checked on the default, reported with TakeSyncDelay.
	drainName := fmt.Sprintf("take commits: fsyncs of %d producers (batch %d) with a drain (batch 100) beside them / alone", drainProducers, drainPutBatch)
	if len(r.DrainFsyncs) == 0 {
		notMeasured(drainName, "<= 1.1")
	}
	for _, x := range r.DrainFsyncs {
		got := fmt.Sprintf("%.2f (%d / %d fsyncs; %d take commits; %d rounds)", x.Ratio(), x.With, x.Alone, x.TakeCommits, x.Rounds)
		if x.TakeSyncDelayMillis > 0 {
			info(fmt.Sprintf("%s, TakeSyncDelay %g ms", drainName, x.TakeSyncDelayMillis), got)
			continue
		}
		add(drainName, "<= 1.1", got, x.Ratio() <= 1.1)
	}

	// Clean reopen with the channel full at sz.memCap (1,000,000 outside
	// tests), and whether the time grows with the log bytes at that capacity.
	var reopens []Recovery
	var worst float64
	var parts []string
	for _, x := range r.Recovery {
		if x.Kind == "clean reopen" && x.Capacity == sz.memCap {
			reopens = append(reopens, x)
			if x.Queued == sz.memCap {
				worst = max(worst, x.Millis)
				parts = append(parts, fmt.Sprintf("%.1f ms (%.0f MiB log)", x.Millis, mib(x.LogBytes)))
			}
		}
	}
	if len(parts) > 0 {
		add(fmt.Sprintf("clean reopen, %d queued", sz.memCap), "<= 50 ms", strings.Join(parts, ", "), worst <= 50)
	}
	var lo, hi *Recovery
	for i := range reopens {
		x := &reopens[i]
		if lo == nil || x.LogBytes < lo.LogBytes {
			lo = x
		}
		if hi == nil || x.LogBytes > hi.LogBytes {
			hi = x
		}
	}
	if lo != nil && hi != lo {
		add("clean reopen does not grow with log bytes", "t(max) <= 1.5 t(min) + 5 ms",
			fmt.Sprintf("%.1f ms at %.0f MiB, %.1f ms at %.0f MiB", lo.Millis, mib(lo.LogBytes), hi.Millis, mib(hi.LogBytes)),
			hi.Millis <= 1.5*lo.Millis+5)
	}

	// Crash replay: records read vs records written after the checkpoint
	// (each batch of 100 puts writes 101 records).
	ok, parts := true, nil
	for _, x := range r.Recovery {
		if x.Kind != "crash replay" {
			continue
		}
		after := float64(x.AfterCkpt) * 1.01
		ok = ok && float64(x.Records) <= 1.1*after+100
		parts = append(parts, fmt.Sprintf("%d+%d: %d records, %.0f ms", x.Queued-x.AfterCkpt, x.AfterCkpt, x.Records, x.Millis))
	}
	if len(parts) > 0 {
		add("crash replay reads only records after the checkpoint", "records <= 1.1 x after-ckpt records",
			strings.Join(parts, "; "), ok)
	}

	// Full replay against a plain read of the same log files: from the
	// page cache (Performance II's 0.5, retired by issue 33: reported), and
	// cold, interleaved (issue 33, target 4).
	var first, last *Recovery
	for i := range r.Recovery {
		x := &r.Recovery[i]
		if x.Kind != "full replay" || x.Cache != "page cache" {
			continue
		}
		before, _ := r.result(fmt.Sprintf("disk/read/events=%d/%s/before", x.Queued, x.Cache))
		after, _ := r.result(fmt.Sprintf("disk/read/events=%d/%s/after", x.Queued, x.Cache))
		read := max(before.MBPerSec, after.MBPerSec)
		info(fmt.Sprintf("full replay %d events (page cache) / plain read", x.Queued),
			fmt.Sprintf("%.2f (%.0f / %.0f MB/s; reads %.0f before, %.0f after)", ratio(x.MBPerSec, read), x.MBPerSec, read,
				before.MBPerSec, after.MBPerSec))
		if first == nil {
			first = x
		}
		last = x
		addRates(fmt.Sprintf("cold full replay %d events / plain read of the same log, both dropped from the page cache, "+
			"interleaved"+target4, x.Queued), coldReplayID(x.Queued, "replay"), coldReplayID(x.Queued, "read"),
			0.7, coldReplayNote)
	}
	if first != nil && last != first {
		per := func(x *Recovery) float64 { return x.Millis * 1000 / float64(x.Queued) }
		q := per(last) / per(first)
		add("full replay is linear in log size (page cache)", "us/event ratio <= 1.25",
			fmt.Sprintf("%.2f (%.2f us/event at %d, %.2f at %d)", q, per(first), first.Queued, per(last), last.Queued), q <= 1.25)
	}

	// Checkpoint stall: the same commits with and without checkpoints
	// running, interleaved (fcStall).
	if len(r.Latency) == 2 {
		a, b := r.Latency[0], r.Latency[1]
		q := ratio(b.P99, a.P99)
		add("checkpoint stall: p99 put commit (batch 100), checkpoints in a loop / none"+target4, "<= 1.5",
			fmt.Sprintf("%.2f (%.2f / %.2f ms; p50 %.2f / %.2f ms; %d checkpoints of %.1f ms on average)",
				q, b.P99, a.P99, b.P50, a.P50, b.Done, b.CkptMillis), q <= 1.5)
		add("checkpoint stall: max put commit (batch 100), checkpoints in a loop", "<= 10 ms",
			fmt.Sprintf("%.2f ms (%.2f ms without, %d commits each)", b.Max, a.Max, b.Commits), b.Max <= 10)
	} else {
		notMeasured("checkpoint stall: p99 put commit (batch 100), checkpoints in a loop / none"+target4, "<= 1.5")
		notMeasured("checkpoint stall: max put commit (batch 100), checkpoints in a loop", "<= 10 ms")
	}
	var mem1 []Memory
	for _, m := range r.Memory {
		if m.Groups == 0 {
			mem1 = append(mem1, m)
		}
	}
	peakOf := func(ms ...Memory) int64 {
		var peak int64
		for _, m := range ms {
			for _, p := range m.Points {
				peak = max(peak, p.VmRSS)
			}
		}
		return peak
	}
	if len(mem1) == 2 {
		small, big := mem1[0], mem1[1]
		peak := peakOf(small, big)
		// Compared after a checkpoint: before one, the heap holds about 8
		// bytes per event put since the last checkpoint (see the INFO row),
		// and a periodic checkpoint may or may not have run during a fill.
		sb, bb := small.point("4/4, checkpointed"), big.point("4/4, checkpointed")
		add(fmt.Sprintf("memory: VmRSS, capacity %d, backlog up to %.0f MiB", big.Capacity, mib(bb.Backlog)),
			"< 100 MiB", fmt.Sprintf("%.1f MiB peak", mib(peak)), peak < 100<<20)
		grow := bb.VmRSS - sb.VmRSS
		add("memory does not grow with backlog bytes", "same events, 4x bytes, checkpointed: < 8 MiB more",
			fmt.Sprintf("%+.1f MiB (%.1f at %.0f MiB, %.1f at %.0f MiB)", mib(grow), mib(sb.VmRSS), mib(sb.Backlog),
				mib(bb.VmRSS), mib(bb.Backlog)), grow < 8<<20)
		q1, q4 := small.point("1/4 backlog"), small.point("4/4 backlog")
		per := func(a, b int64) float64 { return float64(b-a) / float64(max(1, q4.Queued-q1.Queued)) }
		info(fmt.Sprintf("memory growth with queued events (%d-byte events, 1/4 -> 4/4)", small.EventSize),
			fmt.Sprintf("VmRSS %.1f B/event (%.1f -> %.1f MiB), heap %.1f B/event; %.1f MiB after Checkpoint",
				per(q1.VmRSS, q4.VmRSS), mib(q1.VmRSS), mib(q4.VmRSS), per(int64(q1.HeapInuse), int64(q4.HeapInuse)),
				mib(small.point("4/4, checkpointed").VmRSS)))
	}
	if len(r.Memory) == len(mem1) {
		notMeasured(fmt.Sprintf("memory: VmRSS, %d groups x capacity %d", memGroups, sz.memCap)+target4, "< 100 MiB")
	}
	for _, m := range r.Memory {
		if m.Groups == 0 {
			continue
		}
		peak, full := peakOf(m), m.point("4/4 backlog")
		add(fmt.Sprintf("memory: VmRSS, %d groups x capacity %d, backlog up to %.0f MiB", m.Groups, m.Capacity, mib(full.Backlog))+target4,
			"< 100 MiB", fmt.Sprintf("%.1f MiB peak (%.1f MiB full, %.1f after Checkpoint)", mib(peak), mib(full.VmRSS),
				mib(m.point("4/4, checkpointed").VmRSS)), peak < 100<<20)
	}
	for _, a := range r.Allocs {
		info("allocations: "+a.Op, fmt.Sprintf("%.2f allocs/event, %.0f B/event", a.PerEvent, a.BytesPerEvt))
	}
	ts = append(ts, groupTargets(r)...)
	ts = append(ts, deliveryTargets(r)...)
	ts = append(ts, retryTargets(r)...)
	ts = append(ts, orderTargets(r)...)
	ts = append(ts, retentionTargets(r)...)
	ts = append(ts, dedupTargets(r)...)
	ts = append(ts, resetTargets(r)...)
	ts = append(ts, filterTargets(r)...)
	ts = append(ts, kafkaTargets(r)...)
	return ts
}

// groupTargets checks the consumer-group targets (issue 14) on the run's
// numbers, those measured.
func groupTargets(r *Report) []Target {
	var ts []Target
	add := func(name, want, got string, pass bool) {
		st := "MISS"
		if pass {
			st = "PASS"
		}
		ts = append(ts, Target{Name: name, Want: want, Got: got, Status: st})
	}
	info := func(name, got string) { ts = append(ts, Target{Name: name, Want: "-", Got: got, Status: "INFO"}) }
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}

	g1, ok1 := r.result("filechannel/groups=1/put/batch=100")
	g2, _ := r.result("filechannel/groups=2/put/batch=100")
	g4, ok4 := r.result("filechannel/groups=4/put/batch=100")
	fan, okf := r.result("filechannel/fanout=2/put/batch=100")
	if ok1 && ok4 {
		q := ratio(g4.EventsPerSec, g1.EventsPerSec)
		add("groups: puts batch 100, 4 groups / 1 group", ">= 0.9",
			fmt.Sprintf("%.2f (%.0f / %.0f ev/s)", q, g4.EventsPerSec, g1.EventsPerSec), q >= 0.9)
		q = ratio(g4.LogBytesPerEvent, g1.LogBytesPerEvent)
		add("groups: data-dir bytes per event put, 4 groups / 1 group", "<= 1.05",
			fmt.Sprintf("%.3f (%.1f / %.1f B/event)", q, g4.LogBytesPerEvent, g1.LogBytesPerEvent), q <= 1.05)
	}
	t1, okt1 := r.result("filechannel/groups=1/take/batch=100")
	t4, okt4 := r.result("filechannel/groups=4/take/batch=100")
	if ok1 && ok4 && okt1 && okt4 {
		// An event's whole life: its put, and one take by every group.
		c1 := g1.LogBytesPerEvent + t1.LogBytesPerEvent
		c4 := g4.LogBytesPerEvent + 4*t4.LogBytesPerEvent
		q := ratio(c4, c1)
		add("groups: data-dir bytes per event put and taken by every group, 4 groups / 1 group", "<= 1.05",
			fmt.Sprintf("%.3f (%.1f + 4 x %.1f / %.1f + %.1f B/event)", q, g4.LogBytesPerEvent, t4.LogBytesPerEvent,
				g1.LogBytesPerEvent, t1.LogBytesPerEvent), q <= 1.05)
	}
	if okf && ok1 {
		info("groups: 2 groups against the fan-out to 2 channels (puts batch 100)",
			fmt.Sprintf("%.2fx the events/s (%.0f / %.0f), %.2fx the bytes (%.1f / %.1f B/event); 4 groups: %.2fx, %.2fx",
				ratio(g2.EventsPerSec, fan.EventsPerSec), g2.EventsPerSec, fan.EventsPerSec,
				ratio(g2.LogBytesPerEvent, fan.LogBytesPerEvent), g2.LogBytesPerEvent, fan.LogBytesPerEvent,
				ratio(g4.EventsPerSec, fan.EventsPerSec), ratio(g4.LogBytesPerEvent, fan.LogBytesPerEvent)))
	}
	if okt1 && okt4 {
		q := ratio(t4.EventsPerSec, t1.EventsPerSec)
		add("groups: takes batch 100, 4 groups at once / 1 group alone", ">= 3",
			fmt.Sprintf("%.2f (%.0f / %.0f ev/s)", q, t4.EventsPerSec, t1.EventsPerSec), q >= 3)
	}
	if len(r.GroupCheckpoints) > 0 {
		var parts []string
		for _, c := range r.GroupCheckpoints {
			parts = append(parts, fmt.Sprintf("%s: %.1f ms, %.1f MiB (%.1f ms, %.1f MiB per group)", groupsName(c.Groups),
				c.Millis, mib(c.Bytes), c.Millis/float64(max(c.Groups, 1)), mib(c.GroupBytes)))
		}
		info(fmt.Sprintf("groups: checkpoint, %d queued, capacity %d per group", r.GroupCheckpoints[0].Queued,
			r.GroupCheckpoints[0].Capacity), strings.Join(parts, "; "))
	}
	var o1, o4 *Recovery
	for i := range r.Recovery {
		switch x := &r.Recovery[i]; {
		case x.Groups == 1 && strings.HasPrefix(x.Kind, "clean reopen,"):
			o1 = x
		case x.Groups == 4 && strings.HasPrefix(x.Kind, "clean reopen,"):
			o4 = x
		}
	}
	if o4 != nil {
		got := fmt.Sprintf("%.1f ms (%.1f-%.1f)", o4.Millis, o4.MinMs, o4.MaxMs)
		if o1 != nil {
			got += fmt.Sprintf("; 1 group: %.1f ms", o1.Millis)
		}
		add(fmt.Sprintf("groups: clean reopen, 4 groups x %d queued", o4.Queued), "<= 50 ms", got, o4.Millis <= 50)
	}
	return ts
}

// deliveryTargets checks the dead-letter target on the run's numbers: take
// commits of batch 100 from a group with MaxDeliveries 16 against the same
// group without (deadletter.go); batch 10 and 1 are reported, not checked.
// Each says the ratio of the rates over all rounds (what is checked), the
// median and range of the rounds' ratios, the CPU per event and the
// data-dir bytes per event taken of both.
func deliveryTargets(r *Report) []Target {
	var ts []Target
	for _, batch := range slices.Backward(deliveryBatches) {
		name := fmt.Sprintf("dead letters: take commits batch %d, MaxDeliveries %d / without", batch, deliveryLimit)
		with, okw := r.result(deliveryID(deliveryLimit, batch))
		without, oko := r.result(deliveryID(0, batch))
		if !okw || !oko || without.EventsPerSec == 0 {
			if batch == 100 {
				ts = append(ts, Target{Name: name, Want: ">= 0.9", Got: "not measured", Status: "-"})
			}
			continue
		}
		q, got := rateRatio(with, without)
		cpu := func(x Result) float64 { return x.CPUSeconds * 1e6 / float64(max(x.Events, 1)) }
		got += fmt.Sprintf("; CPU %.2f / %.2f us/event; %.1f / %.1f data-dir B/event taken",
			cpu(with), cpu(without), with.LogBytesPerEvent, without.LogBytesPerEvent)
		switch {
		case batch == 100:
			st := "MISS"
			if q >= 0.9 {
				st = "PASS"
			}
			ts = append(ts, Target{Name: name, Want: ">= 0.9", Got: got, Status: st})
		default:
			ts = append(ts, Target{Name: name, Want: "-", Got: got, Status: "INFO"})
		}
	}
	return ts
}

// kafkaTargets checks the Kafka targets on the run's numbers (kafka.go):
// put commits and take commits of batch 100 through a kafka.Channel against
// raw franz-go doing the same, each >= 0.8. Each says the
// median of the rounds' ratios (what is checked: a round that the shared
// machine slowed on one side moves it less than the ratio over all rounds)
// and their range, the ratio over all rounds, and the CPU per event of
// both (the whole process's: the in-process brokers' work included).
func kafkaTargets(r *Report) []Target {
	var ts []Target
	for _, x := range []struct {
		name, op string
		least    float64 // 0: reported, not checked
	}{
		{"kafka: put commits batch 100, kafka.Channel / raw franz-go transactions", "put", 0.8},
		{"kafka: take commits batch 100, kafka.Channel / raw franz-go poll + offset commit", "take", 0.8},
	} {
		want := "-"
		if x.least > 0 {
			want = fmt.Sprintf("median >= %.1f", x.least)
		}
		ch, okc := r.result(kafkaID("channel", x.op))
		raw, okr := r.result(kafkaID("raw", x.op))
		if !okc || !okr || raw.EventsPerSec == 0 {
			if x.least > 0 {
				ts = append(ts, Target{Name: x.name, Want: want, Got: "not measured", Status: "-"})
			}
			continue
		}
		all := ch.EventsPerSec / raw.EventsPerSec
		q, got := all, ""
		if qs := roundRatios(ch, raw); len(qs) > 0 {
			q = median(qs)
			got = fmt.Sprintf("rounds: median %.2f, %.2f-%.2f; ", q, qs[0], qs[len(qs)-1])
		}
		cpu := func(x Result) float64 { return x.CPUSeconds * 1e6 / float64(max(x.Events, 1)) }
		got += fmt.Sprintf("all rounds %.2f (%.0f / %.0f ev/s); CPU %.2f / %.2f us/event",
			all, ch.EventsPerSec, raw.EventsPerSec, cpu(ch), cpu(raw))
		st := "INFO"
		switch {
		case x.least > 0 && q >= x.least:
			st = "PASS"
		case x.least > 0:
			st = "MISS"
		}
		ts = append(ts, Target{Name: x.name, Want: want, Got: got, Status: st})
	}
	return ts
}

// rateRatio returns a's events per second over b's (over all rounds) and
// says it with both rates and, if both recorded their rounds (withRounds),
// the median and range of the rounds' ratios.
func rateRatio(a, b Result) (float64, string) {
	q := a.EventsPerSec / b.EventsPerSec
	got := fmt.Sprintf("%.2f (%.0f / %.0f ev/s)", q, a.EventsPerSec, b.EventsPerSec)
	if qs := roundRatios(a, b); len(qs) > 0 {
		got += fmt.Sprintf("; rounds: median %.2f, %.2f-%.2f", median(qs), qs[0], qs[len(qs)-1])
	}
	return q, got
}

// roundRatios returns the ratios of a's and b's rates round by round,
// sorted.
func roundRatios(a, b Result) []float64 {
	var qs []float64
	for i := range min(len(a.RoundEventsPerSec), len(b.RoundEventsPerSec)) {
		if b.RoundEventsPerSec[i] > 0 {
			qs = append(qs, a.RoundEventsPerSec[i]/b.RoundEventsPerSec[i])
		}
	}
	slices.Sort(qs)
	return qs
}

// median returns the median of sorted, which is not empty.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
