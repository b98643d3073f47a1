package channel

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkPutDedupInterleaved puts as BenchmarkPutDedup (durable, the
// window full) to two channels, one without Dedup and one with it, a
// commit to each in turn, and reports each one's events/s and their
// ratio: the disk's and the machine's changes of pace then fall on both
// alike (b.N events to each).
//
//	go test ./channel -run '^$' -bench PutDedupInterleaved -benchtime 200000x
func BenchmarkPutDedupInterleaved(b *testing.B) {
	const batch = 100
	var cs [2]*FileChannel
	for k := range cs {
		cfg := benchConfig(b)
		if k == 1 {
			cfg.Dedup = Dedup{Header: "id", Window: time.Hour}
		}
		cs[k] = mustOpen(b, cfg)
		defer cs[k].Close()
	}
	fillWindow(cs[1].dedup, DefaultDedupMaxIDs, cs[1].commitTime())
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = "event-" + strconv.Itoa(i)
	}
	h := map[string]string{"id": ""}
	ev := Event{Headers: h, Body: make([]byte, 1024)}
	var spent [2]time.Duration
	b.SetBytes(int64(2 * len(ev.Body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		for k, c := range cs {
			start := time.Now()
			tx, _ := c.Begin()
			for j := i; j < min(i+batch, b.N); j++ {
				h["id"] = ids[j]
				if err := tx.Put(ev); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(start)
		}
	}
	b.StopTimer()
	for k, name := range []string{"events/s-without", "events/s-dedup"} {
		b.ReportMetric(float64(b.N)/spent[k].Seconds(), name)
	}
	b.ReportMetric(spent[0].Seconds()/spent[1].Seconds(), "ratio")
}
