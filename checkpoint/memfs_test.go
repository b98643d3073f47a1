package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// memFS is an in-memory vfs.FS whose crash drops every byte not synced with
// File.Sync and every directory entry change not made durable with SyncDir.
// Its files do not implement vfs.OSFile, so a checkpoint on it uses the
// ReadAt/WriteAt slot store.
type memFS struct {
	mu      sync.Mutex
	files   map[string]*memNode // the namespace as the process sees it
	durable map[string]*memNode // the namespace a crash would leave
	dirs    map[string]bool
}

type memNode struct {
	data   []byte
	synced []byte
}

func newMemFS() *memFS {
	return &memFS{files: map[string]*memNode{}, durable: map[string]*memNode{}, dirs: map[string]bool{"/": true}}
}

// crash forgets everything not durable, as a power cut would.
func (m *memFS) crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files = make(map[string]*memNode, len(m.durable))
	for p, n := range m.durable {
		n.data = append([]byte(nil), n.synced...)
		m.files[p] = n
	}
}

func notExist(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist} }

func (m *memFS) Create(name string) (vfs.File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[filepath.Dir(name)] {
		return nil, notExist("create", name)
	}
	if _, ok := m.files[name]; ok {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	n := &memNode{}
	m.files[name] = n
	return &memFile{fs: m, n: n, name: name, writable: true}, nil
}

func (m *memFS) open(name string, writable bool) (vfs.File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[name]
	if !ok {
		return nil, notExist("open", name)
	}
	return &memFile{fs: m, n: n, name: name, writable: writable}, nil
}

func (m *memFS) Open(name string) (vfs.File, error)          { return m.open(name, false) }
func (m *memFS) OpenReadWrite(name string) (vfs.File, error) { return m.open(name, true) }

func (m *memFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; !ok {
		return notExist("remove", name)
	}
	delete(m.files, name)
	return nil
}

func (m *memFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[oldname]
	if !ok {
		return notExist("rename", oldname)
	}
	if !m.dirs[filepath.Dir(newname)] {
		return notExist("rename", newname)
	}
	delete(m.files, oldname)
	m.files[newname] = n
	return nil
}

func (m *memFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := filepath.Clean(dir); !m.dirs[d]; d = filepath.Dir(d) {
		m.dirs[d] = true
	}
	return nil
}

func (m *memFS) List(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, notExist("list", dir)
	}
	var names []string
	for p := range m.files {
		if filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.files[name]; ok {
		return memInfo{name: filepath.Base(name), size: int64(len(n.data))}, nil
	}
	if m.dirs[name] {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	return nil, notExist("stat", name)
}

func (m *memFS) SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return notExist("syncdir", dir)
	}
	for p := range m.durable {
		if filepath.Dir(p) == dir {
			delete(m.durable, p)
		}
	}
	for p, n := range m.files {
		if filepath.Dir(p) == dir {
			m.durable[p] = n
		}
	}
	return nil
}

func (m *memFS) Lock(name string) (io.Closer, error) { return io.NopCloser(nil), nil }
func (m *memFS) FreeSpace(dir string) (int64, error) { return 1 << 40, nil }

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	fs       *memFS
	n        *memNode
	name     string
	off      int64
	writable bool
	closed   bool
}

var errClosed = errors.New("memfs: file closed")

func (f *memFile) check(write bool) error {
	if f.closed {
		return errClosed
	}
	if write && !f.writable {
		return fmt.Errorf("memfs: %s opened read-only", f.name)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(false); err != nil {
		return 0, err
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.off)
	f.off += int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(true); err != nil {
		return 0, err
	}
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	return copy(f.n.data[off:], p), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return errClosed
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(false); err != nil {
		return err
	}
	f.n.synced = append(f.n.synced[:0], f.n.data...)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(true); err != nil {
		return err
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return memInfo{name: filepath.Base(f.name), size: int64(len(f.n.data))}, nil
}

func (f *memFile) Name() string { return f.name }

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
