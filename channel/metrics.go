package channel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flumego/filechannel/internal/promreg"
	"github.com/flumego/filechannel/logfile"
)

// metricsNamespace prefixes every metric name.
const metricsNamespace = "filechannel"

// Reasons in the reason label of the put and take error counters.
const (
	reasonFull            = "channel_full"
	reasonDiskSpace       = "disk_space"
	reasonTooLarge        = "too_large"
	reasonTransactionFull = "transaction_full"
	reasonCanceled        = "canceled"
	reasonClosed          = "closed"
	reasonIO              = "io"
	reasonMisuse          = "misuse"
)

// metrics are the channel's Prometheus collectors. They are always kept
// (an increment is one atomic add) and registered on Config.Registerer
// only when it is set.
type metrics struct {
	putAttempts, takeAttempts prometheus.Counter
	putSuccess, takeSuccess   prometheus.Counter
	putErrors, takeErrors     *prometheus.CounterVec // by reason
	rollbacks                 *prometheus.CounterVec // by type
	commitErrors              *prometheus.CounterVec // by type
	corruptSkipped            prometheus.Counter
	bytesWritten              prometheus.Counter
	logsCreated, logsDeleted  prometheus.Counter
	checkpoints               prometheus.Counter
	checkpointErrors          prometheus.Counter
	backupErrors              prometheus.Counter

	putCommitSeconds, takeCommitSeconds prometheus.Observer
	putCommitEvents, takeCommitEvents   prometheus.Observer
	fsyncSeconds                        prometheus.Histogram
	checkpointSeconds                   prometheus.Histogram

	// all is every collector, in registration order.
	all []prometheus.Collector
	reg prometheus.Registerer // nil = not registered
}

