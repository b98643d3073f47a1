package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// The compatibility rule (docs/format.md, "Compatibility"): a header of a
// newer format version, and a checksummed record of a type a newer release
// added, are refused with a *corrupt.FormatError, never treated as damage.

// requireNewer checks err is a *corrupt.FormatError, and not corruption, for
// file at off, declaring version (and recordType, 0 for a too new version).
func requireNewer(t testing.TB, err error, file string, off int64, version uint64, recordType uint8) {
	t.Helper()
	var fe *corrupt.FormatError
	if !errors.As(err, &fe) || !errors.Is(err, corrupt.ErrUnsupportedFormat) {
		t.Fatalf("got %v (%T), want a *corrupt.FormatError", err, err)
	}
	if errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("%v matches ErrCorrupt: a newer file is not damage", err)
	}
	if fe.File != file || fe.Offset != off || fe.Version != version || fe.Supported != MaxFormatVersion || fe.RecordType != recordType {
		t.Fatalf("got %+v, want file %q offset %d version %d supported %d record type %d",
			fe, file, off, version, MaxFormatVersion, recordType)
	}
}

// TestOlderVersionsRead: the golden files of versions 1 and 2 (TestGolden
// reads them back record by record) open with the framing of their
// version, and the records of version 3 are accepted in a file of any
// version: no older release wrote them, and each frame is sealed for its
// file, so their type is all that tells them apart.
func TestOlderVersionsRead(t *testing.T) {
	for _, v := range []uint16{1, 2} {
		r, err := OpenReader(vfs.OS(), filepath.Join("testdata", fmt.Sprintf("v%d", v), LogName(1)))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Framing().Version(); got != v {
			t.Errorf("testdata/v%d: version %d", v, got)
		}
		r.Close()
	}
	for _, fr := range []Framing{framingV1, testFramingV2} {
		t.Run(fmt.Sprintf("v%d", fr.version), func(t *testing.T) {
			recs := groupRecords()
			path, offs := writeLogWith(t, t.TempDir(), 1, recs, fr)
			got, gotOffs, s := scanAll(t, path, 0)
			if s.Framing() != fr || !slices.Equal(gotOffs, offs) || s.Tail() != TailClean {
				t.Fatalf("framing %v, records at %v, tail %v; want %v, %v, clean", s.Framing(), gotOffs, s.Tail(), fr, offs)
			}
			for i := range recs {
				requireSameRecord(t, got[i], recs[i])
			}
		})
	}
}

// newerHeader is the header of log file id (testFraming) with format
// version v and its CRC recomputed, so that only the version is "wrong".
func newerHeader(id uint32, v uint16) []byte {
	b := testHeader(id)
	binary.BigEndian.PutUint16(b[versionOffset:], v)
	binary.BigEndian.PutUint32(b[20:], crc32c(b[:20]))
	return b
}

// newer is the first format version this build does not read, and
// newerRecType the first record type it does not know.
const (
	newer        = MaxFormatVersion + 1
	newerRecType = MaxRecordType + 1
)

// TestVersions pins what this build writes and reads: it writes version 7
// (Create, AppendFileHeader) without encryption, 8 with it (4 and 6
// before), 9 and 10 for a recycled file (above 8, so that a release reading
// up to 8 refuses it rather than cut its leftovers), and reads 1 to 10; 11
// is newer, and so is record type 18 (13 and 14, filters, 15, duplicates, 16, retries, and 17, groups with take options, are this build's, 12, the
// sync mark, is this build's).
func TestVersions(t *testing.T) {
	if FormatVersion != 7 || EncryptedVersion != 5 || ChannelBoundVersion != 6 || TimedVersion != 7 || TimedBoundVersion != 8 ||
		RecycledVersion != 9 || RecycledBoundVersion != 10 ||
		MaxFormatVersion != 10 || newer != 11 || newerRecType != 18 {
		t.Fatalf("FormatVersion %d, EncryptedVersion %d, ChannelBoundVersion %d, TimedVersion %d, TimedBoundVersion %d, RecycledVersion %d, RecycledBoundVersion %d, MaxFormatVersion %d, first newer version %d, first newer record type %d; want 7, 5, 6, 7, 8, 9, 10, 10, 11, 18",
			FormatVersion, EncryptedVersion, ChannelBoundVersion, TimedVersion, TimedBoundVersion, RecycledVersion, RecycledBoundVersion, MaxFormatVersion, newer, newerRecType)
	}
	w, err := Create(vfs.OS(), t.TempDir(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint16(b[versionOffset:]); v != 7 || len(b) != HeaderSize || w.Framing().Version() != 7 {
		t.Fatalf("Create wrote version %d, %d bytes, framing %v; want version 7, %d bytes", v, len(b), w.Framing(), HeaderSize)
	}
	for _, fr := range []Framing{framingV1, testFramingV2, testFramingV3, testFraming, testFramingV7} {
		id, got, err := decodeFileHeader(appendFileHeader(nil, 5, fr))
		if err != nil || id != 5 || got != fr {
			t.Fatalf("%v: read back as file %d, %v, %v", fr, id, got, err)
		}
	}
}

func TestDecodeFileHeaderNewerVersion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       []byte
		version uint64
	}{
		{"version_newer", newerHeader(7, newer), newer},
		{"version_max", newerHeader(7, 0xFFFF), 0xFFFF},
		// Magic and version are read before what a newer version may
		// change: the header's CRC and its length.
		{"version_7_other_crc", cat(newerHeader(7, newer)[:20], []byte{1, 2, 3, 4}), newer},
		{"version_7_shorter_header", newerHeader(7, newer)[:versionEnd], newer},
		{"version_7_longer_header", cat(newerHeader(7, newer)[:8], make([]byte, 60)), newer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFileHeader(tc.b)
			requireNewer(t, err, "", versionOffset, tc.version, 0)
		})
	}
	// A wrong magic is damage whatever the version says.
	b := newerHeader(7, newer)
	b[0] = 'X'
	_, err := DecodeFileHeader(b)
	requireCorrupt(t, err, "", 0)
}

