// Package counter keeps a sequence number in a file, replaced atomically
// and durably: the examples' source cursors and sink positions. After a
// crash (or a power loss) the file holds the old or the new number, never
// a torn one.
package counter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Load reads the counter in path; a missing file means 0, and so does an
// empty path (a counter that is not kept). A file that does not hold a
// counter is an error, not a silent restart from 0.
func Load(path string) (int64, error) {
	if path == "" {
		return 0, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s does not hold a sequence number: %.40q", path, b)
	}
	return n, nil
}

// Save replaces the counter in path: it writes path.tmp, fsyncs it,
// renames it over path and fsyncs the directory, so the new value survives
// a power loss once Save returns. An empty path keeps nothing.
func Save(path string, n int64) error {
	if path == "" {
		return nil
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.FormatInt(n, 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes the directory entries of dir durable (the rename above).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
