package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestLockExcludesSecondHolderInSameProcess(t *testing.T) {
	fsys := OS()
	name := filepath.Join(t.TempDir(), "in_use.lock")
	l1, err := fsys.Lock(name, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Lock(name, 0o600); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: got %v, want ErrLocked", err)
	}
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := fsys.Lock(name, 0o600)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Close()
}

func TestWriteFileAtomicReplacesAndLeavesNoTmp(t *testing.T) {
	fsys := OS()
	dir := t.TempDir()
	name := filepath.Join(dir, "meta")
	for _, want := range []string{"one", "two"} {
		if err := WriteFileAtomic(fsys, name, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(fsys, name)
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	if _, err := os.Stat(name + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tmp left behind: %v", err)
	}
	// A stale tmp from a crash is replaced, not an error.
	if err := os.WriteFile(name+".tmp", []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(fsys, name, []byte("three")); err != nil {
		t.Fatal(err)
	}
}

func TestListSortedAndFreeSpace(t *testing.T) {
	fsys := OS()
	dir := t.TempDir()
	for _, n := range []string{"b", "a", "c"} {
		f, err := fsys.Create(filepath.Join(dir, n), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	names, err := fsys.List(dir)
	if err != nil || len(names) != 3 || names[0] != "a" || names[2] != "c" {
		t.Fatalf("List = %v, %v", names, err)
	}
	if _, err := fsys.Create(filepath.Join(dir, "a"), 0o600); err == nil {
		t.Fatal("Create of an existing file succeeded")
	}
	if free, err := fsys.FreeSpace(dir); err != nil || free <= 0 {
		t.Fatalf("FreeSpace = %d, %v", free, err)
	}
}

// File.Sync of an OS file (fdatasync on Linux) succeeds on an open file and
// reports a failure with the file's name.
func TestOSFileSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := OS().Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err == nil {
		t.Fatal("Sync of a closed file succeeded")
	}
}
