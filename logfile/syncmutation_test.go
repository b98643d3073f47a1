package logfile

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// These tests pin down fsyncs of the in-place repairs that no other test
// needs: each fails if the fsync it names is removed (found by a mutation run
// over every Sync and SyncDir of the non-test code; see issue 3).

// RewriteHeader's new header must survive a power loss right after it
// returns. Fails without its fsync of the log: the durable header is still
// the damaged one. (The damage is synced first, unlike in TestRewriteHeader,
// whose durable header was never damaged.)
func TestRewriteHeaderIsDurable(t *testing.T) {
	fsys, path, offs := memLog(t, rec(t, 1, "a"), rec(t, 2, "b"))
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XX"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := RewriteHeader(fsys, path); err != nil {
		t.Fatal(err)
	}
	after := fsys.CrashClone(false, 0)
	s, err := NewScanner(after, path, 0)
	if err != nil {
		t.Fatalf("after a power loss: %v", err)
	}
	defer s.Close()
	n := 0
	for s.Next() {
		n++
	}
	if n != len(offs) {
		t.Fatalf("after a power loss: %d records, want %d", n, len(offs))
	}
}

// An earlier attempt was killed after renaming its .corrupt copy into place
// but before fsyncing the directory; the next attempt reuses the copy. Fails
// without the SyncDir of that reuse (keepBytes): the log is cut durably
// while the copy's name is not, and a power loss loses the bytes from both
// places.
func TestReusedCopyIsDurableBeforeTheLogChanges(t *testing.T) {
	fsys, path, _ := memLog(t, rec(t, 1, "a"), rec(t, 2, "b"))
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	end, tail := int64(len(data)), []byte("a torn write")
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(tail, end); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The earlier attempt: WriteFileAtomicFrom up to its rename.
	keep := filepath.Join("/d", CorruptName(1, end))
	tf, err := fsys.Create(keep+".tmp", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Write(tail); err != nil {
		t.Fatal(err)
	}
	if err := tf.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(keep+".tmp", keep); err != nil {
		t.Fatal(err)
	}

	got, err := CutTail(fsys, path, end)
	if err != nil || got != keep {
		t.Fatalf("CutTail kept the tail in %q, %v; want %s", got, err, keep)
	}
	after := fsys.CrashClone(false, 0)
	data, err = vfs.ReadFile(after, path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) > end {
		return // the log still holds the tail
	}
	if kept, err := vfs.ReadFile(after, keep); err != nil || !bytes.Equal(kept, tail) {
		t.Fatalf("after a power loss the log is cut and %s holds %q, %v; want %q", keep, kept, err, tail)
	}
}
