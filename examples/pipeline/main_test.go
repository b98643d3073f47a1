package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/examples/internal/counter"
)

func TestPipelineRunsAndResumes(t *testing.T) {
	dir := t.TempDir()
	o := options{dir: dir, events: 3000, duration: 20 * time.Second, batch: 100, size: 256}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "stopped cleanly") {
		t.Fatalf("output:\n%s", out.String())
	}
	first := sinkNext(t, dir)
	if first < 3000 {
		t.Fatalf("sink delivered only up to #%d", first)
	}
	out.Reset()
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "sink expects #") || sinkNext(t, dir) < first+3000 {
		t.Fatalf("second run did not resume:\n%s", out.String())
	}
	if strings.Contains(out.String(), "gaps 1") {
		t.Fatalf("gaps reported:\n%s", out.String())
	}
	// 3000 events never come near the capacity: no Put waited for room.
	if p := parseProgress(t, lastLine(out.String(), "total")); p.waits != 0 {
		t.Fatalf("the source waited %dx on a channel with room:\n%s", p.waits, out.String())
	}
}

// A slow sink behind a small channel: the channel fills up and the source
// waits in Put. The progress lines must say so; they used to show only
// the depth ("queued 100") with no capacity, and nothing of the waits,
// which happen inside Put and rarely end in ErrChannelFull. The channel
// counts them (Stats.PutWaits and PutWaitTime).
func TestPipelineShowsASlowSinkBlockingTheSource(t *testing.T) {
	o := options{dir: t.TempDir(), duration: 3 * time.Second, batch: 10, size: 64, capacity: 100, sinkDelay: 50 * time.Millisecond}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	total := parseProgress(t, lastLine(out.String(), "total"))
	if total.capacity != 100 {
		t.Errorf("capacity %d on the total line, want 100\n%s", total.capacity, out.String())
	}
	// The source outruns the sink by far, so the channel ends full but for
	// the source's batch that was rolled back at the stop.
	if total.fill < 80 {
		t.Errorf("fill %d%% on the total line, want ~100%%\n%s", total.fill, out.String())
	}
	if total.waits == 0 || total.waited <= 0 {
		t.Errorf("the source waited %dx, %.1fs for room behind a slow sink; want > 0\n%s", total.waits, total.waited, out.String())
	}
	if total.logBytes == "" {
		t.Errorf("no log size on the total line\n%s", out.String())
	}
}

// A progress line over a near-zero interval prints "-" for its rates, not
// an absurd number.
func TestProgressLineOverANearZeroInterval(t *testing.T) {
	cur := progressCounts{put: 1_000_000, took: 1_000_000, ch: channel.Stats{Capacity: 100}}
	line := progressLine("progress", time.Microsecond, progressCounts{}, cur, 1024, 0, 0)
	if strings.Contains(line, "TB") || strings.Contains(line, "GB/s") || !strings.Contains(line, "(       - ev/s, -/s)") {
		t.Fatalf("line over 1µs: %s", line)
	}
	cur.ch.LogBytes = 2_700_000_000
	line = progressLine("progress", time.Second, progressCounts{}, cur, 1024, 0, 0)
	if !strings.Contains(line, "( 1000000 ev/s, 1.0 GB/s)") || !strings.Contains(line, "log 2.7 GB") {
		t.Fatalf("line over 1s: %s", line)
	}
}

// The waits on the line are the channel's: the totals, and the share of
// the interval from the growth of PutWaitTime.
func TestProgressLineShowsTheChannelsPutWaits(t *testing.T) {
	prev := progressCounts{ch: channel.Stats{Capacity: 100, PutWaits: 5, PutWaitTime: 2 * time.Second}}
	cur := progressCounts{ch: channel.Stats{Capacity: 100, Queued: 100, PutWaits: 9, PutWaitTime: 2*time.Second + 750*time.Millisecond}}
	line := progressLine("progress", time.Second, prev, cur, 64, 0, 0)
	if want := "queued     100/100 fill 100%  log 0 B  source waited 9x 2.8s (blocked 75%)"; !strings.Contains(line, want) {
		t.Fatalf("line %q lacks %q", line, want)
	}
}

