package replay

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/flumego/filechannel/internal/vfs"
)

// copiesFS is the vfs.MemFS that holds Verify's copies of the checkpoint
// files (copyFile), each without its tail of zeros: a file grown sparse to
// gigabytes costs its few real bytes, not its length. Through copiesFS a
// copy has its file's length again: Stat says so, and reads past the bytes
// kept read zeros up to it. Verify only reads the copies; a write to a
// shortened one fails. Used by one goroutine at a time, as the verifier.
type copiesFS struct {
	*vfs.MemFS
	lengths map[string]int64 // cleaned path -> length of the file, for copies kept shorter
}

func newCopiesFS() *copiesFS { return &copiesFS{MemFS: vfs.NewMem(), lengths: map[string]int64{}} }

// setLength records that the copy at name stands for a file of size bytes,
// the ones past what it holds zeros.
func (c *copiesFS) setLength(name string, size int64) { c.lengths[cleanPath(name)] = size }

// length returns the length of the file the copy at name stands for, and
// whether it is longer than the copy.
func (c *copiesFS) length(name string) (int64, bool) {
	n, ok := c.lengths[cleanPath(name)]
	return n, ok
}

func (c *copiesFS) Open(name string) (vfs.File, error) {
	f, err := c.MemFS.Open(name)
	return c.wrap(name, f, err)
}

func (c *copiesFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := c.MemFS.OpenReadWrite(name)
	return c.wrap(name, f, err)
}

func (c *copiesFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	if n, ok := c.length(name); ok {
		return &tailFile{File: f, size: n}, nil
	}
	return f, nil
}

func (c *copiesFS) Stat(name string) (fs.FileInfo, error) {
	fi, err := c.MemFS.Stat(name)
	return c.info(name, fi, err)
}

func (c *copiesFS) Lstat(name string) (fs.FileInfo, error) {
	fi, err := c.MemFS.Lstat(name)
	return c.info(name, fi, err)
}

func (c *copiesFS) info(name string, fi fs.FileInfo, err error) (fs.FileInfo, error) {
	if err != nil {
		return nil, err
	}
	if n, ok := c.length(name); ok {
		return sizedInfo{fi, n}, nil
	}
	return fi, nil
}

func (c *copiesFS) Create(name string, perm fs.FileMode) (vfs.File, error) {
	f, err := c.MemFS.Create(name, perm)
	if err == nil {
		delete(c.lengths, cleanPath(name))
	}
	return f, err
}

func (c *copiesFS) Remove(name string) error {
	err := c.MemFS.Remove(name)
	if err == nil {
		delete(c.lengths, cleanPath(name))
	}
	return err
}

func (c *copiesFS) Rename(oldname, newname string) error {
	err := c.MemFS.Rename(oldname, newname)
	if err == nil {
		if n, ok := c.length(oldname); ok {
			c.lengths[cleanPath(newname)] = n
		} else {
			delete(c.lengths, cleanPath(newname))
		}
		delete(c.lengths, cleanPath(oldname))
	}
	return err
}

// cleanPath is name as the MemFS resolves it: "a/b", "/a/b" and "/a/./b"
// are one file.
func cleanPath(name string) string { return filepath.Clean(string(filepath.Separator) + name) }

// sizedInfo is a FileInfo with another length.
type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }

// errCopyReadOnly is the error of a write to a shortened copy.
var errCopyReadOnly = errors.New("verify's copy of a checkpoint file is read-only")

// tailFile is a copy kept shorter than its file, size bytes long: reads
// past its bytes read zeros up to size.
type tailFile struct {
	vfs.File
	size int64
	off  int64 // Read's offset
}

func (f *tailFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if !errors.Is(err, io.EOF) || off+int64(n) >= f.size {
		return n, err
	}
	m := int(min(int64(len(p)), f.size-off)) // the bytes of p within the file
	clear(p[n:m])
	if m < len(p) {
		return m, io.EOF
	}
	return m, nil
}

func (f *tailFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if errors.Is(err, io.EOF) && n > 0 {
		err = nil
	}
	return n, err
}

func (f *tailFile) Stat() (fs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return sizedInfo{fi, f.size}, nil
}

func (f *tailFile) Write([]byte) (int, error) { return 0, f.readOnly() }

func (f *tailFile) WriteAt([]byte, int64) (int, error) { return 0, f.readOnly() }

func (f *tailFile) Truncate(int64) error { return f.readOnly() }

func (f *tailFile) readOnly() error {
	return &fs.PathError{Op: "write", Path: f.Name(), Err: errCopyReadOnly}
}

// copyInto copies the open file in (src, size bytes long) to out, leaving
// out its tail of zeros. It returns the bytes it wrote up to, and the
// length of in: size, or less if it shrank meanwhile. buf is the unit of
// the reads.
func copyInto(out, in vfs.File, src string, size int64, buf []byte) (kept, length int64, err error) {
	for length < size {
		n, rerr := in.ReadAt(buf[:min(int64(len(buf)), size-length)], length)
		if n > 0 && !allZero(buf[:n]) {
			if _, err := out.WriteAt(buf[:n], length); err != nil {
				return 0, 0, err
			}
			kept = length + int64(n)
		}
		length += int64(n)
		if errors.Is(rerr, io.EOF) || (rerr == nil && n == 0) {
			break
		}
		if rerr != nil {
			return 0, 0, fmt.Errorf("read %s: %w", src, rerr)
		}
	}
	return kept, length, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
