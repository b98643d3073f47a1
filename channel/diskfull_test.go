package channel

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// Full disks. MinimumRequiredSpace refuses puts while there is still room,
// so takes, rollbacks and checkpoints keep working; without it (or when the
// disk fills anyway) writes fail with ENOSPC, and every commit that returned
// nil must survive, and a failed one must be all or nothing.

func TestDiskFullMinimumRequiredSpaceRefusesOnlyPuts(t *testing.T) {
	const (
		minFree  = 1 << 20
		headroom = 4096 // bytes the disk has above MinimumRequiredSpace
	)
	fsys := vfs.NewMem()
	cfg := memConfig(fsys, 1)
	cfg.MaxFileSize = 1 << 20 // no roll: every byte written is counted below
	cfg.Preallocate = -1      // nor zeros laid out: the file sizes are what puts wrote
	cfg.MinimumRequiredSpace = minFree
	fsys.SetFreeSpace(minFree + headroom)
	c := mustOpen(t, cfg)
	// A dataDir asks the filesystem for its free space at most once a second
	// and counts its own writes in between; forget the cached value so the
	// next put looks at the disk now, instead of sleeping for a second.
	refresh := func() {
		c.logs.ForgetFreeSpace()
	}
	logBytes := func() int64 {
		t.Helper()
		var n int64
		names, err := fsys.List(cfg.DataDirs[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if _, ok := logfile.ParseLogName(name); !ok {
				continue
			}
			fi, err := fsys.Stat(filepath.Join(cfg.DataDirs[0], name))
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
		return n
	}

	// Puts until the channel refuses one.
	start := logBytes()
	var model []string
	next := 0
	var refused error
	for refused == nil {
		if next > 1000 {
			t.Fatalf("%d events put into %d bytes of headroom and none refused", next, headroom)
		}
		tx, _ := c.Begin()
		var batch []string
		for range 5 {
			if err := tx.Put(Event{Body: body(next)}); err != nil {
				refused = err
				break
			}
			batch = append(batch, string(body(next)))
			next++
		}
		if refused != nil {
			if err := tx.Rollback(); err != nil {
				t.Fatalf("rollback of a refused put: %v", err)
			}
			break
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		model = append(model, batch...)
	}
	if !errors.Is(refused, ErrInsufficientSpace) {
		t.Fatalf("put on a nearly full disk: %v, want ErrInsufficientSpace", refused)
	}
	for _, want := range []string{cfg.DataDirs[0], "bytes free", strconv.Itoa(minFree), "free space there, or lower MinimumRequiredSpace"} {
		if !strings.Contains(refused.Error(), want) {
			t.Errorf("error %q does not name %q", refused, want)
		}
	}
	if len(model) == 0 {
		t.Fatal("no put fitted in the headroom")
	}
	// Refused before the disk fills: the puts stayed within the headroom
	// (a put transaction's commit record is not checked, so it may overrun
	// by one).
	commit := logfile.Record{Type: logfile.RecordCommit, CommitType: logfile.RecordPut}
	if written := logBytes() - start; written > headroom+int64(commit.EncodedSize()) {
		t.Errorf("puts wrote %d bytes with %d bytes of headroom", written, headroom)
	}

	// The disk fills further; the channel notices at its next look.
	fsys.SetFreeSpace(minFree - 1000)
	refresh()
	tx, _ := c.Begin()
	if err := tx.Put(Event{Body: body(next)}); !errors.Is(err, ErrInsufficientSpace) ||
		!strings.Contains(err.Error(), fmt.Sprintf("%s has %d bytes free, below MinimumRequiredSpace %d", cfg.DataDirs[0], minFree-1000, minFree)) {
		t.Fatalf("put after the disk filled: %v", err)
	}
	tx.Rollback()

	// Takes, take rollbacks and checkpoints still work.
	tx, _ = c.Begin()
	for i := range 3 {
		if ev, ok, err := tx.Take(); err != nil || !ok || string(ev.Body) != model[i] {
			t.Fatalf("take %d: %q %v %v", i, ev.Body, ok, err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, takeN(t, c, 5, 5), model[:5])
	model = model[5:]
	if err := c.Checkpoint(); err != nil {
		t.Fatalf("checkpoint below MinimumRequiredSpace: %v", err)
	}

	// Space freed: puts work again.
	fsys.SetFreeSpace(1 << 30)
	refresh()
	putN(t, c, next, 20, 10)
	model = append(model, bodies(next, 20)...)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	wantEvents(t, drain(t, c), model)
}

// TestDiskFullENOSPCDataDir fills a real filesystem holding the data and
// checkpoint dirs until a commit fails, without a space reserve (the test
// keeps one of its own, and frees it by hand); TestDiskFullDrainAfterRestart
// is the same with the channel's.
func TestDiskFullENOSPCDataDir(t *testing.T) {
	base := t.TempDir()
	mnt := filepath.Join(base, "full")
	testutil.MountTmpfs(t, mnt, "size=4m")
	// Created first, deleted to give takes room once the disk is full.
	reserve := filepath.Join(mnt, "reserve")
	if err := os.WriteFile(reserve, bytes.Repeat([]byte{0xAA}, 256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		CheckpointDir:        filepath.Join(mnt, "checkpoint"),
		DataDirs:             []string{filepath.Join(mnt, "data")},
		Capacity:             20_000,
		TransactionCapacity:  100,
		CheckpointInterval:   time.Hour,
		MaxFileSize:          1 << 20,
		MinimumRequiredSpace: -1,
		SpaceReserve:         -1,
		KeepAlive:            -1,
	}
	c := mustOpen(t, cfg)
	var broken bool // a fault or a hang: leave the channel alone
	t.Cleanup(func() { crashIfOpen(t, c, broken) })
	defer failOnFault(t, &broken)()

	// Commit batches of 1 KiB events until a commit fails, then try a few
	// more.
	var batches []dfBatch
	next, failed := 0, 0
	for failed < 3 {
		if len(batches) > 1000 {
			t.Fatal("4 MiB never filled")
		}
		tx, _ := c.Begin()
		b := dfBatch{}
		for range 20 {
			ev := dfEvent(next)
			next++
			if err := tx.Put(ev); err != nil {
				t.Fatalf("put: %v", err)
			}
			b.ids = append(b.ids, dfID(ev.Body))
		}
		err := tx.Commit()
		b.committed = err == nil
		batches = append(batches, b)
		if err == nil {
			continue
		}
		failed++
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), cfg.DataDirs[0]) {
			t.Errorf("commit on a full disk: %v; want ENOSPC naming a file in %s", err, cfg.DataDirs[0])
		}
		if failed == 1 {
			t.Logf("first failed commit (after %d batches): %v", len(batches)-1, err)
		}
	}
	var queued []string // committed and not taken, in order (failed commits excluded)
	for _, b := range batches {
		if b.committed {
			queued = append(queued, b.ids...)
		}
	}
	taken := map[string]bool{}

	// Takes read what is there; a take commit needs a little room for its
	// record, so on the full disk it may fail, returning the events.
	takeCommit := func(n int, mayFail bool) {
		t.Helper()
		tx, _ := c.Begin()
		for i := range n {
			ev, ok, err := tx.Take()
			if err != nil || !ok || dfID(ev.Body) != queued[i] {
				t.Fatalf("take %d: %.10q %v %v, want %s", i, ev.Body, ok, err, queued[i])
			}
		}
		err := tx.Commit()
		if err == nil {
			for _, id := range queued[:n] {
				taken[id] = true
			}
			queued = queued[n:]
			return
		}
		if !mayFail || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("take commit: %v", err)
		}
		t.Logf("take commit on the full disk: %v", err)
	}
	takeCommit(10, true)
	tx, _ := c.Begin()
	for i := range 3 {
		if ev, ok, err := tx.Take(); err != nil || !ok || dfID(ev.Body) != queued[i] {
			t.Fatalf("take %d: %.10q %v %v", i, ev.Body, ok, err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A checkpoint on the full disk may fail; it must not hang or crash.
	if err := within(t, &broken, "checkpoint on the full disk", c.Checkpoint); err != nil {
		t.Logf("checkpoint on the full disk: %v", err)
		if s := c.Stats(); s.CheckpointErrs == 0 {
			t.Errorf("failed checkpoint not counted: %+v", s)
		}
	}
	if err := os.Remove(reserve); err != nil {
		t.Fatal(err)
	}
	takeCommit(10, false)
	if err := within(t, &broken, "close on the nearly full disk", c.Close); err != nil {
		t.Logf("close on the nearly full disk: %v", err)
	}

	// Free space and restart.
	testutil.RemountTmpfs(t, mnt, "size=16m")
	var got []string
	if err := within(t, &broken, "open after freeing space", func() error {
		var err error
		c, err = Open(cfg)
		return err
	}); err != nil {
		t.Fatalf("open after freeing space: %v", err)
	}
	t.Logf("recovered from %s", c.Stats().RecoveredFrom)
	got = dfDrain(t, c)
	checkDiskFullRecovery(t, got, batches, taken)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDiskFullENOSPCCheckpointDir fills the filesystem of the checkpoint dir
// while the data dir has room: checkpoints fail, counted, and puts and takes
// go on; a restart recovers everything. The ring either stays within the
// checkpoint file's pages that were already allocated or grows into pages
// the full filesystem cannot allocate.
func TestDiskFullENOSPCCheckpointDir(t *testing.T) {
	for _, grow := range []bool{false, true} {
		name := "ring_in_allocated_pages"
		if grow {
			name = "ring_grows_into_unallocated_pages"
		}
		t.Run(name, func(t *testing.T) { diskFullCheckpointDir(t, grow) })
	}
}

func diskFullCheckpointDir(t *testing.T, grow bool) {
	base := t.TempDir()
	mnt := filepath.Join(base, "full")
	testutil.MountTmpfs(t, mnt, "size=1m")
	cfg := Config{
		CheckpointDir:        filepath.Join(mnt, "checkpoint"),
		DataDirs:             []string{filepath.Join(base, "data")},
		Capacity:             20_000, // a 164 KiB sparse ring file
		TransactionCapacity:  100,
		CheckpointInterval:   time.Hour,
		MaxFileSize:          64 << 10,
		MinimumRequiredSpace: -1,
		KeepAlive:            -1,
	}
	c := mustOpen(t, cfg)
	var broken bool // a fault or a hang: leave the channel alone
	t.Cleanup(func() { crashIfOpen(t, c, broken) })
	defer failOnFault(t, &broken)()
	var model []string
	put := func(from, n int) {
		t.Helper()
		putN(t, c, from, n, 50)
		model = append(model, bodies(from, n)...)
	}
	take := func(n int) {
		t.Helper()
		wantEvents(t, takeN(t, c, n, 50), model[:n])
		model = model[n:]
	}
	put(0, 300)
	take(50)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	testutil.FillFS(t, filepath.Join(mnt, "filler"))

	// Ring positions 0..506 share one 4 KiB page of the checkpoint file,
	// allocated by the puts above.
	more := 150
	if grow {
		more = 2000 // the ring grows into pages the file never had
	}
	put(300, more)
	take(100)
	before := c.Stats().CheckpointErrs
	err := within(t, &broken, "checkpoint on the full disk", c.Checkpoint)
	if err == nil {
		t.Fatal("checkpoint on a full disk succeeded")
	}
	t.Logf("checkpoint on the full disk: %v", err)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), cfg.CheckpointDir) {
		t.Errorf("checkpoint error %v: want ENOSPC naming %s", err, cfg.CheckpointDir)
	}
	if got := c.Stats().CheckpointErrs; got != before+1 {
		t.Errorf("CheckpointErrs = %d, want %d", got, before+1)
	}
	put(300+more, 40)
	take(100)
	if err := within(t, &broken, "close on the full disk", c.Close); err != nil {
		t.Logf("close on the full disk: %v", err)
	}

	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	if err := within(t, &broken, "open after freeing space", func() error {
		var err error
		c, err = Open(cfg)
		return err
	}); err != nil {
		t.Fatalf("open after freeing space: %v", err)
	}
	t.Logf("recovered from %s", c.Stats().RecoveredFrom)
	wantEvents(t, drain(t, c), model)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// dfBatch is one put transaction of the ENOSPC test: its event ids and
// whether its commit returned nil (a failed commit has an unknown outcome).
type dfBatch struct {
	ids       []string
	committed bool
}

// dfEvent is event i: a 1 KiB body starting with its id.
func dfEvent(i int) Event {
	b := make([]byte, 1024)
	copy(b, fmt.Sprintf("ev-%07d|", i))
	for j := 11; j < len(b); j++ {
		b[j] = byte('a' + (i+j)%26)
	}
	return Event{Body: b}
}

func dfID(body []byte) string {
	if i := bytes.IndexByte(body, '|'); i > 0 {
		return string(body[:i])
	}
	return string(body)
}

func dfDrain(t *testing.T, c *FileChannel) []string {
	var out []string
	for {
		tx, _ := c.Begin()
		n := 0
		for ; n < 100; n++ {
			ev, ok, err := tx.Take()
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if !ok {
				break
			}
			out = append(out, dfID(ev.Body))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
	}
}

// checkDiskFullRecovery checks that got holds, in commit order, every event
// of every committed batch not taken, and of each failed batch either every
// event or none.
func checkDiskFullRecovery(t *testing.T, got []string, batches []dfBatch, taken map[string]bool) {
	t.Helper()
	i := 0
	for bi, b := range batches {
		var want []string
		for _, id := range b.ids {
			if !taken[id] {
				want = append(want, id)
			}
		}
		if len(want) == 0 {
			continue
		}
		present := i < len(got) && got[i] == want[0]
		if !present && !b.committed {
			continue // a failed commit that left nothing: fine
		}
		if !present || i+len(want) > len(got) || !slices.Equal(got[i:i+len(want)], want) {
			t.Fatalf("batch %d (committed %v, events %s..%s): not found whole at position %d of %d recovered events %s",
				bi, b.committed, want[0], want[len(want)-1], i, len(got), short(got))
		}
		if !b.committed {
			t.Logf("batch %d: its commit failed but all its events were recovered", bi)
		}
		i += len(want)
	}
	if i != len(got) {
		t.Fatalf("%d unexpected events after the last batch: %s", len(got)-i, short(got[i:]))
	}
}

// within runs f in its own goroutine and returns its error. The test fails,
// setting *broken, if f runs longer than 20 s or panics, including on a
// memory fault (see failOnFault).
func within(t *testing.T, broken *bool, what string, f func() error) error {
	t.Helper()
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- result{panic: fmt.Sprintf("%v\n%s", r, debug.Stack())}
			}
		}()
		done <- result{err: f()}
	}()
	select {
	case r := <-done:
		if r.panic != nil {
			*broken = true
			t.Fatalf("%s panicked: %v", what, r.panic)
		}
		return r.err
	case <-time.After(20 * time.Second):
		*broken = true
		t.Fatalf("%s: still running after 20s", what)
		return nil
	}
}

// failOnFault makes a memory fault in the calling goroutine a panic instead
// of a crash of the test binary, and returns the function to defer that
// turns that panic into a test failure. The checkpoint file is mmap'd: on a
// full filesystem, touching a page of it that was never allocated (a tmpfs
// allocates on the first read too) raises SIGBUS. After a fault the
// channel's locks may be held for ever; *broken tells the cleanup to leave
// it alone.
func failOnFault(t *testing.T, broken *bool) func() {
	prev := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(prev)
		if r := recover(); r != nil {
			*broken = true
			if f, ok := r.(interface{ Addr() uintptr }); ok {
				t.Fatalf("memory fault at %#x (SIGBUS: the mmap'd checkpoint file touched a page the full filesystem cannot allocate): %v\n%s",
					f.Addr(), r, debug.Stack())
			}
			t.Fatalf("panic: %v\n%s", r, debug.Stack())
		}
	}
}

// crashIfOpen releases c's files without a checkpoint unless it is closed
// or broken (its locks may be held by a goroutine that faulted or hangs).
func crashIfOpen(t *testing.T, c *FileChannel, broken bool) {
	if c != nil && !broken && !c.closed.Load() {
		crash(t, c)
	}
}

// TestPutSeesRoomFreedByCheckpoint: a put refused for space, then a
// checkpoint that deletes the log files the sink emptied: the next put
// sees the room at once (the free space the channel cached is forgotten
// when it deletes files), not up to a second later.
func TestPutSeesRoomFreedByCheckpoint(t *testing.T) {
	const minFree = 1 << 20
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	cfg.MinimumRequiredSpace = minFree
	c := mustOpen(t, cfg)
	defer c.Close()
	putN(t, c, 0, 200, 10) // several 4 KiB log files
	wantEvents(t, takeN(t, c, 200, 10), bodies(0, 200))

	mem.SetFreeSpace(minFree - 1)
	c.logs.ForgetFreeSpace()
	tx, _ := c.Begin()
	if err := tx.Put(Event{Body: body(200)}); !errors.Is(err, ErrInsufficientSpace) {
		t.Fatalf("put on a full disk: %v", err)
	}
	mem.SetFreeSpace(1 << 30) // the room the deletions below free
	files := c.Stats().LogFiles
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().LogFiles; got >= files {
		t.Fatalf("the checkpoint deleted no log file (%d before, %d after)", files, got)
	}
	if err := tx.Put(Event{Body: body(200)}); err != nil {
		t.Fatalf("put right after a checkpoint deleted logs: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, drain(t, c), bodies(200, 1))
}

// TestDiskFullDrainAfterRestart: the channel fills a real filesystem (no
// MinimumRequiredSpace) until a commit fails; its space reserve goes,
// puts are refused from then on, and after a Close or a crash the channel
// opens again on the full disk and a sink drains it: every take commit
// succeeds, checkpoints delete the emptied log files, and once there is
// room the reserve is back and puts go on. Every committed event comes
// out, in order. In the "filled_while_down" cases another writer fills
// the disk to the last byte while the channel is down: the Open finds no
// room at all and uses its reserve.
func TestDiskFullDrainAfterRestart(t *testing.T) {
	for _, counting := range []bool{false, true} {
		for _, external := range []bool{false, true} {
			for _, crashed := range []bool{false, true} {
				name := map[bool]string{false: "channel_fills_it", true: "filled_while_down"}[external] +
					map[bool]string{false: "/close", true: "/crash"}[crashed]
				if counting {
					// A group that counts deliveries has a delivery
					// journal, which a reopen on the full disk must start
					// without new room.
					name = "dead_letters/" + name
				}
				t.Run(name, func(t *testing.T) { diskFullDrain(t, crashed, external, counting) })
			}
		}
	}
}

func diskFullDrain(t *testing.T, crashed, external, counting bool) {
	const reserve = 128 << 10
	base := t.TempDir()
	mnt := filepath.Join(base, "full")
	testutil.MountTmpfs(t, mnt, "size=4m")
	cfg := Config{
		CheckpointDir:        filepath.Join(mnt, "checkpoint"),
		DataDirs:             []string{filepath.Join(mnt, "data")},
		Capacity:             20_000,
		TransactionCapacity:  100,
		CheckpointInterval:   time.Hour,
		MaxFileSize:          256 << 10,
		MinimumRequiredSpace: -1,
		SpaceReserve:         reserve,
		KeepAlive:            -1,
	}
	if counting {
		cfg.Groups = []GroupConfig{{MaxDeliveries: 5}}
	}
	reservePath := filepath.Join(cfg.DataDirs[0], logfile.ReserveName)
	c := mustOpen(t, cfg)
	var broken bool // a fault or a hang: leave the channel alone
	t.Cleanup(func() { crashIfOpen(t, c, broken) })
	defer failOnFault(t, &broken)()
	if fi, err := os.Stat(reservePath); err != nil || fi.Size() != reserve {
		t.Fatalf("space reserve after Open: %v, %v; want %d bytes", fi, err, reserve)
	}

	// Batches of 1 KiB events until the disk is full: the first commit that
	// finds no room fails, and the puts after it are refused.
	var batches []dfBatch
	next := 0
	for refused := false; !refused && !(external && len(batches) == 50); {
		if len(batches) > 1000 {
			t.Fatal("4 MiB never filled")
		}
		tx, _ := c.Begin()
		b := dfBatch{}
		for range 20 {
			ev := dfEvent(next)
			if err := tx.Put(ev); err != nil {
				if !errors.Is(err, ErrInsufficientSpace) {
					t.Fatalf("put: %v", err)
				}
				refused = true
				break
			}
			next++
			b.ids = append(b.ids, dfID(ev.Body))
		}
		err := tx.Commit()
		b.committed = err == nil
		batches = append(batches, b)
		if err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("commit on a filling disk: %v", err)
		}
	}
	if !external {
		if _, err := os.Stat(reservePath); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("space reserve of the full dir: %v; want it removed", err)
		}
		if err := c.Health(); !errors.Is(err, ErrInsufficientSpace) || !strings.Contains(err.Error(), "is full") {
			t.Fatalf("Health of the full dir: %v", err)
		}
	}
	if crashed {
		crash(t, c)
	} else if err := within(t, &broken, "close on the full disk", c.Close); err != nil {
		t.Fatalf("close on the full disk: %v", err)
	}
	if external {
		testutil.FillFS(t, filepath.Join(mnt, "filler"))
	}
	logs := func() int {
		names, err := os.ReadDir(cfg.DataDirs[0])
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range names {
			if _, ok := logfile.ParseLogName(e.Name()); ok {
				n++
			}
		}
		return n
	}
	before := logs()

	if err := within(t, &broken, "open on the full disk", func() error {
		var err error
		c, err = Open(cfg)
		return err
	}); err != nil {
		t.Fatalf("open on the full disk: %v", err)
	}
	t.Logf("reopened on the full disk (%d log files before, %d after): recovered from %s, %d events", before, logs(), c.Stats().RecoveredFrom, c.Len())
	tx, _ := c.Begin()
	if err := tx.Put(dfEvent(next)); !errors.Is(err, ErrInsufficientSpace) {
		t.Fatalf("put after reopening on the full disk: %v", err)
	}
	_ = tx.Rollback()

	// A sink drains it; the periodic checkpoint is every 10 take commits.
	var got []string
	for n := 0; ; n++ {
		tx, _ := c.Begin()
		took := 0
		for ; took < 50; took++ {
			ev, ok, err := tx.Take()
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if !ok {
				break
			}
			got = append(got, dfID(ev.Body))
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("take commit %d on the full disk (%d events taken so far): %v", n, len(got), err)
		}
		if n%10 == 9 || took == 0 {
			if err := within(t, &broken, "checkpoint while draining", c.Checkpoint); err != nil {
				t.Fatalf("checkpoint %d while draining: %v", n/10, err)
			}
		}
		if took == 0 {
			break
		}
	}
	checkDiskFullRecovery(t, got, batches, map[string]bool{})

	// Drained and checkpointed: room for the reserve, and puts go on.
	if _, err := os.Stat(reservePath); err != nil {
		t.Fatalf("space reserve after draining: %v", err)
	}
	if err := c.Health(); err != nil {
		t.Fatalf("Health after draining: %v", err)
	}
	putN(t, c, 0, 40, 20)
	wantEvents(t, drain(t, c), bodies(0, 40))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFullDirGetsItsReserveBackWithoutWrites: a data dir opened without
// room for its space reserve is full (puts fail, Health says so); once room
// is made by someone else, the periodic checkpoint tick gives it its
// reserve back even though nothing was written since the last checkpoint
// (the tick then skips the checkpoint), and puts go on.
func TestFullDirGetsItsReserveBackWithoutWrites(t *testing.T) {
	const reserve = 64 << 10
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 1)
	cfg.SpaceReserve = reserve
	cfg.CheckpointInterval = 10 * time.Millisecond
	ff.SetFreeSpace(2*reserve - 1)
	c := mustOpen(t, cfg)
	defer c.Close()
	tx, _ := c.Begin()
	if err := tx.Put(Event{Body: body(0)}); !errors.Is(err, ErrInsufficientSpace) || !strings.Contains(err.Error(), "is full") {
		t.Fatalf("put into a dir without room for its reserve: %v", err)
	}
	_ = tx.Rollback()
	if err := c.Health(); !errors.Is(err, ErrInsufficientSpace) {
		t.Fatalf("Health: %v", err)
	}
	ff.SetFreeSpace(1 << 30)
	deadline := time.Now().Add(10 * time.Second)
	for c.logs.Full(0) {
		if time.Now().After(deadline) {
			t.Fatal("the dir is still full 10 s after room was made")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := ff.Stat(filepath.Join(cfg.DataDirs[0], logfile.ReserveName)); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	putN(t, c, 0, 5, 5)
	if err := c.Health(); err != nil {
		t.Fatalf("Health with the reserve back: %v", err)
	}
	wantEvents(t, drain(t, c), bodies(0, 5))
}

// TestOpenWithoutRoomForTheJournal: when even the old delivery journal
// cannot be rewritten in place for lack of space, Open goes on without a
// journal and removes the old one (no Erase could reach it): takes count
// deliveries with deliver records, through a crash, and a poison event is
// still dead-lettered after MaxDeliveries. With room again, the next Open
// starts a journal.
func TestOpenWithoutRoomForTheJournal(t *testing.T) {
	ffs := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ffs, 1)
	cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: 3}}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 2, 2)
	tx, _ := takeOne(t, mustGroup(t, c, "a"))
	tx.Rollback()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(cfg.CheckpointDir, checkpoint.JournalName)
	ffs.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWrite, vfs.OpWriteAt, vfs.OpTruncate}, Name: checkpoint.JournalName + "*", Err: syscall.ENOSPC})
	for want := 2; want <= 3; want++ {
		c = mustOpen(t, cfg)
		if c.hasJournal() {
			t.Fatal("a delivery journal with no room for it")
		}
		if _, err := ffs.Stat(journal); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the old journal after an Open without room for it: %v", err)
		}
		tx, ev := takeOne(t, mustGroup(t, c, "a"))
		if string(ev.Body) != "event-0" || ev.Deliveries != want {
			t.Fatalf("took %s with Deliveries %d, want event-0 with %d", ev.Body, ev.Deliveries, want)
		}
		tx.Rollback()
		crash(t, c)
	}
	ffs.Clear()
	c = mustOpen(t, cfg)
	defer c.Close()
	if !c.hasJournal() {
		t.Fatal("no delivery journal once there is room")
	}
	if n := mustGroup(t, c, "a.dlq").Len(); n != 1 {
		t.Fatalf("a.dlq holds %d events, want the one delivered 3 times", n)
	}
}

