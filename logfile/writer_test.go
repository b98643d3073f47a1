package logfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

func TestCreateWritesHeaderAndRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	w, err := testCreate(vfs.OS(), dir, 7)
	if err != nil {
		t.Fatal(err)
	}
	if w.ID() != 7 || w.Path() != filepath.Join(dir, "log-0000000007") || w.Size() != HeaderSize {
		t.Fatalf("ID %d, Path %q, Size %d", w.ID(), w.Path(), w.Size())
	}
	got, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, testHeader(7)) {
		t.Fatalf("file holds %x, want the header", got)
	}
	if _, err := testCreate(vfs.OS(), dir, 7); err == nil {
		t.Fatal("Create of an existing log succeeded")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Syncs() != 0 {
		t.Fatalf("Close of a writer with nothing written issued %d fsyncs", w.Syncs())
	}
}

func TestCreateRemovesFileWhenHeaderSyncFails(t *testing.T) {
	fsys := newFaultFS()
	fsys.onCreate = func(f *faultFile) { f.failSync.Store(true) }
	dir := t.TempDir()
	if _, err := testCreate(fsys, dir, 3); !errors.Is(err, errInjected) {
		t.Fatalf("Create = %v, want the injected sync failure", err)
	}
	if exists(filepath.Join(dir, LogName(3))) {
		t.Fatal("half-created log file left behind")
	}
}

