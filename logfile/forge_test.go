package logfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// Event bytes are the attacker's (STYLE.md 17): frames a producer put into
// an event body must never be taken for records, not even after a crash
// tore the record holding them, when the scan resynchronises inside it.

// forgedFrames are the frames a producer would embed in a body to make a
// resync after a tear apply them: a put of a phantom event, its commit, a
// take of the three committed events at takes, and its commit, with ids
// above the file's (so that the write-order rule lets them through). enc
// encodes them the way an attacker can: for a file whose salt they guessed,
// or copied from another file.
func forgedFrames(t *testing.T, enc func(*Record) []byte, takes []int64) []byte {
	t.Helper()
	ptrs := make([]uint64, len(takes))
	for i, off := range takes {
		ptrs[i] = 1<<32 | uint64(off)
	}
	var out []byte
	for _, r := range []Record{
		{Type: RecordPut, TxID: 1 << 40, WriteOrderID: 1000, Body: []byte("phantom")},
		{Type: RecordCommit, TxID: 1 << 40, WriteOrderID: 1001, CommitType: RecordPut, Count: 1},
		{Type: RecordTake, TxID: 1<<40 + 1, WriteOrderID: 1002, Pointers: ptrs},
		{Type: RecordCommit, TxID: 1<<40 + 1, WriteOrderID: 1003, CommitType: RecordTake, Count: uint64(len(takes))},
	} {
		out = append(out, enc(&r)...)
	}
	return out
}

// TestFramesInABodyAreNotRecords: a log file holds three committed puts,
// then a put whose body embeds forged frames, torn by a crash: cut inside
// its body after the frames, or with its length field garbled and its
// commit after it. A scan must find the three puts and their commit and
// nothing of the forgery, whichever way the attacker built the frames:
// with the salt guessed (0, the obvious guess), from a log file of another
// channel (the same records, sealed with that file's salt), or as version-1
// frames. In a version-1 file (no salt) the same attack works: the limit
// docs/format.md states, pinned here.
func TestFramesInABodyAreNotRecords(t *testing.T) {
	other, err := Create(vfs.NewMem(), "/", 1) // another channel's log file
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	guessed := Framing{version: FormatVersion} // salt 0
	encoders := map[string]func(*Record) []byte{
		"guessed_salt":       func(r *Record) []byte { return mustAppendWith(t, guessed, r) },
		"another_files_salt": func(r *Record) []byte { return mustAppendWith(t, other.Framing(), r) },
		"version_1_frames":   func(r *Record) []byte { return mustAppendWith(t, framingV1, r) },
	}
	for _, name := range slices.Sorted(maps.Keys(encoders)) {
		for _, tear := range []string{"cut_inside", "garbled_length"} {
			t.Run(name+"/"+tear, func(t *testing.T) {
				fsys := vfs.NewMem()
				w, err := Create(fsys, "/", 1) // a fresh random salt the producer never sees
				if err != nil {
					t.Fatal(err)
				}
				recs := scanForged(t, fsys, w, w.Framing(), encoders[name], tear)
				want := []string{"put 2", "put 3", "put 4", "commit 5"}
				if tear == "garbled_length" {
					want = append(want, "commit 7") // the torn put's own commit, after the skip
				}
				if !slices.Equal(recs, want) {
					t.Fatalf("records %v, want %v", recs, want)
				}
			})
		}
	}
	t.Run("version_1_file_is_forgeable", func(t *testing.T) {
		fsys := vfs.NewMem()
		w, err := create(fsys, "/", 1, framingV1)
		if err != nil {
			t.Fatal(err)
		}
		recs := scanForged(t, fsys, w, framingV1, encoders["version_1_frames"], "cut_inside")
		want := []string{"put 2", "put 3", "put 4", "commit 5", "put 1000", "commit 1001", "take 1002", "commit 1003"}
		if !slices.Equal(recs, want) {
			t.Fatalf("records %v, want %v: the forgery a version-1 file cannot stop", recs, want)
		}
	})
}

// scanForged writes the scenario of TestFramesInABodyAreNotRecords through
// w (framing fr), tears the body holding the forgery as tear says, and
// returns the records a full scan finds, as "type woid".
func scanForged(t *testing.T, fsys vfs.FS, w *Writer, fr Framing, enc func(*Record) []byte, tear string) []string {
	t.Helper()
	var offs []int64
	for i, r := range []Record{
		{Type: RecordPut, TxID: 1, WriteOrderID: 2, Body: []byte("e0")},
		{Type: RecordPut, TxID: 1, WriteOrderID: 3, Body: []byte("e1")},
		{Type: RecordPut, TxID: 1, WriteOrderID: 4, Body: []byte("e2")},
		{Type: RecordCommit, TxID: 1, WriteOrderID: 5, CommitType: RecordPut, Count: 3},
	} {
		off, err := w.Write(mustAppendWith(t, fr, &r))
		if err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			offs = append(offs, off)
		}
	}
	forged := forgedFrames(t, enc, offs)
	body := slices.Concat([]byte("an innocent-looking prefix "), forged, bytes.Repeat([]byte{'.'}, 100))
	evil := mustAppendWith(t, fr, &Record{Type: RecordPut, TxID: 2, WriteOrderID: 6, Body: body})
	evilOff, err := w.Write(evil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(mustAppendWith(t, fr, &Record{Type: RecordCommit, TxID: 2, WriteOrderID: 7, CommitType: RecordPut, Count: 1})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenReadWrite(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	switch tear {
	case "cut_inside": // the crash wrote the put up to just past the forgery
		end := evilOff + int64(len(evil)) - 50
		if !bytes.Contains(readAll(t, f)[evilOff:end], forged) {
			t.Fatal("the cut takes the forgery with it")
		}
		if err := f.Truncate(end); err != nil {
			t.Fatal(err)
		}
	case "garbled_length":
		if _, err := f.WriteAt(binary.BigEndian.AppendUint32(nil, 0x00ffffff), evilOff); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := NewScanner(fsys, w.Path(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var recs []string
	for s.Next() {
		recs = append(recs, fmt.Sprintf("%v %d", s.Record().Type, s.Record().WriteOrderID))
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	return recs
}

func mustAppendWith(t testing.TB, fr Framing, r *Record) []byte {
	t.Helper()
	b, err := fr.AppendRecord(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readAll(t *testing.T, f vfs.File) []byte {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}
