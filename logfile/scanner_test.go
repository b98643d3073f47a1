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

// scanAll scans path from start and returns copies of the records and their
// offsets; it fails the test on an I/O error.
// mapScans makes scanAll read through MapFile, and checkAhead also with
// CheckAhead (TestMappedScanner).
var mapScans, checkAhead bool

func scanAll(t *testing.T, path string, start int64) ([]Record, []int64, *Scanner) {
	t.Helper()
	s, err := NewScanner(vfs.OS(), path, start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	if mapScans && !s.MapFile() {
		t.Fatal("MapFile did not map the file")
	}
	if checkAhead {
		if !s.CheckAhead() {
			t.Fatal("CheckAhead did not start")
		}
		// Let the checker run to its end first, so the scan below trusts
		// every frame it verified (in a real scan it is a race).
		s.ahead.wg.Wait()
	}
	var recs []Record
	var offs []int64
	for s.Next() {
		r := *s.Record()
		r.Body = bytes.Clone(r.Body)
		r.Pointers = append([]uint64(nil), r.Pointers...)
		r.Skip = slices.Clone(r.Skip)
		if r.Headers != nil {
			h := make(map[string]string, len(r.Headers))
			for k, v := range r.Headers {
				h[k] = v
			}
			r.Headers = h
		}
		recs = append(recs, r)
		offs = append(offs, s.Offset())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if s.Next() {
		t.Fatal("Next returned true after returning false")
	}
	return recs, offs, s
}

func TestScannerTails(t *testing.T) {
	recs := sampleRecords()
	lastFrame := mustAppend(t, nil, &recs[len(recs)-1])
	for _, tc := range []struct {
		name string
		// damage changes the file whose records start at offs and which
		// ends at end; it returns how many records stay valid.
		damage func(t *testing.T, path string, offs []int64, end int64) int
		tail   Tail
	}{
		{"clean_eof", func(*testing.T, string, []int64, int64) int { return len(recs) }, TailClean},
		{"zero_fill", func(t *testing.T, path string, _ []int64, _ int64) int {
			appendToFile(t, path, make([]byte, 3*scanBufSize+5)) // longer than the buffer
			return len(recs)
		}, TailClean},
		{"zero_fill_shorter_than_frame_header", func(t *testing.T, path string, _ []int64, _ int64) int {
			appendToFile(t, path, make([]byte, 3))
			return len(recs)
		}, TailClean},
		{"zero_fill_then_garbage", func(t *testing.T, path string, _ []int64, _ int64) int {
			appendToFile(t, path, append(make([]byte, scanBufSize+100), 1))
			return len(recs)
		}, TailTorn},
		{"half_written_last_frame", func(t *testing.T, path string, offs []int64, end int64) int {
			truncate(t, path, end-int64(len(lastFrame))/2)
			return len(recs) - 1
		}, TailTorn},
		{"last_frame_cut_inside_frame_header", func(t *testing.T, path string, offs []int64, _ int64) int {
			truncate(t, path, offs[len(offs)-1]+6)
			return len(recs) - 1
		}, TailTorn},
		// The high bytes of a small length are zero: cut there, a torn frame
		// cannot be told from zero fill, and nothing of it was valid anyway.
		{"last_frame_cut_to_its_zero_length_bytes", func(t *testing.T, path string, offs []int64, _ int64) int {
			truncate(t, path, offs[len(offs)-1]+3)
			return len(recs) - 1
		}, TailClean},
		{"last_frame_cut_then_zero_filled", func(t *testing.T, path string, offs []int64, end int64) int {
			truncate(t, path, end-5)
			appendToFile(t, path, make([]byte, 4096))
			return len(recs) - 1
		}, TailTorn},
		{"garbage_after_last_record", func(t *testing.T, path string, _ []int64, _ int64) int {
			appendToFile(t, path, []byte("not a frame at all"))
			return len(recs)
		}, TailTorn},
		{"length_over_max_after_last_record", func(t *testing.T, path string, _ []int64, _ int64) int {
			appendToFile(t, path, binary.BigEndian.AppendUint32(nil, MaxPayloadSize+1))
			return len(recs)
		}, TailTorn},
		{"flipped_byte_in_last_record", func(t *testing.T, path string, offs []int64, end int64) int {
			flipByte(t, path, end-2)
			return len(recs) - 1
		}, TailTorn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, offs := writeLog(t, t.TempDir(), 1, recs)
			end := fileSize(t, path)
			valid := tc.damage(t, path, offs, end)
			got, gotOffs, s := scanAll(t, path, 0)
			if len(got) != valid {
				t.Fatalf("scanned %d records, want %d", len(got), valid)
			}
			for i := range got {
				requireSameRecord(t, got[i], recs[i])
				if gotOffs[i] != offs[i] {
					t.Fatalf("record %d at offset %d, want %d", i, gotOffs[i], offs[i])
				}
			}
			wantEnd := end
			if valid < len(recs) {
				wantEnd = offs[valid]
			}
			if s.End() != wantEnd {
				t.Fatalf("End %d, want %d", s.End(), wantEnd)
			}
			if s.Tail() != tc.tail {
				t.Fatalf("Tail %v, want %v", s.Tail(), tc.tail)
			}
			if tc.tail == TailTorn {
				requireCorrupt(t, s.TailError(), path, wantEnd)
			} else if s.TailError() != nil {
				t.Fatalf("TailError %v on a clean tail", s.TailError())
			}
		})
	}
}

// TestScannerSkipsDamageInTheMiddle: a damaged record followed by valid ones
// is skipped (and reported), the scan goes on.
func TestScannerSkipsDamageInTheMiddle(t *testing.T) {
	recs := sampleRecords()
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string, offs []int64)
		damaged []int // indexes of the records the damage destroys
		tail    Tail
	}{
		{"flipped_payload_byte", func(t *testing.T, path string, offs []int64) {
			flipByte(t, path, offs[4]+FrameHeaderSize+3)
		}, []int{4}, TailClean},
		{"flipped_checksum_byte", func(t *testing.T, path string, offs []int64) {
			flipByte(t, path, offs[4]+5)
		}, []int{4}, TailClean},
		{"huge_length", func(t *testing.T, path string, offs []int64) {
			writeAt(t, path, offs[4], []byte{0x7f, 0xff, 0xff, 0xff})
		}, []int{4}, TailClean},
		{"length_into_the_next_record", func(t *testing.T, path string, offs []int64) {
			writeAt(t, path, offs[4], binary.BigEndian.AppendUint32(nil, uint32(offs[6]-offs[4])))
		}, []int{4}, TailClean},
		{"zeroed_record", func(t *testing.T, path string, offs []int64) {
			writeAt(t, path, offs[4], make([]byte, offs[5]-offs[4]))
		}, []int{4}, TailClean},
		{"first_record", func(t *testing.T, path string, offs []int64) {
			flipByte(t, path, offs[0]+FrameHeaderSize)
		}, []int{0}, TailClean},
		{"two_records_apart", func(t *testing.T, path string, offs []int64) {
			flipByte(t, path, offs[2]+FrameHeaderSize+1)
			flipByte(t, path, offs[6]+FrameHeaderSize+1)
		}, []int{2, 6}, TailClean},
		{"two_adjacent_records", func(t *testing.T, path string, offs []int64) {
			flipByte(t, path, offs[2]+FrameHeaderSize+1)
			flipByte(t, path, offs[3]+FrameHeaderSize+1)
		}, []int{2, 3}, TailClean},
		{"damage_and_torn_tail", func(t *testing.T, path string, offs []int64) {
			flipByte(t, path, offs[4]+FrameHeaderSize+3)
			appendToFile(t, path, []byte("garbage at the end"))
		}, []int{4}, TailTorn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, offs := writeLog(t, t.TempDir(), 1, recs)
			end := fileSize(t, path)
			tc.damage(t, path, offs)
			got, gotOffs, s := scanAll(t, path, 0)
			var want []int
			for i := range recs {
				if !slices.Contains(tc.damaged, i) {
					want = append(want, i)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("scanned %d records, want %d", len(got), len(want))
			}
			for i, w := range want {
				requireSameRecord(t, got[i], recs[w])
				if gotOffs[i] != offs[w] {
					t.Fatalf("record %d at offset %d, want %d", w, gotOffs[i], offs[w])
				}
			}
			// Adjacent damaged records form one skipped region.
			var wantSkips []Skip
			for _, d := range tc.damaged {
				if n := len(wantSkips); n > 0 && wantSkips[n-1].Offset+wantSkips[n-1].Length == offs[d] {
					wantSkips[n-1].Length += offs[d+1] - offs[d]
					continue
				}
				wantSkips = append(wantSkips, Skip{Offset: offs[d], Length: offs[d+1] - offs[d]})
			}
			skips := s.Skipped()
			if len(skips) != len(wantSkips) {
				t.Fatalf("skipped %v, want %v", skips, wantSkips)
			}
			for i, sk := range skips {
				if sk.Offset != wantSkips[i].Offset || sk.Length != wantSkips[i].Length {
					t.Fatalf("skip %d = [%d,+%d), want [%d,+%d)", i, sk.Offset, sk.Length, wantSkips[i].Offset, wantSkips[i].Length)
				}
				requireCorrupt(t, sk.Err, path, sk.Offset)
			}
			if s.Tail() != tc.tail || s.End() != end {
				t.Fatalf("tail %v end %d, want %v end %d", s.Tail(), s.End(), tc.tail, end)
			}
		})
	}
}

