package logfile

import (
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// holdFS is a filesystem whose files count their writes, and whose fsyncs
// can be held: the next Sync after hold tells entered and waits for
// release.
type holdFS struct {
	vfs.FS
	writes  atomic.Int64
	sizes   []int   // of every write, under mu
	offs    []int64 // of every write, under mu
	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
}

func (g *holdFS) Create(name string, perm fs.FileMode) (vfs.File, error) {
	f, err := g.FS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return &holdFile{File: f, g: g}, nil
}

// hold makes the next Sync wait: it returns a channel closed when that
// Sync starts, and the function that lets it go on.
func (g *holdFS) hold() (<-chan struct{}, func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	entered, release := make(chan struct{}), make(chan struct{})
	g.entered, g.release = entered, release
	return entered, func() { close(release) }
}

type holdFile struct {
	vfs.File
	g *holdFS
}

func (f *holdFile) WriteAt(p []byte, off int64) (int, error) {
	f.g.writes.Add(1)
	f.g.mu.Lock()
	f.g.sizes = append(f.g.sizes, len(p))
	f.g.offs = append(f.g.offs, off)
	f.g.mu.Unlock()
	return f.File.WriteAt(p, off)
}

func (f *holdFile) Sync() error {
	f.g.mu.Lock()
	entered, release := f.g.entered, f.g.release
	f.g.entered, f.g.release = nil, nil
	f.g.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
	return f.File.Sync()
}

// appendAll appends batches of 1, 2, ... n puts to dir 0 of s from n
// goroutines and returns their Appended in the order of the batches
// (started, not returned: the caller lets them go on).
func appendAll(t *testing.T, s *Set, n int) (wait func() []Appended) {
	t.Helper()
	out := make([]Appended, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		b := putBatch(t, s, i+1)
		wg.Go(func() { out[i], errs[i] = s.Append(0, b) })
	}
	return func() []Appended {
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
}

// waitPending waits up to 2 seconds for n batches to wait in dir 0's
// pending list, and reports whether they did.
func waitPending(s *Set, n int) bool {
	d := s.dirs[0]
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		d.pendMu.Lock()
		k := len(d.pend)
		d.pendMu.Unlock()
		if k == n {
			return true
		}
	}
	return false
}

// checkMerged checks that as, the Appended of batches of 1..n puts, lie
// one after another in one file, with write-order ids increasing in file
// order, and that a scan of the file after a power loss finds every
// record of them at its place with its id.
func checkMerged(t *testing.T, mem *vfs.MemFS, as []Appended) {
	t.Helper()
	byBase := slices.Clone(as)
	slices.SortFunc(byBase, func(a, b Appended) int { return int(a.Base - b.Base) })
	for i := 1; i < len(byBase); i++ {
		p, a := byBase[i-1], byBase[i]
		if a.W != p.W || a.Base != p.End || a.FirstWOID <= p.FirstWOID {
			t.Fatalf("appends %+v and %+v are not one after another in one file", p, a)
		}
	}
	want := map[int64]uint64{} // offset -> write-order id
	for i, a := range as {
		for k := range i + 1 {
			want[a.Base+int64(k)*(a.End-a.Base)/int64(i+1)] = a.FirstWOID + uint64(k)
		}
	}
	sc, err := NewScanner(mem.CrashClone(false, 0), as[0].W.Path(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	found := 0
	for sc.Next() {
		if id, ok := want[sc.Offset()]; ok {
			if got := sc.Record().WriteOrderID; got != id {
				t.Fatalf("record at %d has write-order id %d, want %d", sc.Offset(), got, id)
			}
			found++
		}
	}
	if found != len(want) {
		t.Fatalf("after a power loss: %d of the %d records appended", found, len(want))
	}
}

// Appends that wait for the dir while another holds it are written by
// the next holder in one write, each batch where its Appended says.
// Fails if each is written on its own (one write call each).
func TestSetMergesWaitingAppends(t *testing.T) {
	mem := setMem(t, "/a")
	g := &holdFS{FS: mem}
	s := startSet(t, SetOptions{FS: g, Dirs: []string{"/a"}}, Recovered{})
	const n = 5
	d := s.dirs[0]
	d.mu.Lock()
	writes := g.writes.Load()
	wait := appendAll(t, s, n)
	ok := waitPending(s, n)
	d.mu.Unlock()
	as := wait()
	if !ok {
		t.Fatalf("appends did not wait in the pending list for the dir held")
	}
	if got := g.writes.Load() - writes; got != 1 {
		t.Fatalf("%d waiting appends took %d writes, want 1", n, got)
	}
	for _, a := range as {
		if err := s.Sync(a); err != nil {
			t.Fatal(err)
		}
	}
	checkMerged(t, mem, as)
}

// While a commit's fsync is in flight, put appends to its dir wait for it
// to end and then go in one write; each Sync of them returns only once an
// fsync that started after that write has ended. Fails if the appends are
// written during the fsync (one write each), or if a Sync of them returns
// on the fsync that was in flight, which cannot cover them: the power
// loss after it would lose them.
func TestSetAppendsWaitForTheFsyncInFlight(t *testing.T) {
	mem, g, s, first, synced, release := syncHeld(t)
	const n = 4
	size := first.W.Size()
	writes := g.writes.Load()
	wait := appendAll(t, s, n)
	ok := waitPending(s, n)
	time.Sleep(10 * time.Millisecond) // give a write that does not wait the time to land
	got, gotWrites := first.W.Size(), g.writes.Load()
	syncs := first.W.Syncs()
	release()
	if !ok || got != size || gotWrites != writes {
		wait()
		t.Fatalf("appends wrote %d bytes in %d writes while the fsync was in flight", got-size, gotWrites-writes)
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	as := wait()
	// One write of them all, after the sync mark the fsync made due.
	total := int64(len(syncMarkOf(t, first.W.Synced())))
	for _, a := range as {
		total += a.End - a.Base
	}
	g.mu.Lock()
	sizes := g.sizes[len(g.sizes)-int(g.writes.Load()-writes):]
	g.mu.Unlock()
	if !slices.Contains(sizes, int(total)) {
		t.Fatalf("%d appends held back by an fsync, %d bytes, took writes of %v bytes, want one of them all", n, total, sizes)
	}
	for i, a := range as {
		if err := s.Sync(a); err != nil {
			t.Fatal(err)
		}
		if first.W.Syncs() == syncs {
			t.Fatalf("Sync of append %d returned without an fsync after its write", i)
		}
		if a.End > first.W.Synced() {
			t.Fatalf("Sync of append %d returned with its end %d past the synced %d", i, a.End, first.W.Synced())
		}
	}
	checkMerged(t, mem, as)
}

// A merged write that fails fails the first batch alone, as the first of
// the same batches written one after another would; the others go to a
// new log file and survive a power loss once synced.
func TestSetMergedWriteFailure(t *testing.T) {
	mem := setMem(t, "/a")
	ff := vfs.NewFaultFS(mem)
	s := startSet(t, SetOptions{FS: ff, Dirs: []string{"/a"}}, Recovered{})
	const n = 3
	d := s.dirs[0]
	old := s.Active(0)
	d.mu.Lock()
	out := make([]Appended, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		b := putBatch(t, s, 1)
		wg.Go(func() { out[i], errs[i] = s.Append(0, b) })
		if !waitPending(s, i+1) { // in this order in the pending list
			d.mu.Unlock()
			wg.Wait()
			t.Fatalf("append %d did not wait in the pending list for the dir held", i)
		}
	}
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWriteAt}, Name: old.Path(), Times: 1})
	d.mu.Unlock()
	wg.Wait()
	if errs[0] == nil {
		t.Fatal("the first batch of a failed merged write did not fail")
	}
	for i := 1; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("batch %d failed with the merged write: %v", i, errs[i])
		}
		if out[i].W == old {
			t.Fatalf("batch %d went to the failed writer", i)
		}
		if err := s.Sync(out[i]); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := NewScanner(mem.CrashClone(false, 0), out[1].W.Path(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var got []string
	for sc.Next() {
		if r := sc.Record(); r.Type == RecordPut {
			got = append(got, fmt.Sprint(r.WriteOrderID))
		}
	}
	if len(got) != n-1 {
		t.Fatalf("after a power loss the new file holds puts %v, want %d", got, n-1)
	}
}

// A large batch (a transaction's spill) is written at once even while a
// commit's fsync is in flight: it would merge with nothing, and waiting
// would only delay it. Fails if it waits for the fsync.
func TestSetLargeAppendDoesNotWaitForTheFsync(t *testing.T) {
	_, _, s, _, synced, release := syncHeld(t)
	big := s.NewBatch()
	body := make([]byte, 1024)
	for big.Size() <= maxMergedWrite/2 {
		if err := big.Add(&Record{Type: RecordPut, TxID: 2, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(0, big)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Second):
		release()
		<-done
		t.Fatal("a large append waited for the fsync in flight")
	}
	release()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
}

// syncMarkOf returns the encoded sync mark saying synced.
func syncMarkOf(t *testing.T, synced int64) []byte {
	t.Helper()
	b, err := AppendUnsealed(nil, &Record{Type: RecordSynced, SyncedTo: synced})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncHeld starts a set on a holdFS over mem, appends a put batch (first)
// and starts its Sync, whose fsync it holds: it returns once that fsync is
// in flight, with the channel the Sync returns on and the function that
// lets the fsync go on.
func syncHeld(t *testing.T) (mem *vfs.MemFS, g *holdFS, s *Set, first Appended, synced chan error, release func()) {
	mem = setMem(t, "/a")
	g = &holdFS{FS: mem}
	s = startSet(t, SetOptions{FS: g, Dirs: []string{"/a"}}, Recovered{})
	first = mustAppendBatch(t, s, 0, putBatch(t, s, 1))
	entered, release := g.hold()
	synced = make(chan error, 1)
	go func() { synced <- s.Sync(first) }()
	<-entered
	return mem, g, s, first, synced, release
}

// TestSyncMarkRidesOnTheNextAppend: a Sync whose fsync held back a put
// append writes no sync mark of its own: the append's write carries it,
// in front of the batch, saying what that fsync made durable. Fails if the
// mark is left out (a kill after the commit could then read rot before
// acknowledged records as a torn tail) or written in a write of its own.
func TestSyncMarkRidesOnTheNextAppend(t *testing.T) {
	mem, g, s, first, synced, release := syncHeld(t)
	writes := g.writes.Load()
	wait := appendAll(t, s, 1)
	ok := waitPending(s, 1)
	release()
	if err := <-synced; err != nil || !ok {
		t.Fatalf("Sync = %v; append pending: %v", err, ok)
	}
	a := wait()[0]
	mark := syncMarkOf(t, first.End)
	if got := g.writes.Load() - writes; got != 1 || a.Base != first.End+int64(len(mark)) {
		t.Fatalf("%d writes, the batch at %d; want 1 write, the batch at %d after a mark", got, a.Base, first.End+int64(len(mark)))
	}
	if err := s.Sync(a); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(mark))
	f, err := mem.Open(first.W.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(buf, first.End); err != nil {
		t.Fatal(err)
	}
	r, _, err := first.W.Framing().DecodeRecord(buf)
	if err != nil || r.Type != RecordSynced || r.SyncedTo != first.End {
		t.Fatalf("before the batch: %+v, %v; want a mark synced to %d", r, err, first.End)
	}
}
