package channel

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// TestDedupSpilledAcrossCheckpoint: a put transaction that spilled puts
// before a checkpoint and committed after it, then a crash: the recovery
// from that checkpoint reads the spilled puts in flight at it by pointer,
// so a retry of any of its ids is dropped. The put its commit dropped as a
// duplicate adds no id: its id keeps its first commit's time, and a retry
// past that time's window goes in.
func TestDedupSpilledAcrossCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	cfg := memConfig(mem, 1)
	cfg.Dedup = Dedup{Header: "id", Window: time.Minute}
	var now atomic.Int64
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	now.Store(t0)
	cfg.clock = now.Load
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"))
	now.Store(t0 + int64(30*time.Second))
	big := dedupBodies("s", 0, 10)
	for i := range big {
		big[i].Body = append(big[i].Body, make([]byte, 300)...) // past the spill threshold of 4 KiB files
	}
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range append([]Event{idEvent("a", "a2")}, big[:6]...) {
		if err := tx.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	if !tx.spilled {
		t.Fatal("the transaction did not spill")
	}
	if err := c.Checkpoint(); err != nil { // a2 and s0..s5 in flight
		t.Fatal(err)
	}
	for _, e := range big[6:] {
		if err := tx.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	crash(t, c)
	cfg.fs = mem.CrashClone(false, 1)
	c = mustOpen(t, cfg)
	if s := c.Stats(); s.DedupIDs != 11 || s.DedupUnread != 0 {
		t.Fatalf("DedupIDs %d, DedupUnread %d after the crash; want 11, 0", s.DedupIDs, s.DedupUnread)
	}
	putTx(t, c, dedupBodies("s", 0, 10)...)
	if n := c.Len(); n != 1+10 {
		t.Fatalf("%d events after the retry, want 11 (every retry dropped)", n)
	}
	now.Store(t0 + int64(time.Minute) + 1) // past a1's window, inside the transaction's
	putTx(t, c, idEvent("a", "a3"), idEvent("s0", "s0-again"))
	if n := c.Len(); n != 11+1 {
		t.Fatalf("%d events, want 12 (a3 in: a2, dropped, added no id)", n)
	}
}
