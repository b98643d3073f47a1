package logfile

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/flumego/filechannel/internal/vfs"
)

// CutTail removes the bytes of the log file at path from offset end on (a
// torn tail), keeping them in CorruptName(id, end) next to it. The copy is
// published (written, fsynced, renamed, directory fsynced) before the log is
// truncated and fsynced, so a crash at any point leaves the bytes in one of
// the two places; running CutTail again finishes the job. It returns the
// path of the copy. A file no longer than end is left alone ("" and nil).
func CutTail(fsys vfs.FS, path string, end int64) (string, error) {
	id, ok := ParseLogName(filepath.Base(path))
	if !ok {
		return "", fmt.Errorf("cut tail of %s: not a log file name", path)
	}
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return "", fmt.Errorf("cut tail: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		return "", errors.Join(fmt.Errorf("cut tail: stat %s: %w", path, err), f.Close())
	}
	if fi.Size() <= end {
		return "", f.Close()
	}
	keep := filepath.Join(filepath.Dir(path), CorruptName(id, end))
	tail := io.NewSectionReader(f, end, fi.Size()-end)
	if err := vfs.WriteFileAtomicFrom(fsys, keep, tail); err != nil {
		return "", errors.Join(fmt.Errorf("cut tail: keep the bytes of %s: %w", path, err), f.Close())
	}
	if err := f.Truncate(end); err != nil {
		return "", errors.Join(fmt.Errorf("cut tail: truncate %s: %w", path, err), f.Close())
	}
	if err := f.Sync(); err != nil {
		return "", errors.Join(fmt.Errorf("cut tail: sync %s: %w", path, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("cut tail: close %s: %w", path, err)
	}
	return keep, nil
}
