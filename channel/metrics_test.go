package channel

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// metricValue returns the value of the series name{labels} gathered from
// reg (a counter, gauge or a histogram's sample count), and whether it
// exists.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func wantMetric(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := metricValue(t, reg, name, labels)
	if !ok {
		t.Fatalf("metric %s%v not found", name, labels)
	}
	if got != want {
		t.Fatalf("metric %s%v = %v, want %v", name, labels, got, want)
	}
}

func TestMetricsCountWhatHappens(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	cfg := testConfig(t, 2)
	cfg.Name, cfg.Registerer = "orders", reg
	c := mustOpen(t, cfg)
	defer c.Close()
	ch := map[string]string{"channel_name": "orders"}
	with := func(k, v string) map[string]string { return map[string]string{"channel_name": "orders", k: v} }

	putN(t, c, 0, 30, 10) // 3 commits
	tx, _ := c.Begin()
	for i := range 4 {
		if err := tx.Put(Event{Body: body(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := takeN(t, c, 12, 6); len(got) != 12 { // 2 commits
		t.Fatalf("took %d", len(got))
	}
	tx, _ = c.Begin()
	if _, ok, err := tx.Take(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Misuse and a too-large event are put errors with their reason.
	tx, _ = c.Begin()
	if err := tx.Put(Event{Body: make([]byte, 65<<20)}); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("huge put: %v", err)
	}
	if _, _, err := tx.Take(); !errors.Is(err, ErrMixedTransaction) {
		t.Fatalf("take in a put tx: %v", err)
	}
	_ = tx.Rollback()
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}

	wantMetric(t, reg, "filechannel_put_attempts_total", ch, 30+4+1)
	wantMetric(t, reg, "filechannel_put_success_total", ch, 30)
	wantMetric(t, reg, "filechannel_put_errors_total", with("reason", "too_large"), 1)
	wantMetric(t, reg, "filechannel_put_errors_total", with("reason", "channel_full"), 0)
	wantMetric(t, reg, "filechannel_take_attempts_total", ch, 12+1+1) // takeN, the rolled-back take, the misuse
	wantMetric(t, reg, "filechannel_take_success_total", ch, 12)
	wantMetric(t, reg, "filechannel_take_errors_total", with("reason", "misuse"), 1)
	wantMetric(t, reg, "filechannel_rollbacks_total", with("type", "put"), 2) // the 4 puts, the too-large tx
	wantMetric(t, reg, "filechannel_rollbacks_total", with("type", "take"), 1)
	wantMetric(t, reg, "filechannel_commit_duration_seconds", with("type", "put"), 3)
	wantMetric(t, reg, "filechannel_commit_duration_seconds", with("type", "take"), 2)
	wantMetric(t, reg, "filechannel_commit_events", with("type", "put"), 3)
	wantMetric(t, reg, "filechannel_queue_events", ch, 18)
	wantMetric(t, reg, "filechannel_capacity_events", ch, float64(cfg.Capacity))
	wantMetric(t, reg, "filechannel_fill_ratio", ch, 18/float64(cfg.Capacity))
	wantMetric(t, reg, "filechannel_open", ch, 1)
	wantMetric(t, reg, "filechannel_healthy", ch, 1)
	wantMetric(t, reg, "filechannel_log_files", ch, float64(c.Stats().LogFiles))
	wantMetric(t, reg, "filechannel_log_bytes", ch, float64(c.logs.Bytes()))
	wantMetric(t, reg, "filechannel_checkpoint_errors_total", ch, 0)
	if n, _ := metricValue(t, reg, "filechannel_checkpoints_total", ch); n < 2 { // Open's and ours
		t.Fatalf("checkpoints_total = %v, want ≥ 2", n)
	}
	if n, _ := metricValue(t, reg, "filechannel_fsync_duration_seconds", ch); n < 5 {
		t.Fatalf("fsync_duration_seconds has %v samples, want one per commit at least", n)
	}
	if n, _ := metricValue(t, reg, "filechannel_written_bytes_total", ch); n < 30*float64(len(body(0))) {
		t.Fatalf("written_bytes_total = %v", n)
	}
	if n, _ := metricValue(t, reg, "filechannel_log_files_created_total", ch); n != 2 {
		t.Fatalf("log_files_created_total = %v, want one per data dir", n)
	}
	if ts, _ := metricValue(t, reg, "filechannel_last_checkpoint_timestamp_seconds", ch); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Fatalf("last checkpoint timestamp %v", ts)
	}
	for _, dir := range cfg.DataDirs {
		if free, ok := metricValue(t, reg, "filechannel_data_dir_free_bytes", with("data_dir", dir)); !ok || free <= 0 {
			t.Fatalf("data_dir_free_bytes{%s} = %v, %v", dir, free, ok)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}
}

// The put-wait metrics are the numbers Stats gives: a Put waiting now, the
// waits and their time, and the Puts that found the channel full.
func TestMetricsCountPutWaits(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	cfg := testConfig(t, 1)
	cfg.Name, cfg.Registerer = "orders", reg
	cfg.Capacity, cfg.TransactionCapacity, cfg.KeepAlive = 1, 1, time.Hour
	c := mustOpen(t, cfg)
	defer c.Close()
	ch := map[string]string{"channel_name": "orders"}
	wantMetric(t, reg, "filechannel_put_waits_total", ch, 0)
	wantMetric(t, reg, "filechannel_put_wait_seconds_total", ch, 0)
	wantMetric(t, reg, "filechannel_waiting_puts", ch, 0)
	putN(t, c, 0, 1, 1) // full

	// A Put that waits until a take makes room.
	tx, _ := c.Begin()
	errc := make(chan error, 1)
	go func() { errc <- tx.Put(Event{Body: []byte("late")}) }()
	waitForWaitingPuts(t, c, 1, errc)
	wantMetric(t, reg, "filechannel_waiting_puts", ch, 1)
	wantMetric(t, reg, "filechannel_put_waits_total", ch, 1)
	if got := takeN(t, c, 1, 1); len(got) != 1 {
		t.Fatalf("took %v", got)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// A Put whose context ends while it waits: a wait, not full.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	tx, _ = c.Begin()
	if err := tx.PutContext(ctx, Event{Body: []byte("x")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PutContext = %v, want the deadline", err)
	}
	_ = tx.Rollback()
	c.cfg.KeepAlive = -1 // no Put runs now; the next one fails at once: full, not a wait
	tx, _ = c.Begin()
	if err := tx.Put(Event{Body: []byte("x")}); !errors.Is(err, ErrChannelFull) {
		t.Fatalf("Put = %v, want ErrChannelFull", err)
	}
	_ = tx.Rollback()

	s := c.Stats()
	if s.PutWaits != 2 || s.PutWaitTime <= 0 || s.PutsWaiting != 0 || s.PutsFull != 1 {
		t.Fatalf("PutWaits %d, PutWaitTime %v, PutsWaiting %d, PutsFull %d; want 2, > 0, 0, 1",
			s.PutWaits, s.PutWaitTime, s.PutsWaiting, s.PutsFull)
	}
	wantMetric(t, reg, "filechannel_put_waits_total", ch, float64(s.PutWaits))
	wantMetric(t, reg, "filechannel_put_wait_seconds_total", ch, s.PutWaitTime.Seconds())
	wantMetric(t, reg, "filechannel_waiting_puts", ch, float64(s.PutsWaiting))
	wantMetric(t, reg, "filechannel_put_errors_total", map[string]string{"channel_name": "orders", "reason": "channel_full"}, float64(s.PutsFull))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}
}

// The space metrics a dashboard draws beside the free space: the minimum
// and the reserve from the Config (as Open resolved them), and each data
// dir's full state, which follows the reserve: 1 while the dir has no room
// for it, 0 once room is made and the reserve is written again.
func TestMetricsSpaceReserve(t *testing.T) {
	const reserve = 64 << 10
	ff := vfs.NewFaultFS(vfs.NewMem())
	reg := prometheus.NewPedanticRegistry()
	cfg := memConfig(ff, 2)
	cfg.Name, cfg.Registerer = "orders", reg
	cfg.SpaceReserve, cfg.MinimumRequiredSpace = reserve, 1000
	cfg.CheckpointInterval = 10 * time.Millisecond
	ff.SetFreeSpace(2*reserve - 1) // no room for the reserves
	c := mustOpen(t, cfg)
	defer c.Close()
	ch := map[string]string{"channel_name": "orders"}
	dir := func(i int) map[string]string {
		return map[string]string{"channel_name": "orders", "data_dir": cfg.DataDirs[i]}
	}
	wantMetric(t, reg, "filechannel_space_reserve_bytes", ch, reserve)
	wantMetric(t, reg, "filechannel_minimum_required_space_bytes", ch, 1000)
	wantMetric(t, reg, "filechannel_data_dir_full", dir(0), 1)
	wantMetric(t, reg, "filechannel_data_dir_full", dir(1), 1)
	wantMetric(t, reg, "filechannel_healthy", ch, 0)

	ff.SetFreeSpace(1 << 30) // the checkpoint tick writes the reserves again
	deadline := time.Now().Add(10 * time.Second)
	for c.logs.Full(0) || c.logs.Full(1) {
		if time.Now().After(deadline) {
			t.Fatal("a data dir is still full 10 s after room was made")
		}
		time.Sleep(5 * time.Millisecond)
	}
	wantMetric(t, reg, "filechannel_data_dir_full", dir(0), 0)
	wantMetric(t, reg, "filechannel_data_dir_full", dir(1), 0)
	wantMetric(t, reg, "filechannel_healthy", ch, 1)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}

	// Without a reserve or a minimum: 0 and -1, whatever negative value
	// turned them off.
	reg2 := prometheus.NewPedanticRegistry()
	cfg2 := memConfig(vfs.NewMem(), 1)
	cfg2.Name, cfg2.Registerer = "plain", reg2
	cfg2.SpaceReserve, cfg2.MinimumRequiredSpace = -7, -9
	c2 := mustOpen(t, cfg2)
	defer c2.Close()
	ch2 := map[string]string{"channel_name": "plain"}
	wantMetric(t, reg2, "filechannel_space_reserve_bytes", ch2, 0)
	wantMetric(t, reg2, "filechannel_minimum_required_space_bytes", ch2, -1)
	wantMetric(t, reg2, "filechannel_data_dir_full", map[string]string{"channel_name": "plain", "data_dir": cfg2.DataDirs[0]}, 0)
}

// Close unregisters everything, so the same registry takes the channel
// again; two channels need two names.
func TestMetricsRegistrationLifecycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, 1)
	cfg.Name, cfg.Registerer = "a", reg
	c := mustOpen(t, cfg)

	other := testConfig(t, 1)
	other.Name, other.Registerer = "a", reg
	if _, err := Open(other); err == nil || !strings.Contains(err.Error(), `named "a" is already registered`) {
		t.Fatalf("second channel with the same name: %v", err)
	}
	// The failed Open released its dirs: a retry under another name works.
	other.Name = "b"
	c2 := mustOpen(t, other)
	putN(t, c2, 0, 5, 5)
	wantMetric(t, reg, "filechannel_queue_events", map[string]string{"channel_name": "b"}, 5)
	wantMetric(t, reg, "filechannel_queue_events", map[string]string{"channel_name": "a"}, 0)
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 0 {
		t.Fatalf("after Close the registry still has %d metric families, e.g. %s", len(mfs), mfs[0].GetName())
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	wantMetric(t, reg, "filechannel_queue_events", map[string]string{"channel_name": "a"}, 0)

	// No Registerer: nothing registered anywhere, and nothing breaks.
	plain := testConfig(t, 1)
	c3 := mustOpen(t, plain)
	putN(t, c3, 0, 3, 3)
	if err := c3.Close(); err != nil {
		t.Fatal(err)
	}
}

// The healthy gauge and Health follow a failing checkpoint and a data dir
// short of space, and recover with them.
func TestHealth(t *testing.T) {
	reg := prometheus.NewRegistry()
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 1)
	cfg.Registerer = reg
	cfg.MinimumRequiredSpace = 1 << 20
	ff.SetFreeSpace(1 << 30)
	c := mustOpen(t, cfg)
	defer c.Close()
	ch := map[string]string{"channel_name": ""}
	if err := c.Health(); err != nil {
		t.Fatalf("Health of a fresh channel: %v", err)
	}
	putN(t, c, 0, 5, 5)

	ff.Add(vfs.Rule{Ops: []vfs.Op{"writeat"}, Name: checkpoint.CheckpointName, Times: 1})
	if err := c.Checkpoint(); err == nil {
		t.Fatal("checkpoint did not fail")
	}
	if err := c.Health(); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("Health after a failed checkpoint: %v", err)
	}
	wantMetric(t, reg, "filechannel_healthy", ch, 0)
	wantMetric(t, reg, "filechannel_checkpoint_errors_total", ch, 1)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	wantMetric(t, reg, "filechannel_healthy", ch, 1)

	ff.SetFreeSpace(1 << 10)
	c.logs.ForgetFreeSpace()
	// Health looks at the disk itself, before any put is refused.
	if err := c.Health(); !errors.Is(err, ErrInsufficientSpace) {
		t.Fatalf("Health on a full disk before any put: %v", err)
	}
	tx, _ := c.Begin()
	if err := tx.Put(Event{Body: []byte("x")}); !errors.Is(err, ErrInsufficientSpace) {
		t.Fatalf("put on a full disk: %v", err)
	}
	_ = tx.Rollback()
	if err := c.Health(); !errors.Is(err, ErrInsufficientSpace) {
		t.Fatalf("Health on a full disk: %v", err)
	}
	wantMetric(t, reg, "filechannel_healthy", ch, 0)
	wantMetric(t, reg, "filechannel_put_errors_total", map[string]string{"reason": "disk_space"}, 1)
	ff.SetFreeSpace(1 << 30)
	c.logs.ForgetFreeSpace()
	putN(t, c, 5, 1, 1)
	if err := c.Health(); err != nil {
		t.Fatalf("Health after room came back: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Health(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Health after Close: %v", err)
	}
}

