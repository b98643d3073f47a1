package channel

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
)

// dedupConfig is testConfig with Dedup on header "id".
func dedupConfig(t testing.TB) Config {
	cfg := testConfig(t, 1)
	cfg.Dedup = Dedup{Header: "id"}
	return cfg
}

// idEvent is an event whose id header is id ("" = none), its body b.
func idEvent(id, b string) Event {
	e := Event{Body: []byte(b)}
	if id != "" {
		e.Headers = map[string]string{"id": id}
	}
	return e
}

// putTx commits one transaction of events, failing t on an error.
func putTx(t testing.TB, c *FileChannel, es ...Event) {
	t.Helper()
	if err := tryPutTx(c, es...); err != nil {
		t.Fatal(err)
	}
}

// tryPutTx commits one transaction of events.
func tryPutTx(c *FileChannel, es ...Event) error {
	tx, err := c.Begin()
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := tx.Put(e); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// TestDedupAcrossTransactions: an id committed before is dropped by a
// later commit, which succeeds; the other events of that commit go in;
// events without the header (or with an empty value) are never dropped.
func TestDedupAcrossTransactions(t *testing.T) {
	c := mustOpen(t, dedupConfig(t))
	putTx(t, c, idEvent("a", "a1"), idEvent("b", "b1"), idEvent("", "n1"))
	putTx(t, c, idEvent("a", "a2"), idEvent("c", "c1"), idEvent("", "n2"), idEvent("b", "b2"))
	putTx(t, c, Event{Body: []byte("e1"), Headers: map[string]string{"id": "", "x": "y"}}, Event{Body: []byte("e2"), Headers: map[string]string{"id": ""}})
	wantEvents(t, drain(t, c), []string{"a1", "b1", "n1", "c1", "n2", "e1", "e2"})
	s := c.Stats()
	if s.Duplicates != 2 || s.DedupIDs != 3 {
		t.Fatalf("Duplicates %d, DedupIDs %d; want 2, 3", s.Duplicates, s.DedupIDs)
	}
}

// TestDedupInsideTransaction: the first of a transaction's events with one
// id is kept, the others dropped.
func TestDedupInsideTransaction(t *testing.T) {
	c := mustOpen(t, dedupConfig(t))
	putTx(t, c, idEvent("a", "a1"), idEvent("a", "a2"), idEvent("b", "b1"), idEvent("a", "a3"), idEvent("b", "b2"))
	wantEvents(t, drain(t, c), []string{"a1", "b1"})
	if s := c.Stats(); s.Duplicates != 3 {
		t.Fatalf("Duplicates %d, want 3", s.Duplicates)
	}
}

// TestDedupWindowEdge: an id committed exactly Window ago is still a
// duplicate; one nanosecond later it is not.
func TestDedupWindowEdge(t *testing.T) {
	cfg := dedupConfig(t)
	cfg.Dedup.Window = time.Minute
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	cfg.clock = now.Load
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"))
	now.Add(int64(time.Minute))
	putTx(t, c, idEvent("a", "a2")) // at the edge: dropped
	now.Add(1)
	putTx(t, c, idEvent("a", "a3")) // past it: kept
	putTx(t, c, idEvent("a", "a4")) // a3 is now in the window
	wantEvents(t, drain(t, c), []string{"a1", "a3"})
}

// TestDedupMaxIDs: beyond MaxIDs the oldest ids are forgotten (counted),
// and a duplicate of a forgotten id goes in.
func TestDedupMaxIDs(t *testing.T) {
	cfg := dedupConfig(t)
	cfg.Dedup.MaxIDs = 3
	c := mustOpen(t, cfg)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		putTx(t, c, idEvent(id, id+"1"))
	}
	s := c.Stats()
	if s.DedupIDs != 3 || s.DedupForgotten != 2 {
		t.Fatalf("DedupIDs %d, DedupForgotten %d; want 3, 2", s.DedupIDs, s.DedupForgotten)
	}
	putTx(t, c, idEvent("a", "a2"), idEvent("e", "e2"))
	wantEvents(t, drain(t, c), []string{"a1", "b1", "c1", "d1", "e1", "a2"})
}

