package replay

import (
	"path/filepath"
	"sync"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// faultFS wraps a vfs.FS (a vfs.MemFS in these tests) so that reads of
// chosen files and listings of chosen dirs fail.
type faultFS struct {
	vfs.FS
	mu      sync.Mutex
	readErr map[string]readFault // cleaned path -> failure of its ReadAt
	listErr map[string]error     // cleaned dir -> failure of its List
}

// readFault fails every ReadAt reaching at or past offset from.
type readFault struct {
	from int64
	err  error
}

func newFaultFS(fsys vfs.FS) *faultFS {
	return &faultFS{FS: fsys, readErr: map[string]readFault{}, listErr: map[string]error{}}
}

// failReads makes every later ReadAt of the file at path return err.
func (f *faultFS) failReads(path string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readErr[filepath.Clean(path)] = readFault{0, err}
}

// failAfterHeader makes every later ReadAt of the file at path that reaches
// past its log file header return err.
func (f *faultFS) failAfterHeader(path string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readErr[filepath.Clean(path)] = readFault{logfile.HeaderSize, err}
}

// failList makes List of dir return err.
func (f *faultFS) failList(dir string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listErr[filepath.Clean(dir)] = err
}

func (f *faultFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, path: filepath.Clean(name)}, nil
}

func (f *faultFS) List(dir string) ([]string, error) {
	f.mu.Lock()
	err := f.listErr[filepath.Clean(dir)]
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.FS.List(dir)
}

type faultFile struct {
	vfs.File
	fs   *faultFS
	path string
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	e, ok := f.fs.readErr[f.path]
	f.fs.mu.Unlock()
	if ok && off+int64(len(p)) > e.from {
		return 0, e.err
	}
	return f.File.ReadAt(p, off)
}
