package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// Tests of block allocation: the checkpoint file never has holes, so that no
// access through its mapping needs the filesystem to allocate a block (which,
// on a full disk, is a SIGBUS), and a full disk is an error return.

// recFS records the byte ranges written to each file (by its current name,
// following renames), to check on any filesystem that a file was written
// whole. Its files do not implement vfs.OSFile, so they are never mapped.
type recFS struct {
	vfs.FS

	mu      sync.Mutex // guards written
	written map[string][][2]int64
}

func newRecFS(fsys vfs.FS) *recFS { return &recFS{FS: fsys, written: map[string][][2]int64{}} }

type recFile struct {
	vfs.File
	r    *recFS
	name string
	off  int64 // Write's offset (these files are never read with Read)
}

func (r *recFS) Create(name string, perm fs.FileMode) (vfs.File, error) {
	f, err := r.FS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	delete(r.written, filepath.Clean(name))
	r.mu.Unlock()
	return &recFile{File: f, r: r, name: filepath.Clean(name)}, nil
}

func (r *recFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := r.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &recFile{File: f, r: r, name: filepath.Clean(name)}, nil
}

func (r *recFS) Rename(oldname, newname string) error {
	if err := r.FS.Rename(oldname, newname); err != nil {
		return err
	}
	r.mu.Lock()
	r.written[filepath.Clean(newname)] = r.written[filepath.Clean(oldname)]
	delete(r.written, filepath.Clean(oldname))
	r.mu.Unlock()
	return nil
}

func (f *recFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.record(off, n)
	return n, err
}

func (f *recFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.record(f.off, n)
	f.off += int64(n)
	return n, err
}

func (f *recFile) record(off int64, n int) {
	f.r.mu.Lock()
	f.r.written[f.name] = append(f.r.written[f.name], [2]int64{off, off + int64(n)})
	f.r.mu.Unlock()
}

