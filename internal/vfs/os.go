package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// OS returns the FS backed by the operating system.
func OS() FS { return osFS{} }

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) OSFile() *os.File { return f.File }

// Create, Open, OpenReadWrite and Lock open through openRegular
// (os_unix.go): never through a symbolic link, never a special file.

func (osFS) Create(name string, perm fs.FileMode) (File, error) {
	f, err := openRegular("open", name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := openRegular("open", name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := openRegular("open", name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }
func (osFS) Lstat(name string) (fs.FileInfo, error)      { return os.Lstat(name) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err // "sync <dir>: ...", as the other operations' errors
	}
	return d.Close()
}

func (osFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	f, err := openRegular("open", name, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", filepath.Clean(name), err)
	}
	return f, nil
}

func (osFS) FreeSpace(dir string) (int64, error) { return freeSpace(dir) }
