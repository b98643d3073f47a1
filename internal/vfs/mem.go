package vfs

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// defaultFreeSpace is what a new MemFS's FreeSpace reports.
const defaultFreeSpace = 1 << 40

// maxTornBytes bounds how many bytes at the end of a torn tail CrashClone may
// garble: one write that was in flight, not the whole tail.
const maxTornBytes = 4096

// sectorSize is the unit in which CrashClone tears in-place overwrites: a
// disk persists each sector whole, old or new, never a mix within one.
const sectorSize = 512

// MemFS is an in-memory FS for tests whose crash keeps only what was made
// durable: file contents as of their last successful File.Sync, and directory
// entries (create, rename, remove) as of the last SyncDir of their parent
// directory.
//
// The model, exactly:
//   - Paths are resolved from one root: "/a/b", "a/b" and "/a/./b" name the
//     same file. The root always exists and always survives a crash.
//   - A file's durable contents are a copy of its contents taken by its last
//     successful Sync (any handle, read-only ones included). Write, WriteAt
//     and Truncate change only the live contents.
//   - Each directory has live entries and durable entries; SyncDir(dir)
//     replaces the durable entries with a snapshot of the live ones. Create,
//     Rename, Remove, MkdirAll and the creation of a lock file change only
//     live entries. A file reached through a durable entry survives with its
//     durable contents, whatever was done to it since (removed files come
//     back, renamed files are found under their old name).
//   - Directories are entries like files: a directory made by MkdirAll
//     survives a crash only once SyncDir of its parent ran, and so on up to
//     the root (MkdirAll("/a/b") needs SyncDir("/") and SyncDir("/a")). A
//     surviving directory holds its own durable entries.
//   - A rename between two directories is two entry changes, each durable with
//     its own directory's SyncDir: syncing only one side can leave the file
//     under both names (two independent copies) or under neither.
//
// FreeSpace reports the value set by SetFreeSpace (default 1<<40) for any
// existing directory; writes never fail for lack of space (wrap it in a
// FaultFS for that). Locks are per name (the cleaned path) and per MemFS.
// Permissions are recorded as given (no umask), not enforced. There are no
// symbolic links; a directory is the one entry that is not a regular file.
// Files of a MemFS do not implement OSFile.
//
// A MemFS and its files are safe for concurrent use. SetHook lets a crash
// test take a CrashClone at every mutating operation.
type MemFS struct {
	// mu guards every field below, every node reachable from root and
	// every open file and lock of this MemFS.
	mu        sync.Mutex
	root      *memNode
	locks     map[string]*memLock // cleaned path -> holder
	freeSpace int64
	ops       int64
	hook      func(CrashPoint) // nil = none

	// hookSeq is the Seq of the CrashPoint whose hook is running, 0 when
	// none is; atomic so that a misused CrashPoint.Clone is caught, not raced.
	hookSeq atomic.Int64
}

// CrashPoint is what a MemFS hook sees after each successful mutating
// operation: an instant at which a crash test may take a crash image.
type CrashPoint struct {
	// Seq is the operation's number: Ops() including this operation.
	Seq int64
	// Op is the operation: "create", "write", "writeat", "truncate",
	// "sync", "remove", "rename", "mkdir", "syncdir" or "lock" (a Lock that
	// created its file).
	Op string
	// Path is the name the operation was given: for a file operation the
	// name the file was opened with, for Rename the new name, for MkdirAll
	// the cleaned path of the directory it created (one CrashPoint each).
	Path string

	m *MemFS
}

// Clone returns what CrashClone(tear, seed) would return at this instant.
// It is valid only during the hook call that received p, and panics if
// called after that call returned.
func (p CrashPoint) Clone(tear bool, seed int64) *MemFS {
	if p.m == nil || p.m.hookSeq.Load() != p.Seq {
		panic("vfs: CrashPoint.Clone called outside its hook")
	}
	return p.m.crashCloneLocked(tear, seed)
}

