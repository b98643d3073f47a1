package channel

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
)

// The checkpoint corruption matrix: every way the main checkpoint directory
// (and the backup) can be damaged after a crash, each checked against the
// same workload. Whatever the damage, Open must succeed and the channel must
// hold exactly the committed events, in commit order, with the takes that
// were in flight at the crash back at the head; a second restart must find a
// good checkpoint written by the recovery.

// ckptDamage damages the checkpoint files in dir.
type ckptDamage func(t *testing.T, fsys vfs.FS, dir string)

const (
	mainCkptDir   = "/fc/checkpoint"
	backupCkptDir = "/fc/backup"
)

func TestCheckpointCorruptionMatrix(t *testing.T) {
	cases := []struct {
		name   string
		main   ckptDamage // nil: the main checkpoint is left alone
		backup ckptDamage // nil: the backup is left alone; set: the case needs a backup
	}{
		{name: "checkpoint_file_missing", main: removeCkptFiles(checkpoint.CheckpointName)},
		{name: "meta_missing", main: removeCkptFiles(checkpoint.MetaName)},
		{name: "inflightputs_missing", main: removeCkptFiles(checkpoint.InflightPutsName)},
		{name: "inflighttakes_missing", main: removeCkptFiles(checkpoint.InflightTakesName)},
		{name: "every_checkpoint_file_deleted", main: removeCkptFiles(checkpoint.CheckpointName,
			checkpoint.MetaName, checkpoint.InflightPutsName, checkpoint.InflightTakesName)},
		// Version 0: no release writes it, so it is damage. (A newer
		// version is refused instead: compat_test.go.)
		{name: "checkpoint_header_version_0", main: editCkptHeader(func(h *[8]uint64) {
			h[0] &^= 0xFFFFFFFF // "FCCP", version 0; header CRC recomputed
		})},
		{name: "checkpoint_marker_incomplete", main: editCkptHeader(func(h *[8]uint64) {
			h[4] = 0x494E434F4D504C54 // "INCOMPLT", as a crash mid-Write leaves it
		})},
		{name: "checkpoint_write_order_id_disagrees_with_meta", main: editCkptHeader(func(h *[8]uint64) {
			h[1]++ // header CRC recomputed: only the disagreement is wrong
		})},
		{name: "meta_version_0", main: editCkptFile(checkpoint.MetaName, func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[4:], 0)
			return fixTrailingCRC(b)
		})},
		{name: "meta_write_order_id_disagrees_with_checkpoint", main: editCkptFile(checkpoint.MetaName, func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[8:], binary.BigEndian.Uint64(b[8:])+1)
			return fixTrailingCRC(b)
		})},
		{name: "meta_truncated", main: editCkptFile(checkpoint.MetaName, func(b []byte) []byte { return b[:len(b)/2] })},
		{name: "meta_garbled_byte", main: editCkptFile(checkpoint.MetaName, garbleByte)},
		{name: "inflightputs_garbled_byte", main: editCkptFile(checkpoint.InflightPutsName, garbleByte)},
		{name: "inflighttakes_garbled_byte", main: editCkptFile(checkpoint.InflightTakesName, garbleByte)},
		// Caught only by the ring CRC of checkpoint.meta: without it a
		// garbled live slot loses or duplicates an event.
		{name: "ring_slot_garbled", main: garbleRing(func(live []int) []int { return live[len(live)/2 : len(live)/2+1] }, invertSlot)},
		{name: "ring_slots_garbled_many", main: garbleRing(func(live []int) []int {
			var every3rd []int
			for i := 1; i < len(live); i += 3 {
				every3rd = append(every3rd, live[i])
			}
			return every3rd
		}, copyFirstLiveSlot)},

		// Backup damage: with a good main checkpoint the main one is used;
		// with both damaged, a full replay.
		{name: "backup_meta_garbled", backup: editCkptFile(checkpoint.MetaName, garbleByte)},
		{name: "backup_complete_marker_missing", backup: removeCkptFiles(checkpoint.BackupCompleteName)},
		{name: "both_meta_garbled_and_backup_version_0",
			main: editCkptFile(checkpoint.MetaName, garbleByte),
			backup: editCkptHeader(func(h *[8]uint64) {
				h[0] &^= 0xFFFFFFFF
			})},
		{name: "both_checkpoint_file_missing", main: removeCkptFiles(checkpoint.CheckpointName),
			backup: removeCkptFiles(checkpoint.CheckpointName)},
	}
	for _, tc := range cases {
		for _, withBackup := range []bool{false, true} {
			if !withBackup && tc.backup != nil {
				continue // a backup case needs a backup
			}
			t.Run(fmt.Sprintf("%s/backup=%v", tc.name, withBackup), func(t *testing.T) {
				ckptMatrixCase(t, withBackup, tc.main, tc.backup)
			})
		}
	}
}