// TestDedupConfig: bad Dedup settings are refused by Open.
func TestDedupConfig(t *testing.T) {
	for name, d := range map[string]Dedup{
		"negative_window":    {Header: "id", Window: -1},
		"negative_max_ids":   {Header: "id", MaxIDs: -1},
		"window_no_header":   {Window: time.Minute},
		"max_ids_no_header":  {MaxIDs: 5},
		"negative_no_header": {Window: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			cfg.Dedup = d
			c, err := Open(cfg)
			if err == nil {
				c.Close()
				t.Fatal("Open accepted it")
			}
			if !strings.Contains(err.Error(), "Dedup.") {
				t.Fatalf("error %q does not name Dedup", err)
			}
		})
	}
}

// TestDedupCapacity: a dropped event takes no capacity in a Block group
// once its commit drops it (its Put's permit comes back), and does not
// count as queued.
func TestDedupCapacity(t *testing.T) {
	cfg := dedupConfig(t)
	cfg.Capacity, cfg.TransactionCapacity = 4, 4
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"), idEvent("b", "b1"))
	for range 5 { // two free permits: each round needs the last one's back
		putTx(t, c, idEvent("a", "a2"), idEvent("b", "b2"))
		if n := c.Len(); n != 2 {
			t.Fatalf("Len %d, want 2", n)
		}
	}
	putTx(t, c, idEvent("c", "c1"), idEvent("d", "d1"))
	wantEvents(t, drain(t, c), []string{"a1", "b1", "c1", "d1"})
}

// TestDedupGroups: no group receives a duplicate, filtered or not.
func TestDedupGroups(t *testing.T) {
	cfg := dedupConfig(t)
	cfg.Groups = []GroupConfig{{Name: "x", Filter: `headers["tag"] == "x"`}, {Name: "all"}}
	c := mustOpen(t, cfg)
	ev := func(id, tag, b string) Event {
		return Event{Body: []byte(b), Headers: map[string]string{"id": id, "tag": tag}}
	}
	putTx(t, c, ev("a", "x", "a1"), ev("b", "y", "b1"))
	putTx(t, c, ev("a", "x", "a2"), ev("b", "x", "b2"), ev("c", "x", "c1"), ev("c", "y", "c2"))
	for name, want := range map[string][]string{"x": {"a1", "c1"}, "all": {"a1", "b1", "c1"}} {
		g, err := c.Group(name)
		if err != nil {
			t.Fatal(err)
		}
		wantEvents(t, takeWith(t, g.Begin, len(want), 10), want)
		if n := g.Stats().Queued; n != 0 {
			t.Fatalf("group %s: %d more queued", name, n)
		}
	}
}

// TestDedupRestart: the window survives Close and Open, and a full replay
// (the checkpoint removed: the snapshot and the logs).
func TestDedupRestart(t *testing.T) {
	cfg := dedupConfig(t)
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"), idEvent("b", "b1"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a2"), idEvent("c", "c1"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	removeCheckpoint(t, cfg)
	c = mustOpen(t, cfg)
	if s := c.Stats(); s.RecoveredFrom != "full replay" || s.DedupIDs != 3 {
		t.Fatalf("RecoveredFrom %q, DedupIDs %d; want full replay, 3", s.RecoveredFrom, s.DedupIDs)
	}
	putTx(t, c, idEvent("a", "a3"), idEvent("b", "b2"), idEvent("c", "c2"), idEvent("d", "d1"))
	wantEvents(t, drain(t, c), []string{"a1", "b1", "c1", "d1"})
}

// TestDedupCrash: after a crash (no Close, no checkpoint) the ids of the
// commits since the last checkpoint come back from the logs.
func TestDedupCrash(t *testing.T) {
	cfg := dedupConfig(t)
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"))
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	putTx(t, c, idEvent("b", "b1"))
	crash(t, c)
	c = mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a2"), idEvent("b", "b2"), idEvent("c", "c1"))
	wantEvents(t, drain(t, c), []string{"a1", "b1", "c1"})
}

// dedupBodies returns n events whose ids are prefix+i.
func dedupBodies(prefix string, from, n int) []Event {
	es := make([]Event, n)
	for i := range es {
		id := prefix + strconv.Itoa(from+i)
		es[i] = idEvent(id, id)
	}
	return es
}

