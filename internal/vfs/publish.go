package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
)

// WriteFileAtomic publishes data as name with the one recipe every metadata
// file uses: write name.tmp, fsync it, rename it over name, fsync the
// directory. After a crash, name holds either its old or its new contents,
// never a mix; a leftover name.tmp is garbage and may be removed. name.tmp
// is created with FileMode(fsys), so name ends with those permission bits;
// whatever name was before (a symbolic link included) is replaced, never
// followed.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	return WriteFileAtomicFrom(fsys, name, bytes.NewReader(data))
}

// WriteFileAtomicFrom is WriteFileAtomic with the contents read from r.
func WriteFileAtomicFrom(fsys FS, name string, r io.Reader) error {
	tmp := name + ".tmp"
	if err := fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	f, err := fsys.Create(tmp, FileMode(fsys))
	if err != nil {
		return err
	}
	if _, err := io.Copy(fileWriter{f}, r); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", tmp, err), f.Close())
	}
	if err := f.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync %s: %w", tmp, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(name))
}

// ReadFile reads the whole of name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// fileWriter hides a File's other methods from io.Copy, which would
// otherwise use its ReadFrom or WriterTo if it had one.
type fileWriter struct{ f File }

func (w fileWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

// SyncFile fsyncs the file at path (opened read-only: fsync of a read-only
// descriptor flushes the file's data too).
func SyncFile(fsys FS, path string) error {
	f, err := fsys.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync %s: %w", path, err), f.Close())
	}
	return f.Close()
}
