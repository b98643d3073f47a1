package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/examples/internal/counter"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// readCounter reads a cursor or position file, failing the test on error.
func readCounter(t *testing.T, dir, file string) int64 {
	t.Helper()
	n, err := counter.Load(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantDelivered checks that both sinks have delivered every event below n
// (a sink stops the run on a gap, so reaching n means in order, no gap) and
// that the source's cursor agrees.
func wantDelivered(t *testing.T, dir string, n int64, out string) {
	t.Helper()
	for _, g := range groups {
		if got := readCounter(t, dir, g+".next"); got != n {
			t.Errorf("%s sink expects #%d next, want #%d\n%s", g, got, n, out)
		}
	}
	if got := readCounter(t, dir, "source.next"); got != n {
		t.Errorf("source cursor is #%d, want #%d\n%s", got, n, out)
	}
}

// committedPuts counts, per sequence number, the events of committed put
// transactions written after write-order id since in the channel's data
// log files: how many times each event was written. It also returns the
// highest write-order id it saw. (A checkpoint may have deleted log files
// whose events every group has taken, but never the file being written.)
func committedPuts(t *testing.T, dir string, since uint64) (map[int64]int, uint64) {
	t.Helper()
	data := filepath.Join(dir, "data")
	ids, err := logfile.ListLogs(vfs.OS(), data)
	if err != nil {
		t.Fatal(err)
	}
	puts := map[uint64][]int64{} // by transaction
	counts := map[int64]int{}
	last := since
	for _, id := range ids {
		sc, err := logfile.NewScanner(vfs.OS(), filepath.Join(data, logfile.LogName(id)), 0)
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			r := sc.Record()
			if r.WriteOrderID <= since {
				continue
			}
			last = max(last, r.WriteOrderID)
			switch {
			case r.Type == logfile.RecordPut:
				seq, err := parseSeq(r.Body)
				if err != nil {
					t.Fatal(err)
				}
				puts[r.TxID] = append(puts[r.TxID], seq)
			case r.Type == logfile.RecordCommit && r.CommitType == logfile.RecordPut:
				for _, seq := range puts[r.TxID] {
					counts[seq]++
				}
				delete(puts, r.TxID)
			}
		}
		if err := errors.Join(sc.Err(), sc.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return counts, last
}

// wantWrittenOnce checks that the events written after write-order id
// since are those of [from, to), each exactly once: once for both groups.
// It returns the highest write-order id in the logs.
func wantWrittenOnce(t *testing.T, dir string, since uint64, from, to int64) uint64 {
	t.Helper()
	counts, last := committedPuts(t, dir, since)
	for seq := from; seq < to; seq++ {
		if n := counts[seq]; n != 1 {
			t.Fatalf("event #%d is in the data logs %d times, want once", seq, n)
		}
	}
	for seq, n := range counts {
		if seq < from || seq >= to {
			t.Fatalf("event #%d is in the data logs %d times, want none (not in #%d..#%d)", seq, n, from, to-1)
		}
	}
	return last
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
	if strings.Contains(s, "redelivered") || strings.Contains(s, "dropped") {
		t.Fatalf("a clean run redelivered or dropped events:\n%s", s)
	}
	// One put per event for both groups: the groups share the log.
	w := wantWrittenOnce(t, dir, 0, 0, 1000)

	out.Reset()
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "source resumes at #1000") {
		t.Fatalf("second run did not resume:\n%s", out.String())
	}
	wantDelivered(t, dir, 2000, out.String())
	wantWrittenOnce(t, dir, w, 1000, 2000)
}

// A slow sink behind a small group: the source waits for room (Put gives
// up after KeepAlive, naming the group, and the batch is retried) and
// drops nothing, for either sink.
func TestFanoutFullGroupBlocksTheSource(t *testing.T) {
	dir := t.TempDir()
	o := options{dir: dir, events: 600, duration: 30 * time.Second, batch: 20, size: 16,
		slowDelay: 20 * time.Millisecond, capacity: 40, keepAlive: time.Millisecond}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantDelivered(t, dir, 600, out.String())
	if total := parseLine(t, lastLine(out.String(), "total")); total.full == 0 {
		t.Fatalf("the slow group never filled up; the test does not test the full path:\n%s", out.String())
	}
	wantWrittenOnce(t, dir, 0, 0, 600)
}

// The usual case of a full group: Put blocks until the slow sink commits
// a batch, well within KeepAlive, and returns nil. The source is throttled
// to the slow sink's pace, and the progress line must show it: the slow
// group full, the fast one empty, the source blocked most of the time (the
// source times its Puts: the channel's wait counters are the first
// group's, the fast one).
func TestFanoutSlowSinkBlockingTheSourceIsShown(t *testing.T) {
	o := options{dir: t.TempDir(), duration: 3 * time.Second, batch: 10, size: 16,
		slowDelay: 50 * time.Millisecond, capacity: 100} // keepAlive: the default, 1s
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	total := parseLine(t, lastLine(out.String(), "total"))
	slow, fast := total.groups["slow"], total.groups["fast"]
	if slow.capacity != 100 || fast.capacity != 100 {
		t.Errorf("capacities slow %d fast %d, want 100 each\n%s", slow.capacity, fast.capacity, out.String())
	}
	// The source outruns the slow sink by far, so the slow group ends full
	// but for the sink's batch that was rolled back at the stop... which
	// is queued again: ~100%. The fast sink keeps up.
	if slow.queued < 80 {
		t.Errorf("slow group: queued %d of 100, want ~100\n%s", slow.queued, out.String())
	}
	if fast.queued > 20 {
		t.Errorf("fast group: queued %d of 100, want ~0\n%s", fast.queued, out.String())
	}
	if total.blocked < 50 {
		t.Errorf("source blocked %d%% of the run, want most of it\n%s", total.blocked, out.String())
	}
}

// With a drop policy the slow group no longer throttles the source: the
// fast sink gets every event, the slow one what its group kept, and the
// numbers it never received are counted as dropped, not a gap.
func TestFanoutDropPolicyDoesNotBlockTheSource(t *testing.T) {
	for _, p := range []channel.FullPolicy{channel.DropOldest, channel.DropNewest} {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			o := options{dir: dir, events: 2000, duration: 30 * time.Second, batch: 10, size: 16,
				slowDelay: 20 * time.Millisecond, capacity: 50, slowWhenFull: p}
			start := time.Now()
			out, slow := runGapped(t, o)
			// Blocking, the slow sink would need 2000/10 × 20ms = 4s.
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("the run took %v: the slow group held the source back\n%s", d, out)
			}
			if slow.dropped == 0 || slow.delivered+slow.dropped != 2000 {
				t.Errorf("slow sink: %d delivered, %d dropped; want some dropped, 2000 in all\n%s", slow.delivered, slow.dropped, out)
			}
			if !strings.Contains(out, "slow sink has reached #1999") {
				t.Errorf("the slow sink did not say it reached the end:\n%s", out)
			}
			wantWrittenOnce(t, dir, 0, 0, 2000)
		})
	}
}

