package channel

import (
	"testing"
	"time"
)

// TestPreallocateDefaults: by default the active log file is laid out
// ahead of the writes; with Preallocate < 0, and by default with NoSync
// (whose commits do not fsync), nothing is laid out.
func TestPreallocateDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want bool
	}{
		{"default", func(*Config) {}, true},
		{"off", func(c *Config) { c.Preallocate = -1 }, false},
		{"NoSync", func(c *Config) { c.NoSync = true }, false},
		{"NoSync, set", func(c *Config) { c.NoSync, c.Preallocate = true, MinPreallocate }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			tc.edit(&cfg)
			c := mustOpen(t, cfg)
			defer c.Close()
			putN(t, c, 0, 10, 5)
			deadline := time.Now().Add(10 * time.Second)
			for tc.want && c.logs.LayoutStats().LaidOut == 0 && time.Now().Before(deadline) {
				putN(t, c, 10, 1, 1)
				time.Sleep(time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond) // a zero-fill that should not happen has had its chance
			if got := c.logs.LayoutStats().LaidOut > 0; got != tc.want {
				t.Fatalf("laid out: %v, want %v", got, tc.want)
			}
			if tc.want && c.Stats().LogPreallocated == 0 {
				t.Errorf("Stats().LogPreallocated = 0 with zeros laid out")
			}
		})
	}
}
