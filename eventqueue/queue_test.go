package eventqueue

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

func TestPointer(t *testing.T) {
	tests := []struct {
		name   string
		fileID uint32
		offset uint32
		want   string
	}{
		{"small", 3, 1024, "3:1024"},
		{"offset_zero", 1, 0, "1:0"},
		{"max_fields_do_not_bleed", 0xFFFFFFFF, 0xFFFFFFFF, "4294967295:4294967295"},
		{"high_offset_bit_stays_in_offset", 1, 0x80000000, "1:2147483648"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPointer(tt.fileID, tt.offset)
			if p.FileID() != tt.fileID || p.Offset() != tt.offset {
				t.Errorf("NewPointer(%d, %d) = %#x: FileID %d, Offset %d", tt.fileID, tt.offset, uint64(p), p.FileID(), p.Offset())
			}
			if p.String() != tt.want {
				t.Errorf("String() = %q, want %q", p.String(), tt.want)
			}
		})
	}
	if got := NewPointer(3, 1024); uint64(got) != 3<<32|1024 {
		t.Errorf("layout: NewPointer(3, 1024) = %#x, want %#x", uint64(got), uint64(3<<32|1024))
	}
}

func TestQueue(t *testing.T) {
	t.Run("remove_shifts_smaller_side", testRemoveShiftsSmallerSide)
	t.Run("remove_absent_does_not_build_scan", testRemoveAbsentDoesNotBuildScan)
	t.Run("new_rejects_bad_head_size", testNewRejectsBadHeadSize)

	t.Run("fifo_order", func(t *testing.T) {
		q, _ := newTestQueue(t, 8, 5)
		in := ptrs(8)
		mustAddTail(t, q, in...)
		for i, want := range in {
			if got := q.Get(i); got != want {
				t.Fatalf("Get(%d) = %v, want %v", i, got, want)
			}
		}
		for _, want := range in {
			got, ok := q.RemoveHead()
			if !ok || got != want {
				t.Fatalf("RemoveHead() = %v, %v; want %v, true", got, ok, want)
			}
		}
		if p, ok := q.RemoveHead(); ok {
			t.Fatalf("RemoveHead on empty queue = %v, true", p)
		}
		if len(q.FileRefs()) != 0 {
			t.Fatalf("FileRefs of empty queue = %v", q.FileRefs())
		}
	})

	t.Run("add_head_restores_original_order", func(t *testing.T) {
		q, _ := newTestQueue(t, 10, 0)
		in := ptrs(7)
		mustAddTail(t, q, in...)
		var taken []Pointer
		for range 4 {
			p, _ := q.RemoveHead()
			taken = append(taken, p)
		}
		for i := len(taken) - 1; i >= 0; i-- { // rollback: last taken goes back first
			if err := q.AddHead(taken[i]); err != nil {
				t.Fatalf("AddHead(%v): %v", taken[i], err)
			}
		}
		if got := q.Pointers(); !slices.Equal(got, in) {
			t.Fatalf("after rollback Pointers() = %v, want %v", got, in)
		}
		if !maps.Equal(q.FileRefs(), countRefs(in)) {
			t.Fatalf("FileRefs() = %v, want %v", q.FileRefs(), countRefs(in))
		}
	})

	t.Run("full_queue_refuses", func(t *testing.T) {
		for _, capacity := range []int{1, 3} {
			q, s := newTestQueue(t, capacity, capacity-1)
			in := ptrs(capacity)
			mustAddTail(t, q, in...)
			s.reset()
			extra := NewPointer(9, 9)
			if err := q.AddTail(extra); !errors.Is(err, ErrFull) {
				t.Errorf("cap %d: AddTail on full queue = %v, want ErrFull", capacity, err)
			}
			if err := q.AddHead(extra); !errors.Is(err, ErrFull) {
				t.Errorf("cap %d: AddHead on full queue = %v, want ErrFull", capacity, err)
			}
			if s.writes != 0 || q.Size() != capacity || q.Head() != capacity-1 || q.FileRef(9) != 0 {
				t.Errorf("cap %d: refused add changed state: writes %d, size %d, head %d, refs %v", capacity, s.writes, q.Size(), q.Head(), q.FileRefs())
			}
			if got := q.Pointers(); !slices.Equal(got, in) {
				t.Errorf("cap %d: Pointers() = %v, want %v", capacity, got, in)
			}
		}
	})

	t.Run("zero_pointer_refused", func(t *testing.T) {
		q, s := newTestQueue(t, 4, 0)
		if err := q.AddTail(0); !errors.Is(err, ErrZeroPointer) {
			t.Errorf("AddTail(0) = %v, want ErrZeroPointer", err)
		}
		if err := q.AddHead(0); !errors.Is(err, ErrZeroPointer) {
			t.Errorf("AddHead(0) = %v, want ErrZeroPointer", err)
		}
		if q.Size() != 0 || s.writes != 0 {
			t.Errorf("refused zero pointer changed state: size %d, writes %d", q.Size(), s.writes)
		}
	})

	t.Run("wraparound", func(t *testing.T) {
		const capacity = 5
		// Head at the last ring slot: AddTail wraps to ring slot 0.
		q, s := newTestQueue(t, capacity, capacity-1)
		in := ptrs(capacity)
		mustAddTail(t, q, in...)
		for i, want := range []int{4, 0, 1, 2, 3} {
			if got := q.PhysicalIndex(i); got != want {
				t.Errorf("PhysicalIndex(%d) = %d, want %d", i, got, want)
			}
			if got := Pointer(s.MemSlots[want]); got != in[i] {
				t.Errorf("slot of logical %d holds %v, want %v", i, got, in[i])
			}
		}
		// RemoveHead from the last ring slot wraps head to 0.
		if p, _ := q.RemoveHead(); p != in[0] || q.Head() != 0 {
			t.Fatalf("RemoveHead() = %v with head %d, want %v with head 0", p, q.Head(), in[0])
		}
		// AddHead at head 0 wraps back to the last ring slot.
		if err := q.AddHead(in[0]); err != nil || q.Head() != capacity-1 {
			t.Fatalf("AddHead at head 0: err %v, head %d, want head %d", err, q.Head(), capacity-1)
		}
		if got := q.Pointers(); !slices.Equal(got, in) {
			t.Fatalf("Pointers() = %v, want %v", got, in)
		}
		// Remove across the wrap point, both sides.
		if !q.Remove(in[1]) || !q.Remove(in[3]) {
			t.Fatal("Remove of queued pointers across the wrap returned false")
		}
		want := []Pointer{in[0], in[2], in[4]}
		if got := q.Pointers(); !slices.Equal(got, want) {
			t.Fatalf("after Remove Pointers() = %v, want %v", got, want)
		}
		// Refill through the wrap with the index live.
		mustAddTail(t, q, in[1], in[3])
		if !q.Remove(in[0]) {
			t.Fatal("Remove(head) returned false")
		}
		want = []Pointer{in[2], in[4], in[1], in[3]}
		if got := q.Pointers(); !slices.Equal(got, want) {
			t.Fatalf("after refill Pointers() = %v, want %v", got, want)
		}
	})

	t.Run("remove_of_duplicate_takes_nearest_head", func(t *testing.T) {
		q, _ := newTestQueue(t, 8, 6)
		a, b, c := NewPointer(1, 1), NewPointer(2, 2), NewPointer(3, 3)
		mustAddTail(t, q, b, a, c, a, b)
		if !q.Remove(a) {
			t.Fatal("Remove(a) = false")
		}
		want := []Pointer{b, c, a, b}
		if got := q.Pointers(); !slices.Equal(got, want) {
			t.Fatalf("Pointers() = %v, want %v", got, want)
		}
		r1, r2, r3 := q.Remove(b), q.Remove(b), q.Remove(b)
		if !r1 || !r2 || r3 {
			t.Fatalf("Remove(b) three times = %v, %v, %v; want true, true, false", r1, r2, r3)
		}
		if got := q.Pointers(); !slices.Equal(got, []Pointer{c, a}) {
			t.Fatalf("Pointers() = %v, want %v", got, []Pointer{c, a})
		}
	})

	t.Run("refs_follow_every_operation", func(t *testing.T) {
		q, _ := newTestQueue(t, 6, 2)
		f1a, f1b, f2 := NewPointer(1, 10), NewPointer(1, 20), NewPointer(2, 10)
		mustAddTail(t, q, f1a, f2)
		if err := q.AddHead(f1b); err != nil {
			t.Fatal(err)
		}
		if q.FileRef(1) != 2 || q.FileRef(2) != 1 {
			t.Fatalf("FileRefs() = %v, want map[1:2 2:1]", q.FileRefs())
		}
		q.RemoveHead()
		q.Remove(f2)
		if got := q.FileRefs(); !maps.Equal(got, map[uint32]int{1: 1}) {
			t.Fatalf("FileRefs() = %v, want map[1:1] (file 2 deleted at zero)", got)
		}
		got := q.FileRefs()
		got[1] = 99
		if q.FileRef(1) != 1 {
			t.Fatal("FileRefs() returned the queue's own map")
		}
	})

	t.Run("drop_index_then_remove_rebuilds", func(t *testing.T) {
		q, s := newTestQueue(t, 8, 3)
		in := ptrs(6)
		mustAddTail(t, q, in...)
		q.Remove(in[2])
		q.DropIndex()
		q.RemoveHead()
		mustAddTail(t, q, in[2])
		s.reset()
		if !q.Remove(in[4]) {
			t.Fatal("Remove after DropIndex = false")
		}
		if s.reads < q.Size() {
			t.Errorf("Remove after DropIndex read %d slots; want a rebuild pass over the ring", s.reads)
		}
		want := []Pointer{in[1], in[3], in[5], in[2]}
		if got := q.Pointers(); !slices.Equal(got, want) {
			t.Fatalf("Pointers() = %v, want %v", got, want)
		}
	})
}

