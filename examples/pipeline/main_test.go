package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
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