// unwritten returns the first byte of [0, size) never written to name, or -1.
func (r *recFS) unwritten(name string, size int64) int64 {
	r.mu.Lock()
	ranges := slices.Clone(r.written[filepath.Clean(name)])
	r.mu.Unlock()
	slices.SortFunc(ranges, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	var end int64
	for _, w := range ranges {
		if w[0] > end {
			break
		}
		end = max(end, w[1])
	}
	if end >= size {
		return -1
	}
	return end
}

// allocatedBytes is the space the OS filesystem reports allocated to name.
func allocatedBytes(t *testing.T, name string) int64 {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return int64(fi.Sys().(*syscall.Stat_t).Blocks) * 512
}

func fileSize(t *testing.T, fsys vfs.FS, name string) int64 {
	t.Helper()
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCheckpointFileHasNoHoles: every call that makes a checkpoint file
// writes every byte of it, and on the OS the filesystem then reports all its
// blocks allocated.
func TestCheckpointFileHasNoHoles(t *testing.T) {
	const capacity = 300_000 // 2.4 MB: several 1 MiB chunks, a partial last one
	for _, tc := range []struct {
		name string
		// make makes the checkpoint file to check in dir, or in a dir it
		// returns.
		make func(t *testing.T, fsys vfs.FS, dir string) string
	}{
		{"create", func(t *testing.T, fsys vfs.FS, dir string) string {
			mustCreate(t, fsys, dir, capacity)
			return dir
		}},
		{"restore_backup", func(t *testing.T, fsys vfs.FS, dir string) string {
			c := mustCreate(t, fsys, dir, capacity)
			c.SetSlot(capacity/2, 42) // one page of data amid zero chunks
			commit(t, c, &State{Meta: Meta{WriteOrderID: 1, Capacity: capacity}})
			bdir, rdir := path(dir, "backup"), path(dir, "restored")
			for _, d := range []string{bdir, rdir} {
				if err := fsys.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := Backup(fsys, dir, bdir); err != nil {
				t.Fatal(err)
			}
			if err := RestoreBackup(fsys, bdir, rdir); err != nil {
				t.Fatal(err)
			}
			if c2, _ := mustOpen(t, fsys, rdir); c2.Slot(capacity/2) != 42 {
				t.Fatal("restored ring lost its slot")
			}
			return rdir
		}},
	} {
		for _, k := range fsKinds {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) {
				base, dir := newDir(t, k)
				fsys := newRecFS(base)
				name := path(tc.make(t, fsys, dir), CheckpointName)
				size := fileSize(t, fsys, name)
				if want := int64(hs+capacity) * 8; size != want {
					t.Fatalf("file length %d, want %d", size, want)
				}
				if off := fsys.unwritten(name, size); off >= 0 {
					t.Fatalf("byte %d of %s (length %d) was never written: the file has a hole", off, name, size)
				}
				if k.name == "os" {
					if got := allocatedBytes(t, name); got < size {
						t.Fatalf("%s: %d bytes allocated, length %d: the file has holes", name, got, size)
					}
				}
			})
		}
	}
}

// sparsify rewrites the OS file name with holes wherever a 4 KiB page is all
// zero, as a sparse copy by another tool would, and skips the test if the
// filesystem does not make holes.
func sparsify(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	tmp := name + ".sparse"
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += 4096 {
		p := b[off:min(off+4096, len(b))]
		if !zeros.All(p) {
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
	if allocatedBytes(t, name) >= int64(len(b)) {
		t.Skip("the filesystem does not make sparse files")
	}
}

// sparseCheckpoint makes a complete checkpoint in dir on the OS whose file has
// holes, and returns its bytes and state.
func sparseCheckpoint(t *testing.T, dir string, capacity int) ([]byte, *State) {
	t.Helper()
	c, err := Create(vfs.OS(), dir, capacity)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{0, 1, capacity / 2, capacity - 1} {
		c.SetSlot(r, uint64(r+1))
	}
	st := &State{Meta: Meta{WriteOrderID: 9, Capacity: capacity, Head: capacity - 1, Size: 3}}
	commit(t, c, st)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	name := path(dir, CheckpointName)
	sparsify(t, name)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b, st
}

// TestOpenFillsHoles: a checkpoint file with holes (made by another tool) is
// allocated whole, its bytes unchanged, before Open maps it.
func TestOpenFillsHoles(t *testing.T) {
	dir := t.TempDir()
	const capacity = 200_000
	before, st := sparseCheckpoint(t, dir, capacity)
	c, got := mustOpen(t, vfs.OS(), dir)
	sameState(t, got, st)
	name := path(dir, CheckpointName)
	if a := allocatedBytes(t, name); a < int64(len(before)) {
		t.Fatalf("after Open: %d bytes allocated, length %d", a, len(before))
	}
	after, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("filling the holes changed the file")
	}
	if v := c.Slot(capacity / 2); v != capacity/2+1 {
		t.Fatalf("slot = %d after Open", v)
	}
}

// TestFullDiskIsAnError: a full disk (ENOSPC) while a checkpoint file is made
// or written is an error wrapping syscall.ENOSPC that names the file, and a
// retry once there is room succeeds. On the OS, Write's slots reach the file
// through WriteAt (the fault rules see them), not through the mapping.
func TestFullDiskIsAnError(t *testing.T) {
	const capacity = 200_000
	enospc := func(name string, off int64, ops ...vfs.Op) vfs.Rule {
		return vfs.Rule{Ops: ops, Name: name, Off: off, Err: syscall.ENOSPC}
	}
	ring := int64(hs+pageSlots) * 8 // a write reaching past the first ring page
	for _, tc := range []struct {
		name string
		// run sets up a checkpoint in dir, adds rule with fsys.Add at the
		// moment the disk fills, and returns a retry to run after
		// fsys.Clear and the error of the call that must fail.
		run func(t *testing.T, fsys *vfs.FaultFS, dir string, rule vfs.Rule) (func() error, error)
		// rule is the fault; wantName is in the error message.
		rule     vfs.Rule
		wantName string
	}{
		{
			name: "create_zero_fill", rule: enospc(CheckpointName, 1<<20, "writeat"), wantName: CheckpointName,
			run: func(t *testing.T, fsys *vfs.FaultFS, dir string, rule vfs.Rule) (func() error, error) {
				fsys.Add(rule)
				c, err := Create(fsys, dir, capacity)
				if err == nil {
					c.Close()
				}
				return func() error { return createAndClose(fsys, dir, capacity) }, err
			},
		},
		{
			name: "create_sync", rule: enospc(CheckpointName, 0, "sync"), wantName: CheckpointName,
			run: func(t *testing.T, fsys *vfs.FaultFS, dir string, rule vfs.Rule) (func() error, error) {
				fsys.Add(rule)
				c, err := Create(fsys, dir, capacity)
				if err == nil {
					c.Close()
				}
				return func() error { return createAndClose(fsys, dir, capacity) }, err
			},
		},
		{
			name: "restore_copy", rule: enospc(CheckpointName+tmpSuffix, 0, "writeat"), wantName: CheckpointName,
			run: func(t *testing.T, fsys *vfs.FaultFS, dir string, rule vfs.Rule) (func() error, error) {
				bdir, rdir := path(dir, "backup"), path(dir, "restored")
				for _, d := range []string{bdir, rdir} {
					if err := fsys.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				c := mustCreate(t, fsys, dir, capacity)
				c.SetSlot(0, 7)
				commit(t, c, &State{Meta: Meta{WriteOrderID: 3, Capacity: capacity, Size: 1}})
				if err := Backup(fsys, dir, bdir); err != nil {
					t.Fatal(err)
				}
				fsys.Add(rule)
				err := RestoreBackup(fsys, bdir, rdir)
				return func() error {
					if err := RestoreBackup(fsys, bdir, rdir); err != nil {
						return err
					}
					c, st, err := Open(fsys, rdir)
					if err != nil {
						return err
					}
					if st.WriteOrderID != 3 || c.Slot(0) != 7 {
						t.Errorf("restored W=%d slot=%d, want 3, 7", st.WriteOrderID, c.Slot(0))
					}
					return c.Close()
				}, err
			},
		},
		{
			name: "write_ring_pages", rule: enospc(CheckpointName, ring, "writeat"), wantName: dirMarker,
			run: writeWithRule,
		},
		{
			name: "write_flush", rule: enospc(CheckpointName, 0, "sync"), wantName: dirMarker,
			run: writeWithRule,
		},
	} {
		for _, k := range fsKinds {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) {
				base, dir := newDir(t, k)
				fsys := vfs.NewFaultFS(base)
				retry, err := tc.run(t, fsys, dir, tc.rule)
				want := tc.wantName
				if want == dirMarker {
					want = dir
				}
				if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v: want ENOSPC naming %s", err, want)
				}
				if fsys.Injected() == 0 {
					t.Fatal("the fault was never injected")
				}
				fsys.Clear()
				if err := retry(); err != nil {
					t.Fatalf("retry with room on the disk: %v", err)
				}
			})
		}
	}
}