// TestHealthWhilePutsAreRefused: a data dir with a little more than
// MinimumRequiredSpace free refuses a 1 KiB put; Health reports it for as
// long as that goes on (its own look at the disk, a 0-byte check, used to
// call the dir healthy), and one continuous shortage logs one "short of
// space" line and one "room again" line, however refused puts, a smaller
// put that fits, and Health calls interleave.
func TestHealthWhilePutsAreRefused(t *testing.T) {
	const minFree = 1 << 20
	mem := vfs.NewMem()
	rec := &logRecorder{}
	cfg := memConfig(mem, 1)
	cfg.MinimumRequiredSpace = minFree
	cfg.Logger = slog.New(rec)
	c := mustOpen(t, cfg)
	defer c.Close()
	setFree := func(n int64) {
		mem.SetFreeSpace(n)
		c.logs.ForgetFreeSpace()
	}
	lines := func(wantShort, wantRoom int) {
		t.Helper()
		if s, r := len(rec.find("short of space")), len(rec.find("has room again")); s != wantShort || r != wantRoom {
			t.Fatalf("logged \"short of space\" %d times and \"has room again\" %d times, want %d and %d", s, r, wantShort, wantRoom)
		}
	}
	big := Event{Body: bytes.Repeat([]byte("b"), 1024)}

	setFree(minFree + 500) // room for a small put, not for big
	for i := range 5 {
		tx, _ := c.Begin()
		if err := tx.Put(big); !errors.Is(err, ErrInsufficientSpace) {
			t.Fatalf("put %d of 1 KiB with 500 bytes above the minimum: %v", i, err)
		}
		_ = tx.Rollback()
		if err := c.Health(); !errors.Is(err, ErrInsufficientSpace) {
			t.Fatalf("Health after put %d was refused for space: %v", i, err)
		}
		if i == 2 {
			c.logs.ForgetFreeSpace() // Health looks at the disk again
			putN(t, c, 0, 1, 1)      // a small put still fits
			if err := c.Health(); !errors.Is(err, ErrInsufficientSpace) {
				t.Fatalf("Health after a small put fitted, the shortage going on: %v", err)
			}
		}
	}
	lines(1, 0)

	// Back above the minimum by less than the margin: still short.
	setFree(minFree + logfile.LowSpaceMargin(minFree) - 1)
	if err := c.Health(); !errors.Is(err, ErrInsufficientSpace) {
		t.Fatalf("Health with less room than the margin back: %v", err)
	}
	lines(1, 0)
	setFree(1 << 30)
	if err := c.Health(); err != nil {
		t.Fatalf("Health with room back: %v", err)
	}
	putN(t, c, 1, 1, 1)
	lines(1, 1)
	wantEvents(t, drain(t, c), bodies(0, 2))
}
