package channel

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// testConfig returns a small channel config in a fresh temp dir.
func testConfig(t testing.TB, dataDirs int) Config {
	t.Helper()
	base := t.TempDir()
	cfg := Config{
		CheckpointDir:        filepath.Join(base, "checkpoint"),
		Capacity:             1000,
		TransactionCapacity:  100,
		CheckpointInterval:   time.Hour, // tests checkpoint explicitly
		MinimumRequiredSpace: -1,
		KeepAlive:            50 * time.Millisecond,
	}
	for i := range dataDirs {
		cfg.DataDirs = append(cfg.DataDirs, filepath.Join(base, fmt.Sprintf("data%d", i)))
	}
	return cfg
}

func mustOpen(t testing.TB, cfg Config) *FileChannel {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}

func body(i int) []byte { return []byte("event-" + strconv.Itoa(i)) }

// putN commits events [from, from+n) in batches of batch.
func putN(t testing.TB, c *FileChannel, from, n, batch int) {
	t.Helper()
	for i := from; i < from+n; {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < batch && i < from+n; j, i = j+1, i+1 {
			if err := tx.Put(Event{Headers: map[string]string{"i": strconv.Itoa(i)}, Body: body(i)}); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
}

// takeN takes and commits up to n events in batches, returning the bodies.
func takeN(t testing.TB, c *FileChannel, n, batch int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for j := 0; j < batch && len(out) < n; j++ {
			ev, ok, err := tx.Take()
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if !ok {
				break
			}
			out = append(out, string(ev.Body))
			got++
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit take: %v", err)
		}
		if got == 0 {
			break
		}
	}
	return out
}

// drain takes every event.
func drain(t testing.TB, c *FileChannel) []string {
	return takeN(t, c, 1<<30, min(37, c.cfg.TransactionCapacity))
}

func bodies(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(body(from + i))
	}
	return out
}

func wantEvents(t testing.TB, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("got %d events %s, want %d events %s", len(got), short(got), len(want), short(want))
	}
}

func short(s []string) string {
	if len(s) > 12 {
		return fmt.Sprint(s[:6], " ... ", s[len(s)-6:])
	}
	return fmt.Sprint(s)
}

// crash abandons c the way a killed process does: no checkpoint, no
// transaction completion; only the file descriptors (and so the locks) go.
func crash(t testing.TB, c *FileChannel) {
	t.Helper()
	if !c.closed.CompareAndSwap(false, true) {
		t.Fatal("crash of a closed channel")
	}
	close(c.closing)
	c.wg.Wait()
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if err := c.release(); err != nil {
		t.Logf("release after crash: %v", err)
	}
}

func vfsOS() vfs.FS { return vfs.OS() }
