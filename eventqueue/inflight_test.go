package eventqueue

import (
	"maps"
	"slices"
	"testing"
)

func TestInflight(t *testing.T) {
	a, b, c := NewPointer(1, 16), NewPointer(1, 32), NewPointer(2, 16)

	t.Run("insertion_order_per_tx", func(t *testing.T) {
		f := NewInflight()
		f.Add(7, c)
		f.Add(3, a)
		f.Add(7, a)
		f.Add(3, b)
		f.Add(7, b)
		if got, want := f.Get(7), []Pointer{c, a, b}; !slices.Equal(got, want) {
			t.Errorf("Get(7) = %v, want %v", got, want)
		}
		if got, want := f.Get(3), []Pointer{a, b}; !slices.Equal(got, want) {
			t.Errorf("Get(3) = %v, want %v", got, want)
		}
		if f.Get(99) != nil {
			t.Errorf("Get of unknown tx = %v, want nil", f.Get(99))
		}
		if f.Len() != 5 || f.TxCount() != 2 {
			t.Errorf("Len() = %d, TxCount() = %d; want 5, 2", f.Len(), f.TxCount())
		}
		if got := f.Files(); !maps.Equal(got, map[uint32]int{1: 4, 2: 1}) {
			t.Errorf("Files() = %v, want map[1:4 2:1]", got)
		}
	})

	t.Run("entries_oldest_first", func(t *testing.T) {
		f := NewInflight()
		f.Add(9, a)
		f.Add(2, b)
		f.Add(5, c)
		f.Add(9, c) // a later Add does not make tx 9 younger
		got := f.Entries()
		want := []uint64{9, 2, 5}
		for i, e := range got {
			if e.Tx != want[i] {
				t.Fatalf("Entries() order %v, want txs %v", got, want)
			}
		}
	})

	t.Run("entries_are_deep_copies", func(t *testing.T) {
		f := NewInflight()
		f.Add(1, a)
		f.Add(2, b)
		f.Add(2, c)
		es := f.Entries()
		es[0].Pointers[0] = 0
		es[0].Pointers = append(es[0].Pointers, c) // must not overwrite tx 2's copy
		if got := f.Get(1); !slices.Equal(got, []Pointer{a}) {
			t.Errorf("Get(1) after changing Entries() = %v", got)
		}
		if !slices.Equal(es[1].Pointers, []Pointer{b, c}) {
			t.Errorf("appending to one entry changed another: %v", es[1].Pointers)
		}
	})

	t.Run("remove_returns_pointers_and_drops_files", func(t *testing.T) {
		f := NewInflight()
		f.Add(1, a)
		f.Add(1, c)
		f.Add(2, b)
		if got := f.Remove(1); !slices.Equal(got, []Pointer{a, c}) {
			t.Fatalf("Remove(1) = %v", got)
		}
		if f.Remove(1) != nil {
			t.Fatal("second Remove(1) != nil")
		}
		if got := f.Files(); !maps.Equal(got, map[uint32]int{1: 1}) {
			t.Fatalf("Files() = %v, want map[1:1] (file 2 dropped at zero)", got)
		}
		if f.Len() != 1 || f.TxCount() != 1 {
			t.Fatalf("Len() = %d, TxCount() = %d; want 1, 1", f.Len(), f.TxCount())
		}
	})

	t.Run("removed_slice_survives_reuse", func(t *testing.T) {
		f := NewInflight()
		f.Add(1, a)
		f.Add(1, b)
		got := f.Remove(1)
		f.Add(2, c) // reuses the recycled transaction record
		f.Add(2, c)
		if !slices.Equal(got, []Pointer{a, b}) {
			t.Fatalf("slice returned by Remove changed after reuse: %v", got)
		}
		if !slices.Equal(f.Get(2), []Pointer{c, c}) {
			t.Fatalf("Get(2) = %v, want [c c]", f.Get(2))
		}
	})

	t.Run("remove_pointer_keeps_order", func(t *testing.T) {
		f := NewInflight()
		for _, p := range []Pointer{a, b, a, c} {
			f.Add(4, p)
		}
		if !f.RemovePointer(4, a) {
			t.Fatal("RemovePointer(4, a) = false")
		}
		if got := f.Get(4); !slices.Equal(got, []Pointer{b, a, c}) {
			t.Fatalf("Get(4) = %v, want [b a c] (first occurrence removed)", got)
		}
		if f.RemovePointer(4, NewPointer(3, 3)) || f.RemovePointer(5, a) {
			t.Fatal("RemovePointer of absent pointer or tx = true")
		}
	})

	t.Run("remove_last_pointer_drops_tx", func(t *testing.T) {
		f := NewInflight()
		f.Add(4, a)
		f.Add(6, b)
		f.RemovePointer(4, a)
		if f.TxCount() != 1 || f.Get(4) != nil {
			t.Fatalf("TxCount() = %d, Get(4) = %v; want 1, nil", f.TxCount(), f.Get(4))
		}
		f.Add(4, c) // starts again, now younger than tx 6
		if es := f.Entries(); es[0].Tx != 6 || es[1].Tx != 4 {
			t.Fatalf("Entries() = %v, want tx 6 then tx 4", es)
		}
	})

	t.Run("load_replaces_and_copies", func(t *testing.T) {
		f := NewInflight()
		f.Add(1, a)
		src := []InflightTx{
			{Tx: 8, Pointers: []Pointer{b}},
			{Tx: 3, Pointers: nil}, // empty: skipped
			{Tx: 5, Pointers: []Pointer{c}},
			{Tx: 8, Pointers: []Pointer{a}}, // tx listed twice: merged, keeps its first place
		}
		f.Load(src)
		src[0].Pointers[0] = 0
		want := []InflightTx{{Tx: 8, Pointers: []Pointer{b, a}}, {Tx: 5, Pointers: []Pointer{c}}}
		got := f.Entries()
		sameTx := func(a, b InflightTx) bool { return a.Tx == b.Tx && slices.Equal(a.Pointers, b.Pointers) }
		if !slices.EqualFunc(got, want, sameTx) {
			t.Fatalf("Entries() after Load = %v, want %v", got, want)
		}
		if f.Get(1) != nil || f.Len() != 3 || f.TxCount() != 2 {
			t.Fatalf("Load kept old contents: Get(1) %v, Len %d, TxCount %d", f.Get(1), f.Len(), f.TxCount())
		}
		if got := f.Files(); !maps.Equal(got, map[uint32]int{1: 2, 2: 1}) {
			t.Fatalf("Files() after Load = %v", got)
		}
	})

	t.Run("files_is_a_copy", func(t *testing.T) {
		f := NewInflight()
		f.Add(1, a)
		f.Files()[1] = 50
		if f.Files()[1] != 1 {
			t.Fatal("Files() returned the Inflight's own map")
		}
	})
}