// SetHook installs h, or removes the hook if h is nil. h runs after each
// successful mutating operation (the ones Ops counts), synchronously, in the
// goroutine that made the operation, with the MemFS locked: the operation's
// caller waits for h, and no other operation of this MemFS can run meanwhile,
// so what h records is atomic with the crash image it takes. h must not call
// any method of this MemFS or of its files (they would deadlock); it may take
// an image with p.Clone, and may use other MemFS instances (such as clones)
// freely. Clones do not inherit the hook.
func (m *MemFS) SetHook(h func(p CrashPoint)) {
	m.mu.Lock()
	m.hook = h
	m.mu.Unlock()
}

// countLocked counts a successful mutating operation and runs the hook.
func (m *MemFS) countLocked(op, path string) {
	m.ops++
	if m.hook != nil {
		m.hookSeq.Store(m.ops)
		defer m.hookSeq.Store(0)
		m.hook(CrashPoint{Seq: m.ops, Op: op, Path: path, m: m})
	}
}

// memNode is a file or a directory.
type memNode struct {
	dir  bool
	perm fs.FileMode

	// Files.
	data             []byte // contents as the process sees them
	synced           []byte // contents as of the last Sync; never aliases data
	dirtyLo, dirtyHi int64  // hull of data changed since the last Sync; empty if lo >= hi

	// Directories.
	entries map[string]*memNode // as the process sees them
	durable map[string]*memNode // as of the last SyncDir
}

