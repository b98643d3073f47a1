package checkpoint

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

const hs = HeaderSlots

func TestWriteReopenRoundTrip(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const capacity = 3000 // pages 2..7, the first and last partly header / past the end
		rng := rand.New(rand.NewPCG(1, 2))
		c := mustCreate(t, fsys, dir, capacity)
		mirror := make([]uint64, capacity)
		for round := range 4 {
			n := capacity
			if round > 0 {
				n = rng.IntN(200) // later rounds dirty a few pages; the rest must come from the file
			}
			for range n {
				i := rng.IntN(capacity)
				if round == 0 {
					i = n - 1
					n--
				}
				v := rng.Uint64()
				c.SetSlot(i, v)
				mirror[i] = v
			}
			st := randomState(rng, capacity, uint64(100+round))
			st.RingCRC = rng.Uint32() // ignored: Write computes it
			commit(t, c, st)
			if got := ringOf(c); !slices.Equal(got, mirror) {
				t.Fatalf("round %d: Slot values differ from what was set", round)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			var got *State
			c, got = mustOpen(t, fsys, dir)
			sameState(t, got, st)
			if want := wantRingCRC(mirror, st.Head, st.Size); got.RingCRC != want {
				t.Fatalf("round %d: RingCRC = %#08x, want %#08x", round, got.RingCRC, want)
			}
			if c.Capacity() != capacity || c.Len() != capacity {
				t.Fatalf("Capacity, Len = %d, %d", c.Capacity(), c.Len())
			}
			if !slices.Equal(ringOf(c), mirror) || !slices.Equal(fileRing(t, fsys, dir), mirror) {
				t.Fatalf("round %d: ring after reopen differs", round)
			}
			if c.DirtyPages() != 0 {
				t.Fatalf("DirtyPages after Open = %d", c.DirtyPages())
			}
		}
	})
}

func TestQueueSurvivesReopen(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const capacity = 1500
		rng := rand.New(rand.NewPCG(3, 4))
		c := mustCreate(t, fsys, dir, capacity)
		q, err := eventqueue.New(c, capacity, 0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for w := uint64(1); w <= 5; w++ {
			for range 2000 {
				switch rng.IntN(4) {
				case 0, 1:
					q.AddTail(randomPointer(rng)) // ErrFull is fine
				case 2:
					q.RemoveHead()
				case 3:
					if p, ok := q.RemoveHead(); ok {
						q.AddHead(p)
					}
				}
			}
			st := randomState(rng, capacity, w)
			st.Head, st.Size = q.Head(), q.Size()
			commit(t, c, st)
			want := q.Pointers()
			c.Close()
			c, st = mustOpen(t, fsys, dir)
			q2, err := eventqueue.New(c, capacity, st.Head, st.Size, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(q2.Pointers(), want) {
				t.Fatalf("w=%d: queue after reopen differs", w)
			}
			q = q2
		}
	})
}

func TestCopyOnWrite(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const capacity = 1200
		st := &State{Meta: Meta{WriteOrderID: 1, Capacity: capacity}}
		next := func() *State { st.WriteOrderID++; return st }
		c := mustCreate(t, fsys, dir, capacity)
		a, b := 5, 900 // different pages
		for i := range capacity {
			c.SetSlot(i, 1)
		}
		if got := c.DirtyPages(); got != 3 {
			t.Fatalf("DirtyPages = %d, want 3", got)
		}
		c.Freeze()
		c.SetSlot(a, 99) // a's page is frozen: copied, not changed in place
		if err := c.Write(next()); err != nil {
			t.Fatal(err)
		}
		if got := fileRing(t, fsys, dir)[a]; got != 1 {
			t.Fatalf("Write persisted a change made after Freeze: slot = %d", got)
		}
		if got := c.Slot(a); got != 99 {
			t.Fatalf("Slot during frozen generation = %d, want 99", got)
		}
		c.Thaw(true)
		if got := c.DirtyPages(); got != 1 {
			t.Fatalf("DirtyPages after Thaw(true) = %d, want 1", got)
		}
		commit(t, c, next())
		if got := fileRing(t, fsys, dir)[a]; got != 99 {
			t.Fatalf("second checkpoint: slot = %d, want 99", got)
		}

		// A failed checkpoint's pages merge back; current pages win.
		c.SetSlot(a, 7)
		c.SetSlot(b, 7)
		c.Freeze()
		c.SetSlot(a, 8) // newer than the frozen 7
		c.Thaw(false)
		if c.Slot(a) != 8 || c.Slot(b) != 7 {
			t.Fatalf("after Thaw(false): a=%d b=%d, want 8 7", c.Slot(a), c.Slot(b))
		}
		commit(t, c, next())
		ring := fileRing(t, fsys, dir)
		if ring[a] != 8 || ring[b] != 7 || ring[0] != 1 {
			t.Fatalf("after Thaw(false) and a new checkpoint: a=%d b=%d", ring[a], ring[b])
		}
		if c.DirtyPages() != 0 {
			t.Fatalf("DirtyPages = %d, want 0", c.DirtyPages())
		}
	})
}

