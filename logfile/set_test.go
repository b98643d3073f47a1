package logfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// These tests pin down the contract of Set directly (the channel's tests
// reach it only through the channel): listing, readers, ids, rolling,
// snapshots, reclaiming and free space. Each names the one behaviour whose
// loss makes it fail.

// setMem returns a MemFS holding the data dirs, their names durable.
func setMem(t *testing.T, dirs ...string) *vfs.MemFS {
	t.Helper()
	fsys := vfs.NewMem()
	for _, d := range dirs {
		if err := fsys.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}

// setRaw writes data as the file at path, durably (file and dir entry).
func setRaw(t *testing.T, fsys vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fsys.Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
}

// setLog writes log file id in dir holding one put per write-order id,
// synced, and returns its path, the offset of each record and its end.
func setLog(t *testing.T, fsys vfs.FS, dir string, id uint32, woids ...uint64) (string, []int64, int64) {
	t.Helper()
	w, err := testCreate(fsys, dir, id)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, woid := range woids {
		off, err := w.Write(rec(t, woid, fmt.Sprint("event ", woid)))
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	end := w.Size()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path(), offs, end
}

// putBatch returns a batch of s of n unsealed puts (Append seals them).
func putBatch(t *testing.T, s *Set, n int) *Batch {
	t.Helper()
	b := s.NewBatch()
	for i := range n {
		if err := b.Add(&Record{Type: RecordPut, TxID: 1, Body: []byte(fmt.Sprint("put ", i))}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// startSet opens a set with opts, starts it with rec and rolls every data
// dir, so each has an active writer; the set is closed when the test ends.
func startSet(t *testing.T, opts SetOptions, rec Recovered) *Set {
	t.Helper()
	s, err := OpenSet(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close set: %v", err)
		}
	})
	if err := s.Start(rec); err != nil {
		t.Fatal(err)
	}
	for i := range s.NumDirs() {
		if err := s.Roll(i); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func mustAppendBatch(t *testing.T, s *Set, i int, b *Batch) Appended {
	t.Helper()
	a, err := s.Append(i, b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// rollFiles appends a batch to data dir i and rolls, n times, and returns
// the ids of the files rolled away from.
func rollFiles(t *testing.T, s *Set, i, n int) []uint32 {
	t.Helper()
	var ids []uint32
	for range n {
		a := mustAppendBatch(t, s, i, putBatch(t, s, 1))
		ids = append(ids, a.W.ID())
		if err := s.Roll(i); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// diskImage returns the contents of every entry of the dirs that exist.
func diskImage(t *testing.T, fsys vfs.FS, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		names, err := fsys.List(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			b, err := vfs.ReadFile(fsys, filepath.Join(d, n))
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Join(d, n)] = string(b)
		}
	}
	return out
}

func requireSameDisk(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the dirs hold %d entries, had %d", len(got), len(want))
	}
	for p, b := range want {
		if got[p] != b {
			t.Fatalf("%s changed: %d bytes, had %d", p, len(got[p]), len(b))
		}
	}
}

func fileIDs(fs []File) []uint32 {
	var ids []uint32
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	return ids
}

func stateIDs(fs []FileState) []uint32 {
	var ids []uint32
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	return ids
}

func position(t *testing.T, sn *Snapshot, id uint32) int64 {
	t.Helper()
	for _, f := range sn.Files {
		if f.ID == id {
			return f.Position
		}
	}
	t.Fatalf("snapshot has no file %d (has %v)", id, stateIDs(sn.Files))
	return 0
}

func existsIn(fsys vfs.FS, path string) bool {
	_, err := fsys.Stat(path)
	return err == nil
}

// logRecorder is a slog.Handler that keeps each message logged.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	return nil
}

// count returns how many messages contain sub.
func (h *logRecorder) count(sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// openCountFS counts the files opened through it and not closed yet.
type openCountFS struct {
	vfs.FS
	open  atomic.Int64 // files open now
	opens atomic.Int64 // files opened so far
}

type countedFile struct {
	vfs.File
	c    *openCountFS
	once sync.Once
}

func (c *openCountFS) counted(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	c.opens.Add(1)
	return &countedFile{File: f, c: c}, nil
}

func (c *openCountFS) Create(name string, perm fs.FileMode) (vfs.File, error) {
	return c.counted(c.FS.Create(name, perm))
}
func (c *openCountFS) Open(name string) (vfs.File, error) { return c.counted(c.FS.Open(name)) }
func (c *openCountFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.counted(c.FS.OpenReadWrite(name))
}

func (f *countedFile) Close() error {
	f.once.Do(func() { f.c.open.Add(-1) })
	return f.File.Close()
}

// OpenSet lists the log files of every data dir by id, with their dir and
// path; a dir that does not exist is Missing, other names are ignored, and
// nothing on disk changes.
func TestOpenSetListsFilesByIDAcrossDirs(t *testing.T) {
	fsys := setMem(t, "/a", "/b")
	setLog(t, fsys, "/a", 1, 1)
	setLog(t, fsys, "/a", 4, 4)
	setLog(t, fsys, "/b", 2, 2)
	setLog(t, fsys, "/b", 3, 3)
	setRaw(t, fsys, "/a/"+CorruptName(1, 16), []byte("kept bytes"))
	setRaw(t, fsys, "/b/notes", []byte("not a log"))
	dirs := []string{"/a", "/missing", "/b"}
	before, ops := diskImage(t, fsys, dirs...), fsys.Ops()

	s, err := OpenSet(SetOptions{FS: fsys, Dirs: dirs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []File{
		{ID: 1, Dir: "/a", Path: "/a/" + LogName(1)},
		{ID: 2, Dir: "/b", Path: "/b/" + LogName(2)},
		{ID: 3, Dir: "/b", Path: "/b/" + LogName(3)},
		{ID: 4, Dir: "/a", Path: "/a/" + LogName(4)},
	}
	if got := s.Listed(); !slices.Equal(got, want) {
		t.Fatalf("Listed() = %+v\nwant %+v", got, want)
	}
	if got := s.Files(); !slices.Equal(got, want) {
		t.Fatalf("Files() = %+v\nwant %+v", got, want)
	}
	if got := s.Missing(); !slices.Equal(got, []string{"/missing"}) {
		t.Fatalf("Missing() = %v, want [/missing]", got)
	}
	if s.Len() != 4 {
		t.Fatalf("Len() = %d, want 4", s.Len())
	}
	if fsys.Ops() != ops {
		t.Fatalf("OpenSet made %d changes on disk", fsys.Ops()-ops)
	}
	requireSameDisk(t, diskImage(t, fsys, dirs...), before)
}

// The same file id in two data dirs is refused, naming both dirs; with
// AllowDuplicates the second is listed with Duplicate set, and Files, Scan
// and Reader use the first.
func TestOpenSetDuplicateID(t *testing.T) {
	fsys := setMem(t, "/a", "/b")
	setLog(t, fsys, "/a", 1, 1)
	setLog(t, fsys, "/a", 2, 20)
	setLog(t, fsys, "/b", 2, 21)
	setLog(t, fsys, "/b", 3, 3)
	dirs := []string{"/a", "/b"}
	before := diskImage(t, fsys, dirs...)

	t.Run("refused", func(t *testing.T) {
		_, err := OpenSet(SetOptions{FS: fsys, Dirs: dirs})
		if err == nil {
			t.Fatal("OpenSet accepted log file 2 in two data dirs")
		}
		for _, want := range []string{"log file id 2", "/a", "/b"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %q", err, want)
			}
		}
	})
	t.Run("allowed", func(t *testing.T) {
		s, err := OpenSet(SetOptions{FS: fsys, Dirs: dirs, AllowDuplicates: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		want := []File{
			{ID: 1, Dir: "/a", Path: "/a/" + LogName(1)},
			{ID: 2, Dir: "/a", Path: "/a/" + LogName(2)},
			{ID: 2, Dir: "/b", Path: "/b/" + LogName(2), Duplicate: "/a"},
			{ID: 3, Dir: "/b", Path: "/b/" + LogName(3)},
		}
		if got := s.Listed(); !slices.Equal(got, want) {
			t.Fatalf("Listed() = %+v\nwant %+v", got, want)
		}
		files := s.Files()
		if got := []File{want[0], want[1], want[3]}; !slices.Equal(files, got) {
			t.Fatalf("Files() = %+v\nwant %+v", files, got)
		}
		if s.Len() != 3 {
			t.Fatalf("Len() = %d, want 3", s.Len())
		}
		r, err := s.Reader(2)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		if r.Path() != "/a/"+LogName(2) {
			t.Fatalf("Reader(2) reads %s, want the first dir's", r.Path())
		}
		sc, _, err := s.Scan(files[1], 0)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if !sc.Next() || sc.Record().WriteOrderID != 20 {
			t.Fatalf("Scan of the first file 2 did not return its record (woid 20): %v", sc.Err())
		}
	})
	requireSameDisk(t, diskImage(t, fsys, dirs...), before)
}

// A crash inside Create leaves a file shorter than a header, all zeros, or
// a header torn to a newer version without its checksum: Unfinished, and
// not one of Files. A zeroed header followed by anything but zeros is
// damage, not an unfinished create.
// tornNewerHeader is a header whose magic survived a tear and whose other
// bytes did not (the version reads 236; the checksum fails).
func tornNewerHeader() []byte {
	b := bytes.Repeat([]byte{0xEC}, HeaderSize)
	copy(b, magic)
	return b
}

func TestOpenSetUnfinishedCreates(t *testing.T) {
	hdr := testHeader(1)
	zeroHdr := make([]byte, HeaderSize)
	// Past the 64 KiB that unfinishedCreate reads at a time.
	longZeros := make([]byte, HeaderSize+70<<10)
	for _, tc := range []struct {
		name       string
		data       []byte
		unfinished bool
	}{
		{"empty", nil, true},
		{"shorter_than_header", hdr[:HeaderSize-1], true},
		{"zero_header_only", zeroHdr, true},
		{"zero_header_then_zeros", longZeros, true},
		{"zero_header_then_record", cat(zeroHdr, rec(t, 1, "a")), false},
		{"zero_header_then_nonzero_past_64k", cat(longZeros, []byte{1}), false},
		{"garbage_header_then_record", cat(bytes.Repeat([]byte{'x'}, HeaderSize), rec(t, 1, "a")), false},
		{"valid_header_only", hdr, false},
		// A power loss kept the magic of a new file's header and tore
		// the rest: its version reads as newer, its checksum fails.
		{"torn_newer_header_only", tornNewerHeader(), true},
		{"torn_newer_header_then_zeros", cat(tornNewerHeader(), make([]byte, 4096)), true},
		{"torn_newer_header_then_record", cat(tornNewerHeader(), rec(t, 1, "a")), false},
		// The same tear of a header a power loss also cut short (its
		// last bytes never written): too short to hold the checksum, or
		// holding one that fails.
		{"torn_newer_header_short_without_checksum", tornNewerHeader()[:newerHeaderCRCAt+3], true},
		{"torn_newer_header_short_checksum_fails", tornNewerHeader()[:HeaderSize-1], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := setMem(t, "/a")
			setRaw(t, fsys, "/a/"+LogName(1), tc.data)
			setLog(t, fsys, "/a", 2, 2)
			before, ops := diskImage(t, fsys, "/a"), fsys.Ops()

			s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			listed := s.Listed()
			if len(listed) != 2 || listed[0].ID != 1 || listed[1].Unfinished {
				t.Fatalf("Listed() = %+v, want files 1 and 2", listed)
			}
			if listed[0].Unfinished != tc.unfinished {
				t.Fatalf("file 1 Unfinished = %v, want %v", listed[0].Unfinished, tc.unfinished)
			}
			wantFiles, wantLen := []uint32{1, 2}, 2
			if tc.unfinished {
				wantFiles, wantLen = []uint32{2}, 1
			}
			if got := fileIDs(s.Files()); !slices.Equal(got, wantFiles) {
				t.Fatalf("Files() ids %v, want %v", got, wantFiles)
			}
			if s.Len() != wantLen {
				t.Fatalf("Len() = %d, want %d", s.Len(), wantLen)
			}
			if fsys.Ops() != ops {
				t.Fatalf("OpenSet made %d changes on disk", fsys.Ops()-ops)
			}
			requireSameDisk(t, diskImage(t, fsys, "/a"), before)
		})
	}
}

// A file whose header is damaged still reads its records, through Reader
// (and after Start) and through Scan, which reports the salvage.
func TestSetReaderSalvagesDamagedHeader(t *testing.T) {
	fsys := setMem(t, "/a")
	path, offs, end := setLog(t, fsys, "/a", 1, 5, 6)
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XXXX"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReader(fsys, path); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("the header is not damaged: OpenReader gave %v", err)
	}

	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := fileIDs(s.Files()); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("Files() ids %v, want [1]", got)
	}
	check := func(s *Set, when string) {
		t.Helper()
		r, err := s.Reader(1)
		if err != nil {
			t.Fatalf("%s: Reader(1): %v", when, err)
		}
		defer r.Release()
		got, err := r.ReadRecord(offs[1])
		if err != nil || got.WriteOrderID != 6 || string(got.Body) != "event 6" {
			t.Fatalf("%s: record at %d: %+v, %v; want woid 6", when, offs[1], got, err)
		}
	}
	check(s, "before Start")

	sc, salvaged, err := s.Scan(s.Files()[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for sc.Next() {
		n++
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	if !salvaged || n != 2 || sc.End() != end {
		t.Fatalf("Scan: salvaged %v, %d records ending at %d; want salvaged, 2 ending at %d", salvaged, n, sc.End(), end)
	}

	s2, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Start(Recovered{MaxWriteOrderID: 6, MaxFileID: 1, Ends: map[uint32]int64{1: end}}); err != nil {
		t.Fatalf("Start with a damaged header: %v", err)
	}
	check(s2, "after Start")
}

// Reader refuses, with a *corrupt.Error, a file id no data dir holds and a
// file whose valid header names another id.
func TestSetReaderErrors(t *testing.T) {
	fsys := setMem(t, "/a")
	setLog(t, fsys, "/a", 1, 1)
	setRaw(t, fsys, "/a/"+LogName(2), cat(testHeader(3), rec(t, 2, "b")))
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name string
		id   uint32
	}{
		{"unknown_id", 9},
		{"header_names_another_id", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // the second call returns the cached failure
				r, err := s.Reader(tc.id)
				if r.Reader != nil || !errors.Is(err, corrupt.ErrCorrupt) {
					t.Fatalf("Reader(%d) = %v, %v; want a *corrupt.Error", tc.id, r, err)
				}
				var ce *corrupt.Error
				if !errors.As(err, &ce) {
					t.Fatalf("Reader(%d): %v is not a *corrupt.Error", tc.id, err)
				}
			}
		})
	}
}

// Reader opens a file once and hands out the same reader after.
func TestSetReaderIsCached(t *testing.T) {
	fsys := &openCountFS{FS: setMem(t, "/a")}
	setLog(t, fsys, "/a", 1, 1)
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := s.Reader(1)
	if err != nil {
		t.Fatal(err)
	}
	open := fsys.open.Load()
	r2, err := s.Reader(1)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Reader != r2.Reader {
		t.Fatal("Reader(1) returned two different readers")
	}
	r1.Release()
	r2.Release()
	if fsys.open.Load() != open {
		t.Fatal("the second Reader(1) opened the file again")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsys.open.Load(); n != 0 {
		t.Fatalf("%d files left open after Close", n)
	}
}

// A reader handed out before Start is either the one Start keeps or closed:
// no descriptor outlives the set.
func TestSetStartLeavesNoReaderOpen(t *testing.T) {
	fsys := &openCountFS{FS: setMem(t, "/a")}
	_, _, end := setLog(t, fsys, "/a", 1, 1)
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Reader(1)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if err := s.Start(Recovered{MaxWriteOrderID: 1, MaxFileID: 1, Ends: map[uint32]int64{1: end}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsys.open.Load(); n != 0 {
		t.Fatalf("%d files left open after Close (the reader opened before Start was dropped, not closed)", n)
	}
}

// A whole life of a set (readers, appends, rolls, a reclaim) leaves no file
// open once it is closed.
func TestSetCloseLeavesNoFileOpen(t *testing.T) {
	fsys := &openCountFS{FS: setMem(t, "/a", "/b")}
	_, _, end := setLog(t, fsys, "/a", 1, 1)
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a", "/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(Recovered{MaxWriteOrderID: 1, MaxFileID: 1, Ends: map[uint32]int64{1: end}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		rollFiles(t, s, i, 3)
	}
	r, err := s.Reader(2)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if _, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return c[:2] }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsys.open.Load(); n != 0 {
		t.Fatalf("%d files left open after Close", n)
	}
}

// Start continues the ids after Recovered's; Append hands out write-order
// ids that increase across appends, frames and dirs, and seals every frame.
func TestSetStartContinuesIDs(t *testing.T) {
	fsys := setMem(t, "/a", "/b")
	_, _, end3 := setLog(t, fsys, "/a", 3, 1, 2)
	_, _, end7 := setLog(t, fsys, "/b", 7, 9)
	s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a", "/b"}},
		Recovered{MaxWriteOrderID: 100, MaxFileID: 7, Ends: map[uint32]int64{3: end3, 7: end7}})
	if a, b := s.Active(0).ID(), s.Active(1).ID(); a != 8 || b != 9 {
		t.Fatalf("the first files are %d and %d, want 8 and 9 (after MaxFileID 7)", a, b)
	}
	if s.NextFileID() != 10 {
		t.Fatalf("NextFileID() = %d, want 10", s.NextFileID())
	}

	b1 := putBatch(t, s, 2)
	a1 := mustAppendBatch(t, s, 0, b1)
	a2 := mustAppendBatch(t, s, 1, putBatch(t, s, 3))
	a3 := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	for _, c := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"first append", a1.FirstWOID, 101},
		{"append to the other dir", a2.FirstWOID, 103},
		{"third append", a3.FirstWOID, 106},
		{"last id", s.LastWriteOrderID(), 106},
	} {
		if c.got != c.want {
			t.Fatalf("%s: write-order id %d, want %d", c.name, c.got, c.want)
		}
	}
	if a1.Base != HeaderSize || a1.End != HeaderSize+int64(len(b1.buf)) || a3.Base != a1.End {
		t.Fatalf("appends at [%d,%d) then %d; want [%d,%d) then %d",
			a1.Base, a1.End, a3.Base, HeaderSize, HeaderSize+len(b1.buf), a1.End)
	}

	for i := range 2 {
		if err := s.Roll(i); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path  string
		woids []uint64
	}{
		{a1.W.Path(), []uint64{101, 102, 106}},
		{a2.W.Path(), []uint64{103, 104, 105}},
	} {
		got := scanFull(t, fsys, c.path)
		if !slices.Equal(got.woids, c.woids) || len(got.skips) != 0 || got.tail != TailClean {
			t.Fatalf("%s holds write-order ids %v (skips %v, tail %v), want %v sealed",
				c.path, got.woids, got.skips, got.tail, c.woids)
		}
	}
}

// Concurrent appends to several dirs never hand out a write-order id twice,
// and each file's ids increase.
func TestSetAppendConcurrentWriteOrderIDs(t *testing.T) {
	dirs := []string{"/a", "/b", "/c", "/d"}
	fsys := setMem(t, dirs...)
	s := startSet(t, SetOptions{FS: fsys, Dirs: dirs, MaxFileSize: 4 << 10}, Recovered{})
	const goroutines, appends, frames = 8, 200, 3
	var wg sync.WaitGroup
	for g := range goroutines {
		batches := make([]*Batch, appends) // built here: putBatch may call t.Fatal
		for k := range batches {
			batches[k] = putBatch(t, s, frames)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range batches {
				if _, err := s.Append(g%len(dirs), b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range dirs {
		if err := s.Roll(i); err != nil {
			t.Fatal(err)
		}
	}
	var all []uint64
	for _, f := range s.Snapshot().Files {
		path := ""
		for _, d := range dirs {
			if p := filepath.Join(d, LogName(f.ID)); existsIn(fsys, p) {
				path = p
			}
		}
		woids := scanFull(t, fsys, path).woids
		if !slices.IsSorted(woids) {
			t.Fatalf("%s: write-order ids out of order: %v", path, woids)
		}
		all = append(all, woids...)
	}
	slices.Sort(all)
	if len(all) != goroutines*appends*frames {
		t.Fatalf("%d records, want %d", len(all), goroutines*appends*frames)
	}
	for i, w := range all {
		if w != uint64(i+1) {
			t.Fatalf("write-order ids %d..: %v; want each of 1..%d once", i, all[i:min(i+5, len(all))], len(all))
		}
	}
}

// Append rolls when a non-empty file would pass MaxFileSize, and only then:
// not when the batch lands exactly at MaxFileSize, not for an empty file,
// never with MaxFileSize 0. The file rolled away from is synced and closed.
func TestSetAppendRollsAtMaxFileSize(t *testing.T) {
	l := int64((&Record{Type: RecordPut, TxID: 1, Body: []byte("put 0")}).EncodedSize())
	t.Run("non_empty_file_rolls", func(t *testing.T) {
		fsys := setMem(t, "/a")
		s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a"}, MaxFileSize: HeaderSize + 2*l}, Recovered{})
		first := s.Active(0).ID()
		a1 := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
		a2 := mustAppendBatch(t, s, 0, putBatch(t, s, 1)) // ends exactly at MaxFileSize
		if a1.W.ID() != first || a2.W.ID() != first {
			t.Fatalf("appends went to %d and %d, want both in %d", a1.W.ID(), a2.W.ID(), first)
		}
		a3 := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
		if a3.W.ID() != first+1 || a3.Base != HeaderSize {
			t.Fatalf("third append at %d in file %d, want %d in a new file %d", a3.Base, a3.W.ID(), HeaderSize, first+1)
		}
		if _, err := a1.W.Write(putBatch(t, s, 1).buf); !errors.Is(err, ErrClosed) {
			t.Fatalf("the rolled writer still writes: %v", err)
		}
		got := scanFull(t, fsys.CrashClone(false, 0), a1.W.Path())
		if len(got.woids) != 2 {
			t.Fatalf("after a power loss the rolled file holds %d records, want 2 (synced at the roll)", len(got.woids))
		}
	})
	t.Run("empty_file_takes_a_batch_past_max", func(t *testing.T) {
		fsys := setMem(t, "/a")
		s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a"}, MaxFileSize: HeaderSize + l/2}, Recovered{})
		first, next := s.Active(0).ID(), s.NextFileID()
		a := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
		if a.W.ID() != first || s.NextFileID() != next || s.Len() != 1 {
			t.Fatalf("append went to file %d (NextFileID %d, %d files); want the empty file %d and no new file",
				a.W.ID(), s.NextFileID(), s.Len(), first)
		}
		if a := mustAppendBatch(t, s, 0, putBatch(t, s, 1)); a.W.ID() != first+1 {
			t.Fatalf("the next append went to %d, want a new file %d", a.W.ID(), first+1)
		}
	})
	t.Run("zero_never_rolls", func(t *testing.T) {
		s := startSet(t, SetOptions{FS: setMem(t, "/a"), Dirs: []string{"/a"}}, Recovered{})
		first := s.Active(0).ID()
		for range 50 {
			if a := mustAppendBatch(t, s, 0, putBatch(t, s, 4)); a.W.ID() != first {
				t.Fatalf("rolled to %d with MaxFileSize 0", a.W.ID())
			}
		}
	})
	t.Run("no_writer_rolls", func(t *testing.T) {
		fsys := setMem(t, "/a")
		s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Start(Recovered{}); err != nil {
			t.Fatal(err)
		}
		if s.Active(0) != nil {
			t.Fatal("an active writer before the first Roll")
		}
		a := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
		if s.Active(0) != a.W || a.W.ID() != 1 {
			t.Fatalf("append went to %v, want a first file 1 as the active writer", a.W.Path())
		}
	})
}

// Roll calls OnCreate with each new writer before anything is written
// through it.
func TestSetRollCallsOnCreate(t *testing.T) {
	var created []uint32
	var sizes []int64
	onCreate := func(w *Writer) { created, sizes = append(created, w.ID()), append(sizes, w.Size()) }
	s := startSet(t, SetOptions{FS: setMem(t, "/a", "/b"), Dirs: []string{"/a", "/b"}, OnCreate: onCreate}, Recovered{MaxFileID: 4})
	rollFiles(t, s, 0, 1)
	if !slices.Equal(created, []uint32{5, 6, 7}) {
		t.Fatalf("OnCreate saw files %v, want [5 6 7]", created)
	}
	for i, n := range sizes {
		if n != HeaderSize {
			t.Fatalf("OnCreate saw file %d at size %d, want %d (nothing written)", created[i], n, HeaderSize)
		}
	}
}

// An After mark of another writer is synced before the batch is written; a
// mark in the batch's own file is left to the batch's sync; a mark of a
// rolled (closed) writer is fine; a mark of a failed writer fails the
// append, saying the spilled puts were lost, and writes nothing.
func TestSetAppendAfterMarks(t *testing.T) {
	dirs := []string{"/a", "/b"}
	t.Run("other_writer_synced_first", func(t *testing.T) {
		fsys := setMem(t, dirs...)
		s := startSet(t, SetOptions{FS: fsys, Dirs: dirs}, Recovered{})
		spill := mustAppendBatch(t, s, 1, putBatch(t, s, 2))
		b := putBatch(t, s, 1)
		b.After = []Mark{{W: spill.W, End: spill.End}}
		mustAppendBatch(t, s, 0, b)
		if got := spill.W.Synced(); got < spill.End {
			t.Fatalf("the spill's writer is synced to %d, want %d", got, spill.End)
		}
		if got := scanFull(t, fsys.CrashClone(false, 0), spill.W.Path()); len(got.woids) != 2 {
			t.Fatalf("after a power loss the spill's file holds %d records, want 2", len(got.woids))
		}
	})
	t.Run("same_writer_left_to_the_batch", func(t *testing.T) {
		s := startSet(t, SetOptions{FS: setMem(t, dirs...), Dirs: dirs}, Recovered{})
		spill := mustAppendBatch(t, s, 0, putBatch(t, s, 2))
		syncs := spill.W.Syncs()
		b := putBatch(t, s, 1)
		b.After = []Mark{{W: spill.W, End: spill.End}}
		if a := mustAppendBatch(t, s, 0, b); a.W != spill.W {
			t.Fatal("the batch went to another file")
		}
		if spill.W.Syncs() != syncs {
			t.Fatalf("Append issued %d fsyncs for a mark in its own file", spill.W.Syncs()-syncs)
		}
	})
	t.Run("rolled_writer", func(t *testing.T) {
		s := startSet(t, SetOptions{FS: setMem(t, dirs...), Dirs: dirs}, Recovered{})
		spill := mustAppendBatch(t, s, 0, putBatch(t, s, 2))
		if err := s.Roll(0); err != nil {
			t.Fatal(err)
		}
		b := putBatch(t, s, 1)
		b.After = []Mark{{W: spill.W, End: spill.End}}
		if _, err := s.Append(0, b); err != nil {
			t.Fatalf("append after a mark of a rolled writer: %v", err)
		}
	})
	t.Run("failed_writer", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, dirs...))
		s := startSet(t, SetOptions{FS: ff, Dirs: dirs}, Recovered{})
		spill := mustAppendBatch(t, s, 1, putBatch(t, s, 2))
		ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, Name: spill.W.Path(), Times: 1})
		size := s.Active(0).Size()
		b := putBatch(t, s, 1)
		b.After = []Mark{{W: spill.W, End: spill.End}}
		_, err := s.Append(0, b)
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("append after a mark of a failed writer: %v, want the injected fsync failure", err)
		}
		if want := "spilled puts in " + spill.W.Path() + " were lost"; !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
		if got := s.Active(0).Size(); got != size {
			t.Fatalf("the failed append wrote %d bytes", got-size)
		}
	})
}

// A failed active writer is rolled away from by the next Append.
func TestSetAppendRollsAFailedWriter(t *testing.T) {
	ff := vfs.NewFaultFS(setMem(t, "/a"))
	s := startSet(t, SetOptions{FS: ff, Dirs: []string{"/a"}}, Recovered{})
	a := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, Name: a.W.Path(), Times: 1})
	if err := a.W.SyncTo(a.End); err == nil {
		t.Fatal("the injected fsync failure did not fail SyncTo")
	}
	if st := s.DirStates()[0]; st.WriterErr == nil {
		t.Fatal("DirStates does not report the failed writer")
	}
	if b := mustAppendBatch(t, s, 0, putBatch(t, s, 1)); b.W.ID() == a.W.ID() {
		t.Fatal("the append went to the failed writer")
	}
}

// Complete and Batch.Completes record dependencies, ascending and without
// repeats, never a file on itself; Start takes Recovered's.
func TestSetCompletes(t *testing.T) {
	s := startSet(t, SetOptions{FS: setMem(t, "/a"), Dirs: []string{"/a"}},
		Recovered{MaxFileID: 4, Completes: map[uint32][]uint32{4: {1, 4, 2}}})
	if got := s.Completes(4); !slices.Equal(got, []uint32{1, 2}) {
		t.Fatalf("Completes(4) after Start = %v, want [1 2]", got)
	}
	id := s.Active(0).ID()
	b := putBatch(t, s, 1)
	b.Completes = []uint32{id, 9, 2, 9}
	mustAppendBatch(t, s, 0, b)
	if got := s.Completes(id); !slices.Equal(got, []uint32{2, 9}) {
		t.Fatalf("Completes(%d) = %v, want [2 9]", id, got)
	}
	s.Complete(3, 3)
	if got := s.Completes(3); len(got) != 0 {
		t.Fatalf("Completes(3) = %v after Complete(3, 3), want none", got)
	}
	sn := s.Snapshot()
	for _, f := range sn.Files {
		if f.ID == id && !slices.Equal(f.Completes, []uint32{2, 9}) {
			t.Fatalf("snapshot: file %d completes %v, want [2 9]", id, f.Completes)
		}
	}
}

// Snapshot reserves a write-order id of its own: every record appended
// before is below it, every record appended after is above it.
func TestSnapshotReservesWriteOrderID(t *testing.T) {
	s := startSet(t, SetOptions{FS: setMem(t, "/a"), Dirs: []string{"/a"}}, Recovered{MaxWriteOrderID: 10})
	a := mustAppendBatch(t, s, 0, putBatch(t, s, 2))
	sn := s.Snapshot()
	// Reserved: no record holds W, not even the last one before it.
	if sn.WriteOrderID <= a.FirstWOID+1 {
		t.Fatalf("snapshot W %d is not above the last record appended (%d)", sn.WriteOrderID, a.FirstWOID+1)
	}
	if s.LastWriteOrderID() != sn.WriteOrderID {
		t.Fatalf("LastWriteOrderID() = %d after the snapshot, want its W %d", s.LastWriteOrderID(), sn.WriteOrderID)
	}
	if sn.NextFileID != s.NextFileID() {
		t.Fatalf("snapshot NextFileID %d, want %d", sn.NextFileID, s.NextFileID())
	}
	if b := mustAppendBatch(t, s, 0, putBatch(t, s, 1)); b.FirstWOID <= sn.WriteOrderID {
		t.Fatalf("the next append got write-order id %d, not above the snapshot's %d", b.FirstWOID, sn.WriteOrderID)
	}
}

// Snapshot positions: a recovered file's valid end (not its size on disk),
// at least a header; a rolled file's size; an active file's size.
func TestSnapshotPositions(t *testing.T) {
	fsys := setMem(t, "/a", "/b")
	path1, _, end1 := setLog(t, fsys, "/a", 1, 1, 2)
	f, err := fsys.OpenReadWrite(path1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("a torn tail"), end1); err != nil { // past the valid end
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	setLog(t, fsys, "/a", 2, 3)
	s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a", "/b"}},
		Recovered{MaxWriteOrderID: 3, MaxFileID: 2, Ends: map[uint32]int64{1: end1}})
	rolled := rollFiles(t, s, 0, 1)[0]
	st, err := fsys.Stat(filepath.Join("/a", LogName(rolled)))
	if err != nil {
		t.Fatal(err)
	}
	mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	mustAppendBatch(t, s, 1, putBatch(t, s, 2))
	sn := s.Snapshot()
	if got := stateIDs(sn.Files); !slices.Equal(got, []uint32{1, 2, 3, 4, 5}) {
		t.Fatalf("snapshot files %v, want [1 2 3 4 5]", got)
	}
	for _, c := range []struct {
		name string
		id   uint32
		want int64
	}{
		{"recovered file: its valid end", 1, end1},
		{"recovered file without an end: the smallest header", 2, headerSizeV1},
		{"rolled file: its size", rolled, st.Size()},
		{"active file of /b: its size", s.Active(1).ID(), s.Active(1).Size()},
		{"active file of /a: its size", s.Active(0).ID(), s.Active(0).Size()},
	} {
		if got := position(t, sn, c.id); got != c.want {
			t.Errorf("%s (file %d): position %d, want %d", c.name, c.id, got, c.want)
		}
	}
}

// A file rolled away from after its writer's fsync failed counts only up to
// its last good fsync.
func TestSnapshotPositionOfFileRolledAfterFailedSync(t *testing.T) {
	ff := vfs.NewFaultFS(setMem(t, "/a"))
	s := startSet(t, SetOptions{FS: ff, Dirs: []string{"/a"}}, Recovered{})
	a := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	if err := a.W.SyncTo(a.End); err != nil {
		t.Fatal(err)
	}
	mustAppendBatch(t, s, 0, putBatch(t, s, 1)) // not synced
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, Name: a.W.Path(), Times: 1})
	if err := s.Roll(0); err != nil {
		t.Fatal(err)
	}
	if got := position(t, s.Snapshot(), a.W.ID()); got != a.End {
		t.Fatalf("rolled file %d: position %d, want its last good fsync %d", a.W.ID(), got, a.End)
	}
}

