package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	x := filepath.Join(base, "x")
	if err := os.Mkdir(x, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ name, target string }{
		{"y", x},       // absolute
		{"rel", "x"},   // relative
		{"chain", "y"}, // a link to a link
		{"dangling", filepath.Join(base, "later")}, // a target not made yet
		{"loop1", "loop2"}, {"loop2", "loop1"},
	} {
		if err := os.Symlink(l.target, filepath.Join(base, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{x, x},
		{filepath.Join(base, "y"), x},
		{filepath.Join(base, "rel"), x},
		{filepath.Join(base, "chain"), x},
		{filepath.Join(base, "y", "sub", "dir"), filepath.Join(x, "sub", "dir")}, // below the link, not made yet
		{filepath.Join(base, "dangling"), filepath.Join(base, "later")},
		{filepath.Join(base, "dangling", "sub"), filepath.Join(base, "later", "sub")},
		{filepath.Join(base, "y", "..", "x"), x}, // cleaned as filepath.Abs does
		{"/no/such/dir/anywhere", "/no/such/dir/anywhere"},
	} {
		if got, err := Resolve(tc.path); err != nil || got != tc.want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	if got, err := Resolve(filepath.Join(base, "loop1")); err == nil {
		t.Errorf("Resolve of a symlink loop = %q, want an error", got)
	}
}
