package eventqueue

import "testing"

// Benchmarks; reproduce with
//
//	go test -run '^$' -bench . -benchmem ./eventqueue/
func BenchmarkQueue(b *testing.B) {
	// Steady state of a running channel: puts commit at the tail while takes
	// drain the head, the ring wrapping all the time.
	for _, tc := range []struct {
		name  string
		depth int
		index bool
	}{
		{"AddTail_RemoveHead/depth_1", 1, false},
		{"AddTail_RemoveHead/depth_1000", 1000, false},
		{"AddTail_RemoveHead/depth_1000_indexed", 1000, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const capacity = 4096
			q, err := New(NewMemSlots(capacity), capacity, 0, 0, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := range tc.depth - 1 {
				_ = q.AddTail(NewPointer(1, uint32(i)))
			}
			if tc.index {
				q.Remove(NewPointer(999, 0))
			}
			b.SetBytes(8)
			b.ReportAllocs()
			var off uint32
			for b.Loop() {
				off++
				if err := q.AddTail(NewPointer(1+off>>20, off)); err != nil {
					b.Fatal(err)
				}
				q.RemoveHead()
			}
		})
	}

	// Replay of a take: Remove of a pointer near the head of a 1M queue
	// through the index, refilled at the tail to keep the size.
	b.Run("Remove_near_head_indexed/size_1M", func(b *testing.B) {
		const capacity = 1 << 20
		q, err := New(NewMemSlots(capacity), capacity, 0, 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		next := uint32(0)
		for range capacity - 1 {
			next++
			_ = q.AddTail(NewPointer(1+next>>24, next))
		}
		q.Remove(NewPointer(0xFFFF, 0)) // build the index
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if !q.Remove(q.Get(8)) {
				b.Fatal("Remove = false")
			}
			next++
			_ = q.AddTail(NewPointer(1+next>>24, next))
		}
	})
}

func BenchmarkInflight(b *testing.B) {
	// One transaction of 100 puts: Add each, then Remove the transaction.
	b.Run("Add100_Remove", func(b *testing.B) {
		f := NewInflight()
		b.ReportAllocs()
		tx := uint64(0)
		for b.Loop() {
			tx++
			for i := range 100 {
				f.Add(tx, NewPointer(1, uint32(i)))
			}
			f.Remove(tx)
		}
	})
}