// A failed active writer counts to its Synced() and is not in the sync
// list (Sync does not fail on it); the healthy writers are synced.
func TestSnapshotFailedActiveWriter(t *testing.T) {
	mem := setMem(t, "/a", "/b")
	ff := vfs.NewFaultFS(mem)
	s := startSet(t, SetOptions{FS: ff, Dirs: []string{"/a", "/b"}}, Recovered{})
	a0 := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	if err := a0.W.SyncTo(a0.End); err != nil {
		t.Fatal(err)
	}
	a1 := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, Name: a1.W.Path(), Times: 1})
	if err := a1.W.SyncTo(a1.End); err == nil {
		t.Fatal("the injected fsync failure did not fail SyncTo")
	}
	b := mustAppendBatch(t, s, 1, putBatch(t, s, 2)) // healthy, not synced

	sn := s.Snapshot()
	if got := position(t, sn, a1.W.ID()); got != a0.End {
		t.Fatalf("failed active file: position %d, want its last good fsync %d (not %d)", got, a0.End, a1.End)
	}
	if got := position(t, sn, b.W.ID()); got != b.End {
		t.Fatalf("healthy active file: position %d, want %d", got, b.End)
	}
	if err := sn.Sync(); err != nil {
		t.Fatalf("Snapshot.Sync failed on the failed writer: %v", err)
	}
	if got := scanFull(t, mem.CrashClone(false, 0), b.W.Path()); len(got.woids) != 2 {
		t.Fatalf("after Sync and a power loss %s holds %d records, want 2", b.W.Path(), len(got.woids))
	}
}

