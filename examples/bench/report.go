package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
)

// Report is every number of one run; -json writes it as is.
type Report struct {
	Mode     string     `json:"mode"`
	Seconds  float64    `json:"seconds"`
	Env      Env        `json:"env"`
	Results  []Result   `json:"results"`
	Recovery []Recovery `json:"recovery"`
	Latency  []Latency  `json:"latency"`
	// Committers is the many-small-committers step's (committers.go).
	Committers *Committers `json:"committers,omitempty"`
	// CommittersSteady is the same in the steady state (a consumer beside
	// them, consumed files recycled).
	CommittersSteady *Committers `json:"committers_steady,omitempty"`
	// DrainFsyncs is the fsyncs a drain adds to producers' (drainfsyncs.go).
	DrainFsyncs []DrainFsyncs `json:"drain_fsyncs,omitempty"`
	Memory      []Memory      `json:"memory"`
	Allocs      []Allocs      `json:"allocs"`
	// GroupCheckpoints are the checkpoints of channels with consumer
	// groups (groups.go).
	GroupCheckpoints []GroupCheckpoint `json:"group_checkpoints"`
	// Reset is the group resets' channel and heap (reset.go).
	Reset   *ResetReport `json:"reset,omitempty"`
	Targets []Target     `json:"targets"`
}

// Result is one throughput measurement.
type Result struct {
	ID           string  `json:"id"`
	System       string  `json:"system"` // disk, filechannel, go-diskqueue, goleveldb
	Op           string  `json:"op"`
	Batch        int     `json:"batch"`
	Producers    int     `json:"producers"`
	Events       int64   `json:"events"`
	Bytes        int64   `json:"bytes"` // payload bytes (files: bytes read)
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	MBPerSec     float64 `json:"mb_per_sec"` // 10^6 bytes
	Note         string  `json:"note,omitempty"`
	// Groups is the number of consumer groups (groups.go's measurements;
	// the fan-out's: its channels).
	Groups int `json:"groups,omitempty"`
	// LogBytesPerEvent is what the data dirs grew by per event put or
	// taken (groups.go's measurements).
	LogBytesPerEvent float64 `json:"log_bytes_per_event,omitempty"`
	// CPUSeconds is the process's CPU time (user + system) during the
	// measurement, MachineCPUSeconds the CPU time the whole machine was
	// busy meanwhile, other work included (groups.go's measurements).
	CPUSeconds        float64 `json:"cpu_seconds,omitempty"`
	MachineCPUSeconds float64 `json:"machine_cpu_seconds,omitempty"`
	// CommitSeconds is the part of Seconds spent in Commit, the rest
	// being Begin and the Takes (the cold takes').
	CommitSeconds float64 `json:"commit_seconds,omitempty"`
	// RoundEventsPerSec is the rate of each interleaved round, in order
	// (the dead-letter measurement's).
	RoundEventsPerSec []float64 `json:"round_events_per_sec,omitempty"`
	// DiskReadBytes is what the process read from the disk during the
	// measurement (/proc/self/io read_bytes; the resets' with the log
	// dropped from the page cache).
	DiskReadBytes int64 `json:"disk_read_bytes,omitempty"`
}

// Recovery is one timed Open.
type Recovery struct {
	ID            string  `json:"id"`
	Kind          string  `json:"kind"` // clean reopen, crash replay, full replay
	Queued        int     `json:"queued"`
	Capacity      int     `json:"capacity"`
	AfterCkpt     int     `json:"after_checkpoint"` // events put after the last checkpoint
	LogBytes      int64   `json:"log_bytes"`
	Cache         string  `json:"cache,omitempty"`  // page cache or dropped
	Millis        float64 `json:"ms"`               // the median, for a clean reopen
	MinMs         float64 `json:"min_ms,omitempty"` // clean reopen: fastest of the reopens
	MaxMs         float64 `json:"max_ms,omitempty"` // and slowest
	Records       int64   `json:"records"`          // log records read
	Skipped       int64   `json:"skipped"`          // of those, covered by the checkpoint
	RecoveredFrom string  `json:"recovered_from"`
	MBPerSec      float64 `json:"mb_per_sec,omitempty"`
	Groups        int     `json:"groups,omitempty"` // named consumer groups (0: the unnamed group alone)
}