func newDirNode(perm fs.FileMode) *memNode {
	return &memNode{dir: true, perm: perm, entries: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// NewMem returns an empty MemFS holding only the root directory.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode(0o755), locks: map[string]*memLock{}, freeSpace: defaultFreeSpace}
}

// SetFreeSpace sets what FreeSpace reports.
func (m *MemFS) SetFreeSpace(n int64) {
	m.mu.Lock()
	m.freeSpace = n
	m.mu.Unlock()
}

// Ops returns the number of successful mutating operations so far: each
// Write, WriteAt, Truncate and Sync of a file, and each Create, Rename,
// Remove and SyncDir, each directory MkdirAll created and each lock file Lock
// created count one. Reads, Stat, List, Open and failed operations count
// nothing. A CrashClone starts at zero. Each counted operation is one
// CrashPoint for the hook (see SetHook), whose Seq is this count.
func (m *MemFS) Ops() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// CrashClone returns a new MemFS holding what a power loss at this instant
// would leave on disk. The receiver keeps working unchanged: a crashed
// process's open handles keep writing into the receiver, never into the
// clone. Locks and the hook are not carried over (the kernel releases
// locks); FreeSpace is.
//
// Every surviving file holds its durable contents. With tear=false that is
// all. With tear=true, a file also keeps part of what was written to it since
// its last Sync, as a disk that lost power during writeback would. Let S be
// its durable length, L its live length, and D the hull of the byte ranges
// changed since its last Sync (by writes, and by truncates that grew it: the
// zeros they add) cut to [0, min(S, L)): the in-place overwrites. Outside D
// and below min(S, L), durable and live bytes are equal. The choices below
// come from a math/rand/v2 PCG generator seeded with (uint64(seed), FNV-1a 64
// of the file's cleaned path), so they are the same for the same seed, path
// and file history, whatever other files exist. In this order:
//
//  1. Appended tail, if L > S: k is drawn uniformly from [0, L-S]; the file
//     becomes the durable bytes followed by live bytes [S, S+k).
//  2. If k > 0, a mode is drawn uniformly from {intact, zeroed, garbage} and
//     g uniformly from [1, min(k, 4096)]. Intact keeps the k bytes as they
//     are; zeroed sets the last g of them to zero; garbage replaces the last g
//     of them with bytes drawn from the same generator (a torn write).
//  3. Overwrites, if D is not empty: each aligned 512-byte sector
//     [512j, 512j+512) that meets D independently keeps its durable bytes or
//     takes its live bytes (those inside D). The i-th such sector (i = 0, 1,
//     ... in increasing offset order) takes its live bytes if bit i%64 of the
//     (i/64+1)-th Uint64 drawn in this step is set.
//
// Files with no in-place overwrite tear exactly as they did before step 3
// existed. So below S a torn file holds, sector by sector, either what was
// synced or what was written since, never a mix within a sector; from S on it
// holds a prefix of what was appended, possibly ending in up to 4096 damaged
// bytes: the torn tail a log reader must recognise and cut, never damage
// followed by intact data.
func (m *MemFS) CrashClone(tear bool, seed int64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashCloneLocked(tear, seed)
}

func (m *MemFS) crashCloneLocked(tear bool, seed int64) *MemFS {
	c := NewMem()
	c.freeSpace = m.freeSpace
	c.root = crashDir(m.root, "/", tear, seed, nil)
	return c
}

// crashDir returns the surviving copy of directory d at path p. onPath holds
// the directories above it, to drop the cycles stale durable entries of
// renamed directories can form.
func crashDir(d *memNode, p string, tear bool, seed int64, onPath []*memNode) *memNode {
	out := newDirNode(d.perm)
	onPath = append(onPath, d)
	for name, n := range d.durable {
		np := filepath.Join(p, name)
		switch {
		case !n.dir:
			out.entries[name] = crashFile(n, np, tear, seed)
		case !slices.Contains(onPath, n):
			out.entries[name] = crashDir(n, np, tear, seed, onPath)
		}
	}
	out.durable = maps.Clone(out.entries)
	return out
}

// crashFile returns the surviving copy of file n at path p (see CrashClone).
func crashFile(n *memNode, p string, tear bool, seed int64) *memNode {
	data := slices.Clone(n.synced)
	if tear {
		data = tearFile(n, data, p, seed)
	}
	if data == nil {
		data = []byte{}
	}
	return &memNode{perm: n.perm, data: data, synced: slices.Clone(data)}
}

// tearFile applies steps 1-3 of the CrashClone tear model to data, a copy of
// n's durable contents, and returns it.
func tearFile(n *memNode, data []byte, p string, seed int64) []byte {
	s, l := int64(len(n.synced)), int64(len(n.data))
	lo, hi := n.dirtyLo, min(n.dirtyHi, s, l) // D, the in-place overwrites
	if l <= s && lo >= hi {
		return data
	}
	h := fnv.New64a()
	h.Write([]byte(p))
	rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	if l > s {
		k := rng.IntN(int(l-s) + 1)
		data = append(data, n.data[s:s+int64(k)]...)
		if k > 0 {
			mode := rng.IntN(3)
			g := 1 + rng.IntN(min(k, maxTornBytes))
			torn := data[len(data)-g:]
			switch mode {
			case 1:
				clear(torn)
			case 2:
				for i := range torn {
					torn[i] = byte(rng.Uint32())
				}
			}
		}
	}
	var bits uint64
	for i, sec := 0, lo/sectorSize*sectorSize; sec < hi; i, sec = i+1, sec+sectorSize {
		if i%64 == 0 {
			bits = rng.Uint64()
		}
		if bits&(1<<(i%64)) != 0 {
			a, b := max(sec, lo), min(sec+sectorSize, hi)
			copy(data[a:b], n.data[a:b])
		}
	}
	return data
}

// split returns the components of name resolved from the root; none for the
// root itself.
func split(name string) []string {
	p := filepath.Clean(string(filepath.Separator) + name)
	if len(p) == 1 {
		return nil
	}
	return strings.Split(p[1:], string(filepath.Separator))
}

// walkLocked returns the node at parts, or the error to wrap.
func (m *MemFS) walkLocked(parts []string) (*memNode, error) {
	n := m.root
	for _, p := range parts {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.entries[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parentLocked returns the directory holding name and name's last component.
func (m *MemFS) parentLocked(name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", syscall.EINVAL // the root has no parent entry
	}
	d, err := m.walkLocked(parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", syscall.ENOTDIR
	}
	return d, parts[len(parts)-1], nil
}

// dirLocked returns the directory at name.
func (m *MemFS) dirLocked(name string) (*memNode, error) {
	d, err := m.walkLocked(split(name))
	if err == nil && !d.dir {
		err = syscall.ENOTDIR
	}
	return d, err
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// Create creates name for reading and writing with permission bits perm
// (recorded: Stat reports them); it fails if name exists.
func (m *MemFS) Create(name string, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parentLocked(name)
	if err != nil {
		return nil, pathErr("create", name, err)
	}
	if _, ok := d.entries[base]; ok {
		return nil, pathErr("create", name, fs.ErrExist)
	}
	n := &memNode{perm: perm.Perm()}
	d.entries[base] = n
	m.countLocked("create", name)
	return &memFile{m: m, n: n, name: name, writable: true}, nil
}

// Open opens an existing file read-only. A directory is not a regular file
// (ErrNotRegular).
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false) }

// OpenReadWrite opens an existing file for reading and writing. A directory
// is not a regular file (ErrNotRegular).
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open("open", name, true) }

func (m *MemFS) open(op, name string, writable bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walkLocked(split(name))
	if err == nil && n.dir {
		err = notRegular(fs.ModeDir)
	}
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	return &memFile{m: m, n: n, name: name, writable: writable}, nil
}

// Remove deletes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parentLocked(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := d.entries[base]
	switch {
	case !ok:
		return pathErr("remove", name, fs.ErrNotExist)
	case n.dir && len(n.entries) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(d.entries, base)
	m.countLocked("remove", name)
	return nil
}

// Rename atomically replaces newname with oldname. A directory may replace
// only an empty directory, a file only a file; a directory cannot move into
// itself.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	od, ob, err := m.parentLocked(oldname)
	if err != nil {
		return fail(err)
	}
	n, ok := od.entries[ob]
	if !ok {
		return fail(fs.ErrNotExist)
	}
	nd, nb, err := m.parentLocked(newname)
	if err != nil {
		return fail(err)
	}
	if od == nd && ob == nb {
		return nil
	}
	if t, ok := nd.entries[nb]; ok {
		switch {
		case t.dir && !n.dir:
			return fail(syscall.EISDIR)
		case !t.dir && n.dir:
			return fail(syscall.ENOTDIR)
		case t.dir && len(t.entries) > 0:
			return fail(syscall.ENOTEMPTY)
		}
	}
	if n.dir {
		sep := string(filepath.Separator)
		if strings.HasPrefix(strings.Join(split(newname), sep)+sep, strings.Join(split(oldname), sep)+sep) {
			return fail(syscall.EINVAL)
		}
	}
	delete(od.entries, ob)
	nd.entries[nb] = n
	m.countLocked("rename", newname)
	return nil
}