// reclaimSet is a started set with files 1, 2 and 3 rolled in /a and 4
// active; deleted collects the ids OnDelete is called with.
func reclaimSet(t *testing.T, fsys vfs.FS, deleted *[]uint32) *Set {
	t.Helper()
	s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a"}, OnDelete: func(id uint32) { *deleted = append(*deleted, id) }}, Recovered{})
	if got := rollFiles(t, s, 0, 3); !slices.Equal(got, []uint32{1, 2, 3}) || s.Active(0).ID() != 4 {
		t.Fatalf("rolled %v to %d, want 1 2 3 to 4", got, s.Active(0).ID())
	}
	return s
}

// Reclaim offers the rolled files as candidates and deletes exactly those
// the callback returns: from disk, from the set (Reader, Snapshot), and
// through OnDelete.
func TestReclaimDeletesOnlyWhatUnheldReturns(t *testing.T) {
	fsys := setMem(t, "/a")
	var deleted []uint32
	s := reclaimSet(t, fsys, &deleted)
	var cands []uint32
	n, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 {
		cands = slices.Clone(c)
		return []uint32{1, 3}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cands, []uint32{1, 2, 3}) {
		t.Fatalf("candidates %v, want [1 2 3] (not the active 4)", cands)
	}
	if n != 2 || !slices.Equal(deleted, []uint32{1, 3}) {
		t.Fatalf("Reclaim deleted %d, OnDelete saw %v; want 2, [1 3]", n, deleted)
	}
	for id, want := range map[uint32]bool{1: false, 2: true, 3: false, 4: true} {
		if got := existsIn(fsys, filepath.Join("/a", LogName(id))); got != want {
			t.Errorf("file %d exists: %v, want %v", id, got, want)
		}
	}
	if s.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", s.Len())
	}
	if _, err := s.Reader(1); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("Reader(1) of a deleted file: %v, want a *corrupt.Error", err)
	}
	if r, err := s.Reader(2); err != nil {
		t.Fatalf("Reader(2) of a file that stays: %v", err)
	} else {
		r.Release()
	}
	if got := stateIDs(s.Snapshot().Files); !slices.Equal(got, []uint32{2, 4}) {
		t.Fatalf("the next snapshot has files %v, want [2 4]", got)
	}
}

