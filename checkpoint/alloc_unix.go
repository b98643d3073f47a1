//go:build unix

package checkpoint

import (
	"syscall"

	"github.com/flumego/filechannel/internal/vfs"
)

// sparse reports whether f, of size bytes, may have holes: the filesystem
// reports fewer allocated bytes than size, or does not report them.
func sparse(f vfs.File, size int64) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true, nil
	}
	return int64(st.Blocks)*512 < size, nil
}
