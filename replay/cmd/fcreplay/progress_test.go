package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	cases := []struct {
		name                  string
		records, bytes, total int64
		elapsed               time.Duration
		want                  string
	}{
		{"mid_run", 1234567, 512e6, 2048e6, 6 * time.Second,
			"replay: 1234567 records, 512.0/2048.0 MB (25.0%), 85.3 MB/s, ETA 18s"},
		{"done_no_eta", 10, 2e6, 2e6, time.Second, "replay: 10 records, 2.0/2.0 MB (100.0%), 2.0 MB/s"},
		{"no_time_yet", 0, 0, 5e6, 0, "replay: 0 records, 0.0/5.0 MB (0.0%)"},
		{"no_logs", 0, 0, 0, time.Second, "replay: 0 records, 0.0/0.0 MB, 0.0 MB/s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := progressLine(tc.records, tc.bytes, tc.total, tc.elapsed); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestProgressPlain: without a terminal, a line at most every 2 s, and a
// last one at 100% only if earlier lines were printed.
func TestProgressPlain(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false)
	if p.interval() != plainEvery {
		t.Errorf("interval %v", p.interval())
	}
	s := time.Second
	p.update(1, 10, 100, s/2)  // too soon
	p.update(2, 20, 100, 2*s)  // printed
	p.update(3, 30, 100, 3*s)  // too soon after the last
	p.update(4, 40, 100, 4*s)  // printed
	p.update(5, 100, 100, 5*s) // the end, printed
	p.finish()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "2 records") || !strings.Contains(lines[1], "4 records") ||
		!strings.Contains(lines[2], "(100.0%)") {
		t.Errorf("lines:\n%s", buf.String())
	}

	buf.Reset()
	p = newProgress(&buf, false)
	p.update(1, 10, 100, s/10)
	p.update(2, 100, 100, s/5)
	p.finish()
	if buf.Len() != 0 {
		t.Errorf("a short run printed progress: %q", buf.String())
	}
}

// TestProgressBar: on a terminal, a bar with the description, then a
// newline before the summary.
func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, true)
	if p.interval() != barEvery {
		t.Errorf("interval %v", p.interval())
	}
	p.update(1, 50e6, 100e6, time.Second)
	p.update(2, 100e6, 100e6, 2*time.Second)
	p.finish()
	out := buf.String()
	if !strings.Contains(out, "replay") || !strings.Contains(out, "100%") || !strings.HasSuffix(out, "\n") {
		t.Errorf("bar output: %q", out)
	}
}

// TestProgressBarRate: the bar's rate is measured from when the command
// started, not from the first report: 300 MB read in 300 ms or more is at
// most 1 GB/s, never the terabytes a second a bar made at the first report
// showed.
func TestProgressBarRate(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, true)
	time.Sleep(300 * time.Millisecond) // the replay reads before its first report
	p.update(1000, 300e6, 1000e6, 300*time.Millisecond)
	p.finish()
	out := buf.String()
	if !strings.Contains(out, "replay") || strings.Contains(out, "TB/s") || strings.Contains(out, "PB/s") ||
		!strings.Contains(out, "/s") {
		t.Errorf("bar output: %q", out)
	}
}

// TestProgressBarUnused: a command whose replay never reported prints
// nothing.
func TestProgressBarUnused(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, true)
	p.finish()
	if buf.Len() != 0 {
		t.Errorf("printed %q", buf.String())
	}
}
