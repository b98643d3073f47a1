package progress

import (
	"fmt"
	"math"
	"time"

	"github.com/flumego/filechannel/channel"
)

// minInterval is the shortest interval a rate is computed over: a rate
// over a near-zero interval (a late tick followed by a prompt one, a
// report right after the start) is noise that can read as terabytes per
// second.
const minInterval = 50 * time.Millisecond

// PerSecond is n per second over d, or NaN when d is too short to say
// (the formatters below print NaN as "-").
func PerSecond(n float64, d time.Duration) float64 {
	if d < minInterval {
		return math.NaN()
	}
	return n / d.Seconds()
}

// Rate formats an events-per-second rate in width columns.
func Rate(perSec float64, width int) string {
	if math.IsNaN(perSec) || math.IsInf(perSec, 0) {
		return fmt.Sprintf("%*s", width, "-")
	}
	return fmt.Sprintf("%*.0f", width, perSec)
}

// Bytes formats a byte count with a decimal unit: "512 B", "64.0 kB",
// "2.7 GB".
func Bytes(n float64) string {
	switch {
	case math.IsNaN(n) || math.IsInf(n, 0):
		return "-"
	case math.Abs(n) < 1e3:
		return fmt.Sprintf("%.0f B", n)
	}
	units := []string{"kB", "MB", "GB", "TB", "PB"}
	i := 0
	for n /= 1e3; math.Abs(n) >= 999.95 && i < len(units)-1; i++ {
		n /= 1e3
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// Fill is the share of the channel's capacity held (queued, taken and not
// committed, put and spilled to the log but not committed), 0–1: the
// channel's filechannel_fill_ratio. A Put blocks when the share it cannot
// see (unspilled puts of open transactions) brings it to 1.
func Fill(s channel.Stats) float64 {
	if s.Capacity <= 0 {
		return 0
	}
	return float64(s.Queued+s.InflightTakes+s.InflightPuts) / float64(s.Capacity)
}

// Waited formats the channel's count of Puts that waited for room and the
// time they waited, "86x 1.8s": filechannel_put_waits_total and
// filechannel_put_wait_seconds_total. The time includes the waits in
// progress, so the difference of two readings over an interval, passed to
// Share, is the share of it a single producer spent blocked.
func Waited(s channel.Stats) string {
	return fmt.Sprintf("%dx %.1fs", s.PutWaits, s.PutWaitTime.Seconds())
}

// Share formats part/whole as a percentage, clamped to 0–100% (a wait
// that began before the interval can end in it), or "-" if whole is too
// short.
func Share(part, whole time.Duration) string {
	if whole < minInterval {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*min(1, max(0, part.Seconds()/whole.Seconds())))
}