// TestScannerResyncsOnGroupRecords: the records of version 3 (a group
// take, groups, skip) are resync points like put, take, rollback and
// commit: damage to the record before one of them skips that record only.
func TestScannerResyncsOnGroupRecords(t *testing.T) {
	recs := groupRecords()
	for d := 0; d < len(recs)-1; d++ {
		t.Run(fmt.Sprintf("%d_%v_after_damage", d+1, recs[d+1].Type), func(t *testing.T) {
			path, offs := writeLog(t, t.TempDir(), 1, recs)
			flipByte(t, path, offs[d]+FrameHeaderSize+payloadHeaderSize)
			got, gotOffs, s := scanAll(t, path, 0)
			want := slices.Delete(slices.Clone(recs), d, d+1)
			wantOffs := slices.Delete(slices.Clone(offs), d, d+1)
			if len(got) != len(want) || !slices.Equal(gotOffs, wantOffs) {
				t.Fatalf("records at %v, want %v", gotOffs, wantOffs)
			}
			for i := range got {
				requireSameRecord(t, got[i], want[i])
			}
			if sk := s.Skipped(); len(sk) != 1 || sk[0].Offset != offs[d] || sk[0].Length != offs[d+1]-offs[d] {
				t.Fatalf("skipped %v, want [%d,+%d)", sk, offs[d], offs[d+1]-offs[d])
			}
		})
	}
}

