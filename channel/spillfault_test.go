package channel

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// TestFailedSpillLeavesTheTransactionAsItWas (issue 27, item 2): a Put
// whose spill write fails returns the error and adds nothing; the
// transaction keeps the events put before it, buffered as they were (with
// keys: in clear, not sealed for the failed write), and its Commit writes
// them once: every one of them reads back, live, after a restart and by a
// full replay. The event of the failed Put is in none of them.
func TestFailedSpillLeavesTheTransactionAsItWas(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(fmt.Sprintf("encrypted=%v", encrypted), func(t *testing.T) {
			mem := vfs.NewMem()
			ff := vfs.NewFaultFS(mem)
			cfg := memConfig(ff, 1)
			cfg.MaxFileSize = 64 << 10 // a spill every 16 KiB: about 60 events
			cfg.Preallocate = -1       // no zero-fills: the only writes are the channel's
			cfg.Capacity, cfg.TransactionCapacity = 1000, 1000
			if encrypted {
				cfg.Keys = StaticKeys("k1", map[string][]byte{"k1": bytes.Repeat([]byte{7}, KeySize)})
			}
			c, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ev := func(i int) Event {
				return Event{Headers: map[string]string{"i": fmt.Sprint(i)}, Body: bytes.Repeat([]byte{byte('a' + i%26)}, 250)}
			}
			tx, err := c.Begin()
			if err != nil {
				t.Fatal(err)
			}
			// The first spill works; the second one's write fails.
			var want []string
			failed := -1
			for i := 0; i < 200; i++ {
				if i == 70 {
					ff.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWriteAt}, Name: "log-*", Times: 1, Err: syscall.EIO})
				}
				err := tx.Put(ev(i))
				if err != nil {
					if failed >= 0 || !errors.Is(err, syscall.EIO) {
						t.Fatalf("put %d: %v", i, err)
					}
					failed = i
					continue
				}
				want = append(want, string(ev(i).Body)+fmt.Sprint(i))
			}
			if failed < 0 {
				t.Fatal("no spill failed")
			}
			if err := tx.Commit(); err != nil {
				t.Fatalf("commit after the failed spill: %v", err)
			}
			// read lists the queued events in one take transaction and
			// rolls it back: they stay queued.
			read := func(c *FileChannel) []string {
				t.Helper()
				tx, err := c.Begin()
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for {
					e, ok, err := tx.Take()
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						break
					}
					got = append(got, string(e.Body)+e.Headers["i"])
				}
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
				if s := c.Stats(); s.CorruptSkipped != 0 {
					t.Errorf("%d events skipped as damaged", s.CorruptSkipped)
				}
				return got
			}
			check := func(when string, got []string) {
				t.Helper()
				if len(got) != len(want) || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: %d events, want %d (all but put %d); first difference at %d", when, len(got), len(want), failed, firstDiff(got, want))
				}
			}
			check("live", read(c))
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			cfg.fs = mem
			for _, full := range []bool{false, true} {
				if full {
					for _, n := range []string{"checkpoint", "checkpoint.meta"} {
						if err := mem.Remove(cfg.CheckpointDir + "/" + n); err != nil {
							t.Fatal(err)
						}
					}
				}
				c, err := Open(cfg)
				if err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("reopened (full replay %v)", full), read(c))
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