// The error of a put refused for space says what the check counted and
// what to do. When the disk has more than the minimum free and the put's
// own bytes (its event and the events the transaction holds) are what
// falls short, it says what the put would leave, not "has N bytes free"
// with N above the minimum.
func TestInsufficientSpaceErrorSaysWhatThePutWouldLeave(t *testing.T) {
	const minFree = 1 << 20
	for _, tc := range []struct {
		name      string
		free, min int64
		buffered  int // bytes of events the transaction holds before the refused put
		want      string
		wantLeft  bool // the message gives what the put would leave
	}{
		{name: "below_the_minimum", free: minFree - 10, min: minFree, want: "/fc/data0 has 1048566 bytes free, below MinimumRequiredSpace 1048576"},
		{name: "the_put_falls_short", free: minFree + 100, min: minFree, wantLeft: true},
		{name: "the_transaction_falls_short", free: minFree + 1200, min: minFree, buffered: 500, wantLeft: true}, // the put alone would fit
		{name: "the_put_does_not_fit", free: 500, min: 1, want: "/fc/data0 has 500 bytes free, too few for this put's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := memConfig(fsys, 1)
			cfg.MinimumRequiredSpace = tc.min
			fsys.SetFreeSpace(1 << 30)
			c := mustOpen(t, cfg)
			tx, _ := c.Begin()
			defer tx.Rollback()
			if tc.buffered > 0 {
				if err := tx.Put(Event{Body: make([]byte, tc.buffered)}); err != nil {
					t.Fatal(err)
				}
			}
			fsys.SetFreeSpace(tc.free)
			c.logs.ForgetFreeSpace()
			err := tx.Put(Event{Body: make([]byte, 1000)})
			if !errors.Is(err, ErrInsufficientSpace) || !strings.HasSuffix(err.Error(), ": free space there, or lower MinimumRequiredSpace") {
				t.Fatalf("put: %v, want ErrInsufficientSpace saying what to do", err)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
			left, need := int64(-1), int64(-1)
			if _, after, ok := strings.Cut(err.Error(), "this put ("); ok {
				fmt.Sscanf(after, "%d bytes with the events the transaction holds) would leave /fc/data0 %d bytes free", &need, &left)
			}
			if !tc.wantLeft {
				if left >= 0 {
					t.Errorf("error %q gives what the put would leave", err)
				}
				return
			}
			if need <= int64(tc.buffered)+1000 || left != tc.free-need || left >= tc.min {
				t.Errorf("error %q: want \"this put (N bytes …) would leave /fc/data0 %d-N bytes free\", N > %d, below %d", err, tc.free, tc.buffered+1000, tc.min)
			}
			if strings.Contains(err.Error(), "has ") {
				t.Errorf("error %q says what the dir has, above the minimum", err)
			}
		})
	}
}