// A filtered slow group: its sink receives the events its filter matches
// (2 tags in 10), in order, and counts the rest as filtered out, not a
// gap; the fast sink gets every event; the run ends with each group's
// FilteredOut. A filter that does not compile stops the run before
// anything is created.
func TestFanoutSlowFilter(t *testing.T) {
	dir := t.TempDir()
	filter := channel.TagFilter("tag", "TagA", "TagC")
	o := options{dir: dir, events: 2000, duration: 30 * time.Second, batch: 50, size: 16,
		slowDelay: time.Millisecond, capacity: 10_000, slowFilter: filter}
	out, slow := runGapped(t, o)
	if slow.delivered != 400 || slow.dropped != 1600 || slow.queued != 0 {
		t.Errorf("slow sink: %d delivered, %d filtered out, %d queued; want 400, 1600, 0\n%s", slow.delivered, slow.dropped, slow.queued, out)
	}
	if want := fmt.Sprintf("fanout: filtered out this run: fast 0 (no filter), slow 1600 (filter %s)", filter); !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if !strings.Contains(out, "(1600 filtered out)") {
		t.Errorf("the progress line does not say filtered out:\n%s", out)
	}
	wantWrittenOnce(t, dir, 0, 0, 2000)

	bad := t.TempDir()
	o = options{dir: bad, events: 10, duration: 30 * time.Second, batch: 10, capacity: 100, slowFilter: `headers["tag"] ==`}
	if err := run(context.Background(), o, io.Discard); !errors.Is(err, channel.ErrBadFilter) {
		t.Fatalf("run with a bad filter: %v, want ErrBadFilter", err)
	}
	if _, err := os.Stat(filepath.Join(bad, "source.next")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a run with a bad filter saved a cursor: %v", err)
	}
}

