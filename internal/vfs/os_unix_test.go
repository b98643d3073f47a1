//go:build unix

package vfs

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withUmask sets the process's umask for the test and restores it after.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// The OS FS opens no name that is not a regular file: a symbolic link in the
// last component is refused (not followed, its target untouched), and so are
// a directory, a named pipe (without blocking on it) and a socket. A link in
// the directories above is followed.
func TestOSRefusesWhatIsNotARegularFile(t *testing.T) {
	fsys := OS()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	const secret = "someone else's file"
	if err := os.WriteFile(target, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	entries := map[string]func(string) error{
		"symlink":          func(p string) error { return os.Symlink(target, p) },
		"dangling_symlink": func(p string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) },
		"directory":        func(p string) error { return os.Mkdir(p, 0o755) },
		"fifo":             func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"socket": func(p string) error {
			l, err := net.Listen("unix", p)
			if err == nil {
				t.Cleanup(func() { l.Close() })
			}
			return err
		},
	}
	ops := map[string]func(string) error{
		"open":          func(p string) error { f, err := fsys.Open(p); closeIf(f); return err },
		"openreadwrite": func(p string) error { f, err := fsys.OpenReadWrite(p); closeIf(f); return err },
		"lock": func(p string) error {
			l, err := fsys.Lock(p, 0o600)
			if err == nil {
				l.Close()
			}
			return err
		},
	}
	for ename, mk := range entries {
		p := filepath.Join(dir, ename)
		if err := mk(p); err != nil {
			t.Fatal(err)
		}
		for oname, op := range ops {
			err := op(p)
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s of a %s: err %v, want one matching ErrNotRegular", oname, ename, err)
				continue
			}
			if want := strings.ReplaceAll(ename, "_", " "); !strings.Contains(err.Error(), p) ||
				(strings.Contains(want, "symlink") && !strings.Contains(err.Error(), "symbolic link")) {
				t.Errorf("%s of a %s: %q does not name the file and what it is", oname, ename, err)
			}
		}
		if _, err := fsys.Create(p, 0o600); !errors.Is(err, fs.ErrExist) {
			t.Errorf("create over a %s: err %v, want fs.ErrExist", ename, err)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != secret {
		t.Fatalf("the link's target became %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a dangling link's target was created: %v", err)
	}

	// A directory reached through a link is followed: the channel's dirs may
	// be links.
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "linked")
	if err := os.Symlink(real, linked); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(filepath.Join(linked, "f"), 0o600)
	if err != nil {
		t.Fatalf("create through a linked dir: %v", err)
	}
	f.Close()
	if f, err = fsys.OpenReadWrite(filepath.Join(linked, "f")); err != nil {
		t.Fatalf("open through a linked dir: %v", err)
	}
	f.Close()
	if fi, err := fsys.Lstat(filepath.Join(dir, "symlink")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat of a link = %v, %v", fi, err)
	}
}

func closeIf(f File) {
	if f != nil {
		f.Close()
	}
}

// WriteFileAtomic replaces a link at its name with a file; the target is
// untouched.
func TestWriteFileAtomicReplacesALinkNotItsTarget(t *testing.T) {
	dir := t.TempDir()
	target, name := filepath.Join(dir, "target"), filepath.Join(dir, "meta")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(OS(), name, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(name); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s is %v, %v; want a regular file", name, fi, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("target holds %q", b)
	}
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