// TestScannerResyncIgnoresOlderFramesInsideBodies: an event body holding an
// encoded record (a log of logs) is not mistaken for the next record when the
// record around it is damaged, because its write-order id does not move
// forward.
func TestScannerResyncIgnoresOlderFramesInsideBodies(t *testing.T) {
	inner := mustAppend(t, nil, &Record{Type: RecordCommit, TxID: 1, WriteOrderID: 3, CommitType: RecordPut})
	recs := []Record{
		{Type: RecordPut, TxID: 7, WriteOrderID: 10, Body: []byte("first")},
		{Type: RecordPut, TxID: 7, WriteOrderID: 11, Body: append(append([]byte("xx"), inner...), "yy"...)},
		{Type: RecordCommit, TxID: 7, WriteOrderID: 12, CommitType: RecordPut},
	}
	path, offs := writeLog(t, t.TempDir(), 1, recs)
	flipByte(t, path, offs[1]+5) // the outer frame's checksum
	got, gotOffs, s := scanAll(t, path, 0)
	if len(got) != 2 || gotOffs[1] != offs[2] {
		t.Fatalf("got records at %v, want at %v and %v", gotOffs, offs[0], offs[2])
	}
	if sk := s.Skipped(); len(sk) != 1 || sk[0].Offset != offs[1] || sk[0].Length != offs[2]-offs[1] {
		t.Fatalf("skipped %v", sk)
	}
}

