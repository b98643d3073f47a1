package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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
