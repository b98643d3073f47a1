package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/examples/internal/counter"
)

// readCounter reads a cursor or position file, failing the test on error.
func readCounter(t *testing.T, dir, leg, file string) int64 {
	t.Helper()
	n, err := counter.Load(filepath.Join(dir, leg, file))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantDelivered checks that both sinks have delivered every event below n
// (a sink stops the run on a gap, so reaching n means in order, no gap) and
// that the source's cursors agree.
func wantDelivered(t *testing.T, dir string, n int64, out string) {
	t.Helper()
	for _, leg := range []string{"fast", "slow"} {
		if got := readCounter(t, dir, leg, "sink.next"); got != n {
			t.Errorf("%s sink expects #%d next, want #%d\n%s", leg, got, n, out)
		}
		if got := readCounter(t, dir, leg, "source.next"); got != n {
			t.Errorf("source cursor for %s is #%d, want #%d\n%s", leg, got, n, out)
		}
	}
}

func TestFanoutRunsAndResumes(t *testing.T) {
	dir := t.TempDir()
	o := options{dir: dir, events: 1000, duration: 30 * time.Second, batch: 50, size: 64, slowDelay: 30 * time.Millisecond, capacity: 10_000}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	wantDelivered(t, dir, 1000, out.String())
	s := out.String()
	fast := strings.Index(s, "fast sink has delivered every event up to #999")
	slow := strings.Index(s, "slow sink has delivered every event up to #999")
	if fast < 0 || slow < 0 || slow < fast {
		t.Fatalf("want the fast sink to finish first, then the slow one:\n%s", s)
	}
	if strings.Contains(s, "redelivered") || strings.Contains(s, "missed") {
		t.Fatalf("a clean run re-sent or redelivered events:\n%s", s)
	}

	out.Reset()
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "source resumes at #1000") {
		t.Fatalf("second run did not resume:\n%s", out.String())
	}
	wantDelivered(t, dir, 2000, out.String())
}

// A slow sink behind a small channel: the source waits for room (Put gives
// up after KeepAlive, the batch is retried) and drops nothing.
func TestFanoutFullChannelBlocksTheSource(t *testing.T) {
	dir := t.TempDir()
	o := options{dir: dir, events: 600, duration: 30 * time.Second, batch: 20, size: 16,
		slowDelay: 20 * time.Millisecond, capacity: 40, keepAlive: time.Millisecond}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantDelivered(t, dir, 600, out.String())
	if slow := parseLeg(t, lastLine(out.String(), "total"), "slow"); slow.waits == 0 {
		t.Fatalf("the slow channel never filled up; the test does not test the full path:\n%s", out.String())
	}
}

// The usual case of a full channel: Put blocks until the slow sink commits
// a batch, well within KeepAlive, and returns nil. The source is throttled
// to the slow sink's pace, and the progress line must show it: the slow
// channel full, the source's waits on it counted and timed (by the
// channel: Stats.PutWaits and PutWaitTime). (The waits used to be counted
// only when Put gave up with ErrChannelFull, which never happens here:
// "waited 0x".)
func TestFanoutSlowSinkBlockingTheSourceIsShown(t *testing.T) {
	o := options{dir: t.TempDir(), duration: 3 * time.Second, batch: 10, size: 16,
		slowDelay: 50 * time.Millisecond, capacity: 100} // keepAlive: the default, 1s
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	total := lastLine(out.String(), "total")
	slow := parseLeg(t, total, "slow")
	if slow.capacity != 100 {
		t.Errorf("slow channel: capacity %d, want 100\n%s", slow.capacity, out.String())
	}
	// The source outruns the slow sink by far, so the slow channel ends
	// full but for the source's batch that was rolled back at the stop.
	if slow.fill < 80 {
		t.Errorf("slow channel: fill %d%%, want ~100%%\n%s", slow.fill, out.String())
	}
	if slow.waits == 0 || slow.waited <= 0 {
		t.Errorf("source waited %dx, %.1fs on the slow channel; want > 0\n%s", slow.waits, slow.waited, out.String())
	}
	if !regexp.MustCompile(`source at #\d+, blocked \d+%`).MatchString(total) {
		t.Errorf("total line lacks the share of time the source was blocked: %s", total)
	}
}

