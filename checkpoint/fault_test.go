package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/flumego/filechannel/internal/vfs"
)

// errInjected is the error faultFS injects.
var errInjected = errors.New("injected fault")

// faultFS wraps a vfs.FS and fails mutating operations (create, remove,
// rename, syncdir, and write, writeat, sync, truncate on files) chosen by
// fail, which sees every such operation with its 1-based sequence number.
// Files of the underlying FS that implement vfs.OSFile keep doing so.
type faultFS struct {
	vfs.FS
	mu   sync.Mutex
	ops  int
	fail func(n int, op, name string) bool // nil = never
	log  []string

	failReads bool // ReadAt fails (not counted as an operation)
}

func (f *faultFS) inject(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops++
	f.log = append(f.log, op+" "+filepath.Base(name))
	if f.fail != nil && f.fail(f.ops, op, name) {
		return fmt.Errorf("%s %s: %w", op, name, errInjected)
	}
	return nil
}

func (f *faultFS) setFail(fail func(n int, op, name string) bool) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

func (f *faultFS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// failFrom fails operation n and every later one: the process died there.
func failFrom(n int) func(int, string, string) bool {
	return func(i int, _, _ string) bool { return i >= n }
}

// failOp fails every op on a file whose base name is name.
func failOp(op, name string) func(int, string, string) bool {
	return func(_ int, o, n string) bool { return o == op && filepath.Base(n) == name }
}

func (f *faultFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	ff := &faultFile{File: file, fs: f}
	if osf, ok := file.(vfs.OSFile); ok {
		return faultOSFile{ff, osf}, nil
	}
	return ff, nil
}

func (f *faultFS) Create(name string) (vfs.File, error) {
	if err := f.inject("create", name); err != nil {
		return nil, err
	}
	return f.wrap(f.FS.Create(name))
}
func (f *faultFS) Open(name string) (vfs.File, error) { return f.wrap(f.FS.Open(name)) }
func (f *faultFS) OpenReadWrite(name string) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name))
}
func (f *faultFS) Remove(name string) error {
	if err := f.inject("remove", name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}
func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.inject("rename", newname); err != nil {
		return err
	}
	return f.FS.Rename(oldname, newname)
}
func (f *faultFS) SyncDir(dir string) error {
	if err := f.inject("syncdir", dir); err != nil {
		return err
	}
	return f.FS.SyncDir(dir)
}

type faultFile struct {
	vfs.File
	fs *faultFS
}

type faultOSFile struct {
	*faultFile
	osf vfs.OSFile
}

func (f faultOSFile) OSFile() *os.File { return f.osf.OSFile() }

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.inject("write", f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.inject("writeat", f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}
func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	fail := f.fs.failReads
	f.fs.mu.Unlock()
	if fail {
		return 0, fmt.Errorf("readat %s: %w", f.Name(), errInjected)
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.inject("sync", f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}
func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.inject("truncate", f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}
