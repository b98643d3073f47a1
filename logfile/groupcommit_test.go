package logfile

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// TestSyncToWakesOnlyTheCommitsAnFsyncCovers: a commit written while an
// fsync is in flight is not woken by that fsync (it started before the
// write); the next fsync starts when that one ends, led by the syncer, not
// by the leader of the first, which returns at once, nor by the waiter,
// which stays queued until the fsync covering it ends, and gets its
// failure if it fails.
func TestSyncToWakesOnlyTheCommitsAnFsyncCovers(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail bool // the second fsync fails
	}{
		{"covered_by_the_next_fsync", false},
		{"the_next_fsync_fails", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newFaultFS()
			entered := []chan struct{}{make(chan struct{}), make(chan struct{})}
			release := []chan struct{}{make(chan struct{}), make(chan struct{})}
			var file *faultFile
			fsys.onCreate = func(f *faultFile) {
				file = f
				f.syncHook = func() {
					// Data fsyncs 1 and 2 wait to be released (call 1 was the header's).
					if n := f.syncCalls.Load() - 2; n == 0 || n == 1 {
						close(entered[n])
						<-release[n]
					}
				}
			}
			w, err := testCreate(fsys, t.TempDir(), 1)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if !t.Failed() { // else a commit may wait forever, and Close with it
					w.Close()
				}
			}()
			var opened [2]sync.Once
			open := func(n int) { opened[n].Do(func() { close(release[n]) }) }
			defer func() { open(0); open(1) }() // a failure leaves no fsync blocked before Close
			end1 := write(t, w, 100)
			leader, waiter := make(chan error, 1), make(chan error, 1)
			go func() { leader <- w.SyncTo(end1) }()
			recvWithin(t, entered[0], "fsync 1")
			end2 := write(t, w, 100) // during fsync 1, which cannot cover it
			go func() { waiter <- w.SyncTo(end2) }()
			waitUntil(t, "the second commit to queue", func() bool { return queued(w) == 1 })
			open(0)
			if err := recvWithin(t, leader, "the leader of fsync 1 (it must not lead the next)"); err != nil {
				t.Fatal(err)
			}
			recvWithin(t, entered[1], "fsync 2, for the commit left waiting")
			if n := queued(w); n != 1 {
				t.Fatalf("%d commits queued during fsync 2, want 1: fsync 1 woke the commit written after it started", n)
			}
			if tc.fail {
				file.failSync.Store(true)
			}
			open(1)
			err = recvWithin(t, waiter, "the second commit")
			switch {
			case tc.fail && !errors.Is(err, errInjected):
				t.Fatalf("SyncTo after a failed fsync = %v, want the failure", err)
			case !tc.fail && err != nil:
				t.Fatal(err)
			case !tc.fail && w.Synced() < end2:
				t.Fatalf("SyncTo(%d) returned with %d durable", end2, w.Synced())
			}
			if got := w.Syncs(); got != 2 {
				t.Fatalf("%d fsyncs, want 2", got)
			}
		})
	}
}

// queued returns the SyncTo callers waiting for an fsync.
func queued(w *Writer) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiters)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