// runGapped runs o (o.events events, a slow group that may miss some:
// drops or a filter), checks that both sinks reached the end and that the
// fast one delivered every event, and returns the output and the slow
// group's fields of the total line.
func runGapped(t *testing.T, o options) (string, groupFields) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantDelivered(t, o.dir, o.events, out.String())
	total := parseLine(t, lastLine(out.String(), "total"))
	if fast := total.groups["fast"]; fast.delivered != o.events || fast.dropped != 0 {
		t.Errorf("fast sink: %d delivered, %d missed; want all %d delivered\n%s", fast.delivered, fast.dropped, o.events, out.String())
	}
	return out.String(), total.groups["slow"]
}

// lineFields are what the tests read from a progress line.
type lineFields struct {
	groups  map[string]groupFields
	blocked int   // %; 0 if the line says "-" (a run too short to say)
	full    int64 // Puts that gave up after KeepAlive
}

type groupFields struct {
	queued, capacity                int
	delivered, redelivered, dropped int64 // dropped: missed, dropped while full or filtered out
}

func parseLine(t *testing.T, line string) lineFields {
	t.Helper()
	atoi := func(s string) int64 {
		if s == "" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	f := lineFields{groups: map[string]groupFields{}}
	for _, g := range groups {
		re := regexp.MustCompile(g + `: queued +(\d+)/(\d+) +\d+%  delivered +(\d+)(?: \(\+(\d+) redelivered, skipped\))?(?: \((\d+) (?:dropped while full|filtered out|filtered out or dropped while full)\))?`)
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no %s group with queued/capacity and delivered in %q", g, line)
		}
		f.groups[g] = groupFields{queued: int(atoi(m[1])), capacity: int(atoi(m[2])), delivered: atoi(m[3]),
			redelivered: atoi(m[4]), dropped: atoi(m[5])}
	}
	m := regexp.MustCompile(`\| log \S+ \S+ in \d+ files? \| source at #\d+, blocked (?:(\d+)%|-)(?: \((\d+)x full, retried\))?`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no log size, source position and blocked share in %q", line)
	}
	f.blocked, f.full = int(atoi(m[1])), atoi(m[2])
	return f
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

var errStopped = errors.New("stopped after a commit, before the cursor save")

// In process: the source stops after the put commit of the batch at #500
// returned and before it saved its cursor, the one window a crash makes it
// send a batch again. The restart sends it again once, into the channel:
// both groups see it as the same 50 repeats, and neither misses anything.
func TestFanoutStopAfterCommitResendsToBothGroupsAlike(t *testing.T) {
	dir := t.TempDir()
	o := options{dir: dir, events: 1000, duration: 30 * time.Second, batch: 50, size: 64, capacity: 10_000}
	o.afterCommit = func(from int64) error {
		if from == 500 {
			return errStopped
		}
		return nil
	}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); !errors.Is(err, errStopped) {
		t.Fatalf("first run: got %v, want errStopped\n%s", err, out.String())
	}
	// In process the sinks roll back what they hold: no redelivery but
	// the re-send.
	checkRestartAfterStop(t, dir, out.String(), 50, 50)
}

// The same with a real death: a child process exits (no deferred Close, no
// checkpoint on close, no rollback) at that point. A sink may have saved
// its position for a batch whose take commit the exit cut off: at most one
// batch more comes out again.
func TestFanoutKillAfterCommit(t *testing.T) {
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
	checkRestartAfterStop(t, dir, string(b), 50, 50+50)
}

// TestFanoutKillChild is the child of TestFanoutKillAfterCommit; it skips
// unless started by it.
func TestFanoutKillChild(t *testing.T) {
	dir := os.Getenv("FANOUT_KILL_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestFanoutKillAfterCommit")
	}
	o := options{dir: dir, events: 1000, duration: 30 * time.Second, batch: 50, size: 64, capacity: 10_000}
	o.afterCommit = func(from int64) error {
		if from == 500 {
			os.Exit(42)
		}
		return nil
	}
	err := run(context.Background(), o, os.Stdout)
	t.Fatalf("run returned %v; it should have died at #500", err)
}

