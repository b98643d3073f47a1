package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrInjected is matched (errors.Is) by every error a FaultFS injects, beside
// the errno it carries.
var ErrInjected = errors.New("vfs: injected fault")

// ShortHalf as Rule.Short makes a failed write write the first half of its
// buffer.
const ShortHalf = -1

// faultLogLen is how many of the latest mutating operations FaultFS.Log keeps.
const faultLogLen = 1024

// Op is a kind of operation that a FaultFS counts, logs and fails (see
// Rule.Ops); its value is the name Log prints and the Op of the
// *fs.PathError it injects.
type Op string

// String returns the operation's name, such as "writeat".
func (o Op) String() string { return string(o) }

// Operation kinds. The mutating ones are counted by FaultFS.Ops and logged;
// the others are not counted, but rules may fail them too.
const (
	// Mutating.
	OpCreate   Op = "create"
	OpRemove   Op = "remove"
	OpRename   Op = "rename"
	OpMkdir    Op = "mkdir" // one per MkdirAll call
	OpSyncDir  Op = "syncdir"
	OpLock     Op = "lock" // every Lock call
	OpWrite    Op = "write"
	OpWriteAt  Op = "writeat"
	OpSync     Op = "sync"
	OpTruncate Op = "truncate"

	// Not counted.
	OpOpen      Op = "open" // Open and OpenReadWrite
	OpRead      Op = "read"
	OpReadAt    Op = "readat"
	OpList      Op = "list"
	OpStat      Op = "stat"  // FS.Stat, FS.Lstat and File.Stat
	OpClose     Op = "close" // the file is closed all the same
	OpFreeSpace Op = "freespace"
)

// Rule chooses operations a FaultFS fails. An operation matches when it
// passes every condition set (Ops, Name, Seq, Off); the rule lets the first
// Skip matches through, then fails the next Times ones (every later one if
// Times is 0). Rules are checked in the order added: each matching rule
// counts the operation until one fails it; later rules do not see it.
//
// The Op constants say which operation kinds are mutating (counted by Ops
// and logged) and which are not.
//
// A failed operation does nothing to the wrapped FS (except a Short write's
// bytes, and the close of a failed "close") and returns an *fs.PathError (an
// *os.LinkError for Rename) whose Err matches Err, ErrInjected and the
// wrapped errno with errors.Is.
type Rule struct {
	// Ops lists the operation kinds the rule applies to; empty means every
	// mutating kind.
	Ops []Op
	// Name, if not empty, is a filepath.Match pattern the operation's path
	// must match: its base name if the pattern has no separator, else the
	// whole cleaned path. A rename matches if either name does.
	Name string
	// Seq, if positive, limits the rule to the mutating operation Ops
	// numbers Seq (Ops() just after that operation started is Seq). Such a
	// rule never matches a non-mutating kind.
	Seq int64
	// Off, if positive, limits the rule's reads and writes ("read",
	// "readat", "write", "writeat") to those reaching past byte Off of the
	// file: off+len(p) > Off. Other kinds ignore it.
	Off int64
	// Skip is how many matching operations pass before the rule fails any.
	Skip int
	// Times, if positive, is how many operations the rule fails; then it is
	// spent. Zero means no limit.
	Times int
	// Err is the cause returned, typically a syscall.Errno (syscall.ENOSPC
	// for a full disk); nil means syscall.EIO.
	Err error
	// Short, for "write" and "writeat": how many bytes the failed write
	// still writes to the wrapped file (capped at len(p)) before returning
	// their count and the error, as a write into a disk filling up does.
	// ShortHalf writes len(p)/2. Zero writes nothing.
	Short int
	// FailAfter: once this rule fails an operation, every later mutating
	// operation fails too, with the same Err, whatever the rules say (the
	// process died there, or the disk went away). Reads keep working.
	// Clear ends it.
	FailAfter bool
}

// FaultFS wraps an FS and fails the operations its rules choose: I/O errors,
// a full disk, short writes, failing reads and listings, a process that dies
// at its N-th write. It also counts and logs every mutating operation, and
// can make FreeSpace report a nearly full disk. Without rules it only passes
// operations through.
//
// Files opened through a FaultFS are wrapped; those of the wrapped FS that
// implement OSFile keep implementing it (memory-mapped writes and reads then
// bypass the rules). A FaultFS is safe for concurrent use, and rules may be
// added and cleared while it is in use.
type FaultFS struct {
	fs FS

	// mu guards every field below.
	mu        sync.Mutex
	rules     []*faultRule
	ops       int64 // mutating operations so far
	injected  int64 // operations failed so far
	dead      error // once a FailAfter rule fired: the cause every later mutating op fails with
	log       [faultLogLen]faultLogEntry
	freeSpace int64 // reported by FreeSpace if >= 0
	// Files open through the FaultFS now, the most open at once since
	// the last ResetPeakOpenFiles, and the limit SetOpenLimit set (0:
	// none).
	openFiles, peakOpen, openLimit int
}