// Never a candidate: the active file, a file the snapshot keeps, a file
// created after the snapshot (even once rolled away from). With none,
// unheld is not asked.
func TestReclaimCandidates(t *testing.T) {
	all := func(c []uint32) []uint32 { return c }
	t.Run("kept", func(t *testing.T) {
		var deleted []uint32
		s := reclaimSet(t, setMem(t, "/a"), &deleted)
		sn := s.Snapshot()
		sn.Keep(2)
		var cands []uint32
		if _, err := s.Reclaim(sn, func(c []uint32) []uint32 { cands = slices.Clone(c); return c }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cands, []uint32{1, 3}) || !slices.Equal(deleted, []uint32{1, 3}) {
			t.Fatalf("candidates %v, deleted %v; want [1 3] both (2 is kept)", cands, deleted)
		}
	})
	t.Run("active_at_snapshot_and_created_after", func(t *testing.T) {
		var deleted []uint32
		fsys := setMem(t, "/a")
		s := reclaimSet(t, fsys, &deleted)
		sn := s.Snapshot()
		rollFiles(t, s, 0, 2) // 4 (active at the snapshot) and 5 (created after) rolled; 6 active
		var cands []uint32
		if _, err := s.Reclaim(sn, func(c []uint32) []uint32 { cands = slices.Clone(c); return c }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cands, []uint32{1, 2, 3}) {
			t.Fatalf("candidates %v, want [1 2 3]", cands)
		}
		for _, id := range []uint32{4, 5, 6} {
			if !existsIn(fsys, filepath.Join("/a", LogName(id))) {
				t.Errorf("file %d was deleted", id)
			}
		}
	})
	t.Run("none", func(t *testing.T) {
		fsys := setMem(t, "/a")
		s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a"}}, Recovered{})
		asked := false
		n, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { asked = true; return all(c) })
		if n != 0 || err != nil || asked {
			t.Fatalf("Reclaim with only the active file: %d, %v, unheld asked %v", n, err, asked)
		}
		if s.Active(0) == nil || !existsIn(fsys, s.Active(0).Path()) {
			t.Fatal("the active file is gone")
		}
	})
}

