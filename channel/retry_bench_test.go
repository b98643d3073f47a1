package channel

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRetryWaitingTake measures take commits (batch 100 × 1 KiB) of
// a group with RetryDelays, with no event waiting for its delay and with
// 100,000 waiting (an hour away): the waiting events are a heap beside
// the ring, so a take only peeks at its top. Compare the two events/s
// (issue 32's target: >= 0.9 of the rate with none waiting):
//
//	go test ./channel -run '^$' -bench 'RetryWaitingTake' -benchtime 200000x
func BenchmarkRetryWaitingTake(b *testing.B) {
	ev := Event{Body: make([]byte, 1024)}
	for _, waiting := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			cfg := groupsBenchConfig(b, 1, waiting+max(b.N, 10_000)+1000)
			cfg.TransactionCapacity = 10_000
			cfg.Groups[0].RetryDelays = []time.Duration{time.Hour}
			c := mustOpen(b, cfg)
			defer c.Close()
			g := mustGroup(b, c, "g0")
			makeWaiting(b, c, g, ev, waiting)
			for i := 0; i < b.N; i += 1000 {
				putBatch(b, c, ev, min(1000, b.N-i))
			}
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			for left := b.N; left > 0; {
				k, err := takeBatch(g, min(left, 100))
				if err != nil || k == 0 {
					b.Fatalf("take: %d, %v with %d to take", k, err, left)
				}
				left -= k
			}
			b.StopTimer()
			if st := g.Stats(); st.Waiting != waiting {
				b.Fatalf("%d waiting, want %d", st.Waiting, waiting)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// makeWaiting puts n events and rolls back their takes, in transactions
// of 10,000: they wait for g's first retry delay.
func makeWaiting(b *testing.B, c *FileChannel, g *Group, ev Event, n int) {
	b.Helper()
	for i := 0; i < n; i += 10_000 {
		k := min(10_000, n-i)
		putBatch(b, c, ev, k)
		tx, err := g.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for range k {
			if _, ok, err := tx.Take(); !ok || err != nil {
				b.Fatalf("take: %v, %v", ok, err)
			}
		}
		if err := tx.Rollback(); err != nil {
			b.Fatal(err)
		}
	}
}