// TestScannerResyncFindsASmallestLastRecord: the search for the next valid
// record reaches the very end of the file (a rollback, the smallest record,
// ending it).
func TestScannerResyncFindsASmallestLastRecord(t *testing.T) {
	recs := []Record{
		{Type: RecordPut, TxID: 1, WriteOrderID: 1, Body: []byte("a")},
		{Type: RecordPut, TxID: 1, WriteOrderID: 2, Body: []byte("b")},
		{Type: RecordRollback, TxID: 1, WriteOrderID: 3},
	}
	path, offs := writeLog(t, t.TempDir(), 1, recs)
	flipByte(t, path, offs[1]+FrameHeaderSize+2)
	got, gotOffs, s := scanAll(t, path, 0)
	if len(got) != 2 || gotOffs[1] != offs[2] || s.Tail() != TailClean {
		t.Fatalf("records at %v (want %d and %d), tail %v", gotOffs, offs[0], offs[2], s.Tail())
	}
}

// TestSalvageScannerReadsPastADamagedHeader: with a damaged header the file
// id comes from the name and every record is still read.
func TestSalvageScannerReadsPastADamagedHeader(t *testing.T) {
	recs := sampleRecords()
	path, offs := writeLog(t, t.TempDir(), 9, recs)
	flipByte(t, path, 2)
	if _, err := NewScanner(vfs.OS(), path, 0); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("NewScanner on a damaged header: %v", err)
	}
	s, err := NewSalvageScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for s.Next() {
		if s.Offset() != offs[n] {
			t.Fatalf("record %d at %d, want %d", n, s.Offset(), offs[n])
		}
		n++
	}
	if n != len(recs) || s.FileID() != 9 {
		t.Fatalf("read %d records of file %d", n, s.FileID())
	}
	if sk := s.Skipped(); len(sk) != 1 || sk[0].Offset != 0 || sk[0].Length != HeaderSize {
		t.Fatalf("skipped %v", sk)
	}
	r, err := OpenSalvageReader(vfs.OS(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rec, err := r.ReadRecord(offs[0]); err != nil || rec.WriteOrderID != recs[0].WriteOrderID {
		t.Fatalf("salvage reader: %v %v", rec, err)
	}

	// A valid header naming another file is not salvaged.
	other, _ := writeLog(t, t.TempDir(), 4, recs[:1])
	renamed := filepath.Join(filepath.Dir(other), LogName(5))
	if err := os.Rename(other, renamed); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSalvageScanner(vfs.OS(), renamed, 0); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("salvage of a file with another id's header: %v", err)
	}
}