func TestFailedWriteRetriedByNextCheckpoint(t *testing.T) {
	fsys := vfs.NewFaultFS(newMem(t, "/cp"))
	c := mustCreate(t, fsys, "/cp", 100)
	st := &State{Meta: Meta{WriteOrderID: 1, Capacity: 100}}
	c.SetSlot(3, 33)
	c.Freeze()
	fsys.Add(vfs.Rule{Ops: []vfs.Op{"create"}, Name: InflightPutsName + tmpSuffix})
	err := c.Write(st)
	c.Thaw(err == nil)
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Write = %v, want injected fault", err)
	}
	if _, _, err := Open(fsys, "/cp"); !errors.Is(err, ErrIncomplete) || !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("Open after failed Write = %v, want ErrBadCheckpoint (incomplete)", err)
	}
	fsys.Clear()
	st.WriteOrderID = 2
	commit(t, c, st)
	_, got := mustOpen(t, fsys, "/cp")
	if got.WriteOrderID != 2 || fileRing(t, fsys, "/cp")[3] != 33 {
		t.Fatalf("retry did not persist: W=%d", got.WriteOrderID)
	}
}

func TestFailedSlotReadFailsLaterWrites(t *testing.T) {
	mem := newMem(t, "/cp")
	fsys := vfs.NewFaultFS(mem)
	c := mustCreate(t, fsys, "/cp", 2000)
	st := &State{Meta: Meta{WriteOrderID: 1, Capacity: 2000}}
	commit(t, c, st)
	fsys.Add(vfs.Rule{Ops: []vfs.Op{"readat"}})
	c.Slot(1)          // clean page: read from the file
	c.SetSlot(1000, 5) // page copied from the file
	fsys.Clear()
	c.Freeze()
	st.WriteOrderID = 2
	err := c.Write(st)
	c.Thaw(false)
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Write after a failed slot read = %v, want the read error", err)
	}
	if _, got := mustOpen(t, mem, "/cp"); got.WriteOrderID != 1 {
		t.Fatalf("W = %d, want the checkpoint from before the failed read", got.WriteOrderID)
	}
}

func TestSlotsWhileWriteRuns(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const capacity = 5000
		c := mustCreate(t, fsys, dir, capacity)
		var (
			queueMu sync.Mutex // guards mirror and the Slot/SetSlot/Freeze/Thaw calls
			mirror  = make([]uint64, capacity)
		)
		done := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 9))
				for {
					select {
					case <-done:
						return
					default:
					}
					queueMu.Lock()
					for range 64 {
						i := rng.IntN(capacity)
						if rng.IntN(2) == 0 {
							v := rng.Uint64()
							c.SetSlot(i, v)
							mirror[i] = v
						} else if got := c.Slot(i); got != mirror[i] {
							queueMu.Unlock()
							t.Errorf("Slot(%d) = %d, want %d", hs+i, got, mirror[i])
							return
						}
					}
					queueMu.Unlock()
				}
			}()
		}
		for w := uint64(1); w <= 15; w++ {
			queueMu.Lock()
			c.Freeze()
			snapshot := slices.Clone(mirror)
			queueMu.Unlock()
			err := c.Write(&State{Meta: Meta{WriteOrderID: w, Capacity: capacity}})
			if err != nil {
				t.Error(err)
			}
			// The file changes only in Write, so it can be read now.
			if !slices.Equal(fileRing(t, fsys, dir), snapshot) {
				t.Errorf("checkpoint %d does not hold the snapshot taken at Freeze", w)
			}
			queueMu.Lock()
			c.Thaw(err == nil)
			queueMu.Unlock()
		}
		close(done)
		wg.Wait()
	})
}

