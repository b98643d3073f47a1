package logfile

import (
	"bytes"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

func TestCutTailKeepsTheBytesAndTruncates(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	w, err := testCreate(fsys, "/d", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sampleRecords()[:4] {
		if _, err := w.Write(mustAppend(t, nil, &r)); err != nil {
			t.Fatal(err)
		}
	}
	end := w.Size()
	if _, err := w.Write([]byte("torn half-record")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	keep, err := CutTail(fsys, w.Path(), end)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("/d", "log-0000000003."+itoa(end)+".corrupt"); keep != want {
		t.Fatalf("kept in %s, want %s", keep, want)
	}
	// Everything is durable: a power loss now changes nothing.
	after := fsys.CrashClone(false, 1)
	got, err := vfs.ReadFile(after, keep)
	if err != nil || !bytes.Equal(got, []byte("torn half-record")) {
		t.Fatalf("kept bytes %q, %v", got, err)
	}
	s, err := NewScanner(after, w.Path(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for s.Next() {
		n++
	}
	if n != 4 || s.Tail() != TailClean || s.End() != end {
		t.Fatalf("after the cut: %d records, tail %v, end %d (want 4, clean, %d)", n, s.Tail(), s.End(), end)
	}
	if size, _ := s.Size(); size != end {
		t.Fatalf("size %d after the cut, want %d", size, end)
	}
	// Nothing left to cut: no file, no error.
	if keep, err := CutTail(fsys, w.Path(), end); keep != "" || err != nil {
		t.Fatalf("second cut: %q, %v", keep, err)
	}
	if _, err := CutTail(fsys, "/d/not-a-log", 0); err == nil {
		t.Fatal("cut of a file that is not a log succeeded")
	}
}

// TestCutTailLeavesTheLaidOutZeros: the zeros after a torn tail (space laid
// out ahead of the writes) are truncated with it but not copied; a tail of
// zeros only leaves no .corrupt file.
func TestCutTailLeavesTheLaidOutZeros(t *testing.T) {
	fsys := vfs.NewMem()
	w, err := testCreate(fsys, "/", 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(mustAppend(t, nil, &sampleRecords()[0])); err != nil {
		t.Fatal(err)
	}
	end := w.Size()
	torn := []byte("torn\x00\x00 record")
	if _, err := w.Write(append(torn, make([]byte, 3<<20)...)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if nz, err := NonZeroEnd(fsys, w.Path(), end); err != nil || nz != end+int64(len(torn)) {
		t.Fatalf("NonZeroEnd = %d, %v; want %d", nz, err, end+int64(len(torn)))
	}
	keep, err := CutTail(fsys, w.Path(), end)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := vfs.ReadFile(fsys, keep); err != nil || !bytes.Equal(got, torn) {
		t.Fatalf("kept %d bytes %q, %v; want %q", len(got), got[:min(len(got), 32)], err, torn)
	}
	if fi, _ := fsys.Stat(w.Path()); fi.Size() != end {
		t.Fatalf("size %d after the cut, want %d", fi.Size(), end)
	}
	f, err := fsys.OpenReadWrite(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(end + 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if nz, err := NonZeroEnd(fsys, w.Path(), end); err != nil || nz != end {
		t.Fatalf("NonZeroEnd over zeros only = %d, %v; want %d", nz, err, end)
	}
	if keep, err := CutTail(fsys, w.Path(), end); keep != "" || err != nil {
		t.Fatalf("cut of zeros only: %q, %v; want no copy", keep, err)
	}
	if fi, _ := fsys.Stat(w.Path()); fi.Size() != end {
		t.Fatalf("size %d after cutting zeros, want %d", fi.Size(), end)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