// GroupCheckpoint is the checkpoints of one channel with consumer groups.
type GroupCheckpoint struct {
	Groups      int     `json:"groups"`   // named groups; 0 = the unnamed group alone
	Queued      int     `json:"queued"`   // in every group
	Capacity    int     `json:"capacity"` // of every group
	Churn       int     `json:"churn"`    // events put, and taken by every group, before each checkpoint
	Checkpoints int     `json:"checkpoints"`
	Millis      float64 `json:"ms"` // median
	MinMs       float64 `json:"min_ms"`
	MaxMs       float64 `json:"max_ms"`
	Bytes       int64   `json:"bytes"`       // of the files in the checkpoint dir
	GroupBytes  int64   `json:"group_bytes"` // of one group's files (group-1/; the unnamed group's: the dir's)
	TopBytes    int64   `json:"top_bytes"`   // with named groups: the dir's own files
}

// Latency is the put commit latency of one stall run.
type Latency struct {
	ID          string  `json:"id"`
	Checkpoints bool    `json:"checkpoints"`
	Commits     int     `json:"commits"`
	Batch       int     `json:"batch"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
	Done        int     `json:"checkpoints_done"`
	CkptMillis  float64 `json:"checkpoint_ms_mean,omitempty"`
}

// Memory is what the memory child measured.
type Memory struct {
	Capacity  int        `json:"capacity"`         // of every group
	Groups    int        `json:"groups,omitempty"` // named groups (0: the unnamed group alone)
	EventSize int        `json:"event_size"`
	Points    []MemPoint `json:"points"`
	Reopen    Recovery   `json:"reopen"` // clean reopen with the whole backlog
}

// MemPoint is the process's memory at one moment, after debug.FreeOSMemory.
type MemPoint struct {
	Label     string `json:"label"`
	Queued    int    `json:"queued"`
	Backlog   int64  `json:"backlog_bytes"`
	VmRSS     int64  `json:"vm_rss"`
	RssAnon   int64  `json:"rss_anon"`
	RssFile   int64  `json:"rss_file"`
	HeapInuse uint64 `json:"heap_inuse"`
}

// Allocs is the allocation rate of one steady-state loop.
type Allocs struct {
	Op          string  `json:"op"`
	Events      int64   `json:"events"`
	PerEvent    float64 `json:"allocs_per_event"`
	BytesPerEvt float64 `json:"bytes_per_event"`
}

// Target is one of the targets, checked on this run's numbers.
type Target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Status string `json:"status"` // PASS, MISS or INFO (no threshold)
}

func (b *bench) add(r Result) {
	if r.Seconds > 0 {
		r.EventsPerSec = float64(r.Events) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / r.Seconds / 1e6
	}
	b.rep.Results = append(b.rep.Results, r)
	b.logf("  %-44s %10.0f ev/s %8.1f MB/s  (%d events, %.2fs)", r.ID, r.EventsPerSec, r.MBPerSec, r.Events, r.Seconds)
}

func (r *Report) result(id string) (Result, bool) {
	for _, x := range r.Results {
		if x.ID == id {
			return x, true
		}
	}
	return Result{}, false
}

func printReport(w io.Writer, r *Report) {
	fmt.Fprintf(w, "filechannel bench, %s mode, %s, %s, %d CPUs (%s), %d MiB RAM, load %s at start\ndisk: %s; run took %.0fs\n\n",
		r.Mode, r.Env.Date, r.Env.Go, r.Env.CPUs, r.Env.CPU, r.Env.MemMiB, r.Env.Load, r.Env.Disk, r.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\top\tbatch\tprod\tevents\tseconds\tevents/s\tMB/s\t")
	for _, x := range r.Results {
		batch := "-"
		if x.Batch > 0 {
			batch = strconv.Itoa(x.Batch)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f\t%.0f\t%.1f\t\n",
			x.System, x.Op, batch, x.Producers, x.Events, x.Seconds, x.EventsPerSec, x.MBPerSec)
	}
	tw.Flush()
	seen := map[string]bool{}
	for _, x := range r.Results {
		if n := x.System + ": " + x.Note; x.Note != "" && !seen[n] {
			seen[n] = true
			fmt.Fprintln(w, "  note:", n)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "open\tqueued\tafter ckpt\tlog MiB\tcache\tms\trange ms\trecords\tskipped\tMB/s\tfrom\t")
	for _, x := range r.Recovery {
		rng := "-"
		if x.MaxMs > 0 {
			rng = fmt.Sprintf("%.1f-%.1f", x.MinMs, x.MaxMs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%.1f\t%s\t%d\t%d\t%.0f\t%s\t\n", x.Kind, x.Queued, x.AfterCkpt,
			float64(x.LogBytes)/(1<<20), x.Cache, x.Millis, rng, x.Records, x.Skipped, x.MBPerSec, x.RecoveredFrom)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "put commit latency\tcommits\tp50 ms\tp99 ms\tmax ms\tcheckpoints\tckpt ms\t")
	for _, x := range r.Latency {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%d\t%.1f\t\n", x.ID, x.Commits, x.P50, x.P99, x.Max, x.Done, x.CkptMillis)
	}
	tw.Flush()
	for _, c := range []struct {
		x     *Committers
		where string
	}{{r.Committers, ""}, {r.CommittersSteady, " (steady state: beside a consumer, files recycled)"}} {
		if x := c.x; x != nil {
			fmt.Fprintf(w, "\n%d committers%s, one event per commit: commit p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d commits); "+
				"the baseline's fdatasync (batch %d) p50 %.2f ms, p99 %.2f ms; %.1f commits per channel fsync (%d fsyncs)\n",
				x.Committers, c.where, x.P50, x.P99, x.Max, x.Commits, x.Committers, x.FsyncP50, x.FsyncP99, x.CommitsPerFsync(), x.ChannelFsyncs)
		}
	}
	for _, m := range r.Memory {
		groups := ""
		if m.Groups > 0 {
			groups = fmt.Sprintf("%d groups, each holding every event, ", m.Groups)
		}
		fmt.Fprintf(w, "\nmemory (%scapacity %d, %d-byte events; after debug.FreeOSMemory)\n", groups, m.Capacity, m.EventSize)
		fmt.Fprintln(tw, "when\tqueued\tbacklog MiB\tVmRSS MiB\tRssAnon MiB\tRssFile MiB\theap MiB\t")
		for _, p := range m.Points {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", p.Label, p.Queued, mib(p.Backlog),
				mib(p.VmRSS), mib(p.RssAnon), mib(p.RssFile), mib(int64(p.HeapInuse)))
		}
		tw.Flush()
	}
	printGroups(w, r)
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "allocations\tevents\tallocs/event\tbytes/event\t")
	for _, a := range r.Allocs {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t\n", a.Op, a.Events, a.PerEvent, a.BytesPerEvt)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\twant\tgot\t")
	for _, t := range r.Targets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Want, t.Got, t.Status)
	}
	tw.Flush()
}

// printGroups prints the consumer groups' puts with their data-dir bytes,
// and their checkpoints.
func printGroups(w io.Writer, r *Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for _, x := range r.Results {
		if x.Groups == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nconsumer groups: puts and takes (cores: CPU time / elapsed, of this process and of the whole machine)")
			fmt.Fprintln(tw, "op\tbatch\tevents/s\tdata-dir B per event put or taken\tCPU us/event\tprocess cores\tmachine cores busy\t")
			header = true
		}
		bytes := "-"
		if x.LogBytesPerEvent > 0 {
			bytes = fmt.Sprintf("%.1f", x.LogBytesPerEvent)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t\n", x.Op, x.Batch, x.EventsPerSec, bytes,
			x.CPUSeconds*1e6/float64(max(x.Events, 1)), x.CPUSeconds/x.Seconds, x.MachineCPUSeconds/x.Seconds)
	}
	tw.Flush()
	if len(r.GroupCheckpoints) == 0 {
		return
	}
	fmt.Fprintln(w, "\nconsumer groups: checkpoints")
	fmt.Fprintln(tw, "groups\tqueued\tcapacity\tchurn\tcheckpoints\tms\trange ms\tms/group\tdir MiB\tper group MiB\tdir's own MiB\t")
	for _, c := range r.GroupCheckpoints {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f-%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t\n", groupsName(c.Groups), c.Queued,
			c.Capacity, c.Churn, c.Checkpoints, c.Millis, c.MinMs, c.MaxMs, c.Millis/float64(max(c.Groups, 1)),
			mib(c.Bytes), mib(c.GroupBytes), mib(c.TopBytes))
	}
	tw.Flush()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func writeJSON(path string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