func TestOpenRejects(t *testing.T) {
	const capacity = 700
	type mutation func(t *testing.T, fsys vfs.FS, dir string, st *State)
	rewriteHeaderSlot := func(slot int, v uint64) mutation {
		return func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			name := path(dir, CheckpointName)
			b, err := vfs.ReadFile(fsys, name)
			if err != nil {
				t.Fatal(err)
			}
			var h [headerUsed]uint64
			for i := range h {
				h[i] = binaryBE(b[i*8:])
			}
			h[slot] = v
			h[slotHeaderCRC] = uint64(headerCRC(&h)) // only the intended field is wrong
			for i := range h {
				patch(t, fsys, name, int64(i*8), be64(h[i]))
			}
		}
	}
	remove := func(names ...string) mutation {
		return func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			for _, n := range names {
				if err := fsys.Remove(path(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	flip := func(name string, off int64) mutation {
		return func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			b, err := vfs.ReadFile(fsys, path(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			patch(t, fsys, path(dir, name), off, []byte{b[off] ^ 0x40})
		}
	}
	rewriteMeta := func(edit func(*Meta)) mutation {
		return func(t *testing.T, fsys vfs.FS, dir string, st *State) {
			m := st.Meta
			edit(&m)
			replace(t, fsys, path(dir, MetaName), EncodeMeta(&m))
		}
	}
	cases := []struct {
		name        string
		mutate      mutation
		wantNone    bool   // ErrNoCheckpoint instead of ErrBadCheckpoint
		corruptFile string // the *corrupt.Error names this file; "" = no corrupt.Error
		incomplete  bool
	}{
		{name: "missing_checkpoint_file", mutate: remove(CheckpointName)},
		{name: "missing_meta", mutate: remove(MetaName)},
		{name: "neither_file", mutate: remove(CheckpointName, MetaName), wantNone: true},
		{name: "version_0", mutate: rewriteHeaderSlot(slotMagic, magicVersion&magicMask), corruptFile: CheckpointName},
		{name: "bad_magic", mutate: rewriteHeaderSlot(slotMagic, 0x5846434350_000001), corruptFile: CheckpointName},
		{name: "incomplete_marker", mutate: rewriteHeaderSlot(slotMarker, markerIncomplete), incomplete: true},
		{name: "zero_marker", mutate: rewriteHeaderSlot(slotMarker, 0), incomplete: true},
		{name: "header_crc", mutate: flip(CheckpointName, slotTime*8+7), corruptFile: CheckpointName},
		{name: "header_head_out_of_range", mutate: rewriteHeaderSlot(slotHead, capacity), corruptFile: CheckpointName},
		{name: "meta_truncated", mutate: func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			b, _ := vfs.ReadFile(fsys, path(dir, MetaName))
			replace(t, fsys, path(dir, MetaName), b[:len(b)-9])
		}, corruptFile: MetaName},
		{name: "meta_empty", mutate: func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			replace(t, fsys, path(dir, MetaName), nil)
		}, corruptFile: MetaName},
		{name: "meta_garbled", mutate: flip(MetaName, 45), corruptFile: MetaName},
		{name: "meta_wrong_write_order_id", mutate: rewriteMeta(func(m *Meta) { m.WriteOrderID++ }), corruptFile: MetaName},
		{name: "meta_head_mismatch", mutate: rewriteMeta(func(m *Meta) { m.Head = (m.Head + 1) % capacity }), corruptFile: MetaName},
		{name: "meta_size_mismatch", mutate: rewriteMeta(func(m *Meta) { m.Size-- }), corruptFile: MetaName},
		{name: "meta_capacity_mismatch", mutate: rewriteMeta(func(m *Meta) { m.Capacity++ }), corruptFile: MetaName},
		{name: "file_length_wrong", mutate: func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			f, err := fsys.OpenReadWrite(path(dir, CheckpointName))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate((hs + capacity + 1) * 8); err != nil {
				t.Fatal(err)
			}
		}, corruptFile: CheckpointName},
		{name: "file_shorter_than_header", mutate: func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			f, _ := fsys.OpenReadWrite(path(dir, CheckpointName))
			defer f.Close()
			if err := f.Truncate(20); err != nil {
				t.Fatal(err)
			}
		}, corruptFile: CheckpointName},
		{name: "missing_inflight_puts", mutate: remove(InflightPutsName)},
		{name: "missing_inflight_takes", mutate: remove(InflightTakesName)},
		{name: "inflight_takes_garbled", mutate: flip(InflightTakesName, 17), corruptFile: InflightTakesName},
		{name: "inflight_wrong_write_order_id", mutate: func(t *testing.T, fsys vfs.FS, dir string, st *State) {
			replace(t, fsys, path(dir, InflightPutsName), EncodeInflight(InflightPuts, st.WriteOrderID+1, st.InflightPuts))
		}, corruptFile: InflightPutsName},
		{name: "inflight_kinds_swapped", mutate: func(t *testing.T, fsys vfs.FS, dir string, st *State) {
			replace(t, fsys, path(dir, InflightTakesName), EncodeInflight(InflightPuts, st.WriteOrderID, st.InflightTakes))
		}, corruptFile: InflightTakesName},
		// The live ring is ring positions 10..29 (see below).
		{name: "ring_slot_garbled", mutate: flip(CheckpointName, (hs+15)*8+3), corruptFile: CheckpointName},
		{name: "ring_slot_zeroed", mutate: func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			patch(t, fsys, path(dir, CheckpointName), (hs+10)*8, make([]byte, 8))
		}, corruptFile: CheckpointName},
		{name: "meta_ring_crc_wrong", mutate: func(t *testing.T, fsys vfs.FS, dir string, _ *State) {
			b, err := vfs.ReadFile(fsys, path(dir, MetaName))
			if err != nil {
				t.Fatal(err)
			}
			replace(t, fsys, path(dir, MetaName), putByte(metaOffRingCRC+3, b[metaOffRingCRC+3]^1)(b))
		}, corruptFile: CheckpointName},
	}
	for _, k := range fsKinds {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				fsys, dir := newDir(t, k)
				c := mustCreate(t, fsys, dir, capacity)
				st := randomState(rand.New(rand.NewPCG(5, 6)), capacity, 42)
				st.Head, st.Size = 10, 20
				c.SetSlot(10, 1)
				commit(t, c, st)
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				tc.mutate(t, fsys, dir, st)
				c2, _, err := Open(fsys, dir)
				if err == nil {
					c2.Close()
					t.Fatal("Open succeeded")
				}
				t.Log(err)
				if tc.wantNone {
					if !errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrBadCheckpoint) {
						t.Fatalf("got %v, want ErrNoCheckpoint", err)
					}
					return
				}
				if !errors.Is(err, ErrBadCheckpoint) {
					t.Fatalf("got %v, want ErrBadCheckpoint", err)
				}
				if got := errors.Is(err, ErrIncomplete); got != tc.incomplete {
					t.Fatalf("errors.Is(ErrIncomplete) = %v, want %v", got, tc.incomplete)
				}
				var ce *corrupt.Error
				if got := errors.As(err, &ce); got != (tc.corruptFile != "") {
					t.Fatalf("*corrupt.Error present = %v, want %v", got, tc.corruptFile != "")
				}
				if ce != nil && ce.File != path(dir, tc.corruptFile) {
					t.Fatalf("corrupt.Error names %s, want %s", ce.File, path(dir, tc.corruptFile))
				}
				// A bad checkpoint is replaced, never patched: Create must
				// work over whatever is left.
				c3 := mustCreate(t, fsys, dir, capacity)
				commit(t, c3, st)
			})
		}
	}
}