func newMetrics(c *FileChannel) *metrics {
	m := &metrics{}
	counter := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help})
		m.all = append(m.all, x)
		return x
	}
	counterVec := func(name, help, label string, values ...string) *prometheus.CounterVec {
		x := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}, []string{label})
		for _, v := range values {
			x.WithLabelValues(v) // export zeros, so rate() and alerts see the series from the start
		}
		m.all = append(m.all, x)
		return x
	}
	histVec := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		x := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: name, Help: help, Buckets: buckets}, []string{"type"})
		m.all = append(m.all, x)
		return x
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		x := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: name, Help: help, Buckets: buckets})
		m.all = append(m.all, x)
		return x
	}
	gauge := func(name, help string, f func() float64) {
		m.all = append(m.all, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: name, Help: help}, f))
	}

	m.putAttempts = counter("put_attempts_total", "Put calls (Flume EventPutAttemptCount).")
	m.putSuccess = counter("put_success_total", "Events put by committed transactions (Flume EventPutSuccessCount).")
	m.putErrors = counterVec("put_errors_total", "Put calls that failed, by reason (Flume's EventPutErrorCount counts only some of these reasons).", "reason",
		reasonFull, reasonDiskSpace, reasonTooLarge, reasonTransactionFull, reasonCanceled, reasonClosed, reasonIO, reasonMisuse)
	m.takeAttempts = counter("take_attempts_total", "Take calls, including those that found the channel empty and each wake-up of TakeContext (Flume EventTakeAttemptCount).")
	m.takeSuccess = counter("take_success_total", "Events taken by committed transactions (Flume EventTakeSuccessCount).")
	m.takeErrors = counterVec("take_errors_total", "Take calls that failed, by reason (Flume's EventTakeErrorCount also counts damaged events: see corrupt_events_skipped_total).", "reason",
		reasonTransactionFull, reasonClosed, reasonIO, reasonMisuse)
	m.rollbacks = counterVec("rollbacks_total", "Transactions rolled back by Rollback, by type (put or take).", "type", "put", "take")
	m.commitErrors = counterVec("commit_errors_total", "Commits that failed (and rolled back), by type.", "type", "put", "take")
	m.corruptSkipped = counter("corrupt_events_skipped_total", "Damaged events that takes stepped over (logged with file and offset).")
	m.bytesWritten = counter("written_bytes_total", "Bytes appended to the data log files.")
	m.logsCreated = counter("log_files_created_total", "Data log files created (one per data dir at Open, then one per roll).")
	m.logsDeleted = counter("log_files_deleted_total", "Data log files deleted by checkpoints once nothing needed them.")
	m.checkpoints = counter("checkpoints_total", "Checkpoints written.")
	m.checkpointErrors = counter("checkpoint_errors_total", "Checkpoints that failed (Flume CheckpointWriteErrorCount).")
	m.backupErrors = counter("backup_checkpoint_errors_total", "Backup checkpoints that failed (Flume CheckpointBackupWriteErrorCount).")
	counterFunc := func(name, help string, f func() float64) {
		m.all = append(m.all, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}, f))
	}
	counterFunc("log_laid_out_bytes_total", "Zeros written and synced ahead of the log writes (Config.Preallocate).", func() float64 {
		return float64(c.logs.LayoutStats().LaidOut)
	})
	counterFunc("log_layout_waits_total", "Log appends that caught up with a zero-fill in flight and waited for it.", func() float64 {
		return float64(c.logs.LayoutStats().Waits)
	})
	counterFunc("log_files_recycled_total", "Data log files started by overwriting a consumed one (Config.RecycleLogFiles).", func() float64 {
		n, _ := c.logs.RecycleStats()
		return float64(n)
	})
	// The gate counts the waits (Stats reads the same numbers); a Put
	// with room pays nothing for them.
	counterFunc("put_waits_total", "Put calls that found the channel at capacity and waited for room, whatever the outcome; those waiting now included.", func() float64 {
		return float64(c.queueStatsOnly().PutWaits)
	})
	counterFunc("put_wait_seconds_total", "Time Put calls spent waiting for room in a full channel, the waits in progress included.", func() float64 {
		return c.queueStatsOnly().PutWaitTime.Seconds()
	})

	// Idempotent puts (Config.Dedup): read from the window's counters.
	dedupStat := func(f func(w *dedupWindow) float64) func() float64 {
		return func() float64 {
			if c.dedup == nil {
				return 0
			}
			return f(c.dedup)
		}
	}
	counterFunc("put_duplicates_total", "Events put commits dropped as duplicates (Config.Dedup: their header value was committed within the window).",
		dedupStat(func(w *dedupWindow) float64 { return float64(w.duplicates.Load()) }))
	counterFunc("dedup_forgotten_total", "Deduplication ids forgotten for Dedup.MaxIDs while still inside the window (a duplicate of one is no longer dropped).",
		dedupStat(func(w *dedupWindow) float64 { return float64(w.forgotten.Load()) }))
	gauge("dedup_ids", "Deduplication ids the window remembers (Config.Dedup).",
		dedupStat(func(w *dedupWindow) float64 { return float64(w.size()) }))

	latency := prometheus.ExponentialBuckets(50e-6, 2, 17) // 50µs … 3.3s
	commitSeconds := histVec("commit_duration_seconds", "Time Commit took, fsync included, by type.", latency)
	m.putCommitSeconds, m.takeCommitSeconds = commitSeconds.WithLabelValues("put"), commitSeconds.WithLabelValues("take")
	commitEvents := histVec("commit_events", "Events per committed transaction, by type.", []float64{1, 10, 100, 1000, 10000})
	m.putCommitEvents, m.takeCommitEvents = commitEvents.WithLabelValues("put"), commitEvents.WithLabelValues("take")
	m.fsyncSeconds = hist("fsync_duration_seconds", "Time each fsync of a data log file took (one fsync serves every commit waiting on it).", latency)
	m.checkpointSeconds = hist("checkpoint_duration_seconds", "Time each checkpoint took, log deletion included.", prometheus.ExponentialBuckets(1e-3, 2, 15))

	gauge("queue_events", "Events in the channel: committed and not taken (Flume's ChannelSize also counts events taken by open transactions: add inflight_take_events).", func() float64 {
		return float64(c.Len())
	})
	gauge("capacity_events", "The channel's capacity (Flume ChannelCapacity).", func() float64 { return float64(c.Cap()) })
	gauge("fill_ratio", "Events held (queued, taken and uncommitted, put and uncommitted) over capacity, 0–1, of the fullest consumer group (Flume ChannelFillPercentage/100).", func() float64 {
		// The fullest group: the one that holds up Puts (or drops) first.
		fill := 0.0
		for _, g := range c.currentGroups() {
			fill = max(fill, float64(g.gate.inUse())/float64(g.cfg.Capacity))
		}
		return fill
	})
	gauge("inflight_take_events", "Events taken by transactions not yet committed.", func() float64 {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		n := 0
		for _, g := range c.groups {
			n += g.inflight.Len()
		}
		return float64(n)
	})
	gauge("waiting_puts", "Put calls waiting for room in a full channel now.", func() float64 { return float64(c.queueStatsOnly().PutsWaiting) })
	gauge("inflight_put_events", "Events put by open transactions that spilled them to the log.", func() float64 {
		c.queueMu.Lock()
		defer c.queueMu.Unlock()
		return float64(c.inflightPuts.Len())
	})
	gauge("open", "1 while the channel is open (Flume Open).", func() float64 { return b2f(!c.closed.Load()) })
	gauge("healthy", "1 when the last checkpoint succeeded, every data dir has MinimumRequiredSpace and no log writer has failed (Flume Unhealthy, inverted).", func() float64 {
		return b2f(c.Health() == nil)
	})
	gauge("minimum_required_space_bytes", "Config.MinimumRequiredSpace: puts fail that would leave less free space in their data dir (-1: the check is off).", func() float64 {
		return float64(max(c.cfg.MinimumRequiredSpace, -1))
	})
	gauge("space_reserve_bytes", "Config.SpaceReserve: the size of the space reserve file each data dir keeps for take commits on a full disk (0: none).", func() float64 {
		return float64(max(c.cfg.SpaceReserve, 0))
	})
	gauge("log_files", "Data log files the channel holds.", func() float64 {
		return float64(c.logs.Len())
	})
	gauge("log_bytes", "Bytes in the data log files the channel holds.", func() float64 { return float64(c.logs.Bytes()) })
	gauge("retained_log_files", "Data log files kept only for Config.Retention: no group queues or holds an event in them.", func() float64 {
		return float64(c.logs.Retained().Files)
	})
	gauge("retained_log_bytes", "Bytes in the retained log files (Config.Retention.MaxBytes caps them).", func() float64 {
		return float64(c.logs.Retained().Bytes)
	})
	gauge("retained_log_oldest_age_seconds", "Time since the oldest retained log file's last record was written (0 without one; Config.Retention.MaxAge bounds it).", func() float64 {
		if t := c.logs.Retained().Oldest; !t.IsZero() {
			return time.Since(t).Seconds()
		}
		return 0
	})
	gauge("log_files_pooled", "Consumed data log files kept for reuse (Config.RecycleLogFiles).", func() float64 {
		_, n := c.logs.RecycleStats()
		return float64(n)
	})
	gauge("log_preallocated_bytes", "Zeros laid out past the records of the active log files (Config.Preallocate).", func() float64 {
		var n int64
		for _, d := range c.logs.DirStates() {
			n += d.LaidOut
		}
		return float64(n)
	})
	gauge("last_checkpoint_timestamp_seconds", "Unix time of the last successful checkpoint (0 before the first).", func() float64 {
		if t := c.lastCkptTime.Load(); t != 0 {
			return float64(t) / 1e9
		}
		return 0
	})
	gauge("replay_duration_seconds", "How long the last Open's recovery (checkpoint load and log replay) took.", func() float64 {
		return c.stats.replayDuration.Seconds()
	})
	gauge("replay_records", "Log records the last Open read.", func() float64 { return float64(c.stats.replayRecords) })
	gauge("replay_corrupt_regions", "Damaged regions of log files the last Open stepped over.", func() float64 { return float64(c.stats.replayCorrupt) })
	gauge("replay_damaged_transactions", "Committed transactions damage took records of in the last Open.", func() float64 {
		return float64(c.stats.replayDamagedTxs)
	})
	gauge("replay_torn_tails", "Log files whose torn tail the last Open cut off.", func() float64 { return float64(c.stats.tornTails) })
	gauge("channel_ids_healed", "Damaged channel.id files of the checkpoint and backup dirs the last Open wrote again from the data dirs'.", func() float64 {
		return float64(c.stats.channelIDsHealed)
	})
	m.all = append(m.all, newGroupCollector(c))
	for i, dir := range c.cfg.DataDirs {
		m.all = append(m.all, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "data_dir_full",
			Help:        "1 while a data dir is full: its space reserve is given up for take commits (or had no room), and puts there fail until a checkpoint makes room for it.",
			ConstLabels: prometheus.Labels{"data_dir": dir},
		}, func() float64 { return b2f(c.logs.Full(i)) }))
		m.all = append(m.all, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "data_dir_free_bytes",
			Help:        "Free bytes on the filesystem of a data dir (puts fail below MinimumRequiredSpace).",
			ConstLabels: prometheus.Labels{"data_dir": dir},
		}, func() float64 {
			free, err := c.fs.FreeSpace(dir)
			if err != nil {
				return -1
			}
			return float64(free)
		}))
	}
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// register registers every collector on reg, labelled with the channel's
// name. On failure it unregisters what it registered.
func (m *metrics) register(reg prometheus.Registerer, name string) error {
	r, err := promreg.Register(reg, name, m.all)
	if errors.Is(err, promreg.ErrNameTaken) {
		return fmt.Errorf("filechannel: register metrics: a channel named %q is already registered on this Registerer; give each channel its own Config.Name: %w", name, err)
	}
	if err != nil {
		return opErr("register metrics", err)
	}
	m.reg = r
	return nil
}

