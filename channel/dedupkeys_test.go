package channel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/logfile"
)

// encryptedDedupConfig is encryptedConfig with Dedup on header "id".
func encryptedDedupConfig(t *testing.T) Config {
	cfg := encryptedConfig(t, 1)
	cfg.Dedup = Dedup{Header: "id"}
	return cfg
}

// removeCheckpointAndDedup removes the checkpoint and the window's
// snapshot: the next Open rebuilds the window from the logs alone, in a
// full replay.
func removeCheckpointAndDedup(t *testing.T, cfg Config) {
	t.Helper()
	removeCheckpoint(t, cfg)
	if err := os.Remove(filepath.Join(cfg.CheckpointDir, checkpoint.DedupName)); err != nil {
		t.Fatal(err)
	}
}

// TestDedupWithKeys: with Keys, the window survives a crash (the ids of
// the commits after the checkpoint are in encrypted puts only) and a full
// replay without the snapshot: the recovery opens the encrypted puts it
// replays to read their ids.
func TestDedupWithKeys(t *testing.T) {
	cfg := encryptedDedupConfig(t)
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"), idEvent("b", "b1"))
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	putTx(t, c, idEvent("c", "c1"))
	crash(t, c)
	c = mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a2"), idEvent("b", "b2"), idEvent("c", "c2"), idEvent("d", "d1"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	removeCheckpointAndDedup(t, cfg)
	c = mustOpen(t, cfg)
	if s := c.Stats(); s.RecoveredFrom != "full replay" || s.DedupIDs != 4 || s.DedupUnread != 0 {
		t.Fatalf("RecoveredFrom %q, DedupIDs %d, DedupUnread %d; want full replay, 4, 0", s.RecoveredFrom, s.DedupIDs, s.DedupUnread)
	}
	putTx(t, c, idEvent("a", "a3"), idEvent("b", "b3"), idEvent("c", "c3"), idEvent("d", "d2"), idEvent("e", "e1"))
	wantEvents(t, drain(t, c), []string{"a1", "b1", "c1", "d1", "e1"})
}

// TestDedupKeyRotation: a full replay reads the ids of log files written
// with an old key and with the new active one.
func TestDedupKeyRotation(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Dedup = Dedup{Header: "id"}
	cfg.Keys = StaticKeys("k0", map[string][]byte{"k0": testKey(0xa0)})
	c := mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a1"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Keys = StaticKeys("k1", map[string][]byte{"k0": testKey(0xa0), "k1": testKey(0xa1)})
	c = mustOpen(t, cfg)
	putTx(t, c, idEvent("b", "b1"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	keyIDs := map[string]bool{}
	for _, p := range logPaths(t, cfg) {
		r, err := logfile.OpenReader(vfsOS(), p)
		if err != nil {
			t.Fatal(err)
		}
		keyIDs[r.Framing().KeyID()] = true
		r.Close()
	}
	if !keyIDs["k0"] || !keyIDs["k1"] {
		t.Fatalf("log files of keys %v, want k0 and k1", keyIDs)
	}
	removeCheckpointAndDedup(t, cfg)
	c = mustOpen(t, cfg)
	putTx(t, c, idEvent("a", "a2"), idEvent("b", "b2"), idEvent("c", "c1"))
	wantEvents(t, drain(t, c), []string{"a1", "b1", "c1"})
}

// TestDedupEncryptedPutThatDoesNotOpen: a put whose id the recovery cannot
// read (its body changed, its file's key record damaged) does not fail
// Open: it is counted (Stats.DedupUnread) and adds no id, so its retry
// goes in; the others' retries are dropped.
func TestDedupEncryptedPutThatDoesNotOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, p string)
		unread []int // the puts whose ids are unknown
	}{
		{"flipped_ciphertext", func(t *testing.T, p string) {
			offs, _ := putOffsets(t, p)
			testutil.FlipPayloadByte(t, p, offs[3], 30)
		}, []int{3}},
		{"damaged_key_record", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xff}, logfile.HeaderSize+20); err != nil {
				t.Fatal(err)
			}
		}, []int{0, 1, 2, 3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectProblems(t, "bad-pointer", "corrupt-record")
			cfg := encryptedDedupConfig(t)
			c := mustOpen(t, cfg)
			putTx(t, c, dedupBodies("a", 0, 6)...)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			removeCheckpointAndDedup(t, cfg)
			tc.damage(t, logPaths(t, cfg)[0])
			c = mustOpen(t, cfg)
			if s := c.Stats(); s.DedupUnread != int64(len(tc.unread)) || s.DedupIDs != 6-len(tc.unread) {
				t.Fatalf("DedupUnread %d, DedupIDs %d; want %d, %d", s.DedupUnread, s.DedupIDs, len(tc.unread), 6-len(tc.unread))
			}
			before := c.Len()
			putTx(t, c, dedupBodies("a", 0, 6)...)
			if n := c.Len() - before; n != len(tc.unread) {
				t.Fatalf("%d retries went in, want %d (those of the unread puts)", n, len(tc.unread))
			}
			c.Close()
		})
	}
}