// legFields are what the tests read about one channel from a progress line.
type legFields struct {
	queued, capacity, fill int
	waits                  int64
	waited                 float64
}

func parseLeg(t *testing.T, line, leg string) legFields {
	t.Helper()
	re := regexp.MustCompile(leg + `: queued +(\d+)/(\d+) fill +(\d+)%  log \S+ \S+  delivered +\d+(?: \(\+\d+ redelivered, skipped\))?  source waited (\d+)x ([\d.]+)s`)
	m := re.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s channel with queued/capacity, fill, log and waits in %q", leg, line)
	}
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waited, err := strconv.ParseFloat(m[5], 64)
	if err != nil {
		t.Fatal(err)
	}
	return legFields{queued: atoi(m[1]), capacity: atoi(m[2]), fill: atoi(m[3]), waits: int64(atoi(m[4])), waited: waited}
}

func lastLine(s, prefix string) string {
	var last string
	for line := range strings.Lines(s) {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			last = line
		}
	}
	return last
}

var errKilled = errors.New("killed between the two commits")

// In process: the source stops after the fast channel's commit of the
// batch at #500 and before the slow channel's. The restart must send that
// batch to the slow channel only, and both sinks must see no gap.
func TestFanoutStopBetweenCommitsResendsToTheLaggingChannel(t *testing.T) {
	dir := t.TempDir()
	o := options{dir: dir, events: 1000, duration: 30 * time.Second, batch: 50, size: 64, capacity: 10_000}
	o.betweenCommits = func(from int64) error {
		if from == 500 {
			return errKilled
		}
		return nil
	}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); !errors.Is(err, errKilled) {
		t.Fatalf("first run: got %v, want errKilled\n%s", err, out.String())
	}
	checkRestartAfterKill(t, dir, out.String())
}

// The same with a real death: a child process exits (no deferred Close, no
// checkpoint on close) between the two commits.
func TestFanoutKillBetweenCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFanoutKillChild$", "-test.v")
	cmd.Env = append(os.Environ(), "FANOUT_KILL_CHILD_DIR="+dir)
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 42 {
		t.Fatalf("child: got %v, want exit status 42\n%s", err, b)
	}
	checkRestartAfterKill(t, dir, string(b))
}

// TestFanoutKillChild is the child of TestFanoutKillBetweenCommits; it
// skips unless started by it.
func TestFanoutKillChild(t *testing.T) {
	dir := os.Getenv("FANOUT_KILL_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestFanoutKillBetweenCommits")
	}
	o := options{dir: dir, events: 1000, duration: 30 * time.Second, batch: 50, size: 64, capacity: 10_000}
	o.betweenCommits = func(from int64) error {
		if from == 500 {
			os.Exit(42)
		}
		return nil
	}
	err := run(context.Background(), o, os.Stdout)
	t.Fatalf("run returned %v; it should have died at #500", err)
}

func checkRestartAfterKill(t *testing.T, dir, firstOut string) {
	t.Helper()
	if got := readCounter(t, dir, "fast", "source.next"); got != 550 {
		t.Fatalf("fast cursor is #%d after the kill, want #550\n%s", got, firstOut)
	}
	if got := readCounter(t, dir, "slow", "source.next"); got != 500 {
		t.Fatalf("slow cursor is #%d after the kill, want #500\n%s", got, firstOut)
	}
	o := options{dir: dir, events: 200, duration: 30 * time.Second, batch: 50, size: 64, capacity: 10_000}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("restart: %v\n%s", err, out.String())
	}
	s := out.String()
	if !strings.Contains(s, "source resumes at #550") ||
		!strings.Contains(s, "the slow channel missed #500..#549") || strings.Contains(s, "the fast channel missed") {
		t.Fatalf("restart did not re-send #500..#549 to the slow channel only:\n%s", s)
	}
	wantDelivered(t, dir, 750, s)
}