func ckptMatrixCase(t *testing.T, withBackup bool, damageMain, damageBackup ckptDamage) {
	fsys := vfs.NewMem()
	cfg := memConfig(fsys, 2)
	if withBackup {
		cfg.BackupCheckpointDir = backupCkptDir
	}
	want, after := ckptMatrixWorkload(t, cfg)
	if damageMain != nil {
		damageMain(t, fsys, mainCkptDir)
	}
	if damageBackup != nil {
		damageBackup(t, fsys, backupCkptDir)
	}

	wantFrom := "full replay"
	switch {
	case withBackup && damageMain == nil:
		wantFrom = "checkpoint"
	case withBackup && damageBackup == nil:
		wantFrom = "backup checkpoint"
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("open after damage: %v", err)
	}
	s := c.Stats()
	if s.RecoveredFrom != wantFrom {
		t.Errorf("RecoveredFrom = %q, want %q", s.RecoveredFrom, wantFrom)
	}
	if wantFrom == "full replay" {
		if s.ReplaySkipped != 0 || s.ReplayRecords <= after {
			t.Errorf("full replay read %d records, skipped %d; want more than the %d written after the checkpoint, none skipped",
				s.ReplayRecords, s.ReplaySkipped, after)
		}
	} else if got := s.ReplayRecords - s.ReplaySkipped; got != after {
		t.Errorf("replayed %d records (%d read, %d skipped), want exactly the %d written after the checkpoint",
			got, s.ReplayRecords, s.ReplaySkipped, after)
	}
	got := peekAll(t, c)
	if !slices.Equal(got, want) {
		t.Errorf("after recovery from %s: got %d events %s, want %d events %s (CorruptSkipped %d)",
			s.RecoveredFrom, len(got), short(got), len(want), short(want), c.Stats().CorruptSkipped)
	}
	// The recovery wrote a checkpoint: the next restart uses it and replays
	// nothing.
	crash(t, c)
	c = mustOpen(t, cfg)
	defer c.Close()
	if s := c.Stats(); s.RecoveredFrom != "checkpoint" || s.ReplayRecords != s.ReplaySkipped {
		t.Errorf("second restart: RecoveredFrom %q, %d records read, %d skipped; want the recovery's checkpoint and nothing to replay",
			s.RecoveredFrom, s.ReplayRecords, s.ReplaySkipped)
	}
	wantEvents(t, drain(t, c), want)
}

