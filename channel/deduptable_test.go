package channel

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestDedupTableModel: the window's index and FIFO against a Go map and a
// slice, under random adds, updates and deletions in a small table (its
// probes wrap around and collide), with ids whose words share their low
// bits as the ones a test builds.
func TestDedupTableModel(t *testing.T) {
	for _, hint := range []int{0, 100, 5000} {
		rng := rand.New(rand.NewPCG(uint64(hint), 7))
		tb := newIDTable(hint)
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

// TestDedupCheckTrimsFirst: with no trimmer running, a commit's check
// first forgets what the commits before it left past MaxIDs, so it sees
// the window exactly as a trim at each commit would have left it: the
// oldest id is forgotten (counted), the newest still a duplicate.
func TestDedupCheckTrimsFirst(t *testing.T) {
	w := newDedupWindow(Dedup{Header: "id", Window: time.Hour, MaxIDs: 3})
	ids := []dedupID{dedupIDOf("a"), dedupIDOf("b"), dedupIDOf("c"), dedupIDOf("d"), dedupIDOf("e")}
	seen := map[dedupID]struct{}{}
	for i, id := range ids {
		tx, now := uint64(i+1), int64(i+1)
		dups, keep := w.check(tx, now, []dedupSlot{{id: id, has: true}}, seen, nil, nil)
		if len(dups) != 0 {
			t.Fatalf("put %d: duplicates %v, want none", i, dups)
		}
		w.commit(tx, now, keep, 0)
	}
	if w.fifo.n != 4 || w.forgotten.Load() != 1 {
		// Each check trimmed what the commit before it left: e's
		// forgot a; e's commit then left one past MaxIDs.
		t.Fatalf("the FIFO holds %d entries, %d forgotten, after the commits; want 4, 1", w.fifo.n, w.forgotten.Load())
	}
	dups, keep := w.check(9, 9, []dedupSlot{{id: ids[0], has: true}, {id: ids[4], has: true}}, seen, nil, nil)
	if len(dups) != 1 || dups[0] != 1 || len(keep) != 1 || keep[0] != ids[0] {
		t.Fatalf("check of a and e: duplicates %v, kept %v; want [1] (e) and [a]", dups, keep)
	}
	if f := w.forgotten.Load(); f != 2 {
		t.Fatalf("forgotten %d, want 2 (a and b)", f)
	}
	w.release(9, keep)
	if n := w.size(); n != 3 {
		t.Fatalf("size %d, want 3", n)
	}
}

// TestDedupTrimmerCatchesUp: the channel's trimmer forgets the ids past
// MaxIDs without any read of the window.
func TestDedupTrimmerCatchesUp(t *testing.T) {
	cfg := dedupConfig(t)
	cfg.Dedup.MaxIDs = 3
	c := mustOpen(t, cfg)
	defer c.Close()
	for i := range 20 {
		putTx(t, c, idEvent(strconv.Itoa(i), "x"))
	}
	fifo := func() int { c.dedup.mu.Lock(); defer c.dedup.mu.Unlock(); return c.dedup.fifo.n }
	for deadline := time.Now().Add(10 * time.Second); fifo() > 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the FIFO still holds %d entries 10 s after the last commit, want 3", fifo())
		}
	}
	if f := c.dedup.forgotten.Load(); f != 17 {
		t.Fatalf("forgotten %d, want 17", f)
	}
}

// TestDedupTableSeeded: the home slots depend on the table's random seed,
// so that header values chosen offline cannot aim their ids at one probe
// run (SHA-256 is public): two tables place the same ids differently.
func TestDedupTableSeeded(t *testing.T) {
	a, b := newIDTable(0), newIDTable(0)
	if a.seed == b.seed {
		t.Fatalf("two tables got the same seed %x", a.seed)
	}
	same := 0
	for i := range 1000 {
		id := dedupIDOf(strconv.Itoa(i))
		if homeIn(id, 1<<20, a.seed) == homeIn(id, 1<<20, b.seed) {
			same++
		}
	}
	if same > 10 {
		t.Fatalf("%d of 1000 ids have the same home slot in two tables: the seed does not key the slots", same)
	}
}