// TestOpenNewerLogFile: every way of opening a log file refuses one of a
// newer version, the salvage paths included, and names the file.
func TestOpenNewerLogFile(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeLog(t, dir, 3, sampleRecords()[:4])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copy(b, newerHeader(3, newer))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := vfs.OS()
	for _, tc := range []struct {
		name string
		open func() (interface{ Close() error }, error)
	}{
		{"OpenReader", func() (interface{ Close() error }, error) { return OpenReader(fsys, path) }},
		{"OpenSalvageReader", func() (interface{ Close() error }, error) { return OpenSalvageReader(fsys, path) }},
		{"NewScanner", func() (interface{ Close() error }, error) { return NewScanner(fsys, path, 0) }},
		{"NewSalvageScanner", func() (interface{ Close() error }, error) { return NewSalvageScanner(fsys, path, 0) }},
		{"OpenScanner", func() (interface{ Close() error }, error) {
			sc, salvaged, err := OpenScanner(fsys, path, 0)
			if salvaged {
				t.Error("OpenScanner salvaged a newer file")
			}
			return sc, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.open()
			if err == nil {
				c.Close()
			}
			requireNewer(t, err, path, versionOffset, newer, 0)
		})
	}
}

// newerRecordLog writes a log file of sampleRecords' first four records,
// then frame (bytes the writer never produces), then the fifth record. It
// returns the path and the frame's offset.
func newerRecordLog(t *testing.T, frame []byte) (string, int64) {
	t.Helper()
	recs := sampleRecords()
	path, offs := writeLog(t, t.TempDir(), 1, recs[:4])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := offs[3] + int64(testFraming.EncodedSize(&recs[3]))
	if _, err := f.Write(cat(frame, mustAppend(t, nil, &recs[4]))); err != nil {
		t.Fatal(err)
	}
	return path, off
}