// testRemoveShiftsSmallerSide checks that Remove moves only the shorter side
// of the ring: min(i, size-1-i) slot writes and no write outside the ring.
func testRemoveShiftsSmallerSide(t *testing.T) {
	for _, size := range []int{1, 2, 9, 10} {
		for i := 0; i < size; i++ {
			for _, head := range []int{0, 7} { // 7: the ring wraps
				q, s := newTestQueue(t, 12, head)
				in := ptrs(size)
				mustAddTail(t, q, in...)
				q.Remove(NewPointer(99, 1)) // build the index
				s.reset()
				if !q.Remove(in[i]) {
					t.Fatalf("size %d: Remove(index %d) = false", size, i)
				}
				want := min(i, size-1-i)
				if s.writes != want {
					t.Errorf("size %d head %d: Remove(index %d) wrote %d slots, want %d", size, head, i, s.writes, want)
				}
				if s.reads > want+1 {
					t.Errorf("size %d head %d: Remove(index %d) read %d slots, want <= %d", size, head, i, s.reads, want+1)
				}
				wantHead := head
				if i < size/2 {
					wantHead = (head + 1) % 12
				}
				if q.Head() != wantHead {
					t.Errorf("size %d head %d: Remove(index %d) left head %d, want %d", size, head, i, q.Head(), wantHead)
				}
				rest := append(append([]Pointer(nil), in[:i]...), in[i+1:]...)
				if got := q.Pointers(); !slices.Equal(got, rest) {
					t.Errorf("size %d head %d: after Remove(index %d) Pointers() = %v, want %v", size, head, i, got, rest)
				}
			}
		}
	}
}