// TestDedupFailedCommitReleasesIDs: a commit whose fsync fails adds none of
// its ids: the retried put goes in (it is not a duplicate), then a second
// retry is dropped.
func TestDedupFailedCommitReleasesIDs(t *testing.T) {
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 1)
	cfg.Preallocate = -1
	cfg.Dedup = Dedup{Header: "id"}
	c := mustOpen(t, cfg)
	defer c.Close()
	putTx(t, c, idEvent("a", "a1"))
	ff.Add(vfs.Rule{Ops: []vfs.Op{"sync"}, Name: "log-*", Times: 1})
	if err := tryPutTx(c, idEvent("b", "b1"), idEvent("c", "c1")); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("commit with a failing fsync: %v", err)
	}
	// Its reservations are gone: only a's id is left (a reservation
	// left behind would stay in the map, never expired).
	if n := func() int { c.dedup.mu.Lock(); defer c.dedup.mu.Unlock(); return c.dedup.ids.n }(); n != 1 {
		t.Fatalf("the window's map holds %d ids after a failed commit, want 1", n)
	}
	putTx(t, c, idEvent("b", "b2"), idEvent("c", "c2"), idEvent("a", "a2"))
	putTx(t, c, idEvent("b", "b3"))
	wantEvents(t, drain(t, c), []string{"a1", "b2", "c2"})
	if s := c.Stats(); s.Duplicates != 2 {
		t.Fatalf("Duplicates %d, want 2", s.Duplicates)
	}
}

// TestDedupSnapshotUnusable: a snapshot that is missing, damaged or of
// another header is counted and logged, and the window is rebuilt from the
// logs (every log file is still there: nothing is lost).
func TestDedupSnapshotUnusable(t *testing.T) {
	for name, spoil := range map[string]func(t *testing.T, path string){
		"missing": func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
		"damaged": func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"other_header": func(t *testing.T, path string) {
			if err := os.WriteFile(path, checkpoint.AppendDedup(nil, "other", nil), 0o600); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := dedupConfig(t)
			var logged strings.Builder
			cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
			c := mustOpen(t, cfg)
			putTx(t, c, idEvent("a", "a1"), idEvent("b", "b1"))
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			spoil(t, filepath.Join(cfg.CheckpointDir, checkpoint.DedupName))
			removeCheckpoint(t, cfg) // a full replay: every log is read
			c = mustOpen(t, cfg)
			if s := c.Stats(); s.DedupSnapshotMissing != 1 || s.DedupIDs != 2 {
				t.Fatalf("DedupSnapshotMissing %d, DedupIDs %d; want 1, 2", s.DedupSnapshotMissing, s.DedupIDs)
			}
			if !strings.Contains(logged.String(), "rebuilt from the logs alone") {
				t.Fatalf("not logged:\n%s", logged.String())
			}
			putTx(t, c, idEvent("a", "a2"), idEvent("c", "c1"))
			wantEvents(t, drain(t, c), []string{"a1", "b1", "c1"})
		})
	}
}

// TestDedupIDsOfDeletedFiles: the ids of events whose log files were
// deleted (taken, then a checkpoint's Reclaim) survive a crash: the
// snapshot holds them. Without it (see the "no_snapshot" step) a full
// replay forgets them, which is why the snapshot is written before any
// log file is deleted.
func TestDedupIDsOfDeletedFiles(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	cfg.Dedup = Dedup{Header: "id"}
	c := mustOpen(t, cfg)
	for i := range 10 {
		putTx(t, c, dedupBodies("x", 10*i, 10)...)
	}
	drain(t, c)
	files := c.Stats().LogFiles
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().LogFiles; got >= files {
		t.Fatalf("the checkpoint deleted no log file (%d before, %d after)", files, got)
	}
	crash(t, c)
	img := mem.CrashClone(false, 1)
	cfg.fs = img
	c = mustOpen(t, cfg)
	putTx(t, c, dedupBodies("x", 0, 50)...)
	putTx(t, c, dedupBodies("x", 50, 50)...)
	if n := c.Len(); n != 0 {
		t.Fatalf("%d of 100 ids of deleted log files put again", n)
	}
	crash(t, c)

	// no_snapshot: the same channel without its snapshot forgets them.
	img = img.CrashClone(false, 1)
	if err := img.Remove(filepath.Join(cfg.CheckpointDir, checkpoint.DedupName)); err != nil {
		t.Fatal(err)
	}
	cfg.fs = img
	c = mustOpen(t, cfg)
	defer c.Close()
	putTx(t, c, dedupBodies("x", 0, 50)...)
	if n := c.Len(); n == 0 {
		t.Fatal("without the snapshot, the ids of deleted log files were still known")
	}
}

