package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrLocked is returned by FS.Lock when another holder has the lock.
var ErrLocked = errors.New("vfs: file is locked by another holder")

// ErrNotRegular is matched (errors.Is) by the error of Open, OpenReadWrite
// and Lock for a name that is not a regular file: a symbolic link (never
// followed), a directory, a named pipe, a socket or a device.
// The error is an *fs.PathError whose message names the kind, such as
// "open /d/log-0000000001: not a regular file: a symbolic link".
var ErrNotRegular = errors.New("not a regular file")

// notRegular is the cause, wrapping ErrNotRegular, for an entry of mode m.
func notRegular(m fs.FileMode) error { return fmt.Errorf("%w: %s", ErrNotRegular, TypeName(m)) }

// TypeName names the type of an entry of mode m for messages: "a regular
// file", "a symbolic link", "a directory", "a named pipe", "a socket", "a
// device" or "an irregular file".
func TypeName(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	}
	return "an irregular file"
}

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
//
// No operation follows a symbolic link in the last component of a path it
// opens: Open, OpenReadWrite and Lock refuse a name that is a symbolic link,
// a directory, a named pipe, a socket or a device with an error wrapping
// ErrNotRegular, and never open it; Create fails on any name that exists
// (fs.ErrExist), a dangling link included. Links in the directories above
// are followed (a data dir may be a symbolic link). Remove and Rename act
// on a link itself, Stat follows it, Lstat does not.
type FS interface {
	// Create creates name for reading and writing with permission bits
	// perm (before the umask); it fails if name exists, whatever it is.
	Create(name string, perm fs.FileMode) (File, error)
	// Open opens an existing regular file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing regular file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Remove deletes a file (or an empty directory).
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes name, following a symbolic link.
	Stat(name string) (fs.FileInfo, error)
	// Lstat describes name; a symbolic link is described, not followed.
	Lstat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of dir (creates, renames, removes) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive, non-blocking lock on name, a regular file,
	// creating it with permission bits perm (before the umask) if needed.
	// It returns ErrLocked (wrapped) if another holder, in this process or
	// another, has it. Closing the returned Closer releases it; a crashed
	// holder's lock is released by the kernel.
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
