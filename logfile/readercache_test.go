package logfile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
)

// readerSet opens a catalog of n log files in /a, file i holding one
// record of write-order id i at the returned offset, with at most max
// readers open. The header of file 3 is damaged (read by salvage).
func readerSet(t *testing.T, n, max int) (*Set, *openCountFS, int64) {
	t.Helper()
	fsys := &openCountFS{FS: setMem(t, "/a")}
	var off int64
	for id := uint32(1); id <= uint32(n); id++ {
		path, offs, _ := setLog(t, fsys, "/a", id, uint64(id))
		off = offs[0]
		if id == 3 {
			damageHeader(t, fsys, path)
		}
	}
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}, MaxOpenReaders: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close set: %v", err)
		}
		if n := fsys.open.Load(); n != 0 {
			t.Errorf("%d files left open after Close", n)
		}
	})
	return s, fsys, off
}

// damageHeader flips a byte of the file header at path.
func damageHeader(t *testing.T, fsys *openCountFS, path string) {
	t.Helper()
	f, err := fsys.FS.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{0xff}, 10); err != nil {
		t.Fatal(err)
	}
}

// readOne reads the record of file id through the set and releases it.
func readOne(t *testing.T, s *Set, id uint32, off int64) {
	t.Helper()
	r, err := s.Reader(id)
	if err != nil {
		t.Fatalf("Reader(%d): %v", id, err)
	}
	defer r.Release()
	rec, err := r.ReadRecord(off)
	if err != nil || rec.WriteOrderID != uint64(id) {
		t.Fatalf("record of file %d: woid %d, %v; want %d", id, rec.WriteOrderID, err, id)
	}
}

// However many files are read, and in whatever order, at most
// MaxOpenReaders readers are open once released; the least recently used
// goes first, a salvaged header is salvaged again after eviction.
func TestSetReadersStayBounded(t *testing.T) {
	const files, max = 40, 4
	s, fsys, off := readerSet(t, files, max)
	check := func(when string) {
		t.Helper()
		if n, open := s.OpenReaders(), fsys.open.Load(); n > max || open != int64(n) {
			t.Fatalf("%s: OpenReaders() = %d, %d files open; want at most %d, the same", when, n, open, max)
		}
	}
	for id := uint32(1); id <= files; id++ {
		readOne(t, s, id, off)
		check(fmt.Sprintf("after reading file %d", id))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		readOne(t, s, uint32(rng.IntN(files))+1, off)
		check(fmt.Sprintf("random read %d", i))
	}

	// LRU: with 1..4 cached, 1 is used again, 5 evicts 2 (the least
	// recently used), then 1, 3, 4 and 5 are still open and 2 is not.
	for id := uint32(1); id <= max; id++ {
		readOne(t, s, id, off)
	}
	readOne(t, s, 1, off)
	readOne(t, s, 5, off)
	opens := fsys.opens.Load()
	for _, id := range []uint32{1, 3, 4, 5} {
		readOne(t, s, id, off)
	}
	if got := fsys.opens.Load() - opens; got != 0 {
		t.Fatalf("reading the %d most recently used files opened %d files, want 0", max, got)
	}
	readOne(t, s, 2, off)
	if got := fsys.opens.Load() - opens; got != 1 {
		t.Fatalf("reading the evicted file 2 opened %d files, want 1", got)
	}
}

