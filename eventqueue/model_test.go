package eventqueue

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// drawPointer draws from a small pointer space (3 files x 6 offsets) so that
// Remove hits, misses and duplicates all happen.
var drawPointer = rapid.Custom(func(t *rapid.T) Pointer {
	return NewPointer(uint32(rapid.IntRange(1, 3).Draw(t, "file")), uint32(rapid.IntRange(0, 5).Draw(t, "offset")))
})

// TestQueueModel runs random operations against a Queue and a plain slice and
// compares them after every step. For a deeper run (about 15 s):
//
//	go test -run Model -rapid.checks=20000 -rapid.steps=200 ./eventqueue/
func TestQueueModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 17).Draw(t, "capacity")
		head := rapid.IntRange(0, capacity-1).Draw(t, "head")
		s := newGuardSlots(capacity)
		q, err := New(s, capacity, head, 0, nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		var model []Pointer

		add := func(t *rapid.T, atHead bool) {
			p := drawPointer.Draw(t, "p")
			var err error
			if atHead {
				err = q.AddHead(p)
			} else {
				err = q.AddTail(p)
			}
			if len(model) == capacity {
				if !errors.Is(err, ErrFull) {
					t.Fatalf("add to full queue: %v, want ErrFull", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("add: %v", err)
			}
			if atHead {
				model = slices.Insert(model, 0, p)
			} else {
				model = append(model, p)
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"AddTail": func(t *rapid.T) { add(t, false) },
			"AddHead": func(t *rapid.T) { add(t, true) },
			"RemoveHead": func(t *rapid.T) {
				p, ok := q.RemoveHead()
				if len(model) == 0 {
					if ok {
						t.Fatalf("RemoveHead on empty queue = %v, true", p)
					}
					return
				}
				if !ok || p != model[0] {
					t.Fatalf("RemoveHead() = %v, %v; want %v, true", p, ok, model[0])
				}
				model = model[1:]
			},
			"RemoveExisting": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				i := rapid.IntRange(0, len(model)-1).Draw(t, "i")
				p := model[i]
				if !q.Remove(p) {
					t.Fatalf("Remove(%v) of queued pointer = false", p)
				}
				model = slices.Delete(model, slices.Index(model, p), slices.Index(model, p)+1)
			},
			"RemoveAbsent": func(t *rapid.T) {
				p := drawPointer.Draw(t, "p")
				if slices.Contains(model, p) {
					t.Skip("present")
				}
				if q.Remove(p) {
					t.Fatalf("Remove(%v) of absent pointer = true", p)
				}
			},
			"DropIndex": func(t *rapid.T) { q.DropIndex() },
			"Reload": func(t *rapid.T) {
				// What a checkpoint reload does: a fresh queue over the same slots.
				var refs map[uint32]int
				if rapid.Bool().Draw(t, "given refs") {
					refs = q.FileRefs()
				}
				q2, err := New(s, capacity, q.Head(), q.Size(), refs)
				if err != nil {
					t.Fatalf("reload: %v", err)
				}
				q = q2
			},
			"": func(t *rapid.T) {
				if len(s.bad) > 0 {
					t.Fatalf("slot accesses outside the ring: %v", s.bad)
				}
				// No write outside the ring as it now stands (stale slots stay untouched).
				for _, phys := range s.written {
					if j := (phys - q.Head() + capacity) % capacity; j >= q.Size() {
						t.Fatalf("wrote slot %d, outside the ring (head %d, size %d)", phys, q.Head(), q.Size())
					}
				}
				s.reset()
				if q.Size() != len(model) || q.Capacity() != capacity {
					t.Fatalf("Size() = %d, Capacity() = %d; want %d, %d", q.Size(), q.Capacity(), len(model), capacity)
				}
				for i, want := range model {
					if got := q.Get(i); got != want {
						t.Fatalf("Get(%d) = %v, want %v (model %v)", i, got, want, model)
					}
				}
				wantRefs := countRefs(model)
				if !maps.Equal(q.FileRefs(), wantRefs) {
					t.Fatalf("FileRefs() = %v, want %v", q.FileRefs(), wantRefs)
				}
				if err := q.Check(); err != nil {
					t.Fatalf("Check: %v", err)
				}
				q2, err := New(s.MemSlots, capacity, q.Head(), q.Size(), nil)
				if err != nil {
					t.Fatalf("New over the same slots: %v", err)
				}
				if got := q2.Pointers(); !slices.Equal(got, model) {
					t.Fatalf("rebuilt queue Pointers() = %v, want %v", got, model)
				}
				if !maps.Equal(q2.FileRefs(), wantRefs) {
					t.Fatalf("rebuilt queue FileRefs() = %v, want %v", q2.FileRefs(), wantRefs)
				}
			},
		})
	})
}