// A file that completes events of a file that stays, stays (and so on down
// a chain); a file whose completer stays may go; deleted files' own
// dependency entries are dropped.
func TestReclaimDependencyClosure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deps   map[uint32][]uint32 // file: files it completes
		keep   []uint32
		unheld []uint32
		want   []uint32
	}{
		{"completer_of_staying_file_stays", map[uint32][]uint32{2: {1}}, nil, []uint32{2}, nil},
		{"both_candidates_both_go", map[uint32][]uint32{2: {1}}, nil, []uint32{1, 2}, []uint32{1, 2}},
		{"completed_file_goes_alone", map[uint32][]uint32{2: {1}}, nil, []uint32{1}, []uint32{1}},
		{"chain_all_go", map[uint32][]uint32{3: {2}, 2: {1}}, nil, []uint32{1, 2, 3}, []uint32{1, 2, 3}},
		{"chain_root_stays_keeps_all", map[uint32][]uint32{3: {2}, 2: {1}}, nil, []uint32{2, 3}, nil},
		{"chain_middle_stays", map[uint32][]uint32{3: {2}, 2: {1}}, nil, []uint32{1, 3}, []uint32{1}},
		{"completes_the_active_file", map[uint32][]uint32{2: {4}}, nil, []uint32{1, 2, 3}, []uint32{1, 3}},
		{"completes_a_kept_file", map[uint32][]uint32{3: {1}}, []uint32{1}, []uint32{2, 3}, []uint32{2}},
		{"completes_a_file_already_gone", map[uint32][]uint32{2: {99}}, nil, []uint32{2}, []uint32{2}},
		{"cycle_goes_whole", map[uint32][]uint32{1: {2}, 2: {1}}, nil, []uint32{1, 2}, []uint32{1, 2}},
		{"cycle_stays_whole", map[uint32][]uint32{1: {2}, 2: {1}}, nil, []uint32{1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := setMem(t, "/a")
			var deleted []uint32
			s := reclaimSet(t, fsys, &deleted)
			for file, of := range tc.deps {
				for _, g := range of {
					s.Complete(file, g)
				}
			}
			sn := s.Snapshot()
			for _, id := range tc.keep {
				sn.Keep(id)
			}
			n, err := s.Reclaim(sn, func([]uint32) []uint32 { return tc.unheld })
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tc.want) || !slices.Equal(deleted, tc.want) {
				t.Fatalf("deleted %d: %v; want %v", n, deleted, tc.want)
			}
			for id := uint32(1); id <= 4; id++ {
				gone := slices.Contains(tc.want, id)
				if existsIn(fsys, filepath.Join("/a", LogName(id))) == gone {
					t.Errorf("file %d: deleted %v on disk, want %v", id, !gone, gone)
				}
				want := tc.deps[id]
				if gone {
					want = nil
				}
				slices.Sort(want)
				if got := s.Completes(id); !slices.Equal(got, want) {
					t.Errorf("Completes(%d) = %v after Reclaim, want %v", id, got, want)
				}
			}
		})
	}
}