func TestUnknownRecordType(t *testing.T) {
	type9 := frameOf(cat(payloadHead(newerRecType), []byte("a body of a newer kind")))
	commitOf9 := frameOf(cat(payloadHead(RecordCommit), []byte{byte(newerRecType), 1}))
	badCRC := bytes.Clone(type9)
	badCRC[len(badCRC)-1] ^= 1
	for _, tc := range []struct {
		name       string
		frame      []byte
		recordType uint8 // 0: damage, not a newer record
	}{
		{"type_18", type9, 18},
		{"type_255", frameOf(payloadHead(255)), 255},
		{"type_18_no_body", frameOf(payloadHead(newerRecType)), 18},
		{"commit_of_type_18", commitOf9, 18},
		{"type_17_no_body", frameOf(payloadHead(typeOptionGroups)), 0},
		{"commit_of_type_17", frameOf(cat(payloadHead(RecordCommit), []byte{17, 1})), 0},
		{"commit_of_type_200", frameOf(cat(payloadHead(RecordCommit), []byte{200, 1})), 200},
		// Damage as before: a frame whose checksum does not match, and
		// type 0, which no release writes. Types 6 to 10 are this build's:
		// a bad body of one is damage, and so is a commit of one.
		{"type_11_bad_checksum", badCRC, 0},
		{"type_9_no_body", frameOf(payloadHead(RecordDeliver)), 0},
		{"type_10_no_pointer", frameOf(cat(payloadHead(RecordMove), []byte{1, 0})), 0},
		{"type_9_count_0", frameOf(cat(payloadHead(RecordDeliver), []byte{1, 1, 0, 0, 0, 1, 0, 0, 0, 36, 0})), 0},
		{"commit_of_type_9", frameOf(cat(payloadHead(RecordCommit), []byte{9, 1})), 0},
		{"type_12_no_body", frameOf(payloadHead(RecordSynced)), 0},
		{"type_12_zero_offset", frameOf(cat(payloadHead(RecordSynced), []byte{0})), 0},
		{"commit_of_type_12", frameOf(cat(payloadHead(RecordCommit), []byte{12, 1})), 0},
		{"type_0", frameOf(payloadHead(0)), 0},
		{"type_6_bad_body", frameOf(cat(payloadHead(typeGroupTake), []byte("a body of a newer kind"))), 0},
		{"type_8_no_body", frameOf(payloadHead(RecordSkip)), 0},
		{"commit_of_type_6", frameOf(cat(payloadHead(RecordCommit), []byte{6, 1})), 0},
		{"commit_of_type_8", frameOf(cat(payloadHead(RecordCommit), []byte{8, 1})), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := testFraming.DecodeRecord(tc.frame)
			if tc.recordType == 0 {
				requireCorrupt(t, err, "", -1)
			} else {
				requireNewer(t, err, "", -1, uint64(testFraming.version), tc.recordType)
			}
			path, off := newerRecordLog(t, tc.frame)
			for _, mapped := range []bool{false, true} {
				checkScanStops(t, path, off, mapped, tc.recordType)
			}
			r, err := OpenReader(vfs.OS(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, err = r.ReadRecord(off)
			if tc.recordType == 0 {
				requireCorrupt(t, err, path, off)
			} else {
				requireNewer(t, err, path, off, uint64(testFraming.version), tc.recordType)
			}
		})
	}
}

// checkScanStops scans the file of newerRecordLog: with a newer record at
// off the scan returns the four records before it and stops there with a
// *corrupt.FormatError (no resync, no skip); with damage at off it steps over
// it to the fifth record as before.
func checkScanStops(t *testing.T, path string, off int64, mapped bool, recordType uint8) {
	t.Helper()
	sc, salvaged, err := OpenScanner(vfs.OS(), path, 0)
	if err != nil || salvaged {
		t.Fatalf("OpenScanner: salvaged %v, %v", salvaged, err)
	}
	defer sc.Close()
	if mapped {
		if !sc.MapFile() || !sc.CheckAhead() {
			t.Fatal("could not map the file")
		}
	}
	n := 0
	for sc.Next() {
		n++
	}
	if recordType == 0 {
		if sc.Err() != nil || n != 5 || len(sc.Skipped()) != 1 || sc.Skipped()[0].Offset != off {
			t.Fatalf("mapped=%v: damage: %d records, skipped %v, err %v; want 5 records and a skip at %d", mapped, n, sc.Skipped(), sc.Err(), off)
		}
		return
	}
	requireNewer(t, sc.Err(), path, off, uint64(testFraming.version), recordType)
	if n != 4 || len(sc.Skipped()) != 0 || sc.End() != off {
		t.Fatalf("mapped=%v: %d records, skipped %v, end %d; want 4 records, no skip, end %d", mapped, n, sc.Skipped(), sc.End(), off)
	}
}

// TestNewerRecordInDamageIsDamage pins the documented limit: a resync looks
// for records of this build only, so a newer record right after damage is
// part of the damaged region.
func TestNewerRecordInDamageIsDamage(t *testing.T) {
	// Write-order ids above the last record's (13), so only their types
	// keep the resync from landing on them.
	head := func(t RecordType) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{byte(t)}, 9), 100)
	}
	newer := frameOf(cat(head(newerRecType), []byte("newer")))
	commitOf9 := frameOf(cat(head(RecordCommit), []byte{byte(newerRecType), 1}))
	garbage := []byte("damaged bytes, not a frame")
	path, off := newerRecordLog(t, cat(garbage, newer, commitOf9))
	sc, err := NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	n := 0
	for sc.Next() {
		n++
	}
	want := int64(len(garbage) + len(newer) + len(commitOf9))
	if sc.Err() != nil || n != 5 || len(sc.Skipped()) != 1 || sc.Skipped()[0].Offset != off || sc.Skipped()[0].Length != want {
		t.Fatalf("%d records, skipped %+v, err %v; want 5 records and one skip of %d bytes at %d", n, sc.Skipped(), sc.Err(), want, off)
	}
}