// TestRingChecksum garbles one ring slot of a written checkpoint: inside the
// live ring [head, head+size) Open must report corruption (so recovery falls
// back to the backup or a full replay instead of serving garbage pointers);
// outside it the slot is stale and the checkpoint opens with its queue
// intact.
func TestRingChecksum(t *testing.T) {
	const capacity = 1100 // three pages; 1000+300 wraps
	cases := []struct {
		name             string
		head, size, slot int // slot: the ring position garbled
		bad              bool
	}{
		{"live_first_slot", 100, 50, 100, true},
		{"live_last_slot", 100, 50, 149, true},
		{"live_before_wrap", 1000, 300, 1099, true},
		{"live_after_wrap", 1000, 300, 5, true},
		{"live_last_after_wrap", 1000, 300, 199, true},
		{"full_ring_slot_before_head", 7, capacity, 6, true},
		{"stale_before_head", 100, 50, 99, false},
		{"stale_after_tail", 100, 50, 150, false},
		{"stale_after_wrapped_tail", 1000, 300, 200, false},
		{"stale_before_wrapped_head", 1000, 300, 999, false},
		{"empty_queue", 100, 0, 100, false},
	}
	for _, k := range fsKinds {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				fsys, dir := newDir(t, k)
				rng := rand.New(rand.NewPCG(15, 16))
				c := mustCreate(t, fsys, dir, capacity)
				ring := make([]uint64, capacity)
				for i := range ring {
					ring[i] = uint64(randomPointer(rng))
					c.SetSlot(i, ring[i])
				}
				st := randomState(rng, capacity, 9)
				st.Head, st.Size = tc.head, tc.size
				commit(t, c, st)
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				name := path(dir, CheckpointName)
				b, err := vfs.ReadFile(fsys, name)
				if err != nil {
					t.Fatal(err)
				}
				off := int64(hs+tc.slot)*8 + 5
				patch(t, fsys, name, off, []byte{b[off] ^ 0x10})

				c2, got, err := Open(fsys, dir)
				if tc.bad {
					if err == nil {
						c2.Close()
						t.Fatal("Open accepted a garbled live slot")
					}
					var ce *corrupt.Error
					if !errors.Is(err, ErrBadCheckpoint) || errors.Is(err, ErrIncomplete) || !errors.As(err, &ce) {
						t.Fatalf("Open = %v, want ErrBadCheckpoint with a *corrupt.Error", err)
					}
					if ce.File != name || ce.Offset != int64(hs+tc.head)*8 {
						t.Fatalf("corrupt.Error at %s:%d, want %s:%d", ce.File, ce.Offset, name, (hs+tc.head)*8)
					}
					return
				}
				if err != nil {
					t.Fatalf("Open with a garbled stale slot: %v", err)
				}
				defer c2.Close()
				if want := wantRingCRC(ring, tc.head, tc.size); got.RingCRC != want {
					t.Fatalf("RingCRC = %#08x, want %#08x", got.RingCRC, want)
				}
				q, err := eventqueue.New(c2, capacity, got.Head, got.Size, nil)
				if err != nil {
					t.Fatal(err)
				}
				want := make([]eventqueue.Pointer, tc.size)
				for i := range want {
					want[i] = eventqueue.Pointer(ring[(tc.head+i)%capacity])
				}
				if !slices.Equal(q.Pointers(), want) {
					t.Fatal("queue differs from the committed one")
				}
			})
		}
	}
}