// Reclaim syncs the dir of every file it deletes: the deletions survive a
// power loss, in every data dir. A failed dir sync is returned.
func TestReclaimSyncsDirs(t *testing.T) {
	dirs := []string{"/a", "/b"}
	setup := func(t *testing.T) (*vfs.MemFS, *vfs.FaultFS, *Set, []string) {
		mem := setMem(t, dirs...)
		ff := vfs.NewFaultFS(mem)
		s := startSet(t, SetOptions{FS: ff, Dirs: dirs}, Recovered{})
		var paths []string
		for i := range dirs {
			for _, id := range rollFiles(t, s, i, 1) {
				paths = append(paths, filepath.Join(dirs[i], LogName(id)))
			}
		}
		crashed := mem.CrashClone(false, 0)
		for _, p := range paths {
			if !existsIn(crashed, p) {
				t.Fatalf("%s does not survive a power loss before Reclaim", p)
			}
		}
		return mem, ff, s, paths
	}
	t.Run("deletions_survive_power_loss", func(t *testing.T) {
		mem, _, s, paths := setup(t)
		if n, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return c }); n != 2 || err != nil {
			t.Fatalf("Reclaim = %d, %v; want 2", n, err)
		}
		crashed := mem.CrashClone(false, 0)
		for _, p := range paths {
			if existsIn(mem, p) {
				t.Fatalf("%s was not deleted", p)
			}
			if existsIn(crashed, p) {
				t.Errorf("%s comes back after a power loss: its dir was not synced", p)
			}
		}
	})
	t.Run("dir_sync_failure_is_returned", func(t *testing.T) {
		_, ff, s, _ := setup(t)
		ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSyncDir}, Name: "/b", Times: 1})
		if _, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return c }); !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("Reclaim with a failing dir sync: %v, want the injected failure", err)
		}
	})
}

// A file Reclaim fails to remove is not counted as deleted, and OnDelete is
// not called for it; the error is returned.
func TestReclaimRemoveFailure(t *testing.T) {
	mem := setMem(t, "/a")
	ff := vfs.NewFaultFS(mem)
	var deleted []uint32
	s := reclaimSet(t, ff, &deleted)
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpRemove}, Name: LogName(1)})
	n, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return []uint32{1, 2} })
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Reclaim: %v, want the injected remove failure", err)
	}
	if !existsIn(mem, "/a/"+LogName(1)) || existsIn(mem, "/a/"+LogName(2)) {
		t.Fatal("want file 1 still there and file 2 deleted")
	}
	if !slices.Equal(deleted, []uint32{2}) {
		t.Fatalf("OnDelete saw %v, want [2]", deleted)
	}
	if n != 1 {
		t.Errorf("Reclaim reports %d files deleted, want 1 (file 1 is still on disk)", n)
	}
}

// A file that completes events of a file Reclaim failed to remove stays:
// the failed file is still on disk, and a full replay reading it without
// its completer would bring taken events back.
func TestReclaimRemoveFailureKeepsCompleters(t *testing.T) {
	mem := setMem(t, "/a")
	ff := vfs.NewFaultFS(mem)
	var deleted []uint32
	s := reclaimSet(t, ff, &deleted)
	s.Complete(2, 1) // 2 completes events of 1
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpRemove}, Name: LogName(1)})
	if _, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return []uint32{1, 2} }); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Reclaim: %v, want the injected remove failure", err)
	}
	if !existsIn(mem, "/a/"+LogName(1)) {
		t.Fatal("file 1 was removed despite the injected failure")
	}
	if !existsIn(mem, "/a/"+LogName(2)) {
		t.Fatalf("file 2, which completes events of file 1, was deleted while file 1 stays on disk (OnDelete saw %v)", deleted)
	}
}

// At no instant of a Reclaim does a power loss leave a file on disk
// without the file that completes its events, even across data dirs.
func TestReclaimCrashNeverOrphansCompletedFile(t *testing.T) {
	dirs := []string{"/a", "/b"}
	mem := setMem(t, dirs...)
	s := startSet(t, SetOptions{FS: mem, Dirs: dirs}, Recovered{})
	completer := rollFiles(t, s, 0, 1)[0] // in /a
	completed := rollFiles(t, s, 1, 1)[0] // in /b
	// A transaction of /a's file took events put in /b's.
	s.Complete(completer, completed)
	cPath := filepath.Join("/a", LogName(completer))
	dPath := filepath.Join("/b", LogName(completed))

	var images []*vfs.MemFS
	mem.SetHook(func(p vfs.CrashPoint) { images = append(images, p.Clone(false, 0)) })
	n, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return c })
	mem.SetHook(nil)
	if n != 2 || err != nil {
		t.Fatalf("Reclaim = %d, %v; want both files deleted", n, err)
	}
	for i, img := range images {
		if !existsIn(img, cPath) && existsIn(img, dPath) {
			t.Fatalf("a power loss at step %d of %d of Reclaim keeps %s but not %s, which completes its events",
				i+1, len(images), dPath, cPath)
		}
	}
}

