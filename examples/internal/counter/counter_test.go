package counter

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCounter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.next")
	if n, err := Load(path); n != 0 || err != nil {
		t.Fatalf("Load of a missing file = %d, %v; want 0, nil", n, err)
	}
	for _, n := range []int64{1, 12345, 7} {
		if err := Save(path, n); err != nil {
			t.Fatal(err)
		}
		if got, err := Load(path); got != n || err != nil {
			t.Fatalf("Load after Save(%d) = %d, %v", n, got, err)
		}
	}
	if _, err := os.Stat(path + ".tmp"); err == nil {
		t.Fatal("Save left its temporary file")
	}
	for _, bad := range []string{"", "x12", "-4", "12 13"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if n, err := Load(path); err == nil {
			t.Fatalf("Load of %q = %d, nil; want an error", bad, n)
		}
	}
	if err := Save(filepath.Join(t.TempDir(), "missing", "x"), 1); err == nil {
		t.Fatal("Save into a missing directory succeeded")
	}
}