// testRemoveAbsentDoesNotBuildScan checks that once the index exists a Remove
// of an absent pointer reads and writes no slot.
func testRemoveAbsentDoesNotBuildScan(t *testing.T) {
	q, s := newTestQueue(t, 64, 60)
	in := ptrs(50)
	mustAddTail(t, q, in...)
	if q.Remove(NewPointer(77, 1)) {
		t.Fatal("Remove of absent pointer = true")
	}
	s.reset()
	for _, p := range []Pointer{NewPointer(77, 1), NewPointer(1, 17), 0, in[49] + 1, in[0] - 1} {
		if q.Remove(p) {
			t.Fatalf("Remove(%v) of absent pointer = true", p)
		}
	}
	if s.reads != 0 || s.writes != 0 {
		t.Fatalf("Remove of absent pointers with the index built: %d reads, %d writes; want 0, 0", s.reads, s.writes)
	}
	// The index stays maintained by the O(1) operations: no rebuild later.
	q.RemoveHead()
	mustAddTail(t, q, in[0])
	if err := q.AddHead(NewPointer(5, 5)); err != nil {
		t.Fatal(err)
	}
	s.reset()
	if !q.Remove(in[25]) {
		t.Fatal("Remove(in[25]) = false")
	}
	if s.reads > 27 {
		t.Fatalf("Remove with a maintained index read %d slots; a rebuild would read %d", s.reads, q.Size())
	}
}