// SpaceOK: min < 0 disables the check; the free space is cached
// (ForgetFreeSpace refreshes it) and decremented by each append; a refusal
// makes the dir short of space, and it has room again only once its free
// space reaches min + the largest refused n + LowSpaceMargin(min), however
// smaller calls (a smaller put, Health's n = 0) fare meanwhile; each
// transition is logged once; DirStates reports it; a failing FreeSpace is
// an error naming the dir.
func TestSetSpaceOK(t *testing.T) {
	mem := setMem(t, "/a")
	logs := &logRecorder{}
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/a"}, Logger: slog.New(logs)}, Recovered{})
	const short, room = "short of space", "has room again"
	const min = 500
	margin := LowSpaceMargin(min)
	step := func(name string, free, n, min int64, wantOK bool, wantFree int64, wantLow bool, wantShort, wantRoom int) {
		t.Helper()
		if free >= 0 {
			mem.SetFreeSpace(free)
			s.ForgetFreeSpace()
		}
		ok, got, err := s.SpaceOK(0, n, min)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ok != wantOK || got != wantFree {
			t.Fatalf("%s: SpaceOK = %v with %d free, want %v with %d", name, ok, got, wantOK, wantFree)
		}
		if logs.count(short) != wantShort || logs.count(room) != wantRoom {
			t.Fatalf("%s: logged %q %d times and %q %d times, want %d and %d (%v)",
				name, short, logs.count(short), room, logs.count(room), wantShort, wantRoom, logs.msgs)
		}
		if st := s.DirStates()[0]; st.LowSpace != wantLow {
			t.Fatalf("%s: DirStates LowSpace = %v, want %v", name, st.LowSpace, wantLow)
		}
	}
	step("disabled", 0, 100, -1, true, 0, false, 0, 0)
	step("room", 1000, 100, min, true, 1000, false, 0, 0)
	step("exactly_the_minimum_left", 600, 100, min, true, 600, false, 0, 0)
	step("one_byte_short", 600, 101, min, false, 600, true, 1, 0)
	step("still_short", 50, 100, min, false, 50, true, 1, 0)
	step("a_smaller_put_fits_the_dir_stays_short", 600, 50, min, true, 600, true, 1, 0)
	step("health_check_stays_short", 600, 0, min, true, 600, true, 1, 0)
	step("just_below_the_margin", min+101+margin-1, 0, min, true, min+101+margin-1, true, 1, 0)
	step("room_again", min+101+margin, 0, min, true, min+101+margin, false, 1, 1)
	step("still_room", min+101+margin, 100, min, true, min+101+margin, false, 1, 1)
	step("short_again", 600, 101, min, false, 600, true, 2, 1)
	step("a_larger_refusal_raises_the_bar", 600, 5000, min, false, 600, true, 2, 1)
	step("room_for_the_smaller_refusal_only", min+101+margin, 0, min, true, min+101+margin, true, 2, 1)
	step("room_for_the_larger", min+5000+margin, 0, min, true, min+5000+margin, false, 2, 2)
	step("plenty", 10000+margin, 100, min, true, 10000+margin, false, 2, 2)

	mem.SetFreeSpace(1) // not asked again within a second
	b := putBatch(t, s, 1)
	mustAppendBatch(t, s, 0, b)
	step("cached_less_the_append", -1, 0, 0, true, 10000+margin-int64(len(b.buf)), false, 2, 2)

	ff := vfs.NewFaultFS(setMem(t, "/a"))
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpFreeSpace}})
	s2, err := OpenSet(SetOptions{FS: ff, Dirs: []string{"/a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, _, err := s2.SpaceOK(0, 1, 0); !errors.Is(err, vfs.ErrInjected) || !strings.Contains(err.Error(), "/a") {
		t.Fatalf("SpaceOK with a failing FreeSpace: %v, want the injected error naming /a", err)
	}
}

// The set's own deletions refresh the free-space cache of their dir at
// once: a put refused for space just before a checkpoint deleted logs
// sees the room those logs freed at its next SpaceOK, not a second later.
// A dir the set deleted nothing in keeps its cached value.
func TestSetDeletionRefreshesFreeSpace(t *testing.T) {
	const min = 1000
	for _, tc := range []struct {
		name   string
		delete func(t *testing.T, s *Set, a string)
	}{
		{"reclaim", func(t *testing.T, s *Set, a string) {
			inA := func(c []uint32) []uint32 { return slices.DeleteFunc(c, func(id uint32) bool { return id == 2 }) }
			if n, err := s.Reclaim(s.Snapshot(), inA); n != 2 || err != nil {
				t.Fatalf("Reclaim = %d, %v; want the two rolled files of /a deleted", n, err)
			}
		}},
		{"remove_file", func(t *testing.T, s *Set, a string) {
			if err := s.RemoveFile(File{ID: 1, Dir: "/a", Path: a}); err != nil {
				t.Fatal(err)
			}
		}},
		{"cut_tail", func(t *testing.T, s *Set, a string) {
			if _, err := s.CutTail(File{ID: 1, Dir: "/a", Path: a}, HeaderSize); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := setMem(t, "/a", "/b")
			a, _, _ := setLog(t, mem, "/a", 1, 1)
			setLog(t, mem, "/b", 2, 2)
			s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/a", "/b"}}, Recovered{MaxWriteOrderID: 2, MaxFileID: 2})
			rollFiles(t, s, 0, 1)
			mem.SetFreeSpace(min - 1)
			s.ForgetFreeSpace()
			for i := range 2 {
				if ok, _, err := s.SpaceOK(i, 1, min); ok || err != nil {
					t.Fatalf("SpaceOK(%d) on a full disk = %v, %v", i, ok, err)
				}
			}
			mem.SetFreeSpace(1 << 30) // what the deletion frees
			tc.delete(t, s, a)
			if ok, free, err := s.SpaceOK(0, 1, min); !ok || err != nil {
				t.Fatalf("SpaceOK of /a right after the set freed room there = %v with %d free, %v; want the room seen", ok, free, err)
			}
			if ok, free, _ := s.SpaceOK(1, 1, min); ok {
				t.Fatalf("SpaceOK of /b = true with %d free; it deleted nothing there and was asked less than a second ago", free)
			}
		})
	}
}

// DirStates, Active, Len and Bytes follow the rolls and appends: Bytes is
// each rolled file's valid size plus each active file's size.
func TestSetDirStatesLenBytes(t *testing.T) {
	fsys := setMem(t, "/a", "/b")
	_, _, end1 := setLog(t, fsys, "/a", 1, 1)
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a", "/b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(Recovered{MaxWriteOrderID: 1, MaxFileID: 1, Ends: map[uint32]int64{1: end1}}); err != nil {
		t.Fatal(err)
	}
	if st := s.DirStates(); st[0].Active || st[1].Active || s.Active(0) != nil {
		t.Fatalf("active writers before the first Roll: %+v", st)
	}
	if s.Len() != 1 || s.Bytes() != end1 {
		t.Fatalf("Len %d, Bytes %d; want 1, %d", s.Len(), s.Bytes(), end1)
	}
	for i := range 2 {
		if err := s.Roll(i); err != nil {
			t.Fatal(err)
		}
	}
	b := putBatch(t, s, 2)
	l := int64(len(b.buf))
	mustAppendBatch(t, s, 0, b)
	st := s.DirStates()
	want := []DirState{
		{Path: "/a", Size: HeaderSize + l, ActiveID: 2, Active: true},
		{Path: "/b", Size: HeaderSize, ActiveID: 3, Active: true},
	}
	if !slices.Equal(st, want) {
		t.Fatalf("DirStates() = %+v\nwant %+v", st, want)
	}
	if s.Active(0).ID() != 2 || s.Active(1).ID() != 3 {
		t.Fatalf("Active = %d, %d; want 2, 3", s.Active(0).ID(), s.Active(1).ID())
	}
	if want := end1 + 2*HeaderSize + l; s.Bytes() != want || s.Len() != 3 {
		t.Fatalf("Len %d, Bytes %d; want 3, %d", s.Len(), s.Bytes(), want)
	}
	if err := s.Roll(0); err != nil {
		t.Fatal(err)
	}
	if want := end1 + (HeaderSize + l) + 2*HeaderSize; s.Bytes() != want || s.Len() != 4 {
		t.Fatalf("after a roll: Len %d, Bytes %d; want 4, %d", s.Len(), s.Bytes(), want)
	}
}

// Abandon forgets the active writers as a killed process would: nothing is
// synced or closed, by Abandon or by a later Close.
func TestSetAbandon(t *testing.T) {
	mem := setMem(t, "/a")
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/a"}}, Recovered{})
	a := mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	syncs := a.W.Syncs()
	s.Abandon()
	if s.Active(0) != nil || s.DirStates()[0].Active {
		t.Fatal("the writer is still active after Abandon")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a.W.Syncs() != syncs {
		t.Fatalf("%d fsyncs after Abandon", a.W.Syncs()-syncs)
	}
	if got := scanFull(t, mem.CrashClone(false, 0), a.W.Path()); len(got.woids) != 0 {
		t.Fatalf("the abandoned record survives a power loss (%d records): it was synced", len(got.woids))
	}
	if err := a.W.Close(); err != nil {
		t.Fatalf("the abandoned writer was closed: %v", err)
	}
}

// Close syncs and closes the active writers; one that had failed is only
// logged.
func TestSetClose(t *testing.T) {
	mem := setMem(t, "/a", "/b")
	ff := vfs.NewFaultFS(mem)
	logs := &logRecorder{}
	s, err := OpenSet(SetOptions{FS: ff, Dirs: []string{"/a", "/b"}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(Recovered{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Roll(i); err != nil {
			t.Fatal(err)
		}
	}
	a := mustAppendBatch(t, s, 0, putBatch(t, s, 2))
	bad := mustAppendBatch(t, s, 1, putBatch(t, s, 1))
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, Name: bad.W.Path(), Times: 1})
	if err := bad.W.SyncTo(bad.End); err == nil {
		t.Fatal("the injected fsync failure did not fail SyncTo")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close with a failed writer: %v", err)
	}
	if logs.count("closed a log writer that had failed") != 1 {
		t.Fatalf("the failed writer was not logged: %v", logs.msgs)
	}
	if got := scanFull(t, mem.CrashClone(false, 0), a.W.Path()); len(got.woids) != 2 {
		t.Fatalf("after Close and a power loss %s holds %d records, want 2", a.W.Path(), len(got.woids))
	}
	if _, err := a.W.Write(putBatch(t, s, 1).buf); !errors.Is(err, ErrClosed) {
		t.Fatalf("the writer is still open after Close: %v", err)
	}
}

// RemoveFile deletes an unfinished create durably; CutTail keeps the bytes
// it cuts in a .corrupt file.
func TestSetRemoveFileAndCutTail(t *testing.T) {
	mem := setMem(t, "/a")
	setRaw(t, mem, "/a/"+LogName(1), make([]byte, HeaderSize))
	path2, _, end2 := setLog(t, mem, "/a", 2, 1)
	f, err := mem.OpenReadWrite(path2)
	if err != nil {
		t.Fatal(err)
	}
	tail := []byte("torn")
	if _, err := f.WriteAt(tail, end2); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSet(SetOptions{FS: mem, Dirs: []string{"/a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	listed := s.Listed()
	if !listed[0].Unfinished {
		t.Fatalf("file 1 is not unfinished: %+v", listed[0])
	}
	if err := s.RemoveFile(listed[0]); err != nil {
		t.Fatal(err)
	}
	if existsIn(mem, listed[0].Path) || existsIn(mem.CrashClone(false, 0), listed[0].Path) {
		t.Fatal("the unfinished file is still there, or comes back after a power loss")
	}
	keep, err := s.CutTail(listed[1], end2)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := vfs.ReadFile(mem, keep); err != nil || !bytes.Equal(got, tail) {
		t.Fatalf("%s holds %q, %v; want %q", keep, got, err, tail)
	}
	if st, err := mem.Stat(path2); err != nil || st.Size() != end2 {
		t.Fatalf("file 2 after CutTail: %v, %v; want size %d", st, err, end2)
	}
}

// The space reserve (setreserve.go): Start writes it where there is room
// for twice its size (removing an unfinished one), and a dir without it is
// full; a roll or append that fails with ENOSPC removes it, and only a
// draining batch is written again on the room it freed; a full dir takes
// only draining batches, keeping a quarter of the reserve free; Reclaim
// gives it back once there is room; a set without a reserve removes one
// left behind.
func TestSetSpaceReserve(t *testing.T) {
	const size = 64 << 10
	reserve := filepath.Join("/a", ReserveName)
	enospc := vfs.Rule{Ops: []vfs.Op{vfs.OpWriteAt}, Name: "log-*", Times: 1, Err: syscall.ENOSPC}
	open := func(t *testing.T, ff *vfs.FaultFS, reserveSize int64) *Set {
		t.Helper()
		return startSet(t, SetOptions{FS: ff, Dirs: []string{"/a"}, Reserve: reserveSize}, Recovered{})
	}
	hasReserve := func(t *testing.T, fsys vfs.FS, want bool) {
		t.Helper()
		fi, err := fsys.Stat(reserve)
		if got := err == nil; got != want || (got && fi.Size() != size) {
			t.Fatalf("reserve file: %v, %v; want it there: %v (%d bytes)", fi, err, want, size)
		}
	}
	drain := func(s *Set, n int) *Batch { b := putBatch(t, s, n); b.Drain = true; return b }

	t.Run("start_writes_it", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, "/a"))
		setRaw(t, ff, reserve+".tmp", []byte("unfinished"))
		s := open(t, ff, size)
		hasReserve(t, ff, true)
		if existsIn(ff, reserve+".tmp") || s.Full(0) || s.DirStates()[0].Full {
			t.Fatalf("after Start: tmp left %v, full %v", existsIn(ff, reserve+".tmp"), s.Full(0))
		}
	})
	t.Run("no_room_at_start", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, "/a"))
		ff.SetFreeSpace(2*size - 1)
		s := open(t, ff, size)
		hasReserve(t, ff, false)
		if !s.Full(0) {
			t.Fatal("a dir without room for its reserve is not full")
		}
	})
	t.Run("put_finds_the_disk_full", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, "/a"))
		s := open(t, ff, size)
		ff.Add(enospc)
		before := s.Active(0).Size()
		if _, err := s.Append(0, putBatch(t, s, 1)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v", err)
		}
		hasReserve(t, ff, false)
		if !s.Full(0) || s.Active(0).Size() != before {
			t.Fatalf("after the failed put: full %v, active size %d (was %d): want full, nothing written again", s.Full(0), s.Active(0).Size(), before)
		}
		// Full: a put batch is refused without a write, a drain goes.
		ops := ff.Ops()
		if _, err := s.Append(0, putBatch(t, s, 1)); !errors.Is(err, syscall.ENOSPC) || ff.Ops() != ops {
			t.Fatalf("put batch in a full dir: %v after %d operations; want ENOSPC and none", err, ff.Ops()-ops)
		}
		mustAppendBatch(t, s, 0, drain(s, 2))
	})
	t.Run("drain_finds_the_disk_full", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, "/a"))
		s := open(t, ff, size)
		ff.Add(enospc)
		a, err := s.Append(0, drain(s, 3))
		if err != nil {
			t.Fatalf("draining batch on a full disk with a reserve: %v", err)
		}
		hasReserve(t, ff, false)
		if !s.Full(0) || a.W.Size() != a.End {
			t.Fatalf("full %v, written to %d of %d", s.Full(0), a.W.Size(), a.End)
		}
	})
	t.Run("a_quarter_is_kept", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, "/a"))
		ff.SetFreeSpace(size)
		s := open(t, ff, size) // no room for it: full
		b := drain(s, 1)
		n := int64(len(b.buf))
		ff.SetFreeSpace(size/4 + HeaderSize + n)
		s.ForgetFreeSpace()
		mustAppendBatch(t, s, 0, b)
		ff.SetFreeSpace(size/4 + HeaderSize + n - 1)
		s.ForgetFreeSpace()
		if _, err := s.Append(0, drain(s, 1)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("drain into the kept quarter: %v", err)
		}
	})
	t.Run("roll_finds_the_disk_full", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, "/a"))
		s := open(t, ff, size)
		ff.Add(enospc)
		if err := s.Roll(0); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("roll on a full disk: %v", err)
		}
		hasReserve(t, ff, false)
		if !s.Full(0) {
			t.Fatal("not full after the roll failed")
		}
	})
	t.Run("reclaim_gives_it_back", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, "/a"))
		s := open(t, ff, size)
		if !s.ReleaseReserves() || s.ReleaseReserves() {
			t.Fatal("ReleaseReserves: want true once, then false")
		}
		hasReserve(t, ff, false)
		ff.SetFreeSpace(2*size - 1)
		if _, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return c }); err != nil {
			t.Fatal(err)
		}
		hasReserve(t, ff, false)
		ff.SetFreeSpace(2 * size)
		if _, err := s.Reclaim(s.Snapshot(), func(c []uint32) []uint32 { return c }); err != nil {
			t.Fatal(err)
		}
		hasReserve(t, ff, true)
		if s.Full(0) {
			t.Fatal("still full with its reserve back")
		}
		mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	})
	t.Run("none_configured", func(t *testing.T) {
		ff := vfs.NewFaultFS(setMem(t, "/a"))
		setRaw(t, ff, reserve, make([]byte, size))
		s := open(t, ff, 0)
		hasReserve(t, ff, false)
		ff.Add(enospc)
		if _, err := s.Append(0, drain(s, 1)); !errors.Is(err, syscall.ENOSPC) || s.Full(0) {
			t.Fatalf("without a reserve: %v, full %v; want the ENOSPC, not full", err, s.Full(0))
		}
	})
}