func TestScannerStartOffset(t *testing.T) {
	recs := sampleRecords()
	path, offs := writeLog(t, t.TempDir(), 1, recs)
	end := fileSize(t, path)
	for _, tc := range []struct {
		name  string
		start int64
		first int // index of the first record scanned
		end   int64
	}{
		{"zero_means_header_size", 0, 0, end},
		{"below_header_means_header_size", 5, 0, end},
		{"header_size", HeaderSize, 0, end},
		{"record_boundary_in_the_middle", offs[5], 5, end},
		{"last_record", offs[len(offs)-1], len(recs) - 1, end},
		{"eof", end, len(recs), end},
		{"past_eof", end + 1000, len(recs), end + 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, s := scanAll(t, path, tc.start)
			if len(got) != len(recs)-tc.first {
				t.Fatalf("scanned %d records, want %d", len(got), len(recs)-tc.first)
			}
			for i := range got {
				requireSameRecord(t, got[i], recs[tc.first+i])
			}
			if s.End() != tc.end || s.Tail() != TailClean || s.FileID() != 1 {
				t.Fatalf("End %d, Tail %v, FileID %d; want %d, clean, 1", s.End(), s.Tail(), s.FileID(), tc.end)
			}
		})
	}
}

// TestScannerAcrossBufferBoundaries: frames straddling the 1 MiB buffer, and
// frames larger than it.
func TestScannerAcrossBufferBoundaries(t *testing.T) {
	var recs []Record
	for i := 0; i < 2500; i++ { // ~2.6 MiB of 1 KiB puts
		recs = append(recs, Record{Type: RecordPut, TxID: uint64(i), WriteOrderID: uint64(i),
			Headers: map[string]string{"i": fmt.Sprint(i)}, Body: bytes.Repeat([]byte{byte(i)}, 1000+i%50)})
		if i == 1200 {
			recs = append(recs, Record{Type: RecordPut, WriteOrderID: uint64(i), Body: bytes.Repeat([]byte("L"), 3*scanBufSize)})
		}
		if i%100 == 0 {
			recs = append(recs, Record{Type: RecordTake, WriteOrderID: uint64(i), Pointers: []uint64{uint64(i), 2, 3}})
		}
	}
	path, offs := writeLog(t, t.TempDir(), 2, recs)
	got, gotOffs, s := scanAll(t, path, 0)
	if len(got) != len(recs) {
		t.Fatalf("scanned %d records, want %d", len(got), len(recs))
	}
	for i := range got {
		requireSameRecord(t, got[i], recs[i])
		if gotOffs[i] != offs[i] {
			t.Fatalf("record %d at offset %d, want %d", i, gotOffs[i], offs[i])
		}
	}
	if s.Tail() != TailClean || s.End() != fileSize(t, path) {
		t.Fatalf("Tail %v End %d", s.Tail(), s.End())
	}
}