func testNewRejectsBadHeadSize(t *testing.T) {
	tests := []struct {
		name     string
		slots    Slots
		capacity int
		head     int
		size     int
		refs     map[uint32]int
		wantErr  error
	}{
		{name: "capacity_zero", slots: NewMemSlots(1), capacity: 0},
		{name: "capacity_negative", slots: NewMemSlots(1), capacity: -1},
		{name: "head_negative", slots: NewMemSlots(4), capacity: 4, head: -1},
		{name: "head_equals_capacity", slots: NewMemSlots(4), capacity: 4, head: 4},
		{name: "size_negative", slots: NewMemSlots(4), capacity: 4, size: -1},
		{name: "size_above_capacity", slots: NewMemSlots(4), capacity: 4, size: 5},
		{name: "nil_slots", slots: nil, capacity: 4},
		{name: "slots_too_small", slots: NewMemSlots(3), capacity: 4},
		{name: "negative_ref", slots: NewMemSlots(4), capacity: 4, refs: map[uint32]int{1: -1}},
		{name: "zero_pointer_in_ring", slots: NewMemSlots(4), capacity: 4, head: 3, size: 2, wantErr: ErrZeroPointer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := New(tt.slots, tt.capacity, tt.head, tt.size, tt.refs)
			if err == nil {
				t.Fatalf("New(cap %d, head %d, size %d) = %v, nil; want an error", tt.capacity, tt.head, tt.size, q)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("New error %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestNewReloadsRing(t *testing.T) {
	q, s := newTestQueue(t, 7, 5)
	in := ptrs(6)
	mustAddTail(t, q, in...)
	q.RemoveHead()
	q.Remove(in[3])
	refs := q.FileRefs()
	for _, tc := range []struct {
		name string
		refs map[uint32]int
	}{{"refs_counted", nil}, {"refs_given", refs}} {
		t.Run(tc.name, func(t *testing.T) {
			q2, err := New(s.MemSlots, 7, q.Head(), q.Size(), tc.refs)
			if err != nil {
				t.Fatal(err)
			}
			if got := q2.Pointers(); !slices.Equal(got, q.Pointers()) {
				t.Errorf("reloaded Pointers() = %v, want %v", got, q.Pointers())
			}
			if !maps.Equal(q2.FileRefs(), refs) {
				t.Errorf("reloaded FileRefs() = %v, want %v", q2.FileRefs(), refs)
			}
			if err := q2.Check(); err != nil {
				t.Errorf("Check: %v", err)
			}
		})
	}
	refs[1] = 1000 // New copied the map
	q3, _ := New(s.MemSlots, 7, q.Head(), q.Size(), refs)
	refs[1] = 0
	if q3.FileRef(1) != 1000 {
		t.Errorf("New kept the caller's refs map: FileRef(1) = %d", q3.FileRef(1))
	}
}

func TestCheckFindsInconsistencies(t *testing.T) {
	build := func() (*Queue, MemSlots) {
		s := NewMemSlots(8)
		q, _ := New(s, 8, 6, 0, nil)
		for _, p := range ptrs(5) {
			_ = q.AddTail(p)
		}
		return q, s
	}
	tests := []struct {
		name    string
		corrupt func(q *Queue, s MemSlots)
	}{
		{"zero_slot_in_ring", func(q *Queue, s MemSlots) { s[q.PhysicalIndex(2)] = 0 }},
		{"slot_rewritten_behind_refs", func(q *Queue, s MemSlots) { s[q.PhysicalIndex(0)] = uint64(NewPointer(42, 0)) }},
		{"refs_given_wrong", func(q *Queue, s MemSlots) { q.refs[1]++ }},
		{"ref_of_absent_file", func(q *Queue, s MemSlots) { q.refs[9] = 1 }},
		{"zero_count_kept", func(q *Queue, s MemSlots) { q.refs[9] = 0 }},
		{"index_stale", func(q *Queue, s MemSlots) {
			q.Remove(NewPointer(99, 0))
			s[q.PhysicalIndex(1)], s[q.PhysicalIndex(2)] = s[q.PhysicalIndex(2)], s[q.PhysicalIndex(1)]
		}},
		{"size_out_of_range", func(q *Queue, s MemSlots) { q.size = 9 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, s := build()
			if err := q.Check(); err != nil {
				t.Fatalf("Check before breaking: %v", err)
			}
			tt.corrupt(q, s)
			if err := q.Check(); !errors.Is(err, ErrInconsistent) {
				t.Fatalf("Check = %v, want ErrInconsistent", err)
			}
		})
	}
	t.Run("many_problems_are_bounded", func(t *testing.T) {
		s := NewMemSlots(100)
		q, err := New(s, 100, 0, 100, map[uint32]int{})
		if err != nil {
			t.Fatal(err)
		}
		err = q.Check()
		if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != maxCheckProblems+1 {
			t.Fatalf("Check listed %d errors, want %d", n, maxCheckProblems+1)
		}
	})
}

func TestGetOutOfRangePanics(t *testing.T) {
	q, _ := newTestQueue(t, 4, 0)
	mustAddTail(t, q, ptrs(2)...)
	for _, i := range []int{-1, 2, 4} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Get(%d) on size 2 did not panic", i)
				}
			}()
			q.Get(i)
		}()
	}
}