// TestBeforeDelete: Reclaim calls SetOptions.BeforeDelete once before it
// deletes anything; if it fails, nothing is deleted and its error is
// Reclaim's. With nothing to delete it is not called.
func TestBeforeDelete(t *testing.T) {
	fsys := setMem(t, "/a")
	var deleted []uint32
	calls, fail := 0, errors.New("persist failed")
	var ret error
	s := startSet(t, SetOptions{FS: fsys, Dirs: []string{"/a"}, OnDelete: func(id uint32) { deleted = append(deleted, id) },
		BeforeDelete: func() error { calls++; return ret }}, Recovered{})
	rollFiles(t, s, 0, 3)
	none := func([]uint32) []uint32 { return nil }
	if _, err := s.Reclaim(s.Snapshot(), none); err != nil || calls != 0 {
		t.Fatalf("Reclaim of nothing: %v, %d calls; want nil, 0", err, calls)
	}
	ret = fail
	all := func(c []uint32) []uint32 { return c }
	if n, err := s.Reclaim(s.Snapshot(), all); !errors.Is(err, fail) || n != 0 || len(deleted) != 0 || calls != 1 {
		t.Fatalf("Reclaim with a failing BeforeDelete: %d deleted (%v), %v, %d calls", n, deleted, err, calls)
	}
	for id := uint32(1); id <= 3; id++ {
		if !existsIn(fsys, filepath.Join("/a", LogName(id))) {
			t.Fatalf("file %d deleted", id)
		}
	}
	ret = nil
	if n, err := s.Reclaim(s.Snapshot(), all); err != nil || n != 3 || calls != 2 {
		t.Fatalf("Reclaim: %d deleted, %v, %d calls; want 3, nil, 2", n, err, calls)
	}
}

// FinishReclaim deletes the files a missing file (9, deleted by a round a
// crash interrupted) completes, transitively, those unheld lets go and no
// staying file completes; nothing when no missing file completes any.
func TestFinishReclaim(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deps   map[uint32][]uint32 // file: files it completes
		unheld []uint32            // nil: all it is asked
		asked  []uint32
		want   []uint32
	}{
		{"no_missing_completer", map[uint32][]uint32{2: {1}}, nil, nil, nil},
		{"missing_completes_one", map[uint32][]uint32{9: {1}}, nil, []uint32{1}, []uint32{1}},
		{"transitive_in_rounds", map[uint32][]uint32{9: {2}, 2: {1}}, nil, []uint32{1, 2}, []uint32{1, 2}},
		{"cycle_half_gone", map[uint32][]uint32{9: {3}, 3: {9}}, nil, []uint32{3}, []uint32{3}},
		{"held_stays", map[uint32][]uint32{9: {1}}, []uint32{}, []uint32{1}, nil},
		{"completer_of_held_stays", map[uint32][]uint32{9: {2}, 2: {1}}, []uint32{2}, []uint32{1, 2}, nil},
		{"not_the_active_file", map[uint32][]uint32{9: {4}}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := setMem(t, "/a")
			var deleted []uint32
			s := reclaimSet(t, fsys, &deleted)
			for file, of := range tc.deps {
				for _, g := range of {
					s.Complete(file, g)
				}
			}
			var asked []uint32
			n, err := s.FinishReclaim(func(c []uint32) []uint32 {
				asked = slices.Clone(c)
				if tc.unheld != nil {
					return tc.unheld
				}
				return c
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("asked about %v, want %v", asked, tc.asked)
			}
			if n != len(tc.want) || !slices.Equal(deleted, tc.want) {
				t.Fatalf("deleted %d: %v; want %v", n, deleted, tc.want)
			}
			for id := uint32(1); id <= 4; id++ {
				if existsIn(fsys, filepath.Join("/a", LogName(id))) == slices.Contains(tc.want, id) {
					t.Errorf("file %d on disk after FinishReclaim: want deleted %v", id, slices.Contains(tc.want, id))
				}
			}
		})
	}
}