// inflightModel is Inflight as a slice of transactions in creation order.
type inflightModel []InflightTx

func (m inflightModel) find(tx uint64) int {
	return slices.IndexFunc(m, func(e InflightTx) bool { return e.Tx == tx })
}

func TestInflightModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := NewInflight()
		var model inflightModel
		drawTx := rapid.Uint64Range(1, 4)

		t.Repeat(map[string]func(*rapid.T){
			"Add": func(t *rapid.T) {
				tx, p := drawTx.Draw(t, "tx"), drawPointer.Draw(t, "p")
				f.Add(tx, p)
				if i := model.find(tx); i >= 0 {
					model[i].Pointers = append(model[i].Pointers, p)
				} else {
					model = append(model, InflightTx{Tx: tx, Pointers: []Pointer{p}})
				}
			},
			"Remove": func(t *rapid.T) {
				tx := drawTx.Draw(t, "tx")
				got := f.Remove(tx)
				var want []Pointer
				if i := model.find(tx); i >= 0 {
					want = model[i].Pointers
					model = slices.Delete(model, i, i+1)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("Remove(%d) = %v, want %v", tx, got, want)
				}
			},
			"RemovePointerExisting": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				i := rapid.IntRange(0, len(model)-1).Draw(t, "tx index")
				e := &model[i]
				p := e.Pointers[rapid.IntRange(0, len(e.Pointers)-1).Draw(t, "pointer index")]
				if !f.RemovePointer(e.Tx, p) {
					t.Fatalf("RemovePointer(%d, %v) of held pointer = false", e.Tx, p)
				}
				j := slices.Index(e.Pointers, p)
				e.Pointers = slices.Delete(slices.Clone(e.Pointers), j, j+1)
				if len(e.Pointers) == 0 {
					model = slices.Delete(model, i, i+1)
				}
			},
			"RemovePointerAbsent": func(t *rapid.T) {
				tx, p := drawTx.Draw(t, "tx"), drawPointer.Draw(t, "p")
				if i := model.find(tx); i >= 0 && slices.Contains(model[i].Pointers, p) {
					t.Skip("present")
				}
				if f.RemovePointer(tx, p) {
					t.Fatalf("RemovePointer(%d, %v) of absent pointer = true", tx, p)
				}
			},
			"LoadEntries": func(t *rapid.T) {
				// A checkpoint round trip into a fresh or a reused Inflight.
				if rapid.Bool().Draw(t, "fresh") {
					g := NewInflight()
					g.Load(f.Entries())
					f = g
				} else {
					f.Load(f.Entries())
				}
			},
			"": func(t *rapid.T) {
				n := 0
				var all []Pointer
				for _, e := range model {
					n += len(e.Pointers)
					all = append(all, e.Pointers...)
					if got := f.Get(e.Tx); !slices.Equal(got, e.Pointers) {
						t.Fatalf("Get(%d) = %v, want %v", e.Tx, got, e.Pointers)
					}
				}
				if f.Len() != n || f.TxCount() != len(model) {
					t.Fatalf("Len() = %d, TxCount() = %d; want %d, %d", f.Len(), f.TxCount(), n, len(model))
				}
				if !maps.Equal(f.Files(), countRefs(all)) {
					t.Fatalf("Files() = %v, want %v", f.Files(), countRefs(all))
				}
				got := f.Entries()
				if len(got) != len(model) {
					t.Fatalf("Entries() has %d txs, want %d", len(got), len(model))
				}
				for i := range got {
					if got[i].Tx != model[i].Tx || !slices.Equal(got[i].Pointers, model[i].Pointers) {
						t.Fatalf("Entries()[%d] = %v, want %v", i, got[i], model[i])
					}
				}
			},
		})
	})
}
