package logfile

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// retainClock is a settable clock for SetOptions.Now.
type retainClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *retainClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *retainClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// retainSet is a started set in /a with retention r whose files 1, 2 and 3
// were rolled 10 minutes apart (MemFS keeps no mtime: a file's time is
// when it was rolled); 4 is active. deleted collects OnDelete's ids.
func retainSet(t *testing.T, mem *vfs.MemFS, r Retention, deleted *[]uint32) (*Set, *retainClock) {
	t.Helper()
	clock := &retainClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/a"}, Retention: r, Now: clock.Now,
		OnDelete: func(id uint32) { *deleted = append(*deleted, id) }}, Recovered{})
	for range 3 {
		rollFiles(t, s, 0, 1)
		clock.Add(10 * time.Minute)
	}
	return s, clock
}

func setFileSize(s *Set, id uint32) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.files[id].size
}

func allUnheld(c []uint32) []uint32 { return c }

// What Reclaim keeps of the files nothing needs: younger than MaxAge;
// within MaxBytes, oldest out first; both limits together. Retained
// reports what stays.
func TestReclaimRetention(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		r        func(size int64) Retention
		after    time.Duration // from 10m after the last roll (files 30m, 20m, 10m old)
		want     []uint32      // deleted
		retained []uint32
	}{
		{"max_age", func(int64) Retention { return Retention{MaxAge: 30 * time.Minute} }, 5 * time.Minute, []uint32{1}, []uint32{2, 3}},
		{"max_age_all_young", func(int64) Retention { return Retention{MaxAge: time.Hour} }, 0, nil, []uint32{1, 2, 3}},
		{"max_age_all_old", func(int64) Retention { return Retention{MaxAge: time.Minute} }, 0, []uint32{1, 2, 3}, nil},
		{"max_bytes", func(n int64) Retention { return Retention{MaxBytes: 2 * n} }, 0, []uint32{1}, []uint32{2, 3}},
		{"max_bytes_below_one_file", func(n int64) Retention { return Retention{MaxBytes: n - 1} }, 0, []uint32{1, 2, 3}, nil},
		{"both_age_decides", func(n int64) Retention { return Retention{MaxAge: 15 * time.Minute, MaxBytes: 10 * n} }, 0, []uint32{1, 2}, []uint32{3}},
		{"both_bytes_decide", func(n int64) Retention { return Retention{MaxAge: time.Hour, MaxBytes: n} }, 0, []uint32{1, 2}, []uint32{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := setMem(t, "/a")
			var deleted []uint32
			probe, _ := retainSet(t, setMem(t, "/a"), Retention{}, new([]uint32))
			size := setFileSize(probe, 1)
			s, clock := retainSet(t, mem, tc.r(size), &deleted)
			clock.Add(tc.after)
			n, err := s.Reclaim(s.Snapshot(), allUnheld)
			if err != nil || n != len(tc.want) || !slices.Equal(deleted, tc.want) {
				t.Fatalf("Reclaim = %d, %v, deleted %v; want %v", n, err, deleted, tc.want)
			}
			for id := uint32(1); id <= 3; id++ {
				if got, want := existsIn(mem, filepath.Join("/a", LogName(id))), !slices.Contains(tc.want, id); got != want {
					t.Errorf("file %d exists %v, want %v", id, got, want)
				}
			}
			r := s.Retained()
			if r.Files != len(tc.retained) || r.Bytes != int64(len(tc.retained))*size {
				t.Fatalf("Retained = %+v, want %d files of %d bytes", r, len(tc.retained), size)
			}
			if len(tc.retained) > 0 {
				if want := t0.Add(time.Duration(tc.retained[0]-1) * 10 * time.Minute); !r.Oldest.Equal(want) {
					t.Fatalf("Oldest = %v, want %v (when file %d was rolled)", r.Oldest, want, tc.retained[0])
				}
			}
		})
	}
}

