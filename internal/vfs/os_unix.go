//go:build unix

package vfs

import (
	"errors"
	"os"
	"syscall"
)

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
