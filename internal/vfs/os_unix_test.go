//go:build unix

package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// withUmask sets the process's umask for the test and restores it after.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// Files and directories get the permission bits asked for, before the
// umask: FileMode and DirMode of an FS (private unless WithModes widened
// them) through Create, Lock, WriteFileAtomic and MkdirAll.
func TestOSModes(t *testing.T) {
	withUmask(t, 0)
	for _, tc := range []struct {
		name      string
		fsys      FS
		file, dir fs.FileMode
	}{
		{"default", OS(), 0o600, 0o700},
		{"with_modes_zero", WithModes(OS(), 0, 0), 0o600, 0o700},
		{"with_modes", WithModes(OS(), 0o640, 0o750), 0o640, 0o750},
		{"rewrapped", WithModes(WithModes(OS(), 0o640, 0o750), 0o660, 0o770), 0o660, 0o770},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := tc.fsys
			if FileMode(fsys) != tc.file || DirMode(fsys) != tc.dir {
				t.Fatalf("FileMode, DirMode = %o, %o; want %o, %o", FileMode(fsys), DirMode(fsys), tc.file, tc.dir)
			}
			dir := filepath.Join(t.TempDir(), "a", "b")
			if err := fsys.MkdirAll(dir, DirMode(fsys)); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.Create(filepath.Join(dir, "created"), FileMode(fsys))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			l, err := fsys.Lock(filepath.Join(dir, "lock"), FileMode(fsys))
			if err != nil {
				t.Fatal(err)
			}
			l.Close()
			if err := WriteFileAtomic(fsys, filepath.Join(dir, "published"), []byte("x")); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{filepath.Dir(dir), dir} {
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != tc.dir {
					t.Errorf("%s: mode %v, %v; want %o", p, fi.Mode(), err, tc.dir)
				}
			}
			for _, n := range []string{"created", "lock", "published"} {
				if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.Mode().Perm() != tc.file {
					t.Errorf("%s: mode %v, %v; want %o", n, fi.Mode(), err, tc.file)
				}
			}
		})
	}
	// The umask still applies.
	syscall.Umask(0o077)
	fsys := WithModes(OS(), 0o644, 0o755)
	p := filepath.Join(t.TempDir(), "f")
	f, err := fsys.Create(p, FileMode(fsys))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("under umask 077 a 0644 file is %v, want -rw-------", fi.Mode())
	}
}
