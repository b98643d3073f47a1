package channel

import (
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/testutil"
)

// TestDedupSpilledAcrossCheckpoint: a put transaction that spilled puts
// before a checkpoint and committed after it, then a crash: the recovery
// from that checkpoint reads the spilled puts in flight at it by pointer
// (opening them with Keys), so a retry of any of its ids is dropped. The
// put its commit dropped as a duplicate adds no id: its id keeps its first
// commit's time, and a retry past that time's window goes in. A spilled
// put that does not open is counted (Stats.DedupUnread) and its retry goes
// in, without failing Open.
func TestDedupSpilledAcrossCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name         string
		keys, damage bool
	}{
		{"plain", false, false},
		{"encrypted", true, false},
		{"encrypted_put_does_not_open", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			if tc.keys {
				cfg = encryptedConfig(t, 1)
			}
			cfg.MaxFileSize = 4096 // spills past 1 KiB
			testDedupSpilledAcrossCheckpoint(t, cfg, tc.damage)
		})
	}
}

// testDedupSpilledAcrossCheckpoint is a case of TestDedupSpilledAcrossCheckpoint
// on cfg; damage makes the in-flight put s2 not open.
func testDedupSpilledAcrossCheckpoint(t *testing.T, cfg Config, damage bool) {
	now, t0 := dedupClock(&cfg, time.Minute)
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"))
	now.Store(t0 + int64(30*time.Second))
	big := spillEvents("s", 10)
	tx := beginSpilled(t, c, append([]Event{idEvent("a", "a2")}, big[:6]...)...)
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
	unread := 0
	if damage { // s2: put 4 of the logs (a1, a2, s0, s1, s2)
		expectProblems(t, "bad-pointer")
		path, off := nthPut(t, cfg, 4)
		testutil.FlipPayloadByte(t, path, off, 30)
		unread = 1
	}
	c = mustOpen(t, cfg)
	if s := c.Stats(); s.DedupIDs != 11-unread || s.DedupUnread != int64(unread) {
		t.Fatalf("DedupIDs %d, DedupUnread %d after the crash; want %d, %d", s.DedupIDs, s.DedupUnread, 11-unread, unread)
	}
	putTx(t, c, dedupBodies("s", 0, 10)...)
	if n := c.Len(); n != 11+unread {
		t.Fatalf("%d events after the retry, want %d (every retry dropped but those of unread ids)", n, 11+unread)
	}
	now.Store(t0 + int64(time.Minute) + 1) // past a1's window, inside the transaction's
	putTx(t, c, idEvent("a", "a3"), idEvent("s0", "s0-again"))
	if n := c.Len(); n != 12+unread {
		t.Fatalf("%d events, want %d (a3 in: a2, dropped, added no id)", n, 12+unread)
	}
	c.Close()
}

// nthPut returns the log file and offset of the n-th put record (from 0)
// of cfg's first data dir, its files in id order.
func nthPut(t *testing.T, cfg Config, n int) (string, int64) {
	t.Helper()
	for _, p := range logPaths(t, cfg) {
		offs, _ := putOffsets(t, p)
		if n < len(offs) {
			return p, offs[n]
		}
		n -= len(offs)
	}
	t.Fatalf("fewer puts than %d in the logs", n)
	return "", 0
}