// A held file is never deleted for retention, nor counted as retained;
// the zero value retains nothing.
func TestReclaimRetentionHeldAndZero(t *testing.T) {
	var deleted []uint32
	s, clock := retainSet(t, setMem(t, "/a"), Retention{MaxAge: time.Minute}, &deleted)
	clock.Add(time.Hour)
	if _, err := s.Reclaim(s.Snapshot(), func([]uint32) []uint32 { return []uint32{2} }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deleted, []uint32{2}) || s.Retained().Files != 0 {
		t.Fatalf("deleted %v, retained %+v; want [2] and none", deleted, s.Retained())
	}
	deleted = nil
	z, _ := retainSet(t, setMem(t, "/a"), Retention{}, &deleted)
	if _, err := z.Reclaim(z.Snapshot(), allUnheld); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deleted, []uint32{1, 2, 3}) || z.Retained().Files != 0 || z.RetentionDue() {
		t.Fatalf("zero Retention: deleted %v, retained %+v", deleted, z.Retained())
	}
}

// A file completing events of a retained file stays with it, whatever its
// age, and is retained; once the completed file goes, it may go too.
func TestReclaimRetentionKeepsCompleters(t *testing.T) {
	var deleted []uint32
	// Files 2 (20m old) and 3 (10m) are young; 1 (30m) is old but
	// completes events of 3 (its take records took them: two data dirs).
	s, clock := retainSet(t, setMem(t, "/a"), Retention{MaxAge: 25 * time.Minute}, &deleted)
	s.Complete(1, 3)
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 0 || s.Retained().Files != 3 {
		t.Fatalf("deleted %v, retained %+v; want none deleted, 3 retained (1 completes 3)", deleted, s.Retained())
	}
	clock.Add(10 * time.Minute) // 3 is 20m old, 2 is 30m
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deleted, []uint32{2}) {
		t.Fatalf("deleted %v, want [2]", deleted)
	}
	clock.Add(10 * time.Minute)
	if !s.RetentionDue() {
		t.Fatal("RetentionDue with every retained file past MaxAge")
	}
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil {
		t.Fatal(err)
	}
	// 3 in the round before 1, which completes it.
	if !slices.Equal(deleted, []uint32{2, 3, 1}) || s.RetentionDue() {
		t.Fatalf("deleted %v, want [2 3 1]", deleted)
	}
}

// MakeRoom deletes retained files of the dir, oldest first, only while it
// is short of space, never a file unheld does not return; with room it
// deletes nothing.
func TestMakeRoomDeletesRetainedOldestFirst(t *testing.T) {
	mem := setMem(t, "/a")
	var deleted []uint32
	s, _ := retainSet(t, mem, Retention{MaxAge: time.Hour}, &deleted)
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil || s.Retained().Files != 3 {
		t.Fatalf("Reclaim: %v, retained %+v", err, s.Retained())
	}
	const min = 1000
	mem.SetFreeSpace(min + 100)
	s.ForgetFreeSpace()
	if n, err := s.MakeRoom(0, 100, min, allUnheld); n != 0 || err != nil {
		t.Fatalf("MakeRoom with room: %d, %v", n, err)
	}
	// Each deletion frees 60 bytes; 150 are missing: file 1 is held, so
	// 2, 3 go.
	s.opts.OnDelete = func(id uint32) {
		deleted = append(deleted, id)
		f, _ := mem.FreeSpace("/a")
		mem.SetFreeSpace(f + 100)
	}
	mem.SetFreeSpace(min - 50)
	s.ForgetFreeSpace()
	unheld := func(c []uint32) []uint32 {
		return slices.DeleteFunc(slices.Clone(c), func(id uint32) bool { return id == 1 })
	}
	n, err := s.MakeRoom(0, 100, min, unheld)
	if n != 2 || err != nil || !slices.Equal(deleted, []uint32{2, 3}) {
		t.Fatalf("MakeRoom = %d, %v, deleted %v; want [2 3]", n, err, deleted)
	}
	if r := s.Retained(); r.Files != 1 {
		t.Fatalf("retained %+v, want file 1", r)
	}
	// Enough after one: only the oldest goes.
	deleted = nil
	s2, _ := retainSet(t, mem2(t), Retention{MaxAge: time.Hour}, &deleted)
	if _, err := s2.Reclaim(s2.Snapshot(), allUnheld); err != nil {
		t.Fatal(err)
	}
	m := s2.fs.(*vfs.MemFS)
	s2.opts.OnDelete = func(id uint32) { deleted = append(deleted, id); m.SetFreeSpace(1 << 30) }
	m.SetFreeSpace(0)
	s2.ForgetFreeSpace()
	if n, err := s2.MakeRoom(0, 1, min, allUnheld); n != 1 || err != nil || !slices.Equal(deleted, []uint32{1}) {
		t.Fatalf("MakeRoom = %d, %v, deleted %v; want only the oldest, [1]", n, err, deleted)
	}
}