// checkRestartAfterStop checks the channel after a stop between the commit
// of #500..#549 and the cursor save, restarts it for 200 events and checks
// that each sink got every event, with between minRepeats and maxRepeats
// redelivered (and skipped).
func checkRestartAfterStop(t *testing.T, dir, firstOut string, minRepeats, maxRepeats int64) {
	t.Helper()
	if got := readCounter(t, dir, "source.next"); got != 500 {
		t.Fatalf("source cursor is #%d after the stop, want #500\n%s", got, firstOut)
	}
	// The batch is committed once, for both groups.
	w := wantWrittenOnce(t, dir, 0, 0, 550)
	o := options{dir: dir, events: 200, duration: 30 * time.Second, batch: 50, size: 64, capacity: 10_000}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("restart: %v\n%s", err, out.String())
	}
	s := out.String()
	if !strings.Contains(s, "source resumes at #500") {
		t.Fatalf("restart did not resume at #500:\n%s", s)
	}
	wantDelivered(t, dir, 700, s)
	total := parseLine(t, lastLine(s, "total"))
	for _, g := range groups {
		if r := total.groups[g].redelivered; r < minRepeats || r > maxRepeats {
			t.Errorf("%s sink: %d redelivered, want %d to %d\n%s", g, r, minRepeats, maxRepeats, s)
		}
	}
	// The restart wrote the re-sent batch once more, not once per group,
	// and the rest once.
	wantWrittenOnce(t, dir, w, 500, 700)
}

// Ctrl-C with a dropping slow group (the README's third command): the
// source used to go on putting after its context ended (PutContext looks
// at the context only while it waits for room, and with the slow group
// dropping nothing waits until the fast group fills), for seconds, while
// the slow group dropped as many real events to make room for them. It
// must stop within a batch.
func TestFanoutStopsWithinABatchOfCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const batch, cancelAt = 50, 1000
	o := options{dir: dir, duration: 30 * time.Second, batch: batch, size: 64, slowDelay: 100 * time.Millisecond,
		capacity: 20_000, slowWhenFull: channel.DropOldest,
	}
	var fastAtCancel int64
	o.afterCommit = func(from int64) error {
		if from+batch == cancelAt {
			fastAtCancel = readCounter(t, dir, "fast.next")
			cancel() // Ctrl-C, right after the commit of #cancelAt-1
		}
		return nil
	}
	var out bytes.Buffer
	if err := run(ctx, o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if n := readCounter(t, dir, "source.next"); n > cancelAt+batch {
		t.Errorf("the source put up to #%d after its context ended at #%d: more than a batch (%d)\n%s", n-1, cancelAt-1, batch, out.String())
	}
	// The sinks stop too: the fast one finishes the batch it was on.
	if n := readCounter(t, dir, "fast.next"); n > fastAtCancel+batch {
		t.Errorf("the fast sink delivered up to #%d after the context ended at its #%d: more than a batch (%d)\n%s", n-1, fastAtCancel, batch, out.String())
	}
}

// Below -min-free the source's puts are refused for space: it waits and
// retries (after a checkpoint), saying so, and the run goes on; it used to
// stop at the first refusal.
func TestFanoutWaitsForDiskSpace(t *testing.T) {
	o := options{dir: t.TempDir(), duration: 2 * time.Second, batch: 50, size: 64, capacity: 1000,
		minFree: 1 << 50} // 1 PiB, more than any disk: every put is refused
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"fanout: the source waits for disk space while takes go on",
		"free space there, or lower MinimumRequiredSpace",
		"lower -min-free (1024TiB) and -max-file-size",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if total := lastLine(out.String(), "total"); !regexp.MustCompile(`source at #0, blocked \S+ \([1-9]\d*x no disk space, retried\)`).MatchString(total) {
		t.Errorf("the total line does not show the waits for space: %s", total)
	}
}

// A gap stops the run, and the error says what to run and how to go on.
// (The source resumes at #100 here while the sinks expect #0.)
func TestFanoutStopsAtAGap(t *testing.T) {
	dir := t.TempDir()
	if err := counter.Save(filepath.Join(dir, "source.next"), 100); err != nil {
		t.Fatal(err)
	}
	o := options{dir: dir, events: 100, duration: 20 * time.Second, batch: 50, size: 64, capacity: 1000}
	var out bytes.Buffer
	err := run(context.Background(), o, &out)
	for _, want := range []string{
		"sink: gap: expected #0, got #100: events #0..#99 are missing",
		"fcreplay verify --checkpoint-dir " + filepath.Join(dir, "checkpoint") + " --data-dirs " + filepath.Join(dir, "data"),
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run: %v, want an error with %q\n%s", err, want, out.String())
		}
	}
	if err != nil && !regexp.MustCompile(`\(to accept the loss and go on from #100: echo 100 > \S+/(fast|slow)\.next\)$`).MatchString(err.Error()) {
		t.Errorf("run: %v, want how to go on", err)
	}
}