// TestDedupResetGroupDoesNotResurrect: a reset to Earliest (retention on)
// queues the retained events again, never the duplicates their commits
// dropped; nor does a reset on the closed channel (offline).
func TestDedupResetGroupDoesNotResurrect(t *testing.T) {
	cfg := resetConfig(t, 1)
	cfg.Dedup = Dedup{Header: "id"}
	cfg.Retention = Retention{MaxAge: time.Hour}
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"), idEvent("b", "b1"))
	putTx(t, c, idEvent("a", "a2"), idEvent("c", "c1"), idEvent("c", "c2"), idEvent("", "n1"))
	a := groupOf(t, c, "a")
	want := []string{"a1", "b1", "c1", "n1"}
	wantEvents(t, takeWith(t, a.Begin, 10, 3), want)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.ResetGroup("a", Earliest()); err != nil || n != 4 {
		t.Fatalf("ResetGroup = %d, %v; want 4", n, err)
	}
	wantEvents(t, takeWith(t, a.Begin, 10, 3), want)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := ResetGroup(cfg, "a", Earliest()); err != nil || n != 4 {
		t.Fatalf("offline ResetGroup = %d, %v; want 4", n, err)
	}
	c = mustOpen(t, cfg)
	wantEvents(t, takeWith(t, groupOf(t, c, "a").Begin, 10, 3), want)
}