// progressFields are what the tests read from a progress line.
type progressFields struct {
	queued, capacity, fill int
	logBytes               string
	waits                  int64
	waited                 float64
}

var progressRE = regexp.MustCompile(`queued +(\d+)/(\d+) fill +(\d+)%  log (\S+ \S+)  source waited (\d+)x ([\d.]+)s \(blocked (?:\d+%|-)\)`)

func parseProgress(t *testing.T, line string) progressFields {
	t.Helper()
	m := progressRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("not a progress line with queued/capacity, fill, log and waits: %q", line)
	}
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waited, err := strconv.ParseFloat(m[6], 64)
	if err != nil {
		t.Fatal(err)
	}
	return progressFields{queued: atoi(m[1]), capacity: atoi(m[2]), fill: atoi(m[3]), logBytes: m[4], waits: int64(atoi(m[5])), waited: waited}
}

// lastLine is the last line of s that starts with prefix.
func lastLine(s, prefix string) string {
	var last string
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, prefix) {
			last = line
		}
	}
	return last
}

// TestPipelineServesMetrics runs the pipeline with its HTTP server on a free
// port, scrapes /metrics and /healthz while it runs, stops it with its
// context and checks that it stopped cleanly and closed the port.
func TestPipelineServesMetrics(t *testing.T) {
	addrc := make(chan string, 1)
	o := options{
		dir: t.TempDir(), duration: 20 * time.Second, batch: 50, size: 64, rate: 20_000,
		metricsAddr: "127.0.0.1:0",
		onListen:    func(addr string) { addrc <- addr },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer // written by run's goroutine only; read after it returns
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, &out) }()

	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("run ended before listening: %v\n%s", err, out.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the metrics server did not start")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, string(b)
	}

	// Scrape until the source has committed something.
	var page string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := get("/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: status %d\n%s", code, body)
		}
		if v, ok := sampleValue(body, `filechannel_put_success_total{channel_name="pipeline"}`); ok && v > 0 {
			page = body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("filechannel_put_success_total stayed 0:\n%s", body)
		}
	}
	for _, want := range []string{
		`filechannel_queue_events{channel_name="pipeline"}`,
		`filechannel_put_success_total{channel_name="pipeline"}`,
		`filechannel_commit_duration_seconds_bucket{channel_name="pipeline",type="put",le=`,
		`filechannel_fsync_duration_seconds_bucket{channel_name="pipeline",le=`,
		`filechannel_healthy{channel_name="pipeline"} 1`,
		"go_goroutines ",            // collectors.NewGoCollector
		"process_cpu_seconds_total", // collectors.NewProcessCollector
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q, want 200 \"ok\\n\"", code, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop after its context was canceled")
	}
	for _, want := range []string{"pipeline: metrics at http://" + addr + "/metrics", "stopped cleanly"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after run returned", addr)
	}
}

// sampleValue returns the value of the sample written as series (name and
// labels exactly as the text exposition format writes them) in page.
func sampleValue(page, series string) (float64, bool) {
	for line := range strings.Lines(page) {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil
	}
	return 0, false
}