func TestScannerReportsReadErrors(t *testing.T) {
	path, _ := writeLog(t, t.TempDir(), 1, sampleRecords())
	fsys := &failReadFS{FS: vfs.OS()}
	s, err := NewScanner(fsys, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fsys.fail = true
	if s.Next() {
		t.Fatal("Next succeeded on a failing read")
	}
	if !errors.Is(s.Err(), errInjected) {
		t.Fatalf("Err = %v, want the read failure", s.Err())
	}
	if errors.Is(s.Err(), corrupt.ErrCorrupt) {
		t.Fatal("a read failure reported as corruption")
	}
}

// failReadFS opens files whose ReadAt fails once fail is set.
type failReadFS struct {
	vfs.FS
	fail bool
}

func (f *failReadFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return failReadFile{File: file, fs: f}, nil
}

type failReadFile struct {
	vfs.File
	fs *failReadFS
}

func (f failReadFile) ReadAt(p []byte, off int64) (int, error) {
	if f.fs.fail {
		return 0, errInjected
	}
	return f.File.ReadAt(p, off)
}

// A scan through a memory mapping finds the same records, damage and tail
// as a buffered one: the scanner tests again, mapped.
func TestMappedScanner(t *testing.T) {
	for _, ahead := range []bool{false, true} {
		t.Run(fmt.Sprintf("check_ahead=%v", ahead), func(t *testing.T) {
			mapScans, checkAhead = true, ahead
			defer func() { mapScans, checkAhead = false, false }()
			mappedScannerTests(t)
		})
	}
}

func mappedScannerTests(t *testing.T) {
	t.Run("tails", TestScannerTails)
	t.Run("damage", TestScannerSkipsDamageInTheMiddle)
	t.Run("resync_older_frames", TestScannerResyncIgnoresOlderFramesInsideBodies)
	t.Run("resync_smallest_last", TestScannerResyncFindsASmallestLastRecord)
	t.Run("start", TestScannerStartOffset)
	t.Run("buffer_boundaries", TestScannerAcrossBufferBoundaries)
}

// MapFile maps only OS files: on other filesystems the scanner reads as
// before.
func TestMapFileNeedsAnOSFile(t *testing.T) {
	fsys, path, _ := memLog(t, rec(t, 1, "a"))
	s, err := NewScanner(fsys, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.MapFile() {
		t.Fatal("MapFile mapped a MemFS file")
	}
	n := 0
	for s.Next() {
		n++
	}
	if n != 1 || s.Err() != nil {
		t.Fatalf("scan after MapFile refused: %d records, %v", n, s.Err())
	}
}

// A scanner that catches up with its checker verifies the frames it
// reaches first itself; the checker then resumes where the scanner is
// instead of verifying them a second time, and verifies the rest.
func TestCheckerResumesWhereTheScannerPassed(t *testing.T) {
	recs := sampleRecords()
	for _, passed := range []int{len(recs), len(recs) / 2} {
		t.Run(fmt.Sprintf("scanner_passed_%d_of_%d", passed, len(recs)), func(t *testing.T) {
			s := mappedScan(t, recs)
			// A checker that has not run yet: the scanner is past it at
			// once, and checks every frame itself.
			start := s.End()
			c := &checker{fr: s.fr}
			c.to.Store(start)
			s.ahead = c
			for range passed {
				if !s.Next() {
					t.Fatalf("scan ended early: %v", s.Err())
				}
			}
			if got := c.passed.Load(); got != s.End() {
				t.Fatalf("scanner published %d as verified, want its end %d", got, s.End())
			}
			c.wg.Add(1)
			c.run(s.mm, start) // from where CheckAhead starts it
			want := start      // nothing left to verify
			if passed < len(recs) {
				want = int64(len(s.mm)) // the rest, once
			}
			if got := c.to.Load(); got != want {
				t.Fatalf("checker verified up to %d, want %d (the scanner had verified up to %d)", got, want, s.End())
			}
			n := passed
			for s.Next() {
				n++
			}
			if n != len(recs) || s.Err() != nil || s.Tail() != TailClean {
				t.Fatalf("scanned %d records of %d, err %v, tail %v", n, len(recs), s.Err(), s.Tail())
			}
		})
	}
}

// mappedScan writes recs to a log file and returns a scanner of it from
// the start, mapped (MapFile), closed when the test ends.
func mappedScan(t *testing.T, recs []Record) *Scanner {
	t.Helper()
	path, _ := writeLog(t, t.TempDir(), 1, recs)
	s, err := NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	if !s.MapFile() {
		t.Fatal("MapFile did not map the file")
	}
	return s
}

// On a file of megabytes the scanner and its checker race (the scanner
// catches up, verifies frames itself, and the checker resumes at its
// place): the scan still finds exactly what a buffered scan finds, with a
// damaged record in the middle and a torn tail, run after run.
func TestCheckAheadRacingTheScanner(t *testing.T) {
	body := bytes.Repeat([]byte("event body "), 93) // about 1 KiB
	var b []byte
	for i := range 3000 {
		b = append(b, mustAppendWith(t, testFraming, &Record{Type: RecordPut, TxID: 1, WriteOrderID: uint64(i + 1), Body: body})...)
	}
	b[len(b)/2] ^= 0x40        // inside a body in the middle
	b = b[:len(b)-len(body)/2] // the last record torn
	path := filepath.Join(t.TempDir(), LogName(1))
	for range 5 {
		checkMappedScan(t, path, testFraming, b)
	}
}