// TestDedupConcurrentCommits: producers putting the same ids at once never
// lose one (a commit that meets an id another commit in flight reserved
// keeps its event: at most one copy per producer), and once every commit
// returned, a retry of any id is dropped.
func TestDedupConcurrentCommits(t *testing.T) {
	cfg := dedupConfig(t)
	cfg.Capacity, cfg.TransactionCapacity = 4000, 20
	c := mustOpen(t, cfg)
	const producers, ids = 4, 200
	var wg sync.WaitGroup
	errs := make([]error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < ids && errs[p] == nil; i += 10 {
				errs[p] = tryPutTx(c, dedupBodies("x", i, 10)...)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, b := range drain(t, c) {
		count[b]++
	}
	for i := range ids {
		if n := count["x"+strconv.Itoa(i)]; n < 1 || n > producers {
			t.Fatalf("id x%d queued %d times", i, n)
		}
	}
	if s := c.Stats(); int(s.Duplicates)+len(drainCount(count)) != producers*ids {
		t.Fatalf("Duplicates %d and %d queued; want %d put", s.Duplicates, len(drainCount(count)), producers*ids)
	}
	putTx(t, c, dedupBodies("x", 0, 20)...)
	if n := c.Len(); n != 0 {
		t.Fatalf("%d retried ids went in", n)
	}
}

// drainCount expands a count of bodies into a list.
func drainCount(count map[string]int) []string {
	var out []string
	for b, n := range count {
		for range n {
			out = append(out, b)
		}
	}
	return out
}

// TestDedupRebuiltWithCommitTimes: the window a crash recovery rebuilds
// from the logs holds each id at its commit's time, spilled puts (whose
// records hold no time: their commit's) included: a retry at the window's
// edge is dropped, one a nanosecond later goes in.
func TestDedupRebuiltWithCommitTimes(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	now, t0 := dedupClock(&cfg, time.Minute)
	c := mustOpen(t, cfg)
	tx := beginSpilled(t, c, spillEvents("s", 12)...)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	putTx(t, c, idEvent("a", "a1"))
	crash(t, c)
	now.Store(t0 + int64(time.Minute))
	cfg.fs = mem.CrashClone(false, 1)
	c = mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a2"), idEvent("s0", "s0-again"), idEvent("s11", "s11-again"))
	if n := c.Len(); n != 12+1 {
		t.Fatalf("%d events at the window's edge, want the 13 before it (retries dropped)", n)
	}
	now.Add(1)
	putTx(t, c, idEvent("a", "a3"), idEvent("s5", "s5-again"))
	if n := c.Len(); n != 13+2 {
		t.Fatalf("%d events past the window's edge, want 15", n)
	}
}

// TestDedupResetOfAFilteredGroup: a reset of a filtered group drops the
// duplicates its filter would have matched, by their index among all of
// the transaction's puts (the events the filter keeps out count too).
func TestDedupResetOfAFilteredGroup(t *testing.T) {
	cfg := resetConfig(t, 1)
	cfg.Dedup = Dedup{Header: "id"}
	cfg.Retention = Retention{MaxAge: time.Hour}
	cfg.Groups = []GroupConfig{{Name: "f", Filter: `headers["id"] != "x"`}}
	c := mustOpen(t, cfg)
	// Put 0 ("x") is kept out by the filter; put 3 repeats put 1's id.
	putTx(t, c, idEvent("x", "x1"), idEvent("a", "a1"), idEvent("b", "b1"), idEvent("a", "a2"), idEvent("c", "c1"))
	want := []string{"a1", "b1", "c1"}
	f := groupOf(t, c, "f")
	wantEvents(t, takeWith(t, f.Begin, 10, 3), want)
	if n, err := c.ResetGroup("f", Earliest()); err != nil || n != len(want) {
		t.Fatalf("ResetGroup = %d, %v; want %d", n, err, len(want))
	}
	wantEvents(t, takeWith(t, f.Begin, 10, 3), want)
	c.Close()
}

// dedupClock sets Dedup on header "id" with window in cfg, and a clock the
// test moves, at t0.
func dedupClock(cfg *Config, window time.Duration) (now *atomic.Int64, t0 int64) {
	cfg.Dedup = Dedup{Header: "id", Window: window}
	now = new(atomic.Int64)
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	now.Store(t0)
	cfg.clock = now.Load
	return now, t0
}

// spillEvents is dedupBodies("prefix", 0, n) with bodies 300 bytes longer:
// a few are past the spill threshold of 4 KiB log files.
func spillEvents(prefix string, n int) []Event {
	es := dedupBodies(prefix, 0, n)
	for i := range es {
		es[i].Body = append(es[i].Body, make([]byte, 300)...)
	}
	return es
}

// beginSpilled begins a put transaction on c and puts es, which must
// spill it.
func beginSpilled(t *testing.T, c *FileChannel, es ...Event) *Transaction {
	t.Helper()
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if err := tx.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	if !tx.spilled {
		t.Fatal("the transaction did not spill")
	}
	return tx
}

// TestDedupSnapshotWriteFails: a checkpoint whose snapshot of the window
// cannot be written (a full disk, an I/O error) fails and deletes no log
// file (their ids would be lost); puts and the window go on, and once the
// write works again a checkpoint succeeds and a restart keeps the ids.
func TestDedupSnapshotWriteFails(t *testing.T) {
	ff := vfs.NewFaultFS(vfs.NewMem())
	cfg := memConfig(ff, 1)
	cfg.Preallocate = -1
	cfg.MaxFileSize = 4096
	cfg.Dedup = Dedup{Header: "id"}
	c := mustOpen(t, cfg)
	for i := range 40 {
		putTx(t, c, idEvent(strconv.Itoa(i), strings.Repeat("x", 300)))
	}
	drain(t, c) // every log file but the active one can go
	files := c.Stats().LogFiles
	ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWrite, vfs.OpCreate}, Name: "dedup*", Err: syscall.ENOSPC})
	if err := c.Checkpoint(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("checkpoint with the snapshot unwritable: %v, want ENOSPC", err)
	}
	if n := c.Stats().LogFiles; n != files {
		t.Fatalf("%d log files after the failed checkpoint, want the %d there were", n, files)
	}
	putTx(t, c, idEvent("7", "again"), idEvent("new", "new"))
	ff.Clear()
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().LogFiles; n >= files {
		t.Fatalf("%d log files after a checkpoint that works, want fewer than %d", n, files)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	putTx(t, c, idEvent("3", "retry"), idEvent("new", "retry"), idEvent("other", "other"))
	wantEvents(t, drain(t, c), []string{"new", "other"})
}