func TestOpenFreshCreateIsIncomplete(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		c := mustCreate(t, fsys, dir, 10)
		c.Close()
		if _, _, err := Open(fsys, dir); !errors.Is(err, ErrBadCheckpoint) || !errors.Is(err, ErrIncomplete) {
			t.Fatalf("Open after Create = %v, want ErrBadCheckpoint (incomplete)", err)
		}
		if _, _, err := Open(fsys, path(dir, "nothing-here")); !errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("Open of an empty dir = %v, want ErrNoCheckpoint", err)
		}
	})
}

// TestCrashDuringWrite kills the process (fails every filesystem operation
// from the k-th on, then drops everything unsynced) at each step of a Write
// in turn. Open must then find the previous checkpoint intact, the new one,
// or ErrBadCheckpoint: never a mix.
func TestCrashDuringWrite(t *testing.T) {
	const capacity = 1200
	rng := rand.New(rand.NewPCG(7, 8))
	stA, stB := randomState(rng, capacity, 10), randomState(rng, capacity, 20)
	ringA, ringB := make([]uint64, capacity), make([]uint64, capacity)
	for i := range ringA {
		ringA[i] = rng.Uint64()
		ringB[i] = ringA[i]
		if i%3 == 0 {
			ringB[i] = rng.Uint64()
		}
	}
	var sawOld, sawBad, sawNew bool
	for k := 1; ; k++ {
		mem := newMem(t, "/cp")
		fsys := vfs.NewFaultFS(mem)
		c, err := Create(fsys, "/cp", capacity)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range ringA {
			c.SetSlot(i, v)
		}
		commit(t, c, stA)
		for i, v := range ringB {
			if v != ringA[i] {
				c.SetSlot(i, v)
			}
		}
		c.Freeze()
		fsys.Add(vfs.Rule{Seq: fsys.Ops() + int64(k), FailAfter: true}) // the process dies at op k
		werr := c.Write(stB)
		mem = mem.CrashClone(false, 0)

		c2, got, err := Open(mem, "/cp")
		switch {
		case err != nil:
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("k=%d: Open = %v, want ErrBadCheckpoint", k, err)
			}
			sawBad = true
		case got.WriteOrderID == stA.WriteOrderID:
			sameState(t, got, stA)
			if !slices.Equal(ringOf(c2), ringA) {
				t.Fatalf("k=%d: old checkpoint with a changed ring", k)
			}
			sawOld = true
		default:
			sameState(t, got, stB)
			if !slices.Equal(ringOf(c2), ringB) {
				t.Fatalf("k=%d: new checkpoint with a wrong ring", k)
			}
			sawNew = true
		}
		if c2 != nil {
			c2.Close()
		}
		if werr == nil {
			if err != nil {
				t.Fatalf("k=%d: Write succeeded but Open fails: %v", k, err)
			}
			break
		}
		if !errors.Is(werr, vfs.ErrInjected) {
			t.Fatalf("k=%d: Write = %v", k, werr)
		}
	}
	if !sawOld || !sawBad || !sawNew {
		t.Fatalf("crash points did not cover all outcomes: old=%v bad=%v new=%v", sawOld, sawBad, sawNew)
	}
}

