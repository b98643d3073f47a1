package vfs

import (
	"errors"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sync makes the file's data durable with fdatasync(2): it writes the data
// and the metadata needed to read it back (the size, the block map) but not
// timestamps, so an append costs one journal commit less than fsync. The
// log files and checkpoint files only need that.
func (f osFile) Sync() error {
	fd := f.File.Fd()
	for {
		err := unix.Fdatasync(int(fd))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "fdatasync", Path: f.File.Name(), Err: err}
		}
		return nil
	}
}
