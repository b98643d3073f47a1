package channel

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkOrderKeyTake measures 4 takers committing take transactions
// (batch 100 × 1 KiB) of one group: without OrderKey (none), with
// OrderKey over 1,000 keys (keys), and with OrderKey where one key, held
// by a taker that never commits, has 10 % of the queued events (stuck;
// events/s counts the others). Compare events/s with none's (issue 32's
// target: >= 0.8 for both):
//
//	go test ./channel -run '^$' -bench 'OrderKeyTake' -benchtime 100000x
func BenchmarkOrderKeyTake(b *testing.B) {
	for _, mode := range []string{"none", "keys", "stuck"} {
		b.Run(mode, func(b *testing.B) {
			n := max(b.N, 10_000)
			cfg := groupsBenchConfig(b, 1, n+1000)
			cfg.TransactionCapacity = 10_000
			cfg.checkKeyTags = false // as in production
			if mode != "none" {
				cfg.Groups[0].OrderKey = "k"
			}
			c := mustOpen(b, cfg)
			defer c.Close()
			g := mustGroup(b, c, "g0")
			stuck := putOrderBench(b, c, n, mode == "stuck")
			var holder *Transaction
			if mode == "stuck" {
				holder = mustBegin(b, g)
				if _, ok, err := holder.Take(); !ok || err != nil {
					b.Fatalf("stuck take: %v, %v", ok, err)
				}
				stuck--
			}
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			took := takeOrderBench(b, g, n-stuck-(n-b.N))
			b.StopTimer()
			b.ReportMetric(float64(took)/b.Elapsed().Seconds(), "events/s")
			if holder != nil {
				if err := holder.Rollback(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// putOrderBench puts n events of 1 KiB over 1,000 keys, every 10th (the
// first among them) on key "stuck" if stuck; it returns how many are.
func putOrderBench(b *testing.B, c *FileChannel, n int, stuck bool) int {
	b.Helper()
	body := make([]byte, 1024)
	s := 0
	for i := 0; i < n; i += 1000 {
		tx, err := c.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for j := i; j < min(i+1000, n); j++ {
			k := "key" + strconv.Itoa(j%1000)
			if stuck && j%10 == 0 {
				k, s = "stuck", s+1
			}
			if err := tx.Put(Event{Headers: map[string]string{"k": k}, Body: body}); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// takeOrderBench takes about n events of g with 4 takers in batches of
// 100 and returns how many they took.
func takeOrderBench(b *testing.B, g *Group, n int) int {
	var left atomic.Int64
	left.Store(int64(n))
	var took atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Load() > 0 {
				k, err := takeBatch(g, 100)
				if err != nil {
					b.Error(err)
					return
				}
				left.Add(-int64(k))
				took.Add(int64(k))
				if k == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	return int(took.Load())
}

// BenchmarkOrderRetryOpen measures Open of a channel whose group has
// 100,000 events waiting for their retry delay (each of its own key), with
// OrderKey (Open reads each waiting event to learn
// its key: keyWaiting) and without (the same files: OrderKey is not in
// the log). Compare the two in one run.
func BenchmarkOrderRetryOpen(b *testing.B) {
	const n = 100_000
	cfg := testConfig(b, 1)
	cfg.Capacity = 2 * n
	cfg.TransactionCapacity = 10_000
	cfg.Groups = []GroupConfig{{Name: "a", RetryDelays: []time.Duration{time.Hour}}}
	c := mustOpen(b, cfg)
	for from := 0; from < n; from += 10_000 {
		keys := make([]string, 10_000)
		for i := range keys {
			keys[i] = strconv.Itoa(from + i)
		}
		putKeyed(b, c, from, keys...)
	}
	for waiting := 0; waiting < n; {
		tx := mustBegin(b, mustGroup(b, c, "a"))
		for range cfg.TransactionCapacity {
			if _, ok, err := tx.Take(); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
		waiting += cfg.TransactionCapacity
		if err := tx.Rollback(); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	for _, key := range []string{"", "k"} {
		b.Run("orderkey="+key, func(b *testing.B) {
			cfg.Groups[0].OrderKey = key
			for b.Loop() {
				c := mustOpen(b, cfg)
				if st := mustGroup(b, c, "a").Stats(); st.Waiting != n {
					b.Fatalf("%d waiting, want %d", st.Waiting, n)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
