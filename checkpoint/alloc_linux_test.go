package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"

	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/internal/vfs"
)

// TestFullTmpfs runs a checkpoint on a real full filesystem: a small tmpfs,
// where even a read fault on a page never allocated needs a block (it needs
// root to mount one). Touching every page of the ring and writing them is
// fine, a Write that needs new blocks is an ENOSPC error, Create of a file
// that does not fit is an ENOSPC error, and nothing faults.
func TestFullTmpfs(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "tmpfs")
	testutil.MountTmpfs(t, mnt, "size=1m")
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true)) // a SIGBUS fails the test
	fsys := vfs.OS()
	dir, big := filepath.Join(mnt, "cp"), filepath.Join(mnt, "big")
	for _, d := range []string{dir, big} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const capacity = 20_000 // 164 KB
	c := mustCreate(t, fsys, dir, capacity)
	commit(t, c, &State{Meta: Meta{WriteOrderID: 1, Capacity: capacity}}) // reads no ring page

	testutil.FillFS(t, filepath.Join(mnt, "filler"))
	for r := 0; r < capacity; r += 100 { // every page read from the file and changed
		c.SetSlot(r, uint64(r+1))
	}
	c.Freeze()
	st := &State{Meta: Meta{WriteOrderID: 2, Capacity: capacity, Size: capacity}}
	err := c.Write(st)
	c.Thaw(err == nil)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write on a full tmpfs = %v, want ENOSPC", err)
	}
	if _, err := Create(fsys, big, 200_000); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Create on a full tmpfs = %v, want ENOSPC", err)
	}

	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	commit(t, c, st)
	c2, got := mustOpen(t, fsys, dir)
	if got.WriteOrderID != 2 || c2.Slot(19_900) != 19_901 {
		t.Fatalf("after freeing space: W = %d, slot = %d", got.WriteOrderID, c2.Slot(19_900))
	}
}
