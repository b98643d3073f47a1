package channel

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/replay"
)

// testConfig returns a small channel config in a fresh temp dir.
func testConfig(t testing.TB, dataDirs int) Config {
	t.Helper()
	base := t.TempDir()
	cfg := Config{
		CheckpointDir:        filepath.Join(base, "checkpoint"),
		Capacity:             1000,
		TransactionCapacity:  100,
		CheckpointInterval:   time.Hour, // tests checkpoint explicitly
		MinimumRequiredSpace: -1,
		SpaceReserve:         -1,
		KeepAlive:            50 * time.Millisecond,
		checkKeyTags:         true,
	}
	for i := range dataDirs {
		cfg.DataDirs = append(cfg.DataDirs, filepath.Join(base, fmt.Sprintf("data%d", i)))
	}
	return cfg
}

// mustOpen opens cfg. When the test ends, it closes the channel if the test
// did not, and runs Verify on cfg's files: the test fails on any problem
// it did not announce with expectProblems, so every test also checks that
// what it leaves on disk is consistent (as bbolt's tests check every DB
// they close).
func mustOpen(t testing.TB, cfg Config) *FileChannel {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	left := leftFilesOf(t)
	t.Cleanup(func() { verifyLeftFiles(t, c, cfg, left) })
	return c
}

// expectProblems says that t damages, cuts or removes the channel's files
// on purpose and leaves problems of these kinds: the Verify that mustOpen
// runs when t ends ignores them, and still fails t on any other.
func expectProblems(t testing.TB, kinds ...replay.ProblemKind) {
	left := leftFilesOf(t)
	left.expected = append(left.expected, kinds...)
}

// expectUnsupported says that t leaves files a newer release wrote (made
// by hand): the Verify that mustOpen runs when t ends must refuse them with
// ErrUnsupportedFormat, and any other outcome fails t.
func expectUnsupported(t testing.TB) { leftFilesOf(t).unsupported = true }

// leftFiles is what a test says about the files it leaves (expectProblems,
// expectUnsupported), and which of them were verified.
type leftFiles struct {
	expected    []replay.ProblemKind
	unsupported bool
	verified    map[leftDirs]bool
}

// leftDirs names a channel's files for leftFiles.verified.
type leftDirs struct {
	fs  vfs.FS
	dir string // the checkpoint dir
}

// leftFilesByTest holds each running test's leftFiles.
var leftFilesByTest sync.Map // testing.TB -> *leftFiles

// leftFilesOf returns t's leftFiles. The first call registers its removal
// as a cleanup, so it runs after those of the mustOpen calls that follow.
func leftFilesOf(t testing.TB) *leftFiles {
	v, loaded := leftFilesByTest.LoadOrStore(t, &leftFiles{verified: map[leftDirs]bool{}})
	if !loaded {
		t.Cleanup(func() { leftFilesByTest.Delete(t) })
	}
	return v.(*leftFiles)
}

// verifyLeftFiles closes c unless the test closed (or crashed) it and fails
// t if Verify finds a problem in cfg's files that left does not expect.
// Faults a FaultFS still injects were the test's; they are cleared first.
// The files of channels opened one after another on the same dirs are
// verified once, by the cleanup of the last one (cleanups run last first).
func verifyLeftFiles(t testing.TB, c *FileChannel, cfg Config, left *leftFiles) {
	t.Helper()
	if t.Failed() {
		return // the test's own failure says more
	}
	if !c.closed.Load() {
		if err := c.Close(); err != nil {
			t.Errorf("Close at the end of the test: %v", err)
			return
		}
	}
	key := leftDirs{c.cfg.fs, cfg.CheckpointDir}
	if left.verified[key] {
		return
	}
	left.verified[key] = true
	if ff, ok := cfg.fs.(*vfs.FaultFS); ok {
		ff.Clear()
	}
	rep, err := Verify(cfg)
	switch {
	case left.unsupported && errors.Is(err, ErrUnsupportedFormat):
		return
	case left.unsupported:
		t.Errorf("Verify at the end of the test: err %v, want one matching ErrUnsupportedFormat", err)
		return
	case err != nil:
		t.Errorf("Verify at the end of the test: %v", err)
		return
	}
	for _, p := range rep.Problems {
		if !slices.Contains(left.expected, p.Kind) {
			t.Errorf("Verify at the end of the test: the files it left have a problem: %s", p)
		}
	}
}

func body(i int) []byte { return []byte("event-" + strconv.Itoa(i)) }

// putN commits events [from, from+n) in batches of batch.
func putN(t testing.TB, c *FileChannel, from, n, batch int) {
	t.Helper()
	for i := from; i < from+n; {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < batch && i < from+n; j, i = j+1, i+1 {
			if err := tx.Put(Event{Headers: map[string]string{"i": strconv.Itoa(i)}, Body: body(i)}); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
}

// takeN takes and commits up to n events in batches, returning the bodies.
func takeN(t testing.TB, c *FileChannel, n, batch int) []string {
	t.Helper()
	return takeWith(t, c.Begin, n, batch)
}

// takeWith is takeN of the transactions begin starts (a group's).
func takeWith(t testing.TB, begin func() (*Transaction, error), n, batch int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		tx, err := begin()
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for j := 0; j < batch && len(out) < n; j++ {
			ev, ok, err := tx.Take()
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if !ok {
				break
			}
			out = append(out, string(ev.Body))
			got++
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit take: %v", err)
		}
		if got == 0 {
			break
		}
	}
	return out
}

// drain takes every event.
func drain(t testing.TB, c *FileChannel) []string {
	return takeN(t, c, 1<<30, min(37, c.cfg.TransactionCapacity))
}

func bodies(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(body(from + i))
	}
	return out
}

func wantEvents(t testing.TB, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("got %d events %s, want %d events %s", len(got), short(got), len(want), short(want))
	}
}

func short(s []string) string {
	if len(s) > 12 {
		return fmt.Sprint(s[:6], " ... ", s[len(s)-6:])
	}
	return fmt.Sprint(s)
}

// crash abandons c the way a killed process does: no checkpoint, no
// transaction completion; only the file descriptors (and so the locks) go.
func crash(t testing.TB, c *FileChannel) {
	t.Helper()
	if !c.closed.CompareAndSwap(false, true) {
		t.Fatal("crash of a closed channel")
	}
	close(c.closing)
	c.wg.Wait()
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if err := c.release(); err != nil {
		t.Logf("release after crash: %v", err)
	}
}

func vfsOS() vfs.FS { return vfs.OS() }
