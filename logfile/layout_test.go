package logfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// gateFS is a MemFS whose files block a WriteAt of zeros (a zero-fill)
// while gate is closed.
type gateFS struct {
	*vfs.MemFS
	mu      sync.Mutex
	gate    chan struct{} // nil = open
	blocked chan struct{} // receives one value per blocked zero write
}

type gateFile struct {
	vfs.File
	fs *gateFS
}

func (g *gateFS) Create(name string, perm os.FileMode) (vfs.File, error) {
	f, err := g.MemFS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return gateFile{File: f, fs: g}, nil
}

func (f gateFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	gate := f.fs.gate
	f.fs.mu.Unlock()
	if gate != nil && len(p) > 0 && zeros.All(p) {
		f.fs.blocked <- struct{}{}
		<-gate
	}
	return f.File.WriteAt(p, off)
}

// TestWriteWaitsForTheZeroFillItReaches: a Write that reaches into the
// range a zero-fill is writing waits for it, so the zeros can never land
// over the records. Without the wait the record below is overwritten.
func TestWriteWaitsForTheZeroFillItReaches(t *testing.T) {
	g := &gateFS{MemFS: vfs.NewMem(), blocked: make(chan struct{}, 1)}
	w, err := create(g, "/", 1, testFraming)
	if err != nil {
		t.Fatal(err)
	}
	small := mustAppend(t, nil, &Record{Type: RecordPut, TxID: 1, WriteOrderID: 1, Body: []byte("first")})
	if _, err := w.Write(small); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
	const chunk = 16 << 10
	laid := make(chan error, 1)
	go func() {
		_, err := w.layOut(4*chunk, chunk, 1<<20, make([]byte, chunk))
		laid <- err
	}()
	<-g.blocked // the zero-fill is in flight, past the writes
	w.lay.mu.Lock()
	from, to := w.lay.from, w.lay.to
	w.lay.mu.Unlock()
	if from < w.Size() || to <= from {
		t.Fatalf("zero-fill [%d, %d) with the writes at %d", from, to, w.Size())
	}
	big := mustAppend(t, nil, &Record{Type: RecordPut, TxID: 2, WriteOrderID: 2, Body: bytes.Repeat([]byte{7}, int(from-w.Size()))})
	wrote := make(chan int64, 1)
	go func() {
		off, err := w.Write(big)
		if err != nil {
			t.Error(err)
		}
		wrote <- off
	}()
	select {
	case <-wrote:
		t.Fatal("a Write reaching into a zero-fill in flight did not wait for it")
	case <-time.After(50 * time.Millisecond):
	}
	g.mu.Lock()
	close(g.gate)
	g.gate = nil
	g.mu.Unlock()
	if err := <-laid; err != nil {
		t.Fatal(err)
	}
	off := <-wrote
	got := make([]byte, len(big))
	f, err := g.Open("/" + LogName(1))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(got, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("the zero-fill overwrote a record")
	}
	if waits := w.LayoutWaits(); waits != 1 {
		t.Errorf("waits = %d, want 1", waits)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := g.Stat("/" + LogName(1)); fi.Size() != w.Size() {
		t.Errorf("closed file is %d bytes, its records end at %d: not trimmed", fi.Size(), w.Size())
	}
}

// TestPreallocatedLogCrashStates runs a live set that lays its files out
// ahead of the writes on a MemFS, and at every filesystem operation takes
// power-loss images (torn ones too: a torn overwrite keeps each sector old
// or new). In each image a scan of the files, as recovery reads them, must
// return a prefix of the records written, in order: every record whose
// sync had returned, then nothing after the first record it misses (the
// records after a torn one were never synced, and replaying them would
// apply part of what no commit returned), with no damaged region reported.
func TestPreallocatedLogCrashStates(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/d", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	ci := collectCrashImages(mem)
	synced := &ci.synced
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/d"}, MaxFileSize: 48 << 10, Preallocate: 16 << 10}, Recovered{})
	next := int64(0)
	var err error
	for batch := range 60 {
		b := s.NewBatch()
		k := 1 + batch%5
		for range k {
			body := make([]byte, 300+int(next%7)*200)
			binary.BigEndian.PutUint64(body, uint64(next))
			next++
			if err = b.Add(&Record{Type: RecordPut, TxID: uint64(batch + 1), Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		a, err := s.Append(0, b)
		if err != nil {
			t.Fatal(err)
		}
		if batch%3 != 2 { // some batches stay unsynced until a later one
			if err := a.W.SyncTo(a.End); err != nil {
				t.Fatal(err)
			}
			synced.Store(next)
		}
		if batch%10 == 0 {
			time.Sleep(time.Millisecond) // let the zero-fills run
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	images, wantAtLeast := ci.stop()
	if st := s.LayoutStats(); st.LaidOut == 0 {
		t.Fatalf("nothing was laid out: %+v", st)
	}
	for i, img := range images {
		got, err := scanImage(img, "/d")
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		if got < wantAtLeast[i] {
			names, _ := img.List("/d")
			for _, n := range names {
				f, _ := img.Open("/d/" + n)
				fi, _ := f.Stat()
				b := make([]byte, fi.Size())
				f.ReadAt(b, 0)
				f.Close()
				t.Logf("%s: %d bytes: % x", n, len(b), b[:min(len(b), 120)])
			}
			t.Fatalf("image %d: %d records read back, %d had been synced", i, got, wantAtLeast[i])
		}
	}
	t.Logf("%d crash images", len(images))
}

// scanImage scans every log file of dir in img as recovery does and
// returns how many records it read, checking that they are records 0, 1,
// 2, ... in order with no damaged region between them.
func scanImage(img *vfs.MemFS, dir string) (int64, error) {
	s, err := OpenSet(SetOptions{FS: img, Dirs: []string{dir}})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	next := int64(0)
	for _, f := range s.Files() {
		sc, _, err := s.Scan(f, 0)
		if err != nil {
			return 0, err
		}
		for sc.Next() {
			r := sc.Record()
			if got := int64(binary.BigEndian.Uint64(r.Body)); got != next {
				sc.Close()
				return 0, fmt.Errorf("%s: record %d where %d comes next", filepath.Base(f.Path), got, next)
			}
			next++
		}
		if err := sc.Err(); err != nil {
			return 0, err
		}
		if sk := sc.Skipped(); len(sk) > 0 {
			sc.Close()
			return 0, fmt.Errorf("%s: damaged regions %+v after a crash", filepath.Base(f.Path), sk)
		}
		sc.Close()
	}
	return next, nil
}

// TestTornOverwriteEndsOnlyTheLastFile: a record with a zeroed sector
// followed by valid records ends the scan of a dir's last file (the
// records after it were never synced), but is a damaged region stepped
// over in an earlier file (synced to its end before the next was made),
// and so is non-zero damage in the last file.
func TestTornOverwriteEndsOnlyTheLastFile(t *testing.T) {
	recs := make([]Record, 6)
	for i := range recs {
		recs[i] = Record{Type: RecordPut, TxID: uint64(i + 1), WriteOrderID: uint64(i + 1), Body: bytes.Repeat([]byte{byte('a' + i)}, 1500)}
	}
	for _, tc := range []struct {
		name     string
		last     bool
		zero     bool // zero a sector of record 2, else flip bytes in it
		wantRecs int
		wantSkip int
		wantTail Tail
	}{
		{"last file, zeroed sector", true, true, 2, 0, TailTorn},
		{"earlier file, zeroed sector", false, true, 5, 1, TailClean},
		{"last file, garbage", true, false, 5, 1, TailClean},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, offs := writeLog(t, dir, 1, recs)
			if !tc.last {
				writeLog(t, dir, 2, recs[:1])
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			sector := (offs[2]/sectorSize + 1) * sectorSize // a whole sector inside record 2
			fill := make([]byte, sectorSize)
			if !tc.zero {
				for i := range fill {
					fill[i] = 0xa5
				}
			}
			if _, err := f.WriteAt(fill, sector); err != nil {
				t.Fatal(err)
			}
			f.Close()
			s, err := OpenSet(SetOptions{Dirs: []string{dir}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sc, _, err := s.Scan(s.Files()[0], 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			n := 0
			for sc.Next() {
				n++
			}
			if n != tc.wantRecs || len(sc.Skipped()) != tc.wantSkip || sc.Tail() != tc.wantTail {
				t.Fatalf("%d records, %d skipped, tail %v; want %d, %d, %v", n, len(sc.Skipped()), sc.Tail(), tc.wantRecs, tc.wantSkip, tc.wantTail)
			}
			if tc.wantTail == TailTorn && sc.End() != offs[2] {
				t.Fatalf("end %d, want the torn record's offset %d", sc.End(), offs[2])
			}
		})
	}
}

// TestNoZerosLaidOutWithoutRoom: a dir whose free space would fall below
// PreallocateMinFree gets no zeros; the same dir with room does.
func TestNoZerosLaidOutWithoutRoom(t *testing.T) {
	const ahead, minFree = 64 << 10, 1 << 20
	for _, tc := range []struct {
		free int64
		want bool
	}{{minFree + ahead/4 - 1, false}, {minFree + 4*ahead, true}} {
		mem := vfs.NewMem()
		mem.SetFreeSpace(tc.free)
		s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/"}, Preallocate: ahead, PreallocateMinFree: minFree}, Recovered{})
		deadline := time.Now().Add(10 * time.Second)
		for tc.want && s.LayoutStats().LaidOut == 0 && time.Now().Before(deadline) {
			s.layouter.kick()
			time.Sleep(time.Millisecond)
		}
		s.layouter.kick()
		time.Sleep(10 * time.Millisecond) // a zero-fill that should not happen has had its chance
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := s.LayoutStats().LaidOut > 0; got != tc.want {
			t.Errorf("free %d: laid out %v, want %v", tc.free, got, tc.want)
		}
	}
}

// crashImages collects, at every filesystem operation of a MemFS, a
// power-loss image and a torn one, each with the value synced had then
// (what the test counts as durable).
type crashImages struct {
	mem    *vfs.MemFS
	synced atomic.Int64
	mu     sync.Mutex
	seed   int64
	images []*vfs.MemFS
	wants  []int64
}

// collectCrashImages starts collecting mem's crash images.
func collectCrashImages(mem *vfs.MemFS) *crashImages {
	ci := &crashImages{mem: mem}
	mem.SetHook(func(p vfs.CrashPoint) {
		ci.mu.Lock()
		defer ci.mu.Unlock()
		ci.seed++
		n := ci.synced.Load()
		ci.images = append(ci.images, p.Clone(false, ci.seed), p.Clone(true, ci.seed))
		ci.wants = append(ci.wants, n, n)
	})
	return ci
}

// stop ends the collection and returns the images, each with synced's
// value when it was taken.
func (ci *crashImages) stop() ([]*vfs.MemFS, []int64) {
	ci.mem.SetHook(nil)
	ci.mu.Lock()
	defer ci.mu.Unlock()
	return ci.images, ci.wants
}

// TestZeroFillWritesAreSmall: the layouter writes its zeros in writes of at
// most maxZeroWrite, however large its chunk, so that a commit's write to
// the file never waits behind a long one (maxZeroWrite).
func TestZeroFillWritesAreSmall(t *testing.T) {
	mem := setMem(t, "/a")
	g := &holdFS{FS: mem}
	const ahead = 4 << 20 // chunks of 1 MiB
	s := startSet(t, SetOptions{FS: g, Dirs: []string{"/a"}, Preallocate: ahead}, Recovered{})
	a := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	if err := s.Sync(a); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the layouter to lay out 4 MiB", func() bool { return s.LayoutStats().LaidOut >= ahead })
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.sizes {
		if n > maxZeroWrite {
			t.Fatalf("a write of %d bytes (writes %v); a zero-fill writes at most %d at a time", n, g.sizes, maxZeroWrite)
		}
	}
}

// TestWritesPaddedToTheirPageEnd: where the file is laid out past a write,
// Write pads it with zeros to the end of its page (a write ending inside a
// page the page cache does not hold makes the kernel read that page
// first), whether the batch's buffer has room for the zeros or is copied;
// the records read back whole. Where the file is not laid out, it writes
// the records alone: the file does not grow past them.
func TestWritesPaddedToTheirPageEnd(t *testing.T) {
	for _, laidOut := range []bool{true, false} {
		t.Run(fmt.Sprintf("laidout=%v", laidOut), func(t *testing.T) {
			mem := setMem(t, "/a")
			g := &holdFS{FS: mem}
			opts := SetOptions{FS: g, Dirs: []string{"/a"}}
			if laidOut {
				opts.Preallocate = 1 << 20
			}
			s := startSet(t, opts, Recovered{})
			var as []Appended
			for _, n := range []int{1, 2, 3, 500, 7} { // 500: a write larger than maxPadCopy
				b := putBatch(t, s, n)
				if n == 3 {
					b.buf = slices.Grow(b.buf, writePage) // room for the zeros
				}
				a := mustAppendBatch(t, s, 0, b)
				if err := s.Sync(a); err != nil {
					t.Fatal(err)
				}
				as = append(as, a)
				if laidOut && len(as) == 1 {
					waitUntil(t, "the layouter", func() bool { return s.LayoutStats().LaidOut >= 1<<20 })
				}
			}
			checkPadded(t, g, as[1:], laidOut) // the first before the layouter began
			checkMerged(t, mem, as[:1])        // the first record
			sc, err := NewScanner(mem.CrashClone(false, 0), as[0].W.Path(), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			n := 0
			for sc.Next() {
				if sc.Record().Type == RecordPut {
					n++
				}
			}
			if n != 1+2+3+500+7 || sc.Err() != nil {
				t.Fatalf("read back %d puts (err %v), want %d", n, sc.Err(), 1+2+3+500+7)
			}
		})
	}
}

// checkPadded checks the write of each of as: ending at the end of its
// page if padded (a batch larger than maxPadCopy may be written alone: it
// is padded only if its buffer had room), else at the batch's end.
func checkPadded(t *testing.T, g *holdFS, as []Appended, padded bool) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, a := range as {
		k := slices.Index(g.offs, a.Base)
		if k < 0 {
			t.Fatalf("no write at %d (writes at %v)", a.Base, g.offs)
		}
		end := a.Base + int64(g.sizes[k])
		pageEnd := (a.End + writePage - 1) &^ (writePage - 1)
		switch {
		case !padded && end != a.End,
			padded && end != pageEnd && (a.End-a.Base <= maxPadCopy || end != a.End):
			t.Fatalf("append %d: [%d,%d) written as [%d,%d) (padded %v)", i, a.Base, a.End, a.Base, end, padded)
		}
	}
}

// TestPaddingLaysOutNoMore: the layouter keeps Preallocate bytes laid out
// past the records, not past their padding: a few small appends after the
// first chunks lay out nothing more (with the padding counted, the write's
// page end would ask for a chunk more, on disk for nothing).
func TestPaddingLaysOutNoMore(t *testing.T) {
	mem := setMem(t, "/a")
	const ahead = 256 << 10 // chunks of 64 KiB
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/a"}, Preallocate: ahead}, Recovered{})
	a := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	if err := s.Sync(a); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the layouter to lay out 256 KiB", func() bool { return s.LayoutStats().LaidOut >= ahead })
	time.Sleep(20 * time.Millisecond) // let it finish
	before := s.LayoutStats().LaidOut
	for range 3 {
		a := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
		if err := s.Sync(a); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // a chunk more would be laid out by now
	if after := s.LayoutStats().LaidOut; after != before {
		t.Fatalf("laid out %d bytes after 3 small appends, %d before: the padding moved the layout", after, before)
	}
}