func mem2(t *testing.T) *vfs.MemFS { return setMem(t, "/a") }

// A full dir (no space reserve) gets room from its retained files at
// Reclaim, oldest first, until its reserve is back.
func TestReclaimShedsRetainedOfFullDir(t *testing.T) {
	const reserve = 1000
	mem := setMem(t, "/a")
	var deleted []uint32
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/a"}, Reserve: reserve,
		Retention: Retention{MaxAge: time.Hour},
		OnDelete: func(id uint32) {
			deleted = append(deleted, id)
			f, _ := mem.FreeSpace("/a")
			mem.SetFreeSpace(f + reserve/2)
		}}, Recovered{})
	rollFiles(t, s, 0, 4)
	mem.SetFreeSpace(reserve) // room for half the reserve's twice
	if !s.releaseReserve(s.dirs[0]) || !s.Full(0) {
		t.Fatal("the dir is not full")
	}
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil {
		t.Fatal(err)
	}
	if s.Full(0) || !slices.Equal(deleted, []uint32{1, 2}) || s.Retained().Files != 2 {
		t.Fatalf("full %v, deleted %v, retained %+v; want the reserve back after deleting [1 2]", s.Full(0), deleted, s.Retained())
	}
}

// At no instant of a MakeRoom does a power loss leave a retained file on
// disk without the file completing its events (here the completer has the
// lower id: it took events of a later put), even across data dirs: a file
// goes with the retained files it completes, of any dir, after them; and
// it stays while one of them is held.
func TestMakeRoomCrashNeverOrphansCompletedFile(t *testing.T) {
	dirs := []string{"/a", "/b"}
	mem := setMem(t, dirs...)
	s := startSet(t, SetOptions{FS: mem, Dirs: dirs, Retention: Retention{MaxAge: time.Hour}}, Recovered{})
	completer := rollFiles(t, s, 0, 1)[0] // in /a
	completed := rollFiles(t, s, 0, 1)[0] // in /a, its events taken by completer's records
	s.Complete(completer, completed)
	crossCompleter := rollFiles(t, s, 0, 1)[0] // in /a
	crossCompleted := rollFiles(t, s, 1, 1)[0] // in /b
	s.Complete(crossCompleter, crossCompleted)
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil || s.Retained().Files != 4 {
		t.Fatalf("Reclaim: %v, retained %+v", err, s.Retained())
	}
	mem.SetFreeSpace(0)
	s.ForgetFreeSpace()
	var images []*vfs.MemFS
	mem.SetHook(func(p vfs.CrashPoint) {
		images = append(images, p.Clone(false, 0), p.Clone(true, p.Seq))
	})
	path := func(dir string, id uint32) string { return filepath.Join(dir, LogName(id)) }
	holdsCross := func(c []uint32) []uint32 {
		return slices.DeleteFunc(slices.Clone(c), func(id uint32) bool { return id == crossCompleted })
	}
	n, err := s.MakeRoom(0, 1, 1, holdsCross)
	if n != 2 || err != nil || !existsIn(mem, path("/a", crossCompleter)) {
		t.Fatalf("MakeRoom with /b's file held = %d, %v; want 2 deleted, %s kept (it completes the held file's events)",
			n, err, path("/a", crossCompleter))
	}
	n, err = s.MakeRoom(0, 1, 1, allUnheld)
	mem.SetHook(nil)
	if n != 2 || err != nil || existsIn(mem, path("/b", crossCompleted)) {
		t.Fatalf("MakeRoom = %d, %v; want both cross-dir files deleted", n, err)
	}
	for i, img := range images {
		for _, pair := range [][2]string{{path("/a", completer), path("/a", completed)}, {path("/a", crossCompleter), path("/b", crossCompleted)}} {
			if !existsIn(img, pair[0]) && existsIn(img, pair[1]) {
				t.Fatalf("a power loss at image %d of %d keeps %s but not %s, which completes its events", i+1, len(images), pair[1], pair[0])
			}
		}
	}
}