// A reader in use is never closed under its user: evicted by other files,
// or its file deleted by Reclaim, it reads on until released, and only then
// is it closed.
func TestSetReaderInUseOutlivesEvictionAndDeletion(t *testing.T) {
	t.Run("evicted", func(t *testing.T) {
		s, fsys, off := readerSet(t, 10, 2)
		held, err := s.Reader(1)
		if err != nil {
			t.Fatal(err)
		}
		for id := uint32(2); id <= 10; id++ {
			readOne(t, s, id, off)
		}
		if n := s.OpenReaders(); n != 3 {
			t.Fatalf("OpenReaders() = %d with 2 cached and 1 evicted in use, want 3", n)
		}
		if rec, err := held.ReadRecord(off); err != nil || rec.WriteOrderID != 1 {
			t.Fatalf("reading through an evicted reader in use: woid %d, %v", rec.WriteOrderID, err)
		}
		held.Release()
		if n, open := s.OpenReaders(), fsys.open.Load(); n != 2 || open != 2 {
			t.Fatalf("after Release: OpenReaders() = %d, %d files open; want 2, 2", n, open)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		fsys := &openCountFS{FS: setMem(t, "/a")}
		s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a"}, MaxOpenReaders: 2}, Recovered{})
		rollFiles(t, s, 0, 3)
		held, err := s.Reader(1)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return c }); err != nil || n != 3 {
			t.Fatalf("Reclaim: %d, %v; want 3 deleted", n, err)
		}
		if _, err := held.ReadRecord(HeaderSize); err != nil {
			t.Fatalf("reading a deleted file's reader still in use: %v", err)
		}
		if n := s.OpenReaders(); n != 1 {
			t.Fatalf("OpenReaders() = %d with a deleted file's reader in use, want 1", n)
		}
		held.Release()
		if n := s.OpenReaders(); n != 0 {
			t.Fatalf("OpenReaders() = %d after the deleted file's reader was released, want 0", n)
		}
		if _, err := s.Reader(1); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Fatalf("Reader(1) after deletion: %v, want a *corrupt.Error", err)
		}
	})
}

// A header naming another file id is remembered: the file is not opened
// again, however often a take asks for it, and takes no cache room.
func TestSetReaderKeepsHeaderError(t *testing.T) {
	fsys := &openCountFS{FS: setMem(t, "/a")}
	setRaw(t, fsys.FS, "/a/"+LogName(9), cat(AppendFileHeader(nil, 8), rec(t, 9, "x")))
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}, MaxOpenReaders: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var opens int64
	for i := range 3 {
		if _, err := s.Reader(9); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Fatalf("Reader(9): %v, want a *corrupt.Error", err)
		}
		if i == 0 {
			opens = fsys.opens.Load()
		}
	}
	if got := fsys.opens.Load() - opens; got != 0 {
		t.Fatalf("Reader(9) after its header was found bad opened the file %d more times, want 0", got)
	}
	if n, open := s.OpenReaders(), fsys.open.Load(); n != 0 || open != 0 {
		t.Fatalf("OpenReaders() = %d, %d files open after failed opens; want 0, 0", n, open)
	}
}

// Takes on many goroutines while Reclaim deletes files under them: a
// Reader either fails (the file is gone: a *corrupt.Error) or reads; no
// deleted file's reader stays cached, and nothing is left open beyond the
// cache's bound (run with -race).
func TestSetReadersConcurrentWithDeletion(t *testing.T) {
	const max = 3
	fsys := &openCountFS{FS: setMem(t, "/a")}
	s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a"}, MaxOpenReaders: max}, Recovered{})
	ids := rollFiles(t, s, 0, 30)
	gone := ids[:15] // Reclaim deletes these while the readers read all
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 300 {
				id := ids[rng.IntN(len(ids))]
				r, err := s.Reader(id)
				if errors.Is(err, corrupt.ErrCorrupt) && slices.Contains(gone, id) {
					continue
				}
				if err != nil {
					t.Errorf("Reader(%d): %v", id, err)
					return
				}
				if _, err := r.ReadRecord(HeaderSize); err != nil {
					t.Errorf("read file %d: %v", id, err)
				}
				r.Release()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, id := range gone {
			if n, err := s.Reclaim(s.Snapshot(), func([]uint32) []uint32 { return []uint32{id} }); err != nil || n != 1 {
				t.Errorf("Reclaim %d: %d deleted, %v; want 1", id, n, err)
			}
		}
	}()
	wg.Wait()
	s.readers.mu.Lock()
	for id := range s.readers.nodes {
		if slices.Contains(gone, id) {
			t.Errorf("the reader of deleted file %d is still cached", id)
		}
	}
	s.readers.mu.Unlock()
	if n, open := s.OpenReaders(), fsys.open.Load(); n > max || open != int64(n)+1 { // + the writer
		t.Fatalf("OpenReaders() = %d, %d files open; want at most %d, and one more for the writer", n, open, max)
	}
}
