package replay

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// TestCopiesFSKeepsNoZeroTail: copyInto leaves out a file's tail of zeros,
// and through copiesFS the copy reads as the whole file: its length, its
// bytes, zeros up to the end, io.EOF past it; a write to it fails.
func TestCopiesFSKeepsNoZeroTail(t *testing.T) {
	src := vfs.NewMem()
	want := append(bytes.Repeat([]byte{7}, 3000), make([]byte, 10_000)...)
	want[5000] = 1 // a non-zero byte after zeros: kept
	f, err := src.Create("/f", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	c := newCopiesFS()
	out, err := c.Create("/f", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	kept, length, err := copyInto(out, f, "/f", int64(len(want)), make([]byte, 1024))
	if err != nil || kept != 5120 || length != int64(len(want)) {
		t.Fatalf("copyInto: kept %d of %d, %v; want 5120 of %d", kept, length, err, len(want))
	}
	out.Close()
	c.setLength("/f", length)
	if fi, err := c.Stat("/f"); err != nil || fi.Size() != int64(len(want)) {
		t.Fatalf("Stat: %v, %v", fi, err)
	}
	r, err := c.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if fi, err := r.Stat(); err != nil || fi.Size() != int64(len(want)) {
		t.Fatalf("File.Stat: %v, %v", fi, err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAll: %d bytes, %v; want the file's %d", len(got), err, len(want))
	}
	p := make([]byte, 100)
	if n, err := r.ReadAt(p, int64(len(want))-40); n != 40 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:40], make([]byte, 40)) {
		t.Fatalf("ReadAt across the end: %d, %v", n, err)
	}
	if n, err := r.ReadAt(p, int64(len(want))); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt past the end: %d, %v", n, err)
	}
	w, err := c.OpenReadWrite("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte{1}, 0); !errors.Is(err, errCopyReadOnly) {
		t.Fatalf("write to a shortened copy: %v", err)
	}
}
