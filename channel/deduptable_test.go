package channel

import (
	"math/rand/v2"
	"testing"
)

// TestDedupTableModel: the window's index and FIFO against a Go map and a
// slice, under random adds, updates and deletions in a small table (its
// probes wrap around and collide), with ids whose words share their low
// bits as the ones a test builds.
func TestDedupTableModel(t *testing.T) {
	for _, hint := range []int{0, 100, 5000} {
		rng := rand.New(rand.NewPCG(uint64(hint), 7))
		tb := idTable{hint: hint}
		var f idFIFO
		model := map[dedupID]int64{}
		var fifo []dedupEntry
		ids := make([]dedupID, 300)
		for i := range ids {
			ids[i] = dedupID{uint64(i) + 1<<63, uint64(i % 7)}
		}
		for step := range 20000 {
			id := ids[rng.IntN(len(ids))]
			switch rng.IntN(3) {
			case 0, 1:
				v := int64(rng.IntN(1000)) - 500
				if v == 0 {
					v = 1
				}
				tb.set(id, v)
				model[id] = v
				f.push(dedupEntry{ID: id, Time: v})
				fifo = append(fifo, dedupEntry{ID: id, Time: v})
			default:
				if j, ok := tb.lookup(id); ok {
					tb.deleteAt(j)
				}
				delete(model, id)
				if len(fifo) > 0 {
					f.pop()
					fifo = fifo[1:]
				}
			}
			if tb.n != len(model) || f.n != len(fifo) {
				t.Fatalf("hint %d step %d: %d ids and %d entries, want %d and %d", hint, step, tb.n, f.n, len(model), len(fifo))
			}
			if step%97 == 0 {
				checkDedupTable(t, &tb, model)
				if got := f.appendTo(nil); len(got) != len(fifo) || (len(got) > 0 && got[0] != fifo[0]) {
					t.Fatalf("hint %d step %d: FIFO %v, want %v", hint, step, got, fifo)
				}
			}
		}
	}
}

// checkDedupTable fails t unless tb holds exactly model's entries, each
// reachable by its probe.
func checkDedupTable(t *testing.T, tb *idTable, model map[dedupID]int64) {
	t.Helper()
	n := 0
	for _, s := range tb.slots {
		if s.t != 0 {
			n++
		}
	}
	if n != len(model) {
		t.Fatalf("%d slots in use, want %d", n, len(model))
	}
	for id, want := range model {
		if got, ok := tb.get(id); !ok || got != want {
			t.Fatalf("id %v: %d, %v; want %d", id, got, ok, want)
		}
	}
}
