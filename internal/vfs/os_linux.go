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

// WillNeed asks the kernel to start reading bytes [off, off+n) of f into
// the page cache (posix_fadvise POSIX_FADV_WILLNEED) and returns at once:
// a reader about to go through a cold file sequentially gets large reads
// ahead of it instead of one small read per record. A hint only: files that
// are not OS files, and errors, are ignored.
func WillNeed(f File, off, n int64) {
	if o, ok := f.(OSFile); ok && n > 0 {
		_ = unix.Fadvise(int(o.OSFile().Fd()), off, n, unix.FADV_WILLNEED)
	}
}
