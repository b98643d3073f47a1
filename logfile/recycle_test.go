package logfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// recycleOpts are the options of a live set on fsys that recycles up to two
// files of /d, small enough to roll every few batches.
func recycleOpts(fsys vfs.FS) SetOptions {
	return SetOptions{FS: fsys, Dirs: []string{"/d"}, MaxFileSize: 48 << 10, Preallocate: 16 << 10, RecycleLogFiles: 2}
}

// reclaimAllBut deletes (recycles) every file Reclaim may, but the newest
// candidate: the consumer is one file behind.
func reclaimAllBut(t *testing.T, s *Set) {
	t.Helper()
	sn := s.Snapshot()
	if err := sn.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reclaim(sn, func(c []uint32) []uint32 { return c[:len(c)-1] }); err != nil {
		t.Fatal(err)
	}
}

// numberedBatch returns a batch of k puts whose bodies begin with the
// numbers next, next+1, ...
func numberedBatch(t *testing.T, s *Set, next *int64, k int, tx uint64) *Batch {
	t.Helper()
	b := s.NewBatch()
	for range k {
		// Not zeros: a recycled file's old bytes have no zero sector.
		body := bytes.Repeat([]byte{byte(*next) | 1}, 300+int(*next%7)*200)
		binary.BigEndian.PutUint64(body, uint64(*next))
		*next++
		if err := b.Add(&Record{Type: RecordPut, TxID: tx, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// fillAndRoll appends synced batches of numbered puts to data dir 0 of s
// until its file holds size bytes, then rolls.
func fillAndRoll(t *testing.T, s *Set, next *int64, size int64) {
	t.Helper()
	for s.Active(0).Size() < size {
		a := mustAppendBatch(t, s, 0, numberedBatch(t, s, next, 4, 1))
		if err := s.Sync(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Roll(0); err != nil {
		t.Fatal(err)
	}
}

// TestRecycledLogCrashStates is TestPreallocatedLogCrashStates with the
// files the consumer is done with recycled: at every filesystem operation
// it takes power-loss images (torn ones too: an unsynced overwrite of a
// recycled file's old bytes keeps each sector old or new), and in each the
// records a scan reads, file after file, must be consecutive (no old
// record of a recycled file, no record past a torn one, no damaged region)
// and reach the last one whose sync had returned.
func TestRecycledLogCrashStates(t *testing.T) {
	mem := setMem(t, "/d")
	ci := collectCrashImages(mem)
	synced := &ci.synced // records whose Sync returned
	s := startSet(t, recycleOpts(mem), Recovered{})
	next := int64(0)
	for batch := range 90 {
		a := mustAppendBatch(t, s, 0, numberedBatch(t, s, &next, 1+batch%5, uint64(batch+1)))
		if batch%3 != 2 { // some batches stay unsynced until a later one
			if err := s.Sync(a); err != nil {
				t.Fatal(err)
			}
			synced.Store(next)
		}
		if batch%4 == 3 {
			reclaimAllBut(t, s)
		}
		if batch%10 == 0 {
			time.Sleep(time.Millisecond) // let the zero-fills run
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	images, wantAtLeast := ci.stop()
	recycled := 0
	for i, img := range images {
		got, n, err := scanRecycled(img, "/d")
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		recycled = max(recycled, n)
		if got < wantAtLeast[i] {
			t.Fatalf("image %d: records up to %d read back, %d had been synced", i, got, wantAtLeast[i])
		}
	}
	if recycled == 0 {
		t.Fatal("no image holds a recycled file")
	}
	t.Logf("%d crash images", len(images))
}

// scanRecycled scans every log file of dir in img as recovery does and
// returns one past the number of the last record it read and how many
// recycled files it read, checking that the records are consecutive (the
// first may be any: the files before it were consumed) with no damaged
// region, and that a recycled file never ends in a torn tail.
func scanRecycled(img *vfs.MemFS, dir string) (end int64, recycled int, err error) {
	s, err := OpenSet(SetOptions{FS: img, Dirs: []string{dir}})
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	next := int64(-1)
	for _, f := range s.Files() {
		sc, _, err := s.Scan(f, 0)
		if err != nil {
			return 0, 0, err
		}
		for sc.Next() {
			got := int64(binary.BigEndian.Uint64(sc.Record().Body))
			if next >= 0 && got != next {
				sc.Close()
				return 0, 0, fmt.Errorf("%s: record %d where %d comes next", filepath.Base(f.Path), got, next)
			}
			next = got + 1
		}
		err = sc.Err()
		if sk := sc.Skipped(); err == nil && len(sk) > 0 {
			err = fmt.Errorf("%s: damaged regions %+v after a crash", filepath.Base(f.Path), sk)
		}
		if sc.Framing().Recycled() {
			recycled++
			if err == nil && sc.Tail() == TailTorn {
				err = fmt.Errorf("%s: a recycled file with a torn tail at %d", filepath.Base(f.Path), sc.End())
			}
		}
		sc.Close()
		if err != nil {
			return 0, 0, err
		}
	}
	return max(next, 0), recycled, nil
}

// TestRecycleReusesConsumedFiles: with RecycleLogFiles, a file Reclaim
// lets go waits in the pool (at most RecycleLogFiles of them) and the next
// roll overwrites it: version 9, a new salt, none of the old records read,
// the old bytes after the new records a leftover tail (not torn). Another
// Start adopts the pool; without RecycleLogFiles it removes it.
func TestRecycleReusesConsumedFiles(t *testing.T) {
	mem := setMem(t, "/d")
	s := startSet(t, recycleOpts(mem), Recovered{})
	next := int64(0)
	for range 4 {
		fillAndRoll(t, s, &next, 40<<10)
	}
	sn := s.Snapshot()
	if err := sn.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reclaim(sn, func(c []uint32) []uint32 { return c }); err != nil {
		t.Fatal(err)
	}
	if n := s.PoolSize(0); n != 2 {
		t.Fatalf("pool holds %d files after 4 were let go, want RecycleLogFiles = 2", n)
	}
	names, _ := mem.List("/d")
	if got := slices.DeleteFunc(names, func(n string) bool { _, ok := ParseRecycleName(n); return !ok }); len(got) != 2 {
		t.Fatalf("pool files on disk %v, want 2", got)
	}
	a := mustAppendBatch(t, s, 0, numberedBatch(t, s, &next, 1, 2)) // into the active file (5)
	if err := s.Sync(a); err != nil {
		t.Fatal(err)
	}
	if err := s.Roll(0); err != nil {
		t.Fatal(err)
	}
	w := s.Active(0)
	a = mustAppendBatch(t, s, 0, numberedBatch(t, s, &next, 2, 3))
	if err := s.Sync(a); err != nil {
		t.Fatal(err)
	}
	if !w.Framing().Recycled() || w.Framing().Version() != RecycledVersion || s.PoolSize(0) != 1 {
		t.Fatalf("rolled to %v (recycled %v), pool %d: want a recycled file, version %d, pool 1",
			w.Framing(), w.Framing().Recycled(), s.PoolSize(0), RecycledVersion)
	}
	s.Abandon() // as a crash leaves it: the old bytes after the records
	img := mem.CrashClone(false, 1)
	o, err := OpenSet(SetOptions{FS: img, Dirs: []string{"/d"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err := o.Scan(File{ID: w.ID(), Dir: "/d", Path: w.Path()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for sc.Next() {
		got = append(got, int64(binary.BigEndian.Uint64(sc.Record().Body)))
	}
	size, _ := sc.Size()
	if !slices.Equal(got, []int64{next - 2, next - 1}) || sc.Tail() != TailLeftover || len(sc.Skipped()) != 0 || size <= sc.End() {
		t.Fatalf("recycled file: records %v, tail %v, skipped %v, end %d of %d; want [%d %d], leftover, none, old bytes after",
			got, sc.Tail(), sc.Skipped(), sc.End(), size, next-2, next-1)
	}
	sc.Close()
	// Another Start adopts the pool file left.
	again := startSet(t, recycleOpts(img), Recovered{MaxFileID: w.ID()})
	if n := again.PoolSize(0); n != 0 { // the roll of startSet took it
		t.Fatalf("pool after a restart and a roll: %d, want 0 (the file adopted and recycled)", n)
	}
	if !again.Active(0).Framing().Recycled() {
		t.Fatal("the first roll after a restart did not recycle the pool file left")
	}
	o.Close()
}

// TestStartAdoptsThePool: Start puts the pool files a run left back in
// the pool, up to RecycleLogFiles of at most MaxFileSize bytes, and removes
// the others (all of them without RecycleLogFiles): their space comes back.
func TestStartAdoptsThePool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		recycle int
		sizes   []int // of pool files 1, 2, ...
		kept    []uint32
	}{
		{"off", 0, []int{8192}, nil},
		{"up_to_the_bound", 2, []int{8192, 8192, 8192}, []uint32{1, 2}},
		{"too_big", 2, []int{8192, 64 << 10}, []uint32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := setMem(t, "/d")
			for i, n := range tc.sizes {
				setRaw(t, mem, "/d/"+RecycleName(uint32(i+1)), make([]byte, n))
			}
			s, err := OpenSet(SetOptions{FS: mem, Dirs: []string{"/d"}, MaxFileSize: 48 << 10, RecycleLogFiles: tc.recycle})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Start(Recovered{MaxFileID: 10}); err != nil {
				t.Fatal(err)
			}
			var kept []uint32
			for i := range tc.sizes {
				if existsIn(mem, "/d/"+RecycleName(uint32(i+1))) {
					kept = append(kept, uint32(i+1))
				}
			}
			if !slices.Equal(kept, tc.kept) || s.PoolSize(0) != len(tc.kept) {
				t.Fatalf("pool files left %v, pool %d; want %v", kept, s.PoolSize(0), tc.kept)
			}
		})
	}
}

// TestRecycleFailureCreatesAFile: a pool file that cannot be recycled (an
// I/O error) is removed, and the roll creates a new file instead.
func TestRecycleFailureCreatesAFile(t *testing.T) {
	ffs := vfs.NewFaultFS(setMem(t, "/d"))
	s := startSet(t, recycleOpts(ffs), Recovered{})
	next := int64(0)
	fillAndRoll(t, s, &next, 8<<10)
	sn := s.Snapshot()
	if err := sn.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reclaim(sn, func(c []uint32) []uint32 { return c }); err != nil || s.PoolSize(0) != 1 {
		t.Fatalf("Reclaim: %v, pool %d", err, s.PoolSize(0))
	}
	ffs.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWriteAt}, Name: "recycle-*", Times: 1})
	if err := s.Roll(0); err != nil {
		t.Fatal(err)
	}
	names, _ := ffs.List("/d")
	if w := s.Active(0); w.Framing().Recycled() || s.PoolSize(0) != 0 ||
		slices.ContainsFunc(names, func(n string) bool { _, ok := ParseRecycleName(n); return ok }) {
		t.Fatalf("after a failed recycle: active %v, pool %d, files %v; want a created file and no pool", w.Framing(), s.PoolSize(0), names)
	}
}

// TestRecycleNotPooledWhenTheRenameIsNotDurable: a file renamed into the
// pool whose dir fsync failed is removed, not reused: its rename may not
// be durable, and a new header written over it would come back after a
// crash under its old name.
func TestRecycleNotPooledWhenTheRenameIsNotDurable(t *testing.T) {
	ffs := vfs.NewFaultFS(setMem(t, "/d"))
	s := startSet(t, recycleOpts(ffs), Recovered{})
	next := int64(0)
	fillAndRoll(t, s, &next, 8<<10)
	ffs.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSyncDir}, Times: 1})
	sn := s.Snapshot()
	if err := sn.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reclaim(sn, func(c []uint32) []uint32 { return c }); err == nil {
		t.Fatal("Reclaim with a failing dir fsync returned no error")
	}
	names, _ := ffs.List("/d")
	if n := s.PoolSize(0); n != 0 || slices.ContainsFunc(names, func(n string) bool { _, ok := ParseRecycleName(n); return ok }) {
		t.Fatalf("pool %d, files %v: a file whose rename may not be durable was kept for reuse", n, names)
	}
}

// TestRecycledHeaderSaltNotDerivedFromOldRecords: a recycled file that
// holds no record yet, whose header lost both copies of its salt, yields
// no record: the salt a damaged header's file gets from its first two
// frames (recoverFraming) must not be the old file's, whose records follow
// a recycled header unless recycleLog zeroes them.
func TestRecycledHeaderSaltNotDerivedFromOldRecords(t *testing.T) {
	mem := setMem(t, "/d")
	old, err := testCreate(mem, "/d", 1)
	if err != nil {
		t.Fatal(err)
	}
	for woid := range uint64(200) {
		if _, err := old.Write(rec(t, woid+1, fmt.Sprint("old event ", woid))); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Rename("/d/"+LogName(1), "/d/"+RecycleName(1)); err != nil {
		t.Fatal(err)
	}
	w, err := recycleLog(mem, "/d", "/d/"+RecycleName(1), 2, newFraming())
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close() // not Writer.Close, which trims the old bytes: as a crash leaves it
	f, err := mem.OpenReadWrite("/d/" + LogName(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xee}, 24), 12); err != nil { // both salts and their checksums
		t.Fatal(err)
	}
	f.Close()
	sc, salvaged, err := OpenScanner(mem, "/d/"+LogName(2), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	n := 0
	for sc.Next() {
		n++
	}
	if !salvaged || n != 0 {
		t.Fatalf("salvaged %v, %d records read from a recycled file that holds none", salvaged, n)
	}
}

// TestRolledRecycledFileEndsWithAMark: a roll away from a recycled file
// writes a last sync mark, so that damage to records no earlier mark
// vouches for (appended without a sync of their own, made durable by the
// roll) is a damaged region stepped over, not the end of the file: without
// the mark the records after it would be lost as leftovers.
func TestRolledRecycledFileEndsWithAMark(t *testing.T) {
	mem := setMem(t, "/d")
	s := startSet(t, recycleOpts(mem), Recovered{})
	next := int64(0)
	fillAndRoll(t, s, &next, 8<<10)
	reclaimAllBut(t, s) // nothing: one candidate
	rollFiles(t, s, 0, 1)
	sn := s.Snapshot()
	if err := sn.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reclaim(sn, func(c []uint32) []uint32 { return c }); err != nil || s.PoolSize(0) == 0 {
		t.Fatalf("Reclaim: %v, pool %d", err, s.PoolSize(0))
	}
	if err := s.Roll(0); err != nil {
		t.Fatal(err)
	}
	w := s.Active(0)
	if !w.Framing().Recycled() {
		t.Fatal("not recycled")
	}
	first := next
	a := mustAppendBatch(t, s, 0, numberedBatch(t, s, &next, 2, 5))
	if err := s.Sync(a); err != nil {
		t.Fatal(err)
	}
	b := mustAppendBatch(t, s, 0, numberedBatch(t, s, &next, 3, 6)) // no sync: the roll's
	if err := s.Roll(0); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenReadWrite(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 8), b.Base+FrameHeaderSize+40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	o, err := OpenSet(SetOptions{FS: mem, Dirs: []string{"/d"}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	sc, _, err := o.Scan(File{ID: w.ID(), Dir: "/d", Path: w.Path()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var got []int64
	for sc.Next() {
		got = append(got, int64(binary.BigEndian.Uint64(sc.Record().Body)))
	}
	if want := []int64{first, first + 1, first + 3, first + 4}; !slices.Equal(got, want) || len(sc.Skipped()) != 1 {
		t.Fatalf("records %v, skipped %v; want %v and one damaged region", got, sc.Skipped(), want)
	}
}

// TestMakeRoomDoesNotRecycle: files deleted to make room in a dir short of
// space are removed, never kept for reuse (their space is what is needed),
// and Reclaim keeps none in a dir short of space either.
func TestMakeRoomDoesNotRecycle(t *testing.T) {
	mem := setMem(t, "/a")
	var deleted []uint32
	s, _ := retainSet(t, mem, Retention{MaxAge: time.Hour}, &deleted)
	s.opts.RecycleLogFiles, s.opts.MaxFileSize = 2, 1<<20
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil || s.Retained().Files != 3 {
		t.Fatalf("Reclaim: %v, retained %+v", err, s.Retained())
	}
	const min = 1000
	mem.SetFreeSpace(min - 50)
	s.ForgetFreeSpace()
	if n, err := s.MakeRoom(0, 100, min, allUnheld); n == 0 || err != nil {
		t.Fatalf("MakeRoom = %d, %v", n, err)
	}
	names, _ := mem.List("/a")
	if s.PoolSize(0) != 0 || slices.ContainsFunc(names, func(n string) bool { _, ok := ParseRecycleName(n); return ok }) {
		t.Fatalf("pool %d, files %v: MakeRoom kept files for reuse", s.PoolSize(0), names)
	}
}

// TestNoRecycleInADirShortOfSpace: a dir short of space (a SpaceOK refused
// a put) or full (its space reserve given back) keeps no file for reuse:
// Reclaim removes them, giving the space back.
func TestNoRecycleInADirShortOfSpace(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			mem := setMem(t, "/d")
			s := startSet(t, recycleOpts(mem), Recovered{})
			next := int64(0)
			fillAndRoll(t, s, &next, 8<<10)
			if full {
				s.dirs[0].full.Store(true) // as releaseReserve leaves it
			} else {
				mem.SetFreeSpace(500)
				s.ForgetFreeSpace()
				if ok, _, _ := s.SpaceOK(0, 100, 1000); ok {
					t.Fatal("SpaceOK with 500 bytes free and 1000 required")
				}
			}
			sn := s.Snapshot()
			if err := sn.Sync(); err != nil {
				t.Fatal(err)
			}
			if n, err := s.Reclaim(sn, func(c []uint32) []uint32 { return c }); n != 1 || err != nil || s.PoolSize(0) != 0 {
				t.Fatalf("Reclaim = %d, %v, pool %d; want 1 file deleted, none kept", n, err, s.PoolSize(0))
			}
		})
	}
}

// TestRecycleRenameFailureRemoves: a file whose rename into the pool fails
// is removed as without recycling, and gives its pool place back: the next
// file let go is kept.
func TestRecycleRenameFailureRemoves(t *testing.T) {
	ffs := vfs.NewFaultFS(setMem(t, "/d"))
	opts := recycleOpts(ffs)
	opts.RecycleLogFiles = 1
	s := startSet(t, opts, Recovered{})
	next := int64(0)
	reclaim := func() {
		t.Helper()
		fillAndRoll(t, s, &next, 8<<10)
		sn := s.Snapshot()
		if err := sn.Sync(); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Reclaim(sn, func(c []uint32) []uint32 { return c }); n != 1 || err != nil {
			t.Fatalf("Reclaim = %d, %v; want 1 file deleted", n, err)
		}
	}
	ffs.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpRename}, Name: "recycle-*", Times: 1})
	reclaim()
	names, _ := ffs.List("/d")
	if s.PoolSize(0) != 0 || len(names) != 1 {
		t.Fatalf("after a failed rename: pool %d, files %v; want the file removed", s.PoolSize(0), names)
	}
	reclaim()
	if s.PoolSize(0) != 1 {
		t.Fatalf("pool %d after the next file was let go, want 1: the failed rename kept its place", s.PoolSize(0))
	}
}
