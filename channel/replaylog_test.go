package channel

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.records = append(r.records, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// atLeast returns the messages of the records at level l or above.
func (r *logRecorder) atLeast(l slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		if rec.Level >= l {
			out = append(out, rec.Message)
		}
	}
	return out
}

// find returns the records whose message contains s.
func (r *logRecorder) find(s string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.records {
		if strings.Contains(rec.Message, s) {
			out = append(out, rec)
		}
	}
	return out
}

// TestFullReplayOfAHealthyChannelLogsNoWarning: with its checkpoint gone, an
// undamaged channel whose taken events' log files were deleted replays in
// full; the takes of events in those files are normal and make one summary
// line at Info, not a warning each.
func TestFullReplayOfAHealthyChannelLogsNoWarning(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.MaxFileSize = logfile.HeaderSize + 4096
	c := mustOpen(t, cfg)
	putN(t, c, 0, 600, 10)
	got := takeN(t, c, 550, 10)
	if len(got) != 550 {
		t.Fatalf("took %d", len(got))
	}
	if err := c.Checkpoint(); err != nil { // deletes the files whose events are all taken
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Remove(vfs.OS(), cfg.CheckpointDir); err != nil {
		t.Fatal(err)
	}
	rec := &logRecorder{}
	cfg.Logger = slog.New(rec)
	c = mustOpen(t, cfg)
	defer c.Close()
	if c.Len() != 50 || c.Stats().RecoveredFrom != "full replay" {
		t.Fatalf("Len %d, recovered from %q", c.Len(), c.Stats().RecoveredFrom)
	}
	if w := rec.atLeast(slog.LevelWarn); len(w) > 0 {
		t.Errorf("%d warnings or errors, want none: %q", len(w), w[:min(len(w), 5)])
	}
	sum := rec.find("committed takes of events in deleted log files")
	if len(sum) != 1 || sum[0].Level != slog.LevelInfo {
		t.Fatalf("summary lines: %v", sum)
	}
}

// TestOpenSaysWhenALogWasCutBelowTheCheckpoint: a log file shorter than the
// checkpoint recorded is committed data lost, which Open logs as an error
// with the number of queued events cut off.
func TestOpenSaysWhenALogWasCutBelowTheCheckpoint(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 100, 10)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ids, err := logfile.ListLogs(vfs.OS(), cfg.DataDirs[0])
	if err != nil || len(ids) == 0 {
		t.Fatal(ids, err)
	}
	path := filepath.Join(cfg.DataDirs[0], logfile.LogName(ids[0]))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	// The channel keeps the length it recorded and the queued pointers past
	// the cut, so that the whole file can still be put back (operations.md).
	expectProblems(t, replay.ProblemTruncatedLog, replay.ProblemCheckpointDisagrees)
	rec := &logRecorder{}
	cfg.Logger = slog.New(rec)
	c = mustOpen(t, cfg)
	defer c.Close()
	lines := rec.find("shorter than the checkpoint recorded")
	if len(lines) != 1 || lines[0].Level != slog.LevelError {
		t.Fatalf("log lines about the cut: %v", lines)
	}
	var lost int64
	lines[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "events_lost" {
			lost = a.Value.Int64()
		}
		return true
	})
	if lost < 40 || lost > 60 {
		t.Errorf("events_lost %d, want about half of 100", lost)
	}
}

// TestErrorsSayFilechannelOnce: an error passed up through two of the
// package's operations (repair, then its rebuild) names the package once.
func TestErrorsSayFilechannelOnce(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 50, 10)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Capacity, cfg.TransactionCapacity = 10, 10
	_, err := Repair(cfg, RepairOptions{})
	if err == nil {
		t.Fatal("repair into a capacity too small: no error")
	}
	if n := strings.Count(err.Error(), "filechannel:"); n != 1 || !strings.HasPrefix(err.Error(), "filechannel: repair: rebuild: ") {
		t.Errorf("error says filechannel: %d times: %v", n, err)
	}
	if err := opErr("commit", ErrClosed); err.Error() != "filechannel: commit: channel is closed" || !errors.Is(err, ErrClosed) {
		t.Errorf("opErr: %v", err)
	}
}
