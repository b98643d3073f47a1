package channel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// testClock is a settable clock for Config.now.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// retainedWorkload puts n events, takes them all and checkpoints.
func retainedWorkload(t *testing.T, c *FileChannel, n int) {
	t.Helper()
	putN(t, c, 0, n, 10)
	wantEvents(t, takeN(t, c, n, 10), bodies(0, n))
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// Negative limits are refused with the field's name.
func TestRetentionConfigRefusesNegatives(t *testing.T) {
	for _, r := range []Retention{{MaxAge: -time.Second}, {MaxBytes: -1}} {
		cfg := memConfig(vfs.NewMem(), 1)
		cfg.Retention = r
		_, err := Open(cfg)
		if err == nil || !strings.Contains(err.Error(), "Retention.Max") || !strings.Contains(err.Error(), "negative") {
			t.Fatalf("Open with %+v: %v", r, err)
		}
	}
}

// With MaxAge, the log files of taken events stay (retained: in Stats,
// not in the backlog); without, they go at the checkpoint. Once they are
// MaxAge old they go, within about one CheckpointInterval, even if the
// channel writes nothing more.
func TestRetentionMaxAgeKeepsTakenEventsLogs(t *testing.T) {
	clock := &testClock{now: time.Now()}
	cfg := memConfig(vfs.NewMem(), 1)
	zero := mustOpen(t, cfg)
	retainedWorkload(t, zero, 200)
	if s := zero.Stats(); s.LogFiles > 2 || s.RetainedFiles != 0 {
		t.Fatalf("zero Retention: %d log files, %d retained after the checkpoint", s.LogFiles, s.RetainedFiles)
	}
	_ = zero.Close()

	cfg = memConfig(vfs.NewMem(), 1)
	cfg.Retention = Retention{MaxAge: time.Hour}
	cfg.CheckpointInterval = 10 * time.Millisecond
	cfg.now = clock.Now
	c := mustOpen(t, cfg)
	defer c.Close()
	retainedWorkload(t, c, 200)
	s := c.Stats()
	if s.Queued != 0 || s.RetainedFiles < 3 || s.RetainedFiles != s.LogFiles-1 || s.RetainedBytes <= 0 || s.OldestRetained.IsZero() {
		t.Fatalf("after taking every event: %+v; want every rolled file retained, nothing queued", s)
	}
	time.Sleep(50 * time.Millisecond) // a few idle ticks: nothing is due
	if got := c.Stats().RetainedFiles; got != s.RetainedFiles {
		t.Fatalf("retained files went from %d to %d before MaxAge", s.RetainedFiles, got)
	}
	clock.Add(time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().RetainedFiles != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("an idle channel still retains %d files 10 s after they reached MaxAge", c.Stats().RetainedFiles)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := c.Stats().LogFiles; got > 2 {
		t.Fatalf("%d log files left", got)
	}
	putN(t, c, 200, 5, 5)
	wantEvents(t, drain(t, c), bodies(200, 5))
}

// With MaxBytes, the retained files' bytes stay within it, the newest
// kept.
func TestRetentionMaxBytesCapsRetained(t *testing.T) {
	cfg := memConfig(vfs.NewMem(), 1)
	cfg.Retention = Retention{MaxBytes: 3 * 4096}
	c := mustOpen(t, cfg)
	defer c.Close()
	retainedWorkload(t, c, 400)
	s := c.Stats()
	if s.RetainedFiles == 0 || s.RetainedBytes > cfg.Retention.MaxBytes || s.RetainedBytes+4096 <= cfg.Retention.MaxBytes {
		t.Fatalf("retained %d files of %d bytes; want the most that fit %d", s.RetainedFiles, s.RetainedBytes, cfg.Retention.MaxBytes)
	}
	if s.Queued != 0 {
		t.Fatalf("queued %d", s.Queued)
	}
}

// Retained files are neither damage nor backlog: Verify is clean, a
// reopen and a full replay (the checkpoint deleted) recover exactly the
// events not taken, and the retained files are still there, still
// retained.
func TestRetainedFilesReplayAndVerifyClean(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.MaxFileSize = MinMaxFileSize
	cfg.Retention = Retention{MaxAge: time.Hour}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 300, 10)
	wantEvents(t, takeN(t, c, 250, 10), bodies(0, 250))
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()
	if before.RetainedFiles < 2 || before.Queued != 50 {
		t.Fatalf("before: %d retained, %d queued", before.RetainedFiles, before.Queued)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(cfg)
	if err != nil || !rep.OK() || len(rep.Notes) != 0 || rep.Queued != 50 || rep.FullReplayQueued != 50 {
		t.Fatalf("Verify with retained files: %v, %v (notes %v), queued %d, full replay %d", err, rep, rep.Notes, rep.Queued, rep.FullReplayQueued)
	}
	for _, full := range []bool{false, true} {
		if full {
			if err := os.RemoveAll(cfg.CheckpointDir); err != nil {
				t.Fatal(err)
			}
		}
		c = mustOpen(t, cfg)
		s := c.Stats()
		if full && s.RecoveredFrom != "full replay" {
			t.Fatalf("recovered from %q", s.RecoveredFrom)
		}
		if s.Queued != 50 || s.ReplayCorrupt != 0 || s.ReplayDamagedTxs != 0 || s.TornTails != 0 || s.RetainedFiles < before.RetainedFiles {
			t.Fatalf("reopen (full replay %v): %+v; want 50 queued, no damage, %d retained at least", full, s, before.RetainedFiles)
		}
		if full {
			wantEvents(t, drain(t, c), bodies(250, 50))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// spaceFS is a MemFS whose free space is a disk of size bytes less the
// bytes of every file under /fc: deleting a log file makes room.
type spaceFS struct {
	*vfs.MemFS
	size atomic.Int64
}

func (f *spaceFS) FreeSpace(dir string) (int64, error) {
	var used int64
	var walk func(string) error
	walk = func(d string) error {
		names, err := f.List(d)
		if err != nil {
			return err
		}
		for _, n := range names {
			p := filepath.Join(d, n)
			fi, err := f.Stat(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if fi.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			used += fi.Size()
		}
		return nil
	}
	if err := walk("/fc"); err != nil {
		return 0, err
	}
	return max(f.size.Load()-used, 0), nil
}

// spaceChannel opens a channel on a spaceFS of a large disk with
// Retention{MaxAge: 1h}, dirs data dirs and no zeros laid out, edited by
// edit.
func spaceChannel(t *testing.T, dirs int, edit func(*Config)) (*FileChannel, *spaceFS) {
	t.Helper()
	sfs := &spaceFS{MemFS: vfs.NewMem()}
	sfs.size.Store(1 << 40)
	cfg := memConfig(sfs, dirs)
	cfg.Preallocate = -1
	cfg.Retention = Retention{MaxAge: time.Hour}
	edit(&cfg)
	c := mustOpen(t, cfg)
	t.Cleanup(func() { _ = c.Close() })
	return c, sfs
}

// A put that would leave less than MinimumRequiredSpace deletes retained
// files first, oldest first, and is refused only when none is left; the
// held files stay, and every queued event comes out.
func TestRetainedFilesMakeRoomForPuts(t *testing.T) {
	const minFree = 64 << 10
	c, sfs := spaceChannel(t, 1, func(cfg *Config) { cfg.MinimumRequiredSpace = minFree })
	retainedWorkload(t, c, 400)
	before := c.Stats()
	if before.RetainedFiles < 5 {
		t.Fatalf("%d retained files", before.RetainedFiles)
	}
	// The disk: what the channel holds, MinimumRequiredSpace, and 2 KiB.
	const headroom = 2048
	free, _ := sfs.FreeSpace("/fc")
	sfs.size.Add(-free + minFree + headroom)
	c.logs.ForgetFreeSpace()
	var refused error
	put := 400
	for refused == nil && put < 5000 {
		tx, _ := c.Begin()
		if err := tx.Put(Event{Body: body(put)}); err != nil {
			refused = err
			_ = tx.Rollback()
			break
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		put++
		c.logs.ForgetFreeSpace()
	}
	if !errors.Is(refused, ErrInsufficientSpace) {
		t.Fatalf("after %d puts: %v", put-400, refused)
	}
	s := c.Stats()
	if s.RetainedFiles != 0 {
		t.Fatalf("a put was refused with %d retained files left", s.RetainedFiles)
	}
	// A put writes a put and a commit record: more went in than the
	// headroom holds, in the retained files' room.
	if most := headroom / (2*logfile.FrameHeaderSize + len(body(999))); put-400 <= most {
		t.Fatalf("%d events put before the refusal, the headroom alone takes %d: the retained files made no room", put-400, most)
	}
	wantEvents(t, drain(t, c), bodies(400, put-400))
}

// A full data dir (its space reserve given up) deletes its retained files
// before it refuses a put, until the reserve is back.
func TestRetainedFilesGiveAFullDirItsReserveBack(t *testing.T) {
	const reserve = 16 << 10
	c, sfs := spaceChannel(t, 1, func(cfg *Config) { cfg.SpaceReserve = reserve })
	retainedWorkload(t, c, 400)
	n := c.Stats().RetainedFiles
	// The disk fills up (another writer): a write failing with ENOSPC
	// gives the reserve up, and its room is all that is left.
	if !c.logs.ReleaseReserves() || !c.logs.Full(0) {
		t.Fatal("the dir is not full")
	}
	free, _ := sfs.FreeSpace("/fc")
	sfs.size.Add(-free + reserve)
	tx, _ := c.Begin()
	if err := tx.Put(Event{Body: body(0)}); err != nil {
		t.Fatalf("put into a full dir with %d retained files: %v", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if c.logs.Full(0) || c.Stats().RetainedFiles >= n {
		t.Fatalf("full %v, %d retained of %d", c.logs.Full(0), c.Stats().RetainedFiles, n)
	}
	if _, err := sfs.Stat(filepath.Join(c.cfg.DataDirs[0], logfile.ReserveName)); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	wantEvents(t, drain(t, c), bodies(0, 1))
}

// Producers and a consumer under tight space with retention and frequent
// checkpoints: puts shed retained files while checkpoints reclaim and
// retain others (run under -race). Every committed event comes out once,
// each producer's in order; retained files were deleted for room (nothing
// else deletes them within MaxAge). A refused put is tried again.
func TestRetentionSheddingUnderLoad(t *testing.T) {
	const minFree = 64 << 10
	c, sfs := spaceChannel(t, 2, func(cfg *Config) {
		cfg.MinimumRequiredSpace, cfg.CheckpointInterval = minFree, 2*time.Millisecond
	})
	free, _ := sfs.FreeSpace("/fc")
	sfs.size.Add(-free + minFree + 48<<10) // 48 KiB above the minimum: a dozen log files
	const producers, each = 2, 600
	var wg sync.WaitGroup
	errs := make(chan error, producers+1)
	stop := make(chan struct{})
	defer wg.Wait()
	defer close(stop)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				tx, _ := c.Begin()
				err := tx.Put(Event{Body: []byte(fmt.Sprintf("%d/%05d/%s", p, i, strings.Repeat("x", 200)))})
				if errors.Is(err, ErrInsufficientSpace) {
					_ = tx.Rollback()
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					continue
				}
				if err == nil {
					err = tx.Commit()
				}
				if err != nil {
					errs <- err
					return
				}
				i++
			}
		}()
	}
	got := map[int][]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; n < producers*each; {
			tx, _ := c.Begin()
			ev, ok, err := tx.Take()
			if err == nil {
				err = tx.Commit()
			}
			if err != nil {
				errs <- err
				return
			}
			if !ok {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Microsecond):
				}
				continue
			}
			var p int
			fmt.Sscanf(string(ev.Body), "%d/", &p)
			got[p] = append(got[p], string(ev.Body[:7]))
			n++
		}
	}()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(time.Minute):
		t.Fatalf("the consumer did not get every event in a minute (%+v)", c.Stats())
	}
	for p := range producers {
		if len(got[p]) != each || !slices.IsSorted(got[p]) {
			t.Fatalf("producer %d: %d events, sorted %v", p, len(got[p]), slices.IsSorted(got[p]))
		}
	}
	s := c.Stats()
	if s.Queued != 0 {
		t.Fatalf("queued %d", s.Queued)
	}
	if created := int(c.logs.NextFileID() - 1); created-s.LogFiles < 5 {
		t.Fatalf("%d log files created, %d left: retained files made little room", created, s.LogFiles)
	}
}

// Retention can change between restarts: a lower MaxBytes deletes what no
// longer fits at Open; the zero value deletes the retained files at the
// next checkpoint.
func TestRetentionChangedAtOpen(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	cfg.Retention = Retention{MaxAge: time.Hour}
	c := mustOpen(t, cfg)
	retainedWorkload(t, c, 400)
	n := c.Stats().RetainedFiles
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Retention = Retention{MaxBytes: 2 * cfg.MaxFileSize}
	c = mustOpen(t, cfg)
	if s := c.Stats(); s.RetainedFiles == 0 || s.RetainedFiles >= n || s.RetainedBytes > cfg.Retention.MaxBytes {
		t.Fatalf("after reopening with MaxBytes %d: %d retained files (%d bytes), %d before", cfg.Retention.MaxBytes, s.RetainedFiles, s.RetainedBytes, n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Retention = Retention{}
	c = mustOpen(t, cfg)
	defer c.Close()
	files := c.Stats().LogFiles
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.RetainedFiles != 0 || s.LogFiles >= files || s.LogFiles > 2 {
		t.Fatalf("after reopening without Retention and a checkpoint: %d log files (%d before), %d retained", s.LogFiles, files, s.RetainedFiles)
	}
}

// A put short of space while a reset reads the retained files (MakeRoom
// runs outside the commit lock) deletes none of them: the reset queues
// events whose files stay, and every one comes out.
func TestResetKeepsRetainedFilesAPutWantsRoomFor(t *testing.T) {
	const minFree = 64 << 10
	read, resume := make(chan struct{}), make(chan struct{})
	c, sfs := spaceChannel(t, 1, func(cfg *Config) {
		cfg.MinimumRequiredSpace = minFree
		cfg.resetRead = func() { close(read); <-resume }
	})
	retainedWorkload(t, c, 400)
	if c.Stats().RetainedFiles < 5 {
		t.Fatalf("%d retained files", c.Stats().RetainedFiles)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.ResetGroup("", Earliest())
		done <- err
	}()
	<-read
	// The disk is short now: a put wants the retained files' room.
	free, _ := sfs.FreeSpace("/fc")
	sfs.size.Add(-free + minFree)
	c.logs.ForgetFreeSpace()
	putDone := make(chan error, 1)
	go func() {
		tx, _ := c.Begin()
		err := tx.Put(Event{Body: body(400)})
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
		putDone <- err
	}()
	select {
	case err := <-putDone:
		t.Logf("the put ended during the reset: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	err := <-putDone
	if err != nil && !errors.Is(err, ErrInsufficientSpace) {
		t.Fatal(err)
	}
	sfs.size.Add(1 << 30)
	c.logs.ForgetFreeSpace()
	got := drain(t, c)
	if len(got) < 400 || !slices.Equal(got[:400], bodies(0, 400)) {
		t.Fatalf("after the reset, %d events came out (%s); want the 400 it queued", len(got), short(got))
	}
	if s := c.Stats(); s.CorruptSkipped != 0 {
		t.Fatalf("%d queued events did not read back", s.CorruptSkipped)
	}
}
