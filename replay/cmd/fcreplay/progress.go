package main

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/flumego/filechannel/replay"
)

// Progress intervals: how often the library reports and, without a
// terminal, how often a line is printed.
const (
	barEvery   = 200 * time.Millisecond
	plainEvery = 2 * time.Second
)

// progress shows a long replay's progress on stderr: a bar with rate and
// ETA on a terminal, otherwise a plain line at most every plainEvery (none
// for a run shorter than that, which the summary covers).
type progress struct {
	w     io.Writer
	tty   bool
	every time.Duration // plain lines: minimum interval

	mu      sync.Mutex // guards the fields below; the library may report from another goroutine
	bar     *progressbar.ProgressBar
	shown   bool          // the bar has been drawn
	last    time.Duration // elapsed time of the last plain line
	printed bool          // a plain line was printed
}

// newProgress makes the bar (on a terminal) at once, before the replay
// starts: the bar's rate is the bytes over the time since it was made, and
// a bar made at the first report, when the replay had already read
// hundreds of megabytes, showed rates of terabytes a second.
func newProgress(w io.Writer, tty bool) *progress {
	p := &progress{w: w, tty: tty, every: plainEvery}
	if tty {
		p.bar = progressbar.NewOptions64(1, // the total comes with the first report
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("replay"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionUseANSICodes(true),
		)
		p.bar.StartWithoutRender() // its clock starts now; nothing is drawn before a report
	}
	return p
}

// interval is how often the library should report.
func (p *progress) interval() time.Duration {
	if p.tty {
		return barEvery
	}
	return p.every
}

// callback is the function the library reports progress to.
func (p *progress) callback() func(replay.Progress) {
	return func(r replay.Progress) { p.update(r.Records, r.Bytes, r.TotalBytes, r.Elapsed) }
}

// update shows records and bytes read out of total after elapsed.
func (p *progress) update(records, bytes, total int64, elapsed time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		if p.bar == nil { // finished
			return
		}
		if total := max(total, 1); total != p.bar.GetMax64() {
			p.bar.ChangeMax64(total)
		}
		p.shown = true
		p.bar.Set64(min(bytes, max(total, 1))) // a bar's render error is not the replay's
		return
	}
	// Due every p.every; at the end only if earlier lines were printed (it
	// shows 100%; a short run prints only the summary).
	done := total > 0 && bytes >= total
	if elapsed-p.last < p.every && !(done && p.printed) {
		return
	}
	p.last, p.printed = elapsed, true
	fmt.Fprintln(p.w, progressLine(records, bytes, total, elapsed))
}

// finish ends the bar's line before the summary is printed.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil && p.shown {
		p.bar.Finish() // render errors are not the replay's
		fmt.Fprintln(p.w)
	}
	p.bar = nil
}

// progressLine is a plain progress line:
// "replay: 1234567 records, 512.0/2048.0 MB (25.0%), 85.3 MB/s, ETA 18s".
func progressLine(records, bytes, total int64, elapsed time.Duration) string {
	s := "replay: " + strconv.FormatInt(records, 10) + " records, " + mb(bytes) + "/" + mb(total) + " MB"
	if total > 0 {
		s += fmt.Sprintf(" (%.1f%%)", 100*float64(bytes)/float64(total))
	}
	if elapsed > 0 {
		rate := float64(bytes) / elapsed.Seconds()
		s += ", " + mb(int64(rate)) + " MB/s"
		if rate > 0 && total > bytes {
			eta := time.Duration(float64(total-bytes) / rate * float64(time.Second))
			s += ", ETA " + eta.Round(time.Second).String()
		}
	}
	return s
}

// mb formats bytes as decimal megabytes with one decimal.
func mb(b int64) string { return strconv.FormatFloat(float64(b)/1e6, 'f', 1, 64) }

// rateMBs is bytes per elapsed time in MB/s.
func rateMBs(bytes int64, elapsed time.Duration) string {
	if elapsed <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(bytes)/1e6/elapsed.Seconds(), 'f', 1, 64)
}