// faultRule is a Rule with its counters.
type faultRule struct {
	Rule
	seen, failed int
}

// faultLogEntry is one mutating operation in FaultFS.log, at index seq-1
// modulo faultLogLen.
type faultLogEntry struct {
	op          Op
	name, name2 string
	failed      bool
}

// NewFaultFS returns a FaultFS wrapping fsys, with no rules.
func NewFaultFS(fsys FS) *FaultFS { return &FaultFS{fs: fsys, freeSpace: -1} }

// Add adds rules, checked after those already added. It panics on an
// unknown operation kind or a malformed Name pattern.
func (f *FaultFS) Add(rules ...Rule) {
	for _, r := range rules {
		for _, op := range r.Ops {
			if known, _ := opKind(op); !known {
				panic(fmt.Sprintf("vfs: FaultFS rule with unknown operation %q", op))
			}
		}
		if _, err := filepath.Match(r.Name, ""); err != nil {
			panic(fmt.Sprintf("vfs: FaultFS rule with bad name pattern %q: %v", r.Name, err))
		}
		r.Ops = append([]Op(nil), r.Ops...)
		f.mu.Lock()
		f.rules = append(f.rules, &faultRule{Rule: r})
		f.mu.Unlock()
	}
}

// Clear removes every rule and ends a FailAfter failure; operations pass
// through again. Ops, Log and SetFreeSpace are unaffected.
func (f *FaultFS) Clear() {
	f.mu.Lock()
	f.rules = nil
	f.dead = nil
	f.mu.Unlock()
}

// Ops returns the number of mutating operations so far: every call, whether
// it succeeded, failed in the wrapped FS or was failed by a rule. Unlike
// MemFS.Ops, a MkdirAll or Lock call counts one however many entries it
// creates.
func (f *FaultFS) Ops() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Injected returns the number of operations failed by rules so far.
func (f *FaultFS) Injected() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// Log returns the latest mutating operations (up to 1024), oldest first, one
// line each: the kind and base name(s), such as "write log-0000000001" or
// "rename checkpoint.meta.tmp checkpoint.meta", ending in " (injected)" when
// a rule failed it. It is meant for failure messages.
func (f *FaultFS) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	first := max(f.ops-faultLogLen, 0)
	out := make([]string, 0, f.ops-first)
	for seq := first; seq < f.ops; seq++ {
		e := f.log[seq%faultLogLen]
		s := string(e.op) + " " + filepath.Base(e.name)
		if e.name2 != "" {
			s += " " + filepath.Base(e.name2)
		}
		if e.failed {
			s += " (injected)"
		}
		out = append(out, s)
	}
	return out
}

// SetFreeSpace makes FreeSpace report n for every directory the wrapped FS
// knows; a negative n reports the wrapped FS's value again.
func (f *FaultFS) SetFreeSpace(n int64) {
	f.mu.Lock()
	f.freeSpace = max(n, -1)
	f.mu.Unlock()
}

// opKind reports whether op is an operation kind a Rule may name, and
// whether it is a mutating one (see Rule).
func opKind(op Op) (known, mutating bool) {
	switch op {
	case OpCreate, OpRemove, OpRename, OpMkdir, OpSyncDir, OpLock, OpWrite, OpWriteAt, OpSync, OpTruncate:
		return true, true
	case OpOpen, OpRead, OpReadAt, OpList, OpStat, OpClose, OpFreeSpace:
		return true, false
	}
	return false, false
}

// isAccess reports whether op reads or writes file bytes (see Rule.Off).
func isAccess(op Op) bool {
	return op == OpRead || op == OpReadAt || op == OpWrite || op == OpWriteAt
}

// access is a data access of n bytes at off, for Rule.Off.
type access struct{ off, n int64 }

// check records operation op on name (and name2, a rename's new name) and
// returns the Short of the rule that failed it, if any, with the cause of
// its injected failure.
func (f *FaultFS) check(op Op, name, name2 string, a access) (short int, cause error) {
	_, mutating := opKind(op)
	f.mu.Lock()
	defer f.mu.Unlock()
	var seq int64
	if mutating {
		f.ops++
		seq = f.ops
	}
	switch {
	case mutating && f.dead != nil:
		cause = f.dead
	default:
		for _, r := range f.rules {
			if !r.matches(op, mutating, seq, name, name2, a) {
				continue
			}
			r.seen++
			if r.seen <= r.Skip || (r.Times > 0 && r.failed >= r.Times) {
				continue
			}
			r.failed++
			cause, short = r.Err, r.Short
			if cause == nil {
				cause = syscall.EIO
			}
			if r.FailAfter {
				f.dead = cause
			}
			break
		}
	}
	if cause != nil {
		f.injected++
	}
	if mutating {
		f.log[(seq-1)%faultLogLen] = faultLogEntry{op: op, name: name, name2: name2, failed: cause != nil}
	}
	return short, cause
}

