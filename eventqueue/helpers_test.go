package eventqueue

import (
	"fmt"
	"testing"
)

// guardSlots is a MemSlots that counts reads and writes, remembers the slots
// written since the last reset, and records any access outside the ring of
// the capacity it was made for.
type guardSlots struct {
	MemSlots
	capacity int
	reads    int
	writes   int
	written  []int
	bad      []string
}

func newGuardSlots(capacity int) *guardSlots {
	return &guardSlots{MemSlots: NewMemSlots(capacity), capacity: capacity}
}

func (g *guardSlots) inRing(op string, i int) {
	if i < 0 || i >= g.capacity {
		g.bad = append(g.bad, fmt.Sprintf("%s(%d) outside ring [0, %d)", op, i, g.capacity))
	}
}

func (g *guardSlots) Slot(i int) uint64 {
	g.reads++
	g.inRing("Slot", i)
	return g.MemSlots[i]
}

func (g *guardSlots) SetSlot(i int, v uint64) {
	g.writes++
	g.written = append(g.written, i)
	g.inRing("SetSlot", i)
	g.MemSlots[i] = v
}

func (g *guardSlots) reset() {
	g.reads, g.writes, g.written = 0, 0, g.written[:0]
}

// newTestQueue returns an empty queue over guardSlots whose Check runs when
// the test ends.
func newTestQueue(t *testing.T, capacity, head int) (*Queue, *guardSlots) {
	t.Helper()
	s := newGuardSlots(capacity)
	q, err := New(s, capacity, head, 0, nil)
	if err != nil {
		t.Fatalf("New(cap %d, head %d): %v", capacity, head, err)
	}
	t.Cleanup(func() {
		if err := q.Check(); err != nil {
			t.Errorf("Check at cleanup: %v", err)
		}
		if len(s.bad) > 0 {
			t.Errorf("slot accesses outside the ring: %v", s.bad)
		}
	})
	return q, s
}

// ptrs returns n distinct pointers spread over three files.
func ptrs(n int) []Pointer {
	ps := make([]Pointer, n)
	for i := range ps {
		ps[i] = NewPointer(uint32(1+i%3), uint32(16+i*100))
	}
	return ps
}

func mustAddTail(t *testing.T, q *Queue, ps ...Pointer) {
	t.Helper()
	for _, p := range ps {
		if err := q.AddTail(p); err != nil {
			t.Fatalf("AddTail(%v): %v", p, err)
		}
	}
}

func countRefs(ps []Pointer) map[uint32]int {
	m := make(map[uint32]int)
	for _, p := range ps {
		m[p.FileID()]++
	}
	return m
}