func TestWriteRejectsInvalidState(t *testing.T) {
	const capacity = 50
	valid := func() *State {
		return &State{Meta: Meta{WriteOrderID: 9, Capacity: capacity, Logs: []LogState{{FileID: 1}, {FileID: 2, Completes: []uint32{1, 3}}}},
			InflightPuts: []eventqueue.InflightTx{{Tx: 1, Pointers: []eventqueue.Pointer{5}}}}
	}
	cases := []struct {
		name string
		edit func(*State)
	}{
		{"capacity_differs", func(s *State) { s.Capacity = capacity + 1 }},
		{"head_at_capacity", func(s *State) { s.Head = capacity }},
		{"negative_head", func(s *State) { s.Head = -1 }},
		{"size_above_capacity", func(s *State) { s.Size = capacity + 1 }},
		{"time_before_1970", func(s *State) { s.Time = time.Unix(-5, 0) }},
		{"logs_unsorted", func(s *State) { s.Logs[0].FileID = 3 }},
		{"logs_duplicate", func(s *State) { s.Logs[0].FileID = 2 }},
		{"negative_position", func(s *State) { s.Logs[0].Position = -1 }},
		{"negative_refs", func(s *State) { s.Logs[0].Refs = -1 }},
		{"completes_unsorted", func(s *State) { s.Logs[1].Completes = []uint32{3, 1} }},
		{"zero_pointer", func(s *State) { s.InflightPuts[0].Pointers[0] = 0 }},
		{"duplicate_tx", func(s *State) {
			s.InflightTakes = []eventqueue.InflightTx{{Tx: 4}, {Tx: 4}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t, "/cp")
			c := mustCreate(t, mem, "/cp", capacity)
			commit(t, c, valid())
			before, _ := vfs.ReadFile(mem, path("/cp", CheckpointName))
			st := valid()
			tc.edit(st)
			c.Freeze()
			err := c.Write(st)
			c.Thaw(false)
			if err == nil {
				t.Fatal("Write accepted an invalid state")
			}
			after, _ := vfs.ReadFile(mem, path("/cp", CheckpointName))
			if string(before) != string(after) {
				t.Fatal("a rejected Write changed the checkpoint file")
			}
			mustOpen(t, mem, "/cp")
		})
	}
	if err := (&Checkpoint{}).Write(nil); err == nil {
		t.Fatal("Write(nil) accepted")
	}
}