func TestWriteReturnsOffsetsAndSize(t *testing.T) {
	w, err := testCreate(vfs.OS(), t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	want := int64(HeaderSize)
	for _, n := range []int{10, 0, 1, 4096} {
		off, err := w.Write(make([]byte, n))
		if err != nil {
			t.Fatal(err)
		}
		if off != want {
			t.Fatalf("Write of %d bytes at %d, want %d", n, off, want)
		}
		want += int64(n)
		if w.Size() != want {
			t.Fatalf("Size %d, want %d", w.Size(), want)
		}
	}
}

func TestWritePastMaxFileSizeIsRefusedAndNotSticky(t *testing.T) {
	w, err := testCreate(vfs.OS(), t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	real := w.Size()
	w.size.Store(MaxFileSize - 10) // pretend the file is nearly full
	if _, err := w.Write(make([]byte, 11)); !errors.Is(err, ErrFileFull) {
		t.Fatalf("Write past MaxFileSize = %v, want ErrFileFull", err)
	}
	if w.Size() != MaxFileSize-10 {
		t.Fatalf("Size moved to %d on a refused write", w.Size())
	}
	w.size.Store(real)
	if _, err := w.Write([]byte("ok")); err != nil {
		t.Fatalf("Write after ErrFileFull: %v", err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestSyncToAccounting(t *testing.T) {
	w, err := testCreate(vfs.OS(), t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.SyncTo(HeaderSize); err != nil || w.Syncs() != 0 {
		t.Fatalf("SyncTo(header) = %v with %d fsyncs; the header is durable after Create", err, w.Syncs())
	}
	off, _ := w.Write(make([]byte, 100))
	if _, err := w.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := w.SyncTo(off + 100); err != nil || w.Syncs() != 1 {
		t.Fatalf("SyncTo = %v, %d fsyncs; want nil, 1", err, w.Syncs())
	}
	// That fsync covered everything written before it, the second write too.
	for _, o := range []int64{off, off + 100, w.Size()} {
		if err := w.SyncTo(o); err != nil || w.Syncs() != 1 {
			t.Fatalf("SyncTo(%d) on a covered offset = %v, %d fsyncs; want no fsync", o, err, w.Syncs())
		}
	}
	if err := w.Sync(); err != nil || w.Syncs() != 1 {
		t.Fatalf("Sync with nothing new = %v, %d fsyncs", err, w.Syncs())
	}
	if err := w.SyncTo(w.Size() + 1); err == nil {
		t.Fatal("SyncTo past the end succeeded")
	}
	if _, err := w.Write([]byte("still usable")); err != nil {
		t.Fatalf("SyncTo past the end made the writer fail: %v", err)
	}
}

// TestGroupCommitSharesOneFsync: while an fsync is in flight, later writers
// wait for it and then share a single fsync, whatever the timing.
func TestGroupCommitSharesOneFsync(t *testing.T) {
	fsys := newFaultFS()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fsys.onCreate = func(f *faultFile) {
		f.syncHook = func() {
			if f.syncCalls.Load() == 2 { // the first data fsync (1 was the header)
				once.Do(func() { close(entered) })
				<-release
			}
		}
	}
	w, err := testCreate(fsys, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	end1 := write(t, w, 100)
	errs := make(chan error, 10)
	go func() { errs <- w.SyncTo(end1) }()
	<-entered // the first fsync is in flight and covers only end1
	const waiters = 8
	for i := 0; i < waiters; i++ {
		end := write(t, w, 100)
		go func() { errs <- w.SyncTo(end) }()
	}
	close(release)
	for i := 0; i < waiters+1; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := w.Syncs(); got != 2 {
		t.Fatalf("%d fsyncs for one in flight plus %d waiting committers, want 2", got, waiters)
	}
}

func write(t *testing.T, w *Writer, n int) int64 {
	t.Helper()
	off, err := w.Write(make([]byte, n))
	if err != nil {
		t.Fatal(err)
	}
	return off + int64(n)
}

// TestGroupCommitConcurrentCommitters: many goroutines Write (serialised, as
// the channel does) and SyncTo concurrently; every SyncTo'd range ends up
// covered and slow fsyncs are shared.
func TestGroupCommitConcurrentCommitters(t *testing.T) {
	fsys := newFaultFS()
	fsys.onCreate = func(f *faultFile) { f.syncHook = func() { time.Sleep(2 * time.Millisecond) } }
	w, err := testCreate(fsys, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	const committers, rounds = 16, 10
	var writeMu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < committers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				writeMu.Lock()
				off, err := w.Write(make([]byte, 64))
				writeMu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if err := w.SyncTo(off + 64); err != nil {
					t.Error(err)
					return
				}
				w.mu.Lock()
				synced := w.synced
				w.mu.Unlock()
				if synced < off+64 {
					t.Errorf("SyncTo(%d) returned with only %d durable", off+64, synced)
				}
			}
		}()
	}
	wg.Wait()
	if got := w.Syncs(); got >= committers*rounds {
		t.Fatalf("%d fsyncs for %d commits: none shared", got, committers*rounds)
	}
	t.Logf("%d fsyncs for %d commits", w.Syncs(), committers*rounds)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.synced != w.Size() {
		t.Fatalf("closed with %d of %d bytes durable", w.synced, w.Size())
	}
}

func TestWriterFailuresAreSticky(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(f *faultFile)
		fail   func(t *testing.T, w *Writer) error // the operation that meets the fault
	}{
		{"short_write", func(f *faultFile) { f.failWrite.Store(true) },
			func(t *testing.T, w *Writer) error { _, err := w.Write(make([]byte, 200)); return err }},
		{"failed_fsync", func(f *faultFile) { f.failSync.Store(true) },
			func(t *testing.T, w *Writer) error { write(t, w, 200); return w.Sync() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newFaultFS()
			w, err := testCreate(fsys, t.TempDir(), 1)
			if err != nil {
				t.Fatal(err)
			}
			durable := write(t, w, 50)
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			before := w.Size()
			tc.inject(fsys.last)
			if err := tc.fail(t, w); !errors.Is(err, errInjected) {
				t.Fatalf("faulty operation = %v, want the injected fault", err)
			}
			if tc.name == "short_write" {
				if w.Size() != before || fileSize(t, w.Path()) != before {
					t.Fatalf("after a short write: Size %d, file %d bytes; want both back at %d",
						w.Size(), fileSize(t, w.Path()), before)
				}
			}
			// The fault is gone from the file, but the writer stays failed.
			if _, err := w.Write([]byte("x")); !errors.Is(err, errInjected) {
				t.Fatalf("later Write = %v, want the sticky fault", err)
			}
			if err := w.Sync(); !errors.Is(err, errInjected) {
				t.Fatalf("later Sync = %v, want the sticky fault", err)
			}
			if err := w.SyncTo(w.Size()); w.Size() > durable && !errors.Is(err, errInjected) {
				t.Fatalf("later SyncTo of undurable bytes = %v, want the sticky fault", err)
			}
			if err := w.SyncTo(durable); err != nil {
				t.Fatalf("SyncTo of bytes made durable before the fault = %v, want nil", err)
			}
			if err := w.Close(); !errors.Is(err, errInjected) {
				t.Fatalf("Close = %v, want the sticky fault", err)
			}
			if err := fsys.last.File.Close(); err == nil {
				t.Fatal("Close of a failed writer left the file open")
			}
		})
	}
}

func TestClosedWriter(t *testing.T) {
	w, err := testCreate(vfs.OS(), t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	end := write(t, w, 10)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Syncs() != 1 {
		t.Fatalf("Close issued %d fsyncs, want 1", w.Syncs())
	}
	if err := w.SyncTo(end); err != nil {
		t.Fatalf("SyncTo of bytes Close made durable = %v, want nil", err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v, want ErrClosed", err)
	}
	if err := w.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v, want ErrClosed", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
}

// TestFailedSyncTakesBackTheUnsyncedBytes: after a failed fsync nothing past
// the last good one can be trusted, so the writer truncates the file back to
// it (a restart without a power loss must not replay what never reached the
// disk) and Synced says where the durable part ends.
func TestFailedSyncTakesBackTheUnsyncedBytes(t *testing.T) {
	fsys := newFaultFS()
	w, err := testCreate(fsys, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	good := syncThenFailSync(t, w, &fsys.last.failSync)
	if got := fileSize(t, w.Path()); got != good {
		t.Fatalf("file is %d bytes after the failed sync, want it cut back to %d", got, good)
	}
	if w.Synced() != good {
		t.Fatalf("Synced %d, want %d", w.Synced(), good)
	}
}

// syncThenFailSync writes a record and syncs it, writes a second, and syncs
// again with fault set (one of a faultFile's knobs): that Sync must fail.
// It returns the end of the synced record, where Synced must stay.
func syncThenFailSync(t *testing.T, w *Writer, fault *atomic.Bool) (good int64) {
	t.Helper()
	if _, err := w.Write(mustAppend(t, nil, &Record{Type: RecordPut, TxID: 1, WriteOrderID: 1, Body: []byte("synced")})); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	good = w.Size()
	if w.Synced() != good {
		t.Fatalf("Synced %d after a good sync, want %d", w.Synced(), good)
	}
	if _, err := w.Write(mustAppend(t, nil, &Record{Type: RecordPut, TxID: 2, WriteOrderID: 2, Body: []byte("commit failed")})); err != nil {
		t.Fatal(err)
	}
	fault.Store(true)
	if err := w.Sync(); !errors.Is(err, errInjected) {
		t.Fatalf("Sync: %v", err)
	}
	return good
}

// TestFailedSyncCutSurvivesAPowerLoss: a failed fsync may still have written
// the pages past the last good one (and a zero-fill's fdatasync of the same
// file, finishing after it, writes them for sure). The writer's cut back to
// the last good fsync must then be durable itself: a power loss after it,
// with a checkpoint written meanwhile that counts those bytes out, must not
// bring back a record whose commit failed. The channel's fault enumeration
// found this (a zero-fill's sync between the failed fsync and the cut).
func TestFailedSyncCutSurvivesAPowerLoss(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/d", 0o700); err != nil {
		t.Fatal(err)
	}
	fsys := &faultFS{FS: mem}
	w, err := testCreate(fsys, "/d", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, d := range []string{"/", "/d"} {
		if err := mem.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	good := syncThenFailSync(t, w, &fsys.last.lateFail) // the pages reach the disk, the fsync fails
	img := mem.CrashClone(true, 1)
	fi, err := img.Stat(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != good {
		t.Fatalf("after a power loss the file is %d bytes, want %d: the cut back to the last good fsync was not durable", fi.Size(), good)
	}
}
