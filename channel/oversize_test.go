package channel

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// openAllocated opens cfg (mustOpen) and returns the channel and the bytes
// Open allocated.
func openAllocated(t *testing.T, cfg Config) (*FileChannel, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := mustOpen(t, cfg)
	runtime.ReadMemStats(&after)
	return c, after.TotalAlloc - before.TotalAlloc
}

// maxOpenAlloc bounds what Open of a small channel may allocate, whatever
// the length of its small files.
const maxOpenAlloc = 64 << 20

// TestOpenOversizeSmallFiles: a small file of the checkpoint dir grown to
// 1 GiB (a sparse tail of zeros) is damage, and costs Open a bounded
// amount of memory: a checkpoint file makes Open fall back to a full
// replay, the delivery journal is no journal; every event is still there.
// The journal of a channel where no group counts deliveries is not read.
func TestOpenOversizeSmallFiles(t *testing.T) {
	for _, tc := range []struct {
		file     string
		counting bool // a group counts deliveries
		fallback bool // Open recovers without the checkpoint
	}{
		{file: "checkpoint", counting: true, fallback: true},
		{file: "checkpoint.meta", counting: true, fallback: true},
		{file: "inflightputs", counting: true, fallback: true},
		{file: "inflighttakes", counting: true, fallback: true},
		{file: "groups", counting: true, fallback: true},
		{file: "group-1/checkpoint", counting: true, fallback: true},
		{file: "group-1/checkpoint.meta", counting: true, fallback: true},
		{file: "group-1/inflighttakes", counting: true, fallback: true},
		{file: "deliveries", counting: true},
		{file: "deliveries"},
	} {
		name := tc.file
		if !tc.counting {
			name += "/no_group_counts"
		}
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			cfg.Groups = []GroupConfig{{}, {Name: "a"}}
			if tc.counting {
				cfg.Groups[1].MaxDeliveries = 3
			}
			c := mustOpen(t, cfg)
			putN(t, c, 0, 20, 5)
			wantEvents(t, takeN(t, c, 5, 5), bodies(0, 5))
			a, err := c.Group("a")
			if err != nil {
				t.Fatal(err)
			}
			tx, _ := a.Begin()
			for range 2 {
				if _, ok, err := tx.Take(); !ok || err != nil {
					t.Fatalf("take from a: %v %v", ok, err)
				}
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(cfg.CheckpointDir, filepath.FromSlash(tc.file))
			if !tc.counting {
				// No journal here: one left by an earlier configuration,
				// say, grown.
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Fatalf("a channel where no group counts deliveries has a journal: %v", err)
				}
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Truncate(p, 1<<30); err != nil {
				t.Fatal(err)
			}
			c, n := openAllocated(t, cfg)
			if n > maxOpenAlloc {
				t.Errorf("Open with a 1 GiB %s allocated %d MiB", tc.file, n>>20)
			}
			if from := c.Stats().RecoveredFrom; (from != "checkpoint") != tc.fallback {
				t.Errorf("recovered from %q", from)
			}
			t.Logf("Open allocated %d KiB, recovered from %s", n>>10, c.Stats().RecoveredFrom)
			wantEvents(t, drain(t, c), bodies(5, 15))
			wantEvents(t, takeWith(t, groupBegin(t, c, "a"), 20, 20), bodies(0, 20))
			if fi, err := os.Stat(filepath.Join(cfg.CheckpointDir, "deliveries")); (err == nil) != tc.counting ||
				(err == nil && fi.Size() >= 1<<30) {
				t.Errorf("delivery journal after Open: %v, %v", fi, err)
			}
		})
	}
}

// groupBegin returns the Begin of c's group name.
func groupBegin(t *testing.T, c *FileChannel, name string) func() (*Transaction, error) {
	t.Helper()
	g, err := c.Group(name)
	if err != nil {
		t.Fatal(err)
	}
	return g.Begin
}
