package eventqueue

import (
	"runtime"
	"testing"
)

// tagged returns q's pointers and tags in queue order.
func tagged(q *Queue) (ps []Pointer, tags []uint64) {
	for i := range q.Size() {
		ps, tags = append(ps, q.Get(i)), append(tags, q.Tag(i))
	}
	return ps, tags
}

func mustQueue(t *testing.T, capacity int) *Queue {
	t.Helper()
	q, err := New(NewMemSlots(capacity), capacity, 0, 0, map[uint32]int{})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestTagsFollowPointers: a tag moves with its pointer through every
// operation, across the ring's wrap, and an add without a tag leaves
// tag 0 in a slot an earlier pointer's tag was in.
func TestTagsFollowPointers(t *testing.T) {
	q := mustQueue(t, 6)
	p := func(i int) Pointer { return NewPointer(1, uint32(8*i)) }
	for i := 1; i <= 4; i++ {
		if err := q.AddTailTagged(p(i), uint64(10*i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ { // the head moves to slot 3
		if got, tag, ok := q.RemoveHeadTagged(); !ok || got != p(i) || tag != uint64(10*i) {
			t.Fatalf("RemoveHeadTagged = %v, %d, %v; want %v, %d", got, tag, ok, p(i), 10*i)
		}
	}
	// slots 4, 5, then 0 (wrapped, untagged over p(1)'s tag 10) and 1
	for i, tag := range []uint64{50, 60, 0, 80} {
		if err := q.AddTailTagged(p(5+i), tag); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.AddHead(p(3)); err != nil { // slot 2, untagged over its tag 30
		t.Fatal(err)
	}
	if _, tags := tagged(q); !equalTags(tags, []uint64{0, 40, 50, 60, 0, 80}) {
		t.Fatalf("tags %v, want [0 40 50 60 0 80]", tags)
	}
	// Remove shifts the front segment (index 1), then the back one (index 3).
	q.Remove(p(4))
	q.Remove(p(7))
	if _, tags := tagged(q); !equalTags(tags, []uint64{0, 50, 60, 80}) {
		t.Fatalf("after Remove: tags %v, want [0 50 60 80]", tags)
	}
	if err := q.AddHeadTagged(p(2), 20); err != nil {
		t.Fatal(err)
	}
	if got, tag, _ := q.RemoveHeadTagged(); got != p(2) || tag != 20 {
		t.Fatalf("RemoveHeadTagged = %v, %d; want %v, 20", got, tag, p(2))
	}
}

func equalTags(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTagsCostNothingUntilUsed: a queue that never had a non-zero tag
// keeps none; the first costs 8 bytes per slot.
func TestTagsCostNothingUntilUsed(t *testing.T) {
	q := mustQueue(t, 1000)
	for i := range 900 {
		if err := q.AddTail(NewPointer(1, uint32(8*i))); err != nil {
			t.Fatal(err)
		}
	}
	q.RemoveHead()
	q.Remove(NewPointer(1, 800))
	if n := q.TagBytes(); n != 0 {
		t.Fatalf("untagged queue: TagBytes %d, want 0", n)
	}
	if err := q.AddTailTagged(NewPointer(2, 0), 7); err != nil {
		t.Fatal(err)
	}
	if n := q.TagBytes(); n != 8000 {
		t.Fatalf("TagBytes %d, want 8000 (8 per slot)", n)
	}
}

// BenchmarkTagsMemory reports the heap a full ring of 1,000,000 tagged
// pointers adds for its tags, per queued pointer (MemSlots' own 8 bytes
// per slot excluded: they are allocated before).
func BenchmarkTagsMemory(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		slots := NewMemSlots(n)
		q, err := New(slots, n, 0, 0, map[uint32]int{})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			if err := q.AddTailTagged(NewPointer(1, uint32(8*i)), uint64(i)|2); err != nil {
				b.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "tagB/event")
		runtime.KeepAlive(q)
	}
}

// Tag checks its index as Get does, and reads no slot.
func TestTagBoundsNoSlotRead(t *testing.T) {
	g := newGuardSlots(4)
	q, err := New(g, 4, 0, 0, map[uint32]int{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddTailTagged(NewPointer(1, 8), 5); err != nil {
		t.Fatal(err)
	}
	g.reads = 0
	if tag := q.Tag(0); tag != 5 || g.reads != 0 {
		t.Fatalf("Tag(0) = %d with %d slot reads; want 5, none", tag, g.reads)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Tag(1) of a queue of size 1 did not panic")
		}
	}()
	q.Tag(1)
}