func TestCreateAndRemoveLeaveOtherFilesAlone(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for _, n := range []string{"in_use.lock", "notes.txt", MetaName + tmpSuffix} {
			replace(t, fsys, path(dir, n), []byte(n))
		}
		c := mustCreate(t, fsys, dir, 10)
		commit(t, c, &State{Meta: Meta{WriteOrderID: 1, Capacity: 10}})
		c.Close()
		if err := Remove(fsys, dir); err != nil {
			t.Fatal(err)
		}
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"in_use.lock", "notes.txt"}; !slices.Equal(names, want) {
			t.Fatalf("after Remove: %v, want %v", names, want)
		}
		if _, _, err := Open(fsys, dir); !errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("Open after Remove = %v, want ErrNoCheckpoint", err)
		}
		if err := Remove(fsys, dir); err != nil {
			t.Fatalf("second Remove: %v", err)
		}
	})
}

func TestCreateRejectsBadCapacity(t *testing.T) {
	mem := newMem(t, "/cp")
	for _, capacity := range []int{0, -1, maxCapacity + 1} {
		if c, err := Create(mem, "/cp", capacity); err == nil {
			c.Close()
			t.Errorf("Create(capacity %d) succeeded", capacity)
		}
	}
}

func TestLargeCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("maps a 4 GB sparse file")
	}
	const capacity = 500_000_000
	fsys, dir := vfs.OS(), t.TempDir()
	c := mustCreate(t, fsys, dir, capacity)
	last := capacity - 1
	c.SetSlot(last, 0xABCDEF)
	c.SetSlot(0, 1)
	commit(t, c, &State{Meta: Meta{WriteOrderID: 3, Capacity: capacity, Head: capacity - 1, Size: 2}})
	c.Close()
	c, st := mustOpen(t, fsys, dir)
	if st.Capacity != capacity || c.Slot(last) != 0xABCDEF || c.Slot(0) != 1 || c.Slot(capacity/2) != 0 {
		t.Fatalf("capacity %d, last slot %#x", st.Capacity, c.Slot(last))
	}
	q, err := eventqueue.New(c, capacity, st.Head, st.Size, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Pointers(); len(got) != 2 || got[0] != 0xABCDEF || got[1] != 1 {
		t.Fatalf("queue = %v", got)
	}
}

func TestSlotOutsideRingPanics(t *testing.T) {
	mem := newMem(t, "/cp")
	c := mustCreate(t, mem, "/cp", 10)
	for _, i := range []int{-1, 10, hs + 10} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Slot(%d) did not panic", i)
				}
			}()
			c.Slot(i)
		}()
	}
}
