package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// ErrLocked is returned by FS.Lock when another holder has the lock.
var ErrLocked = errors.New("vfs: file is locked by another holder")

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Name() string
}

// FS is the set of filesystem operations filechannel needs.
type FS interface {
	// Create creates name for reading and writing with permission bits
	// perm (before the umask); it fails if name exists.
	Create(name string, perm fs.FileMode) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Remove deletes a file (or an empty directory).
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes name.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of dir (creates, renames, removes) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive, non-blocking lock on name, creating it
	// with permission bits perm (before the umask) if needed. It returns
	// ErrLocked (wrapped) if another holder, in this process or another,
	// has it. Closing the returned Closer releases it; a crashed holder's
	// lock is released by the kernel.
	Lock(name string, perm fs.FileMode) (io.Closer, error)
	// FreeSpace reports the bytes available to an unprivileged writer on the
	// filesystem holding dir.
	FreeSpace(dir string) (int64, error)
}

// OSFile is implemented by files backed by a real *os.File (used to mmap the
// checkpoint). Files of other FS implementations do not implement it.
type OSFile interface {
	OSFile() *os.File
}