// MkdirAll creates dir and its missing parents with permission perm. Each
// new directory is durable only after SyncDir of its parent.
func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	parts := split(dir)
	for i, p := range parts {
		c, ok := d.entries[p]
		switch {
		case !ok:
			c = newDirNode(perm.Perm())
			d.entries[p] = c
			path := ""
			if m.hook != nil {
				path = string(filepath.Separator) + filepath.Join(parts[:i+1]...)
			}
			m.countLocked("mkdir", path)
		case !c.dir:
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		d = c
	}
	return nil
}

// List returns the names of the live entries of dir, sorted.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dirLocked(dir)
	if err != nil {
		return nil, pathErr("list", dir, err)
	}
	return slices.Sorted(maps.Keys(d.entries)), nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walkLocked(split(name))
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return n.infoLocked(name), nil
}

// Lstat is Stat: a MemFS has no symbolic links.
func (m *MemFS) Lstat(name string) (fs.FileInfo, error) { return m.Stat(name) }

// SyncDir makes the current entries of dir durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dirLocked(dir)
	if err != nil {
		return pathErr("syncdir", dir, err)
	}
	d.durable = maps.Clone(d.entries)
	m.countLocked("syncdir", dir)
	return nil
}

// Lock takes the exclusive lock on name, creating an empty file there with
// permission bits perm if needed. It fails with ErrLocked while another
// Closer this MemFS returned for the same cleaned path is open, and with
// ErrNotRegular for a directory.
func (m *MemFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walkLocked(split(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d, base, perr := m.parentLocked(name)
		if perr != nil {
			return nil, pathErr("lock", name, perr)
		}
		d.entries[base] = &memNode{perm: perm.Perm()}
		m.countLocked("lock", name)
	case err != nil:
		return nil, pathErr("lock", name, err)
	case n.dir:
		return nil, pathErr("lock", name, notRegular(fs.ModeDir))
	}
	key := filepath.Join(split(name)...)
	if m.locks[key] != nil {
		return nil, fmt.Errorf("lock %s: %w", filepath.Clean(name), ErrLocked)
	}
	l := &memLock{m: m, key: key, name: name}
	m.locks[key] = l
	return l, nil
}

// FreeSpace reports what SetFreeSpace set, for any existing directory.
func (m *MemFS) FreeSpace(dir string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.dirLocked(dir); err != nil {
		return 0, pathErr("freespace", dir, err)
	}
	return m.freeSpace, nil
}

// memLock is a lock Lock handed out; Close releases it.
type memLock struct {
	m         *MemFS
	key, name string
	closed    bool // guarded by m.mu
}

func (l *memLock) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.closed {
		return pathErr("close", l.name, fs.ErrClosed)
	}
	l.closed = true
	delete(l.m.locks, l.key)
	return nil
}

