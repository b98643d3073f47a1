package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxReadAlloc bounds what reading a damaged small file may allocate.
const maxReadAlloc = 64 << 20

// TestOversizeFilesReadWithBoundedMemory: each small file of a checkpoint
// set grown to 1 GiB (a sparse tail of zeros) is damage, reported as a
// *corrupt.Error naming it, and reading it allocates a bounded amount, not
// its length.
func TestOversizeFilesReadWithBoundedMemory(t *testing.T) {
	for _, name := range []string{
		CheckpointName, MetaName, InflightPutsName, InflightTakesName, CatalogName,
		filepath.Join("group-1", CheckpointName), filepath.Join("group-1", MetaName),
		filepath.Join("group-1", InflightTakesName), JournalName,
	} {
		t.Run(filepath.ToSlash(name), func(t *testing.T) {
			dir := t.TempDir()
			s := newSet(t, vfs.OS(), dir, 100, 1)
			s.write(7)
			j, err := CreateJournal(vfs.OS(), dir, 0, 5, []JournalEntry{{Pointer: 9, Group: 1, Count: 2}})
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, name)
			if err := os.Truncate(p, 1<<30); err != nil {
				t.Fatal(err)
			}
			var got error
			n := allocated(func() {
				switch name {
				case JournalName:
					_, got = ReadJournal(vfs.OS(), dir)
				case CatalogName:
					_, got = ReadCatalog(vfs.OS(), dir)
				default:
					var c *Checkpoint
					if c, _, got = Open(vfs.OS(), filepath.Dir(p)); got == nil {
						c.Close()
					}
				}
			})
			if n > maxReadAlloc {
				t.Errorf("reading a 1 GiB %s allocated %d MiB", name, n>>20)
			}
			var ce *corrupt.Error
			if !errors.As(got, &ce) || ce.File != p {
				t.Fatalf("error %v, want a *corrupt.Error naming %s", got, p)
			}
			if name != JournalName && name != CatalogName && !errors.Is(got, ErrBadCheckpoint) {
				t.Fatalf("error %v does not match ErrBadCheckpoint", got)
			}
			t.Logf("%v (%d KiB allocated)", got, n>>10)
		})
	}
}

// TestLargeValidFramedFileReads: a framed file longer than bigFile whose
// CRC matches is read whole (the streamed check lets it through).
func TestLargeValidFramedFileReads(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		c := mustCreate(t, fsys, dir, 10)
		ptrs := make([]eventqueue.Pointer, 2*bigFile/8)
		for i := range ptrs {
			ptrs[i] = eventqueue.NewPointer(1, uint32(i+1))
		}
		st := &State{Meta: Meta{WriteOrderID: 3, Capacity: 10}, InflightPuts: []eventqueue.InflightTx{{Tx: 4, Pointers: ptrs}}}
		commit(t, c, st)
		_, got := mustOpen(t, fsys, dir)
		if len(got.InflightPuts) != 1 || len(got.InflightPuts[0].Pointers) != len(ptrs) {
			t.Fatalf("read back %d transactions", len(got.InflightPuts))
		}
	})
}

// TestLargeDamagedFramedFile: a damaged framed file longer than bigFile
// gets the errors the decoders give: a newer version is refused, not
// damage; a bad CRC is a *corrupt.Error at the CRC.
func TestLargeDamagedFramedFile(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		s := newSet(t, fsys, dir, 10)
		s.write(3)
		name := filepath.Join(dir, InflightTakesName)
		f, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(3 * bigFile); err != nil {
			t.Fatal(err)
		}
		f.Close()
		_, err = ReadCatalog(fsys, dir) // not touched
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Open(fsys, dir)
		var ce *corrupt.Error
		if !errors.As(err, &ce) || ce.File != name || ce.Offset != 3*bigFile-crcLen {
			t.Fatalf("grown file: %v, want a *corrupt.Error at its CRC", err)
		}
		patch(t, fsys, name, versionOffset, []byte{0, formatVersion + 1})
		_, _, err = Open(fsys, dir)
		if !errors.Is(err, corrupt.ErrUnsupportedFormat) || errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("grown file of a newer version: %v", err)
		}
	})
}