// unregister removes every collector from the Registerer, so that a channel
// reopened on it can register again.
func (m *metrics) unregister() {
	promreg.Unregister(m.reg, m.all)
	m.reg = nil
}

func (m *metrics) observeFsync(d time.Duration) { m.fsyncSeconds.Observe(d.Seconds()) }

// logCreated counts a new log file and observes its writer's fsyncs.
func (m *metrics) logCreated(w *logfile.Writer) {
	w.ObserveSyncs(m.observeFsync)
	m.logsCreated.Inc()
}

// logDeleted counts a log file deleted by a checkpoint.
func (m *metrics) logDeleted(uint32) { m.logsDeleted.Inc() }

// observeCommit records a committed transaction of n events.
func (m *metrics) observeCommit(put bool, n int, start time.Time) {
	d := time.Since(start).Seconds()
	if put {
		m.putSuccess.Add(float64(n))
		m.putCommitSeconds.Observe(d)
		m.putCommitEvents.Observe(float64(n))
		return
	}
	m.takeSuccess.Add(float64(n))
	m.takeCommitSeconds.Observe(d)
	m.takeCommitEvents.Observe(float64(n))
}

// putErrorReason classifies an error returned by Put.
func putErrorReason(err error) string {
	switch {
	case errors.Is(err, ErrChannelFull):
		return reasonFull
	case errors.Is(err, ErrInsufficientSpace):
		return reasonDiskSpace
	case errors.Is(err, ErrEventTooLarge):
		return reasonTooLarge
	case errors.Is(err, ErrTransactionFull):
		return reasonTransactionFull
	case errors.Is(err, ErrClosed):
		return reasonClosed
	case errors.Is(err, ErrTransactionDone), errors.Is(err, ErrMixedTransaction), errors.Is(err, ErrConcurrentUse):
		return reasonMisuse
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return reasonCanceled
	}
	return reasonIO
}

// takeErrorReason classifies an error returned by Take.
func takeErrorReason(err error) string {
	switch {
	case errors.Is(err, ErrTransactionFull):
		return reasonTransactionFull
	case errors.Is(err, ErrClosed):
		return reasonClosed
	case errors.Is(err, ErrTransactionDone), errors.Is(err, ErrMixedTransaction), errors.Is(err, ErrConcurrentUse),
		errors.Is(err, ErrNoGroup), errors.Is(err, ErrLeaseExpired):
		return reasonMisuse
	}
	return reasonIO
}