// dirMarker as wantName means the error must name the checkpoint dir.
const dirMarker = "<dir>"

func createAndClose(fsys vfs.FS, dir string, capacity int) error {
	c, err := Create(fsys, dir, capacity)
	if err != nil {
		return err
	}
	return c.Close()
}

// writeWithRule commits a checkpoint, dirties pages across the ring and runs
// a Write that meets rule; the retry it returns beside that Write's error
// writes them again and checks Open sees them.
func writeWithRule(t *testing.T, fsys *vfs.FaultFS, dir string, rule vfs.Rule) (func() error, error) {
	capacity := 200_000
	c := mustCreate(t, fsys, dir, capacity)
	st := &State{Meta: Meta{WriteOrderID: 1, Capacity: capacity, Size: capacity}}
	commit(t, c, st)
	for r := 0; r < capacity; r += 997 {
		c.SetSlot(r, uint64(r+1))
	}
	c.Freeze()
	fsys.Add(rule)
	st.WriteOrderID = 2
	err := c.Write(st)
	c.Thaw(err == nil)
	return func() error {
		c.Freeze()
		err := c.Write(st)
		c.Thaw(err == nil)
		if err != nil {
			return err
		}
		c2, got, err := Open(fsys, dir)
		if err != nil {
			return err
		}
		if err := c2.Close(); err != nil {
			return err
		}
		ring := fileRing(t, fsys, dir)
		for r := 0; r < capacity; r += 997 {
			if ring[r] != uint64(r+1) {
				t.Fatalf("ring %d = %d after the retry, want %d", r, ring[r], r+1)
			}
		}
		if got.WriteOrderID != 2 {
			t.Fatalf("W = %d after the retry, want 2", got.WriteOrderID)
		}
		return nil
	}, err
}

// TestOpenFillingHolesOnFullDisk: a sparse checkpoint on a full disk is an
// ENOSPC error from Open, not a fault later.
func TestOpenFillingHolesOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	sparseCheckpoint(t, dir, 200_000)
	fsys := vfs.NewFaultFS(vfs.OS())
	fsys.Add(vfs.Rule{Ops: []vfs.Op{"writeat"}, Name: CheckpointName, Err: syscall.ENOSPC})
	_, _, err := Open(fsys, dir)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("Open = %v, want ErrBadCheckpoint wrapping ENOSPC", err)
	}
	// The channel discards a checkpoint only if it is damaged.
	if errors.Is(err, ErrIncomplete) || errors.Is(err, corrupt.ErrCorrupt) || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open = %v: a full disk must not look like damage", err)
	}
	fsys.Clear()
	c, _, err := Open(fsys, dir)
	if err != nil {
		t.Fatalf("Open with room on the disk: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFailedCreateRemovesItsFile: a Create that fails (the disk fills while
// it allocates the file, or its fsync fails) leaves no checkpoint file
// behind: on a disk too small for it, a partly allocated ring would only
// take the room the channel needs to go on.
func TestFailedCreateRemovesItsFile(t *testing.T) {
	const capacity = 200_000
	for _, tc := range []struct {
		name string
		rule vfs.Rule
	}{
		{"disk_fills_while_allocating", vfs.Rule{Ops: []vfs.Op{vfs.OpWriteAt}, Name: CheckpointName, Off: 1 << 20, Err: syscall.ENOSPC}},
		{"header_write", vfs.Rule{Ops: []vfs.Op{vfs.OpWriteAt}, Name: CheckpointName, Skip: 2, Err: syscall.ENOSPC}},
		{"sync", vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, Name: CheckpointName, Err: syscall.EIO}},
	} {
		for _, k := range fsKinds {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) {
				base, dir := newDir(t, k)
				fsys := vfs.NewFaultFS(base)
				fsys.Add(tc.rule)
				if c, err := Create(fsys, dir, capacity); err == nil {
					c.Close()
					t.Fatal("Create succeeded")
				}
				if fsys.Injected() == 0 {
					t.Fatal("the fault was never injected")
				}
				if _, err := base.Stat(path(dir, CheckpointName)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("after a failed Create, Stat(checkpoint) = %v; want it gone", err)
				}
			})
		}
	}
}
