//go:build unix

package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openRegular opens name with flag (and perm if it creates it) without
// following a symbolic link in its last component (O_NOFOLLOW) and refuses
// anything but a regular file, with an *fs.PathError wrapping
// ErrNotRegular. It opens with O_NONBLOCK, so that a named pipe does not
// block the open, checks the type with fstat(2) on the descriptor (no race
// with a rename), then clears O_NONBLOCK again: the file behaves as one
// os.OpenFile opened.
func openRegular(op, name string, flag int, perm fs.FileMode) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		// O_NOFOLLOW's answer for a link; a loop in the directories
		// above gives it too, so ask what name is.
		if fi, lerr := os.Lstat(name); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			err = notRegular(fi.Mode())
		}
	case errors.Is(err, unix.EISDIR): // a directory opened for writing
		err = notRegular(fs.ModeDir)
	case errors.Is(err, unix.ENXIO): // a socket
		if fi, lerr := os.Lstat(name); lerr == nil && !fi.Mode().IsRegular() {
			err = notRegular(fi.Mode())
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &fs.PathError{Op: op, Path: name, Err: notRegular(modeType(st.Mode))}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// modeType is the fs.FileMode type bits of a stat(2) st_mode.
func modeType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// flock takes a non-blocking exclusive BSD lock. flock locks belong to the
// open file description, so a second open of the same file in this process
// conflicts too, and the kernel drops the lock when the holder dies.
func flock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}

func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