// ckptMatrixWorkload runs the matrix workload and crashes: a checkpoint
// taken with a take and a spilled put in flight, then committed puts and
// takes after it, then a crash with a take and a put still open. It returns
// the events the channel must hold and the number of log records written
// after the checkpoint.
func ckptMatrixWorkload(t *testing.T, cfg Config) (want []string, after int64) {
	c := mustOpen(t, cfg)
	var model []string
	next := 0
	commitPuts := func(n int) {
		t.Helper()
		putN(t, c, next, n, 10)
		model = append(model, bodies(next, n)...)
		next += n
	}
	commitTakes := func(n int) {
		t.Helper()
		wantEvents(t, takeN(t, c, n, n), model[:n])
		model = model[n:]
	}
	openTake := func(n int) *Transaction {
		t.Helper()
		tx, _ := c.Begin()
		for i := range n {
			ev, ok, err := tx.Take()
			if err != nil || !ok || string(ev.Body) != model[i] {
				t.Fatalf("take %d: %q %v %v, want %s", i, ev.Body, ok, err, model[i])
			}
		}
		return tx
	}

	commitPuts(100)
	commitTakes(20)
	inflightTake := openTake(5) // in flight at the checkpoint, committed after it
	// A put transaction that spills its records to the log before the
	// checkpoint and commits after it: the checkpoint's inflightputs holds it.
	spilled, _ := c.Begin()
	spilledFrom := next
	for !spilled.spilled {
		if next-spilledFrom == cfg.TransactionCapacity {
			t.Fatal("the put transaction never spilled")
		}
		ev := Event{Headers: map[string]string{"pad": strings.Repeat("p", 200)}, Body: body(next)}
		if err := spilled.Put(ev); err != nil {
			t.Fatal(err)
		}
		next++
	}
	if spilled.batch.Len() != 0 {
		t.Fatal("spill left records buffered") // they would be written after the checkpoint
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	files := c.logs.NextFileID()

	// After the checkpoint.
	if err := inflightTake.Commit(); err != nil {
		t.Fatal(err)
	}
	model = model[5:]
	after += 2 // take + commit
	if err := spilled.Commit(); err != nil {
		t.Fatal(err)
	}
	model = append(model, bodies(spilledFrom, next-spilledFrom)...)
	after++ // commit
	commitPuts(40)
	after += 4 * (10 + 1) // four batches of ten puts and a commit
	commitTakes(10)
	after += 2
	rolledBack, _ := c.Begin()
	for range 5 {
		if err := rolledBack.Put(Event{Body: body(next)}); err != nil {
			t.Fatal(err)
		}
		next++
	}
	rolledBack.Rollback() // never spilled: writes nothing
	openTake(7)           // in flight at the crash: back at the head after it
	openPut, _ := c.Begin()
	for range 5 {
		if err := openPut.Put(Event{Body: body(next)}); err != nil {
			t.Fatal(err)
		}
		next++
	}
	// Every log file started after the checkpoint begins with the groups
	// record.
	after += int64(c.logs.NextFileID() - files)
	crash(t, c)
	return model, after
}

// peekAll returns the channel's events without consuming them: it takes
// them all in transactions and rolls those back, last first, which restores
// the queue.
func peekAll(t *testing.T, c *FileChannel) []string {
	t.Helper()
	return peekWith(t, c.Begin, c.cfg.TransactionCapacity)
}

// peekWith is peekAll of the transactions begin starts, batch events each.
func peekWith(t testing.TB, begin func() (*Transaction, error), batch int) []string {
	t.Helper()
	var out []string
	var txs []*Transaction
	defer func() {
		for i := len(txs) - 1; i >= 0; i-- {
			txs[i].Rollback()
		}
	}()
	for {
		tx, err := begin()
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		for range batch {
			ev, ok, err := tx.Take()
			if err != nil {
				t.Fatalf("take: %v", err)
			}
			if !ok {
				return out
			}
			out = append(out, string(ev.Body))
		}
	}
}

// removeCkptFiles deletes the named files.
func removeCkptFiles(names ...string) ckptDamage {
	return func(t *testing.T, fsys vfs.FS, dir string) {
		t.Helper()
		for _, n := range names {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// editCkptFile replaces the contents of dir/name with edit(contents).
func editCkptFile(name string, edit func([]byte) []byte) ckptDamage {
	return func(t *testing.T, fsys vfs.FS, dir string) {
		t.Helper()
		p := filepath.Join(dir, name)
		b, err := vfs.ReadFile(fsys, p)
		if err != nil {
			t.Fatal(err)
		}
		writeWhole(t, fsys, p, edit(b))
	}
}

func writeWhole(t *testing.T, fsys vfs.FS, p string, b []byte) {
	t.Helper()
	f, err := fsys.OpenReadWrite(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// garbleByte flips the bits of the middle byte; the CRC no longer matches.
func garbleByte(b []byte) []byte {
	b[len(b)/2] ^= 0xFF
	return b
}

// fixTrailingCRC recomputes the CRC32C in the last four bytes (the frame of
// checkpoint.meta and the inflight files).
func fixTrailingCRC(b []byte) []byte {
	n := len(b) - 4
	binary.BigEndian.PutUint32(b[n:], crc32.Checksum(b[:n], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// editCkptHeader edits header slots 0..7 of the checkpoint file and then
// recomputes the header CRC (slot 7, over slots 0..6), so only the edit is
// wrong.
func editCkptHeader(edit func(h *[8]uint64)) ckptDamage {
	return editCkptFile(checkpoint.CheckpointName, func(b []byte) []byte {
		var h [8]uint64
		for i := range h {
			h[i] = binary.BigEndian.Uint64(b[i*8:])
		}
		edit(&h)
		for i := range h[:7] {
			binary.BigEndian.PutUint64(b[i*8:], h[i])
		}
		crc := crc32.Checksum(b[:56], crc32.MakeTable(crc32.Castagnoli))
		binary.BigEndian.PutUint64(b[56:], uint64(crc))
		return b
	})
}

// garbleRing rewrites the ring slots pick chooses among the live ones (the
// file offsets of ring positions head..head+size-1) with garble.
func garbleRing(pick func(live []int) []int, garble func(b []byte, live []int, off int)) ckptDamage {
	return editCkptFile(checkpoint.CheckpointName, func(b []byte) []byte {
		size := binary.BigEndian.Uint64(b[2*8:])
		head := binary.BigEndian.Uint64(b[3*8:])
		capacity := binary.BigEndian.Uint64(b[5*8:])
		var live []int
		for i := range size {
			live = append(live, int(checkpoint.HeaderSlots+(head+i)%capacity)*8)
		}
		if len(live) < 3 {
			panic(fmt.Sprintf("only %d live ring slots", len(live)))
		}
		for _, off := range pick(live) {
			garble(b, live, off)
		}
		return b
	})
}

// invertSlot flips every bit of the pointer: a file id that does not exist.
func invertSlot(b []byte, _ []int, off int) {
	binary.BigEndian.PutUint64(b[off:], ^binary.BigEndian.Uint64(b[off:]))
}

// copyFirstLiveSlot overwrites the slot with the head's pointer: a plausible
// value that refers to a real event (a duplicate).
func copyFirstLiveSlot(b []byte, live []int, off int) {
	copy(b[off:off+8], b[live[0]:live[0]+8])
}
