package channel

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkPutDedup compares put commits (batch 100 × 1 KiB, each event
// with its own id header) without Config.Dedup and with it, the window
// full (1,000,000 ids: each commit forgets as many as it adds); durable
// (an fsync per commit) and with NoSync (the CPU cost alone shows):
//
//	go test ./channel -run '^$' -bench PutDedup -benchtime 100000x
func BenchmarkPutDedup(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("sync=%v/dedup=%v", sync, on), func(b *testing.B) { benchPutDedup(b, sync, on) })
		}
	}
}

// benchPutDedup is a run of BenchmarkPutDedup.
func benchPutDedup(b *testing.B, sync, on bool) {
	cfg := benchConfig(b)
	cfg.NoSync = !sync
	if on {
		cfg.Dedup = Dedup{Header: "id", Window: time.Hour}
	}
	c := mustOpen(b, cfg)
	defer c.Close()
	if on { // full: each commit forgets as many ids as it adds
		fillWindow(c.dedup, DefaultDedupMaxIDs, c.commitTime())
	}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = "event-" + strconv.Itoa(i)
	}
	h := map[string]string{"id": ""}
	benchPutsEach(b, c, Event{Headers: h, Body: make([]byte, 1024)}, 100, func(i int) { h["id"] = ids[i] })
}

// fillWindow adds n distinct ids committed at now to w.
func fillWindow(w *dedupWindow, n int, now int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range n {
		w.addLocked(dedupID{uint64(i) + 1<<63, uint64(i)}, now)
	}
}

// BenchmarkDedupWindowMemory reports the heap a window of 1,000,000 ids
// takes, per id (the map and the FIFO, as commits of 100 ids fill it),
// and again after 3,000,000 more ids went through it (each commit then
// forgets as many as it adds): the window does not grow with the churn.
//
//	go test ./channel -run '^$' -bench DedupWindowMemory -benchtime 1x
func BenchmarkDedupWindowMemory(b *testing.B) {
	const n = DefaultDedupMaxIDs
	var full, churned float64
	for range b.N {
		heap := func() uint64 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		w := newDedupWindow(Dedup{Header: "id", Window: time.Hour, MaxIDs: n})
		keep := make([]dedupID, 100)
		commit := func(from int) {
			for i := range keep {
				keep[i] = dedupIDOf(strconv.Itoa(from + i))
			}
			w.commit(1, int64(from+1), keep, 0)
			w.trim() // the trimmer's part
		}
		for i := 0; i < n; i += len(keep) {
			commit(i)
		}
		full = float64(heap()-before) / n
		for i := n; i < 4*n; i += len(keep) {
			commit(i)
		}
		churned = float64(heap()-before) / n
		runtime.KeepAlive(w)
	}
	b.ReportMetric(full, "B/id")
	b.ReportMetric(churned, "B/id-churned")
}

// BenchmarkRecoveryDedup measures a crash recovery (Open) whose log tail
// holds 100,000 committed puts (commits of 100 × 100 B, each event with
// its own id header; no checkpoint after them), with and without Keys and
// Config.Dedup: with both, the replay opens every encrypted put to read
// its id. Each run opens a fresh copy of the channel's files (OS
// filesystem: the page cache serves the reads).
//
//	go test ./channel -run '^$' -bench RecoveryDedup -benchtime 5x
func BenchmarkRecoveryDedup(b *testing.B) {
	for _, keys := range []bool{false, true} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("keys=%v/dedup=%v", keys, on), func(b *testing.B) { benchRecoveryDedup(b, keys, on) })
		}
	}
}

// benchRecoveryDedup is a run of BenchmarkRecoveryDedup.
func benchRecoveryDedup(b *testing.B, keys, on bool) {
	const puts, batch = 100_000, 100
	cfg := benchConfig(b)
	cfg.NoSync = true
	if keys {
		cfg.Keys = StaticKeys("k1", map[string][]byte{"k1": testKey(0xa1)})
	}
	cfg.Dedup = Dedup{Header: "id", Window: time.Hour}
	base := filepath.Dir(cfg.CheckpointDir)
	c, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < puts; i += batch {
		es := make([]Event, batch)
		for j := range es {
			es[j] = Event{Headers: map[string]string{"id": "event-" + strconv.Itoa(i+j)}, Body: make([]byte, 100)}
		}
		putTx(b, c, es...)
	}
	crash(b, c)
	if !on {
		cfg.Dedup = Dedup{}
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), strconv.Itoa(i))
		if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
			b.Fatal(err)
		}
		run := cfg
		run.CheckpointDir = filepath.Join(dir, filepath.Base(cfg.CheckpointDir))
		run.DataDirs = []string{filepath.Join(dir, filepath.Base(cfg.DataDirs[0]))}
		b.StartTimer()
		c, err := Open(run)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if s := c.Stats(); on && s.DedupIDs != puts {
			b.Fatalf("DedupIDs %d, want %d", s.DedupIDs, puts)
		}
		c.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/puts, "ns/put")
}