func (r *faultRule) matches(op Op, mutating bool, seq int64, name, name2 string, a access) bool {
	switch {
	case len(r.Ops) == 0 && !mutating:
		return false
	case len(r.Ops) > 0 && !slices.Contains(r.Ops, op):
		return false
	case r.Seq > 0 && r.Seq != seq:
		return false
	case r.Off > 0 && isAccess(op) && a.off+a.n <= r.Off:
		return false
	}
	return r.Name == "" || nameMatches(r.Name, name) || (name2 != "" && nameMatches(r.Name, name2))
}

func nameMatches(pattern, name string) bool {
	if strings.ContainsRune(pattern, filepath.Separator) {
		name = filepath.Clean(name)
	} else {
		name = filepath.Base(name)
	}
	ok, _ := filepath.Match(pattern, name)
	return ok
}

// injectedError is the Err of an injected *fs.PathError: it unwraps to its
// cause and also matches ErrInjected.
type injectedError struct{ cause error }

func (e *injectedError) Error() string        { return e.cause.Error() + " (injected)" }
func (e *injectedError) Unwrap() error        { return e.cause }
func (e *injectedError) Is(target error) bool { return target == ErrInjected }

func injected(op Op, name string, cause error) error {
	return &fs.PathError{Op: string(op), Path: name, Err: &injectedError{cause}}
}

// fail returns the injected error for op on name, or nil.
func (f *FaultFS) fail(op Op, name string) error {
	if _, cause := f.check(op, name, "", access{}); cause != nil {
		return injected(op, name, cause)
	}
	return nil
}

func (f *FaultFS) wrap(name string, file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.openFiles++
	f.peakOpen = max(f.peakOpen, f.openFiles)
	f.mu.Unlock()
	ff := &faultFile{File: file, f: f, name: name}
	if osf, ok := file.(OSFile); ok {
		return faultOSFile{ff, osf}, nil
	}
	return ff, nil
}

