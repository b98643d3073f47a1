package checkpoint

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
)

// fsKind is a filesystem a test runs on: the OS (mmap slot store) or
// vfs.MemFS (ReadAt/WriteAt slot store).
type fsKind struct {
	name string
	new  func(t testing.TB) (vfs.FS, string)
}

var fsKinds = []fsKind{
	{"os", func(t testing.TB) (vfs.FS, string) { return vfs.OS(), t.TempDir() }},
	{"mem", func(t testing.TB) (vfs.FS, string) { return vfs.NewMem(), "/cp" }},
}

// newMem returns an in-memory filesystem holding dirs, each made durable
// (SyncDir of its parent) so that a crash clone keeps them. Each dir must be
// one level below the root.
func newMem(t testing.TB, dirs ...string) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	for _, d := range dirs {
		if err := mem.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := mem.SyncDir(filepath.Dir(d)); err != nil {
			t.Fatal(err)
		}
	}
	return mem
}

// newDir returns a filesystem of kind k and an existing directory on it.
func newDir(t testing.TB, k fsKind) (vfs.FS, string) {
	t.Helper()
	fsys, dir := k.new(t)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return fsys, dir
}

// forEachFS runs f as a subtest on every fsKind.
func forEachFS(t *testing.T, f func(t *testing.T, fsys vfs.FS, dir string)) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := newDir(t, k)
			f(t, fsys, dir)
		})
	}
}

// randomState returns a valid state for a ring of capacity with random
// geometry, log states and inflight transactions.
func randomState(rng *rand.Rand, capacity int, w uint64) *State {
	st := &State{Meta: Meta{
		WriteOrderID: w,
		Capacity:     capacity,
		Head:         rng.IntN(capacity),
		Size:         rng.IntN(capacity + 1),
		NextFileID:   rng.Uint32(),
		MaxTxID:      rng.Uint64(),
		Time:         time.Unix(0, rng.Int64N(1<<62)+1),
	}}
	id := uint32(0)
	for range rng.IntN(6) {
		id += 1 + uint32(rng.IntN(5))
		l := LogState{FileID: id, Position: rng.Int64N(1 << 40), Refs: rng.IntN(1000)}
		t := uint32(0)
		for range rng.IntN(4) {
			t += 1 + uint32(rng.IntN(3))
			l.Completes = append(l.Completes, t)
		}
		st.Logs = append(st.Logs, l)
	}
	st.InflightPuts = randomTxs(rng, 1)
	st.InflightTakes = randomTxs(rng, 1000)
	if st.Size > 0 {
		st.RingCRC = rng.Uint32() // what a decoder may see; Write ignores it
	}
	return st
}

func randomTxs(rng *rand.Rand, firstTx uint64) []eventqueue.InflightTx {
	var txs []eventqueue.InflightTx
	for i := range rng.IntN(5) {
		tx := eventqueue.InflightTx{Tx: firstTx + uint64(i)*7}
		for range rng.IntN(4) {
			tx.Pointers = append(tx.Pointers, randomPointer(rng))
		}
		txs = append(txs, tx)
	}
	return txs
}

func randomPointer(rng *rand.Rand) eventqueue.Pointer {
	return eventqueue.NewPointer(1+rng.Uint32N(50), rng.Uint32())
}

// sameState fails t unless got and want record the same state. RingCRC is
// not compared: Write computes it and ignores the caller's value (tests
// compare it with wantRingCRC).
func sameState(t *testing.T, got, want *State) {
	t.Helper()
	if !got.Time.Equal(want.Time) {
		t.Errorf("Time = %v, want %v", got.Time, want.Time)
	}
	g, w := *got, *want
	g.Time, w.Time = time.Time{}, time.Time{}
	g.RingCRC, w.RingCRC = 0, 0
	if !reflect.DeepEqual(g, w) {
		t.Errorf("state mismatch:\n got %+v\nwant %+v", g, w)
	}
}

// fileRing reads the ring slots of the checkpoint file in dir straight from
// the file: what a crash right now would leave (apart from unsynced data).
func fileRing(t *testing.T, fsys vfs.FS, dir string) []uint64 {
	t.Helper()
	b, err := vfs.ReadFile(fsys, path(dir, CheckpointName))
	if err != nil {
		t.Fatal(err)
	}
	ring := make([]uint64, len(b)/8-HeaderSlots)
	for i := range ring {
		ring[i] = binary.BigEndian.Uint64(b[(HeaderSlots+i)*8:])
	}
	return ring
}

// wantRingCRC is the ring CRC of the live slots of ring (indexed by ring
// position), computed independently of the code under test: the CRC32C of
// the big-endian slots from head, in ring order.
func wantRingCRC(ring []uint64, head, size int) uint32 {
	var b []byte
	for i := range size {
		b = binary.BigEndian.AppendUint64(b, ring[(head+i)%len(ring)])
	}
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}

// ringOf reads every ring slot through c.Slot.
func ringOf(c *Checkpoint) []uint64 {
	ring := make([]uint64, c.Capacity())
	for i := range ring {
		ring[i] = c.Slot(i)
	}
	return ring
}

// commit runs one full checkpoint: Freeze, Write, Thaw.
func commit(t *testing.T, c *Checkpoint, st *State) {
	t.Helper()
	c.Freeze()
	err := c.Write(st)
	c.Thaw(err == nil)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// mustCreate creates a checkpoint and closes it at cleanup.
func mustCreate(t *testing.T, fsys vfs.FS, dir string, capacity int) *Checkpoint {
	t.Helper()
	c, err := Create(fsys, dir, capacity)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mustOpen opens a checkpoint and closes it at cleanup.
func mustOpen(t *testing.T, fsys vfs.FS, dir string) (*Checkpoint, *State) {
	t.Helper()
	c, st, err := Open(fsys, dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, st
}

// patch overwrites bytes of a file at off.
func patch(t *testing.T, fsys vfs.FS, name string, off int64, b []byte) {
	t.Helper()
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// replace rewrites a whole file.
func replace(t *testing.T, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	if err := vfs.WriteFileAtomic(fsys, name, b); err != nil {
		t.Fatal(err)
	}
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func binaryBE(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
