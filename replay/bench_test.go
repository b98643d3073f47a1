package replay

import (
	"fmt"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
)

// BenchmarkReplay replays logs of events that were each put and taken, in
// transactions of 100, over two data dirs (on the OS filesystem, so the page
// cache serves the reads). ns/record and ns/event should stay about flat
// from 100k to 400k events: replay is linear in the records read and the
// events they move.
//
//	full: no checkpoint; every put and take commit is in the logs.
//	ring: a checkpoint holds every event in its ring; the logs after it hold
//	      only the take commits, which remove the events from the head.
//
// Reproduce with
//
//	go test -run '^$' -bench Replay -benchmem ./replay/
func BenchmarkReplay(b *testing.B) {
	for _, kind := range []string{"full", "ring"} {
		for _, events := range []int{100_000, 400_000} {
			b.Run(fmt.Sprintf("%s/events=%dk", kind, events/1000), func(b *testing.B) {
				benchmarkReplay(b, kind == "ring", events)
			})
		}
	}
}

func benchmarkReplay(b *testing.B, fromRing bool, events int) {
	const batch = 100
	l := newLogSetOn(b, vfs.OS(), b.TempDir(), 2)
	l.create(0, 1)
	l.create(1, 2)
	var (
		tx   uint64
		ring []ptr
		st   *checkpoint.State
	)
	// File 1 and 2 take turns; each batch is taken from the other file.
	file := func(i int) uint32 { return uint32(1 + i%2) }
	puts := make([][]ptr, events/batch)
	for i := range puts {
		tx++
		puts[i] = l.putCommitted(file(i), tx, batch)
		if !fromRing && i > 0 {
			tx++
			l.takeCommitted(file(i), tx, puts[i-1]...) // the previous batch, after the next was put
		}
	}
	if fromRing {
		for _, ps := range puts {
			ring = append(ring, ps...)
		}
		st = l.state(l.woid, ring)
	}
	for i := range puts {
		if fromRing || i == len(puts)-1 {
			tx++
			l.takeCommitted(file(i+1), tx, puts[i]...)
		}
	}
	for id, w := range l.w {
		if err := w.Sync(); err != nil {
			b.Fatalf("sync log %d: %v", id, err)
		}
	}

	capacity := max(len(ring), 1)
	slots := eventqueue.NewMemSlots(capacity)
	var res *Result
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i, p := range ring {
			slots[i] = uint64(p)
		}
		q, err := eventqueue.New(slots, capacity, 0, len(ring), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err = Run(Options{FS: l.fs, DataDirs: l.dirs, Checkpoint: st, Queue: q})
		if err != nil {
			b.Fatal(err)
		}
		if q.Size() != 0 {
			b.Fatalf("%d events left in the queue, want none", q.Size())
		}
	}
	b.StopTimer()
	if res.Takes != int64(events) {
		b.Fatalf("replay took %d events, want %d", res.Takes, events)
	}
	b.SetBytes(res.Bytes)
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns/float64(res.Records), "ns/record")
	b.ReportMetric(ns/float64(events), "ns/event")
	b.ReportMetric(float64(res.Records), "records")
}