// Create creates name through the wrapped FS unless a rule fails it.
func (f *FaultFS) Create(name string, perm fs.FileMode) (File, error) {
	if err := f.fail(OpCreate, name); err != nil {
		return nil, err
	}
	if err := f.tooManyOpen(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Create(name, perm)
	return f.wrap(name, file, err)
}

// Open opens name read-only through the wrapped FS unless a rule fails it.
func (f *FaultFS) Open(name string) (File, error) {
	if err := f.fail(OpOpen, name); err != nil {
		return nil, err
	}
	if err := f.tooManyOpen(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Open(name)
	return f.wrap(name, file, err)
}

// OpenReadWrite opens name through the wrapped FS unless a rule fails it.
func (f *FaultFS) OpenReadWrite(name string) (File, error) {
	if err := f.fail(OpOpen, name); err != nil {
		return nil, err
	}
	if err := f.tooManyOpen(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.fs.OpenReadWrite(name)
	return f.wrap(name, file, err)
}

// Remove removes name through the wrapped FS unless a rule fails it.
func (f *FaultFS) Remove(name string) error {
	if err := f.fail(OpRemove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

// Rename renames through the wrapped FS unless a rule fails it; its failure
// is an *os.LinkError, as os.Rename's.
func (f *FaultFS) Rename(oldname, newname string) error {
	if _, cause := f.check(OpRename, oldname, newname, access{}); cause != nil {
		return &os.LinkError{Op: string(OpRename), Old: oldname, New: newname, Err: &injectedError{cause}}
	}
	return f.fs.Rename(oldname, newname)
}

// MkdirAll creates dir through the wrapped FS unless a rule fails it.
func (f *FaultFS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := f.fail(OpMkdir, dir); err != nil {
		return err
	}
	return f.fs.MkdirAll(dir, perm)
}

// List lists dir through the wrapped FS unless a rule fails it.
func (f *FaultFS) List(dir string) ([]string, error) {
	if err := f.fail(OpList, dir); err != nil {
		return nil, err
	}
	return f.fs.List(dir)
}

// Stat describes name through the wrapped FS unless a rule fails it.
func (f *FaultFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.fail(OpStat, name); err != nil {
		return nil, err
	}
	return f.fs.Stat(name)
}

// Lstat describes name through the wrapped FS unless a rule fails it (as
// OpStat).
func (f *FaultFS) Lstat(name string) (fs.FileInfo, error) {
	if err := f.fail(OpStat, name); err != nil {
		return nil, err
	}
	return f.fs.Lstat(name)
}

// SyncDir syncs dir through the wrapped FS unless a rule fails it.
func (f *FaultFS) SyncDir(dir string) error {
	if err := f.fail(OpSyncDir, dir); err != nil {
		return err
	}
	return f.fs.SyncDir(dir)
}

// Lock locks name through the wrapped FS unless a rule fails it.
func (f *FaultFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	if err := f.fail(OpLock, name); err != nil {
		return nil, err
	}
	return f.fs.Lock(name, perm)
}

// FreeSpace reports the wrapped FS's free space, or what SetFreeSpace set,
// unless a rule fails it.
func (f *FaultFS) FreeSpace(dir string) (int64, error) {
	if err := f.fail(OpFreeSpace, dir); err != nil {
		return 0, err
	}
	n, err := f.fs.FreeSpace(dir)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.freeSpace >= 0 {
		n = f.freeSpace
	}
	return n, nil
}

// SetOpenLimit makes Create, Open and OpenReadWrite fail with EMFILE (as
// an injected error) while n files opened through f are open, as a process
// at its RLIMIT_NOFILE; n <= 0 removes the limit. Locks are not counted.
func (f *FaultFS) SetOpenLimit(n int) {
	f.mu.Lock()
	f.openLimit = max(n, 0)
	f.mu.Unlock()
}

// OpenFiles returns how many files opened through f are open now.
func (f *FaultFS) OpenFiles() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.openFiles
}

// PeakOpenFiles returns the most files opened through f that were open at
// once since f was made or ResetPeakOpenFiles was last called.
func (f *FaultFS) PeakOpenFiles() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peakOpen
}

// ResetPeakOpenFiles starts PeakOpenFiles again from the files open now.
func (f *FaultFS) ResetPeakOpenFiles() {
	f.mu.Lock()
	f.peakOpen = f.openFiles
	f.mu.Unlock()
}

// tooManyOpen returns the EMFILE failure of op on name if the open limit
// is reached.
func (f *FaultFS) tooManyOpen(op Op, name string) error {
	f.mu.Lock()
	full := f.openLimit > 0 && f.openFiles >= f.openLimit
	if full {
		f.injected++
	}
	f.mu.Unlock()
	if full {
		return injected(op, name, syscall.EMFILE)
	}
	return nil
}

// faultFile is a File opened through a FaultFS.
type faultFile struct {
	File
	f      *FaultFS
	name   string       // as opened, for rules and errors
	off    atomic.Int64 // the file offset Read and Write use, for Rule.Off
	closed atomic.Bool  // counted out of FaultFS.openFiles
}

// faultOSFile is a faultFile of a file that implements OSFile.
type faultOSFile struct {
	*faultFile
	osf OSFile
}

func (f faultOSFile) OSFile() *os.File { return f.osf.OSFile() }

func (f *faultFile) Read(p []byte) (int, error) {
	if _, cause := f.f.check(OpRead, f.name, "", access{f.off.Load(), int64(len(p))}); cause != nil {
		return 0, injected(OpRead, f.name, cause)
	}
	n, err := f.File.Read(p)
	f.off.Add(int64(n))
	return n, err
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if _, cause := f.f.check(OpReadAt, f.name, "", access{off, int64(len(p))}); cause != nil {
		return 0, injected(OpReadAt, f.name, cause)
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	short, cause := f.f.check(OpWrite, f.name, "", access{f.off.Load(), int64(len(p))})
	if cause == nil {
		n, err := f.File.Write(p)
		f.off.Add(int64(n))
		return n, err
	}
	n, err := f.File.Write(p[:shortLen(short, len(p))])
	f.off.Add(int64(n))
	if err != nil {
		return n, err
	}
	return n, injected(OpWrite, f.name, cause)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	short, cause := f.f.check(OpWriteAt, f.name, "", access{off, int64(len(p))})
	if cause == nil {
		return f.File.WriteAt(p, off)
	}
	n, err := f.File.WriteAt(p[:shortLen(short, len(p))], off)
	if err != nil {
		return n, err
	}
	return n, injected(OpWriteAt, f.name, cause)
}

// shortLen is how many of n bytes a write failed with Rule.Short writes.
func shortLen(short, n int) int {
	if short == ShortHalf {
		return n / 2
	}
	return min(max(short, 0), n)
}

func (f *faultFile) Sync() error {
	if err := f.f.fail(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.f.fail(OpTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Stat() (fs.FileInfo, error) {
	if err := f.f.fail(OpStat, f.name); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

// Close closes the wrapped file even when a rule fails it.
func (f *faultFile) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.f.mu.Lock()
		f.f.openFiles--
		f.f.mu.Unlock()
	}
	ierr := f.f.fail(OpClose, f.name)
	if err := f.File.Close(); err != nil {
		return err
	}
	return ierr
}
