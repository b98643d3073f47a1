package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// The sync marks (RecordSynced, Set.Sync) against the torn-overwrite rule:
// one flipped bit in an acknowledged record whose body holds a zero sector
// costs that record, never the acknowledged records after it, in the last
// file of a dir, from a killed process's files, a power loss's and a
// cleanly closed channel's; a write that no fsync covered is still cut
// as a torn tail.

// markedLog writes batches to a one-dir set on mem with zeros laid out
// ahead: batch b holds sizes[b] puts, numbered 0, 1, 2, ... in their
// first 8 body bytes; the put numbered zeroPut has a body of 2,048 bytes
// whose bytes from 8 on are zero. The first synced batches go through
// Set.Sync (as the channel commits), the rest are written and left
// unsynced. It returns the set and each put's offset.
func markedLog(t *testing.T, mem *vfs.MemFS, sizes []int, synced int, zeroPut int) (*Set, []int64) {
	t.Helper()
	if err := errors.Join(mem.MkdirAll("/d", 0o700), mem.SyncDir("/")); err != nil {
		t.Fatal(err)
	}
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/d"}, Preallocate: 256 << 10}, Recovered{})
	rng := rand.New(rand.NewPCG(1, 2))
	var offs []int64
	next := 0
	for b, k := range sizes {
		batch := s.NewBatch()
		for range k {
			body := make([]byte, 600)
			for i := range body {
				body[i] = byte(rng.Uint32() | 1)
			}
			if next == zeroPut {
				body = make([]byte, 2048)
			}
			binary.BigEndian.PutUint64(body, uint64(next)+1)
			next++
			if err := batch.Add(&Record{Type: RecordPut, TxID: uint64(b + 1), Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		a := mustAppendBatch(t, s, 0, batch)
		for _, f := range batch.frames {
			offs = append(offs, a.Base+int64(f))
		}
		if b < synced {
			if err := s.Sync(a); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s, offs
}

// scanPuts scans dir's files in img as recovery does and returns the put
// numbers read, the damaged regions skipped and the last file's tail.
func scanPuts(t *testing.T, img *vfs.MemFS) (puts []int, skips []Skip, tail Tail) {
	t.Helper()
	s, err := OpenSet(SetOptions{FS: img, Dirs: []string{"/d"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range s.Files() {
		sc, _, err := s.Scan(f, 0)
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			if r := sc.Record(); r.Type == RecordPut {
				puts = append(puts, int(binary.BigEndian.Uint64(r.Body))-1)
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		skips = append(skips, sc.Skipped()...)
		tail = sc.Tail()
		sc.Close()
	}
	return puts, skips, tail
}

// openOnlyLog opens the only log file in /d of img for writing.
func openOnlyLog(t *testing.T, img *vfs.MemFS) vfs.File {
	t.Helper()
	names, err := img.List("/d")
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for _, n := range names {
		if _, ok := ParseLogName(n); ok {
			path = "/d/" + n
		}
	}
	f, err := img.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// flipBit flips one bit of the only log file in /d at off.
func flipBit(t *testing.T, img *vfs.MemFS, off int64) {
	t.Helper()
	f := openOnlyLog(t, img)
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func without(s []int, x int) []int {
	var out []int
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

func TestRotBeforeAcknowledgedRecordsCostsOnlyItsRecord(t *testing.T) {
	ones := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		sizes  []int // puts per batch
		synced int   // batches synced (Set.Sync); the rest are not
		zero   int   // the put with the zero sector, which the bit hits
		image  string
		want   []int // puts read back
		tail   Tail
	}{
		// 21 commits of one event each: the bit in the first.
		{"kill, one commit per event", ones(21), 21, 0, "kill", seq(1, 21), TailClean},
		{"power loss, one commit per event", ones(21), 21, 0, "power", seq(1, 21), TailClean},
		{"clean close, one commit per event", ones(21), 21, 0, "close", seq(1, 21), TailClean},
		// One commit of 21 events, the last commit before the stop: only
		// the mark written after its fsync vouches for it.
		{"kill, one commit of all", []int{21}, 1, 0, "kill", seq(1, 21), TailClean},
		{"clean close, one commit of all", []int{21}, 1, 0, "close", seq(1, 21), TailClean},
		// No commit synced (NoSync): only Close's own mark vouches.
		{"clean close, nothing synced before", []int{21}, 0, 0, "close", seq(1, 21), TailClean},
		{"kill, bit in the middle of the last commit", []int{5, 5, 11}, 3, 13, "kill", without(seq(0, 21), 13), TailClean},
		// A kill leaves the unsynced commit in the page cache: its
		// records are read back too.
		{"kill, unsynced last commit", []int{5, 5, 11}, 2, 3, "kill", without(seq(0, 21), 3), TailClean},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			s, offs := markedLog(t, mem, tc.sizes, tc.synced, tc.zero)
			var img *vfs.MemFS
			switch tc.image {
			case "kill": // the page cache outlives the process
				s.Abandon()
				img = mem
			case "power":
				s.Abandon()
				img = mem.CrashClone(true, 7)
			case "close":
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				img = mem.CrashClone(true, 7)
			}
			// One bit of the zero-body put's payload checksum: the frame
			// fails, and its body holds whole zero sectors.
			flipBit(t, img, offs[tc.zero]+9)
			puts, skips, tail := scanPuts(t, img)
			if fmt.Sprint(puts) != fmt.Sprint(tc.want) || len(skips) != 1 || tail != tc.tail {
				t.Fatalf("read back puts %v, %d damaged regions, tail %v; want %v, 1, %v", puts, len(skips), tail, tc.want, tc.tail)
			}
			if sk := skips[0]; sk.Offset != offs[tc.zero] {
				t.Fatalf("damaged region at %d, want the damaged put's offset %d", sk.Offset, offs[tc.zero])
			}
		})
	}
}

// TestTornWriteAfterTheLastMarkIsCut: a write no fsync covered, torn the
// way a power loss tears an overwrite (a zero sector in a record, records
// after it whole), still ends the scan there, marks or not: the marks
// before it vouch only for what was synced before them.
func TestTornWriteAfterTheLastMarkIsCut(t *testing.T) {
	mem := vfs.NewMem()
	// Batches 0..3 synced (puts 0..7), batch 4 (puts 8..15) written only.
	s, offs := markedLog(t, mem, []int{2, 2, 2, 2, 8}, 4, -1)
	s.Abandon()
	// The power loss kept the unsynced batch but for one sector of put 9.
	f := openOnlyLog(t, mem)
	sector := (offs[9]/sectorSize + 1) * sectorSize
	if _, err := f.WriteAt(make([]byte, sectorSize), sector); err != nil {
		t.Fatal(err)
	}
	f.Close()
	puts, skips, tail := scanPuts(t, mem)
	if fmt.Sprint(puts) != fmt.Sprint(seq(0, 9)) || len(skips) != 0 || tail != TailTorn {
		t.Fatalf("read back puts %v, %d damaged regions, tail %v; want %v, none, torn", puts, len(skips), tail, seq(0, 9))
	}
}

// TestSyncMarks: Set.Sync writes one mark after an fsync that made more
// of the file durable, none when nothing new was synced; a mark is never
// returned by a scan, and claims no more than was written before it.
func TestSyncMarks(t *testing.T) {
	mem := vfs.NewMem()
	if err := errors.Join(mem.MkdirAll("/d", 0o700), mem.SyncDir("/")); err != nil {
		t.Fatal(err)
	}
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/d"}}, Recovered{})
	put := func() Appended {
		b := s.NewBatch()
		if err := b.Add(&Record{Type: RecordPut, TxID: 1, Body: binary.BigEndian.AppendUint64(nil, 1)}); err != nil {
			t.Fatal(err)
		}
		return mustAppendBatch(t, s, 0, b)
	}
	a1 := put()
	if err := s.Sync(a1); err != nil {
		t.Fatal(err)
	}
	end1 := a1.W.Size()
	if err := s.Sync(a1); err != nil { // nothing new synced: no second mark
		t.Fatal(err)
	}
	if a1.W.Size() != end1 {
		t.Fatalf("a second mark for the same fsync: size %d, want %d", a1.W.Size(), end1)
	}
	a2 := put()
	if a2.Base != end1 || end1 <= a1.End {
		t.Fatalf("batch 2 at %d, the mark ended at %d after batch 1's end %d", a2.Base, end1, a1.End)
	}
	w := a1.W
	s.Abandon()
	f, err := mem.Open(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mark := make([]byte, end1-a1.End)
	if _, err := f.ReadAt(mark, a1.End); err != nil {
		t.Fatal(err)
	}
	r, n, err := w.Framing().DecodeRecord(mark)
	if err != nil || n != len(mark) || r.Type != RecordSynced || r.SyncedTo != a1.End || r.TxID != 0 || r.WriteOrderID != 0 {
		t.Fatalf("mark % x: %+v, %d bytes, %v; want synced to %d", mark, r, n, err, a1.End)
	}
	puts, skips, _ := scanPuts(t, mem)
	if len(puts) != 2 || len(skips) != 0 {
		t.Fatalf("scan: puts %v, skips %v", puts, skips)
	}
	if !bytes.Equal(mark[:4], binary.BigEndian.AppendUint32(nil, uint32(n-FrameHeaderSize))) {
		t.Fatalf("mark length field % x", mark[:4])
	}
}

// TestSnapshotSyncAfterARoll: a writer active at a Snapshot that a roll
// has synced and closed since is no error for the snapshot's Sync (a
// commit rolled the dir while the checkpoint ran); it was synced to its
// end before it was closed.
func TestSnapshotSyncAfterARoll(t *testing.T) {
	mem := vfs.NewMem()
	if err := errors.Join(mem.MkdirAll("/d", 0o700), mem.SyncDir("/")); err != nil {
		t.Fatal(err)
	}
	s := startSet(t, SetOptions{FS: mem, Dirs: []string{"/d"}}, Recovered{})
	b := s.NewBatch()
	if err := b.Add(&Record{Type: RecordPut, TxID: 1, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	mustAppendBatch(t, s, 0, b)
	sn := s.Snapshot()
	if err := s.Roll(0); err != nil {
		t.Fatal(err)
	}
	if err := sn.Sync(); err != nil {
		t.Fatalf("sync of a snapshot whose writer was rolled since: %v", err)
	}
}