// memInfo is the fs.FileInfo of a MemFS node.
type memInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (n *memNode) infoLocked(name string) memInfo {
	i := memInfo{name: filepath.Base(filepath.Clean(string(filepath.Separator) + name)), size: int64(len(n.data)), mode: n.perm}
	if n.dir {
		i.mode |= fs.ModeDir
	}
	return i
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

// memFile is an open MemFS file. It keeps its node after the name is removed
// or renamed, as a POSIX file descriptor keeps its inode.
type memFile struct {
	m        *MemFS
	n        *memNode
	name     string
	writable bool

	// Guarded by m.mu.
	off    int64
	closed bool
}

func (f *memFile) checkLocked(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if write && !f.writable {
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Read(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("read", false); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if f.off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.off:])
	f.off += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("readat", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	f.n.writeAt(p, f.off)
	f.off += int64(len(p))
	f.m.countLocked("write", f.name)
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("writeat", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("writeat", f.name, syscall.EINVAL)
	}
	f.n.writeAt(p, off)
	f.m.countLocked("writeat", f.name)
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.n.resize(size)
	f.m.countLocked("truncate", f.name)
	return nil
}

func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("sync", false); err != nil {
		return err
	}
	f.n.sync()
	f.m.countLocked("sync", f.name)
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("stat", false); err != nil {
		return nil, err
	}
	return f.n.infoLocked(f.name), nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// writeAt writes p at off, growing the file with zeros up to off if needed.
func (n *memNode) writeAt(p []byte, off int64) {
	end := off + int64(len(p))
	if end > int64(len(n.data)) {
		n.resize(end)
	}
	copy(n.data[off:], p)
	n.markDirty(off, end)
}

// resize sets the live length; new bytes are zero and dirty.
func (n *memNode) resize(size int64) {
	old := int64(len(n.data))
	n.data = setLen(n.data, size)
	if size > old {
		n.markDirty(old, size)
	}
}

func (n *memNode) markDirty(lo, hi int64) {
	if lo >= hi {
		return
	}
	if n.dirtyLo >= n.dirtyHi {
		n.dirtyLo, n.dirtyHi = lo, hi
		return
	}
	n.dirtyLo, n.dirtyHi = min(n.dirtyLo, lo), max(n.dirtyHi, hi)
}

// sync makes synced equal data, copying only the dirty range: every byte
// beyond the shorter of the two lengths was made by a resize, which marks it
// dirty, so appends cost what they add, not the file size.
func (n *memNode) sync() {
	size := int64(len(n.data))
	n.synced = setLen(n.synced, min(int64(len(n.synced)), size))
	if lo, hi := n.dirtyLo, min(n.dirtyHi, size); lo < hi {
		if int64(len(n.synced)) < hi {
			n.synced = setLen(n.synced, hi)
		}
		copy(n.synced[lo:hi], n.data[lo:hi])
	}
	n.dirtyLo, n.dirtyHi = 0, 0
}

// setLen returns b resized to size bytes, any new bytes zero. It at least
// doubles the capacity when it must grow (append grows large slices by only
// 1.25x), so appending to a big file copies each byte about twice.
func setLen(b []byte, size int64) []byte {
	old := int64(len(b))
	if size <= old {
		return b[:size]
	}
	if size > int64(cap(b)) {
		nb := make([]byte, old, max(size, 2*int64(cap(b))))
		copy(nb, b)
		b = nb
	}
	b = b[:size]
	clear(b[old:])
	return b
}
