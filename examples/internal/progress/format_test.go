package progress

import (
	"math"
	"testing"
	"time"

	"github.com/flumego/filechannel/channel"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    float64
		want string
	}{
		{"zero", 0, "0 B"},
		{"below_a_kilobyte", 999, "999 B"},
		{"a_kilobyte", 1000, "1.0 kB"},
		{"rounds_up_to_the_next_unit", 999_960, "1.0 MB"},
		{"gigabytes", 2.7e9, "2.7 GB"},
		{"beyond_the_last_unit", 3e18, "3000.0 PB"},
		{"nan", math.NaN(), "-"},
		{"inf", math.Inf(1), "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Bytes(tc.n); got != tc.want {
				t.Errorf("Bytes(%v) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}

// A rate over a near-zero interval is "-", not "28.0 TB/s".
func TestRateOverANearZeroInterval(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		want string
	}{
		{"zero", 0, "-"},
		{"a_microsecond", time.Microsecond, "-"},
		{"negative", -time.Second, "-"},
		{"a_second", time.Second, "1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rate(PerSecond(1000, tc.d), 0); got != tc.want {
				t.Errorf("rate of 1000 over %v = %q, want %q", tc.d, got, tc.want)
			}
			if tc.want == "-" {
				if got := Bytes(PerSecond(28e6, tc.d)); got != "-" {
					t.Errorf("byte rate of 28 MB over %v = %q, want -", tc.d, got)
				}
			}
		})
	}
}

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		name        string
		part, whole time.Duration
		want        string
	}{
		{"half", time.Second / 2, time.Second, "50%"},
		{"clamped_above", 3 * time.Second, time.Second, "100%"},
		{"clamped_below", -time.Second, time.Second, "0%"},
		{"near_zero_interval", time.Millisecond, time.Microsecond, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Share(tc.part, tc.whole); got != tc.want {
				t.Errorf("Share(%v, %v) = %q, want %q", tc.part, tc.whole, got, tc.want)
			}
		})
	}
}

func TestFill(t *testing.T) {
	s := channel.Stats{Queued: 150, InflightTakes: 40, InflightPuts: 10, Capacity: 200}
	if got := Fill(s); got != 1 {
		t.Errorf("Fill(%+v) = %v, want 1 (queued, taken and put count)", s, got)
	}
	if got := Fill(channel.Stats{}); got != 0 {
		t.Errorf("Fill of no capacity = %v, want 0", got)
	}
}

func TestWaited(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    channel.Stats
		want string
	}{
		{"none", channel.Stats{}, "0x 0.0s"},
		{"waits", channel.Stats{PutWaits: 86, PutWaitTime: 1830 * time.Millisecond}, "86x 1.8s"},
		// PutsFull without waits: KeepAlive < 0 fails at once, no wait.
		{"full_is_not_a_wait", channel.Stats{PutsFull: 3}, "0x 0.0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Waited(tc.s); got != tc.want {
				t.Errorf("Waited(%+v) = %q, want %q", tc.s, got, tc.want)
			}
		})
	}
}