func sinkNext(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := counter.Load(dir + "/sink.next")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// prefill puts events #from..#to-1, as the source makes them, into the
// channel of o.dir.
func prefill(t *testing.T, o options, from, to int64) {
	t.Helper()
	cfg := fileConfig(o.withDefaults())
	cfg.MinimumRequiredSpace = -1
	ch, err := channel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := ch.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for seq := from; seq < to; seq++ {
		if err := tx.Put(channel.Event{Body: []byte(strconv.FormatInt(seq, 10) + " prefilled")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

// Below -min-free the source's puts are refused for space. The source
// waits and retries, saying so on its progress line, and the sink drains
// the channel meanwhile (takes are never refused for space): the run goes
// on. It used to end at the first refusal, the sink with it.
func TestPipelineWaitsForDiskSpaceWhileTheSinkDrains(t *testing.T) {
	o := options{dir: t.TempDir(), events: 500, duration: 20 * time.Second, batch: 100, size: 64, capacity: 1000,
		minFree: 1 << 50} // 1 PiB, more than any disk: every put is refused
	prefill(t, o, 0, 500)
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if n := sinkNext(t, o.dir); n != 500 {
		t.Errorf("the sink delivered up to #%d, want #500\n%s", n, out.String())
	}
	total := lastLine(out.String(), "total")
	for _, want := range []string{
		"pipeline: the source waits for disk space",
		"free space there, or lower MinimumRequiredSpace",
		"lower -min-free (1024TiB) and -max-file-size (67108864)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !regexp.MustCompile(`  no space [1-9]\d*x \d+\.\ds \(`).MatchString(total) || !strings.HasPrefix(total, "total   : put         0 ") {
		t.Errorf("the total line does not show the waits for space, or says events were put: %s", total)
	}
}

// A gap stops the pipeline at once, with an error that says what to run,
// and the run never says it stopped cleanly. The batch with the gap is
// rolled back: the channel still holds it, and the sink's position stays.
// (The pipeline used to count the gap, run on, print "stopped cleanly",
// then the error.)
func TestPipelineStopsAtTheFirstGap(t *testing.T) {
	o := options{dir: t.TempDir(), duration: 20 * time.Second, batch: 100, size: 64, capacity: 1000}
	prefill(t, o, 5, 10) // the sink expects #0
	var out bytes.Buffer
	start := time.Now()
	err := run(context.Background(), o, &out)
	if err == nil {
		t.Fatalf("run with a gap: no error\n%s", out.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("run took %v to stop at the gap", d)
	}
	for _, want := range []string{
		"sink: gap: expected #0, got #5: events #0..#4 are missing",
		"fcreplay verify --checkpoint-dir " + o.dir + "/checkpoint --data-dirs " + o.dir + "/data",
		"echo 5 > " + o.dir + "/sink.next",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(out.String(), "stopped cleanly") || !strings.Contains(out.String(), "pipeline: stopped on an error") {
		t.Errorf("output of a run that failed:\n%s", out.String())
	}
	if n := sinkNext(t, o.dir); n != 0 {
		t.Errorf("the sink moved to #%d past the gap", n)
	}
	ch, err := channel.Open(fileConfig(o.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	tx, _ := ch.Begin()
	defer tx.Rollback()
	if ev, ok, err := tx.Take(); err != nil || !ok || !strings.HasPrefix(string(ev.Body), "5 ") {
		t.Errorf("the channel's head after the gap: %q %v %v, want #5", ev.Body, ok, err)
	}
}

// A second pipeline on a metrics port in use fails before it opens the
// channel (so it does not lock -dir, nor replay it), and the error says
// which flag to change.
func TestPipelineListensBeforeItOpens(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	o := options{dir: t.TempDir() + "/p", duration: 5 * time.Second, batch: 10, size: 64, metricsAddr: busy.Addr().String()}
	var out bytes.Buffer
	err = run(context.Background(), o, &out)
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "-metrics-addr") {
		t.Errorf("run on a busy port: %v, want \"address already in use\" and a hint at -metrics-addr\n%s", err, out.String())
	}
	if _, err := os.Stat(o.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("run made or opened %s before it failed to listen (%v)", o.dir, err)
	}
	// Not a port in use: the error still names the flag.
	o.metricsAddr = "127.0.0.1:notaport"
	if err := run(context.Background(), o, &out); err == nil || !strings.Contains(err.Error(), `-metrics-addr "127.0.0.1:notaport"`) {
		t.Errorf("run with a bad address: %v", err)
	}
}
