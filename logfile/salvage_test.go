package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Every frame of a version-2 file is checksummed with the salt in its
// header, so a damaged header must not take the salt with it: the header
// holds it twice, and recoverFraming finds it again from the copy that
// checks out, or from the file's first two records (recoverFraming's doc
// lists the steps). These tests damage the header in each way and check
// that the records still read back (salvage scanner and reader), that
// RewriteHeader writes a header with the same framing, and where the salt
// is truly lost, that nothing is taken for a record.
func TestDamagedHeaderKeepsTheSalt(t *testing.T) {
	recs := sampleRecords()[:4]
	flip := func(offs ...int) func(b []byte) {
		return func(b []byte) {
			for _, o := range offs {
				b[o] ^= 0x40
			}
		}
	}
	for _, tc := range []struct {
		name   string
		fr     Framing
		nrecs  int // records in the file
		damage func(b []byte)
		lost   bool // the salt cannot be recovered: no record reads back
	}{
		{"bad_magic", testFraming, 4, flip(0), false},
		{"first_copy_damaged", testFraming, 4, flip(13), false},
		{"main_checksum_damaged", testFraming, 4, flip(21), false},
		{"second_copy_damaged", testFraming, 4, flip(27), false},
		{"both_copies_damaged", testFraming, 4, flip(13, 27), false},
		{"zeroed", testFraming, 4, func(b []byte) { clear(b[:HeaderSize]) }, false},
		// Without its version field, a file's first commit of puts
		// tells a version with commit times from one without.
		{"v7_zeroed", testFramingV7, 4, func(b []byte) { clear(b[:HeaderSize]) }, false},
		{"v7_version_0", testFramingV7, 4, func(b []byte) { b[versionOffset+1] = 0 }, false},
		{"zeroed_first_record_damaged", testFraming, 4, func(b []byte) {
			clear(b[:HeaderSize])
			b[HeaderSize+FrameHeaderSize+20] ^= 1
		}, true},
		// One record cannot confirm a salt derived from it.
		{"zeroed_one_record", testFraming, 1, func(b []byte) { clear(b[:HeaderSize]) }, true},
		// A version-2 file keeps its version: its version field, when
		// it still says 2, gives the version of a salt found again.
		{"v2_bad_magic", testFramingV2, 4, flip(0), false},
		{"v2_first_copy_damaged", testFramingV2, 4, flip(13), false},
		{"v2_second_copy_damaged", testFramingV2, 4, flip(27), false},
		{"v2_both_copies_damaged", testFramingV2, 4, flip(13, 27), false},
		{"v1_bad_magic", framingV1, 4, flip(0), false},
		{"v1_zeroed", framingV1, 4, func(b []byte) { clear(b[:headerSizeV1]) }, false},
		{"v1_bad_checksum", framingV1, 4, flip(13), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, offs := writeLogWith(t, t.TempDir(), 1, recs[:tc.nrecs], tc.fr)
			edit(t, path, tc.damage)
			if _, err := NewScanner(vfs.OS(), path, 0); !errors.Is(err, corrupt.ErrCorrupt) {
				t.Fatalf("NewScanner on the damaged header: %v", err)
			}
			s, err := NewSalvageScanner(vfs.OS(), path, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !tc.lost && s.Framing() != tc.fr {
				t.Fatalf("salvaged framing %v, want %v", s.Framing(), tc.fr)
			}
			n := 0
			for s.Next() {
				if s.Offset() != offs[n] {
					t.Fatalf("record %d at %d, want %d", n, s.Offset(), offs[n])
				}
				n++
			}
			sk := s.Skipped()
			if len(sk) == 0 || sk[0].Offset != 0 || sk[0].Length != tc.fr.HeaderSize() {
				t.Fatalf("skipped %+v, want the header first", sk)
			}
			if tc.lost {
				if n != 0 || s.Tail() != TailTorn || s.End() != tc.fr.HeaderSize() {
					t.Fatalf("salt lost: %d records, tail %v at %d; want none and a torn tail after the header", n, s.Tail(), s.End())
				}
			} else if n != tc.nrecs || len(sk) != 1 || s.Tail() != TailClean {
				t.Fatalf("%d of %d records, skips %+v, tail %v", n, tc.nrecs, sk, s.Tail())
			}
			r, err := OpenSalvageReader(vfs.OS(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.ReadRecord(offs[0]); (err != nil) != tc.lost {
				t.Fatalf("salvage reader: %v", err)
			}

			// The rewritten header keeps the framing the records need.
			keep, err := RewriteHeader(vfs.OS(), path)
			if err != nil || keep == "" {
				t.Fatalf("RewriteHeader: %q, %v", keep, err)
			}
			s2, err := NewScanner(vfs.OS(), path, 0)
			if err != nil {
				t.Fatalf("after RewriteHeader: %v", err)
			}
			defer s2.Close()
			n = 0
			for s2.Next() {
				n++
			}
			switch {
			case tc.lost && (n != 0 || s2.Tail() != TailTorn || s2.Framing() == tc.fr):
				t.Fatalf("rewritten over a lost salt: %d records, tail %v, same salt %v", n, s2.Tail(), s2.Framing() == tc.fr)
			case !tc.lost && (n != tc.nrecs || s2.Framing() != tc.fr || len(s2.Skipped()) != 0):
				t.Fatalf("rewritten: %d of %d records, framing kept %v, skips %v", n, tc.nrecs, s2.Framing() == tc.fr, s2.Skipped())
			}
		})
	}
}

// TestCreateDrawsAFreshSalt: every new file has its own random salt, which
// its header holds and its writer seals with.
func TestCreateDrawsAFreshSalt(t *testing.T) {
	dir := t.TempDir()
	var seen []Framing
	for id := uint32(1); id <= 3; id++ {
		w, err := Create(vfs.OS(), dir, id)
		if err != nil {
			t.Fatal(err)
		}
		fr := w.Framing()
		if _, err := w.Write(mustAppendWith(t, fr, &Record{Type: RecordRollback, TxID: 1, WriteOrderID: 1})); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReader(vfs.OS(), w.Path())
		if err != nil {
			t.Fatal(err)
		}
		if r.Framing() != fr || fr.Version() != FormatVersion || fr == testFraming {
			t.Fatalf("file %d: reader framing %v, writer %v", id, r.Framing(), fr)
		}
		if _, err := r.ReadRecord(HeaderSize); err != nil {
			t.Fatal(err)
		}
		r.Close()
		for _, o := range seen {
			if o == fr {
				t.Fatalf("file %d has the salt of an earlier file", id)
			}
		}
		seen = append(seen, fr)
	}
}

// TestFramingNeverPrintsItsSalt: whatever the verb, a Framing formats as
// its version only.
func TestFramingNeverPrintsItsSalt(t *testing.T) {
	fr := Framing{version: 2, salt: 0x1122334455667788}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%X", "%q"} {
		got := fmt.Sprintf(verb, fr)
		if got != "log format v2" {
			t.Errorf("%s: %q", verb, got)
		}
		for _, part := range []string{"1122", "3344", "5566", "7788", "287454020", "1234605616436508552"} {
			if bytes.Contains([]byte(got), []byte(part)) {
				t.Errorf("%s prints the salt: %q", verb, got)
			}
		}
	}
}

// edit rewrites the file at path with f applied to its bytes.
func edit(t *testing.T, path string, f func(b []byte)) {
	t.Helper()
	fsys := vfs.OS()
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	f(b)
	writeAt(t, path, 0, b)
}

// TestPadRegionKeepsTheFileVersion: a repair of a version-1 file writes
// version-1 padding (no salt; 25 bytes the smallest), so a 27-byte record,
// too short for version-2 padding, is padded and the scan reads on.
func TestPadRegionKeepsTheFileVersion(t *testing.T) {
	recs := sampleRecords()[:4]
	path, offs := writeLogWith(t, t.TempDir(), 1, recs, framingV1)
	if n := offs[2] - offs[1]; n != 27 {
		t.Fatalf("record 1 is %d bytes", n)
	}
	if _, err := PadRegion(vfs.OS(), path, offs[1], offs[2]-offs[1]); err != nil {
		t.Fatal(err)
	}
	s, err := NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var types []RecordType
	for s.Next() {
		types = append(types, s.Record().Type)
	}
	want := []RecordType{RecordPut, RecordPadding, RecordPut, RecordCommit}
	if s.Framing() != framingV1 || !slices.Equal(types, want) || len(s.Skipped()) != 0 || s.Tail() != TailClean {
		t.Fatalf("%v: records %v, skips %v, tail %v; want %v", s.Framing(), types, s.Skipped(), s.Tail(), want)
	}
}