// BenchmarkMakeRoomWithRoom is what retention adds to every put of a dir
// that retains files and has room: MakeRoom's look, which deletes nothing.
//
//	go test -run '^$' -bench MakeRoom ./logfile/
func BenchmarkMakeRoomWithRoom(b *testing.B) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/a", 0o700); err != nil {
		b.Fatal(err)
	}
	s, err := OpenSet(SetOptions{FS: mem, Dirs: []string{"/a"}, Retention: Retention{MaxAge: time.Hour}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(Recovered{}); err != nil {
		b.Fatal(err)
	}
	for range 4 {
		if err := s.Roll(0); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil || s.Retained().Files != 3 {
		b.Fatalf("Reclaim: %v, retained %+v", err, s.Retained())
	}
	b.ReportAllocs()
	for b.Loop() {
		if n, err := s.MakeRoom(0, 1100, 1<<20, allUnheld); n != 0 || err != nil {
			b.Fatal(n, err)
		}
	}
}

// A retained file whose deletion fails stays, counted as retained; MakeRoom
// returns the error and goes on with the next file, and does not loop.
// After Close, MakeRoom has nothing to delete.
func TestMakeRoomDeletionFails(t *testing.T) {
	mem := setMem(t, "/a")
	ff := vfs.NewFaultFS(mem)
	var deleted []uint32
	s := startSet(t, SetOptions{FS: ff, Dirs: []string{"/a"}, Retention: Retention{MaxAge: time.Hour},
		OnDelete: func(id uint32) { deleted = append(deleted, id) }}, Recovered{})
	rollFiles(t, s, 0, 3)
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil || s.Retained().Files != 3 {
		t.Fatalf("Reclaim: %v, retained %+v", err, s.Retained())
	}
	ff.SetFreeSpace(0)
	s.ForgetFreeSpace()
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpRemove}, Name: LogName(1)})
	n, err := s.MakeRoom(0, 1, 1, allUnheld)
	if n != 2 || err == nil || !slices.Equal(deleted, []uint32{2, 3}) {
		t.Fatalf("MakeRoom = %d, %v, deleted %v; want 2, an error, [2 3]", n, err, deleted)
	}
	if r := s.Retained(); r.Files != 1 || !existsIn(mem, filepath.Join("/a", LogName(1))) {
		t.Fatalf("retained %+v; want file 1, which could not be deleted", r)
	}
}

// After Close, a put's MakeRoom (racing with Close) touches nothing: not
// even the space reserve of a dir that was full.
func TestMakeRoomAfterClose(t *testing.T) {
	mem := setMem(t, "/a")
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/a"}, Reserve: 1000, Retention: Retention{MaxAge: time.Hour}}, Recovered{})
	rollFiles(t, s, 0, 3)
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil || s.Retained().Files != 3 {
		t.Fatalf("Reclaim: %v, retained %+v", err, s.Retained())
	}
	if !s.releaseReserve(s.dirs[0]) {
		t.Fatal("no reserve to release")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.MakeRoom(0, 1, 1, allUnheld); n != 0 || err != nil || s.Retained().Files != 0 {
		t.Fatalf("MakeRoom after Close: %d, %v, retained %+v", n, err, s.Retained())
	}
	if existsIn(mem, filepath.Join("/a", ReserveName)) {
		t.Fatal("MakeRoom after Close wrote the space reserve")
	}
}

// HoldDeletes makes MakeRoom wait: a reset reading retained files never
// has one deleted under it.
func TestHoldDeletesMakesMakeRoomWait(t *testing.T) {
	mem := setMem(t, "/a")
	var deleted []uint32
	s, _ := retainSet(t, mem, Retention{MaxAge: time.Hour}, &deleted)
	if _, err := s.Reclaim(s.Snapshot(), allUnheld); err != nil || s.Retained().Files != 3 {
		t.Fatalf("Reclaim: %v, retained %+v", err, s.Retained())
	}
	const min = 1000
	mem.SetFreeSpace(0)
	s.ForgetFreeSpace()
	release := s.HoldDeletes()
	done := make(chan int)
	go func() {
		n, _ := s.MakeRoom(0, 100, min, allUnheld)
		done <- n
	}()
	select {
	case n := <-done:
		t.Fatalf("MakeRoom deleted %d files while deletes were held", n)
	case <-time.After(50 * time.Millisecond):
	}
	if r := s.Retained(); r.Files != 3 {
		t.Fatalf("retained %+v while held, want 3 files", r)
	}
	release()
	if n := <-done; n == 0 {
		t.Fatal("MakeRoom deleted nothing once released")
	}
}
