package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// scanAll scans path from start and returns copies of the records and their
// offsets; it fails the test on an I/O error.
func scanAll(t *testing.T, path string, start int64) ([]Record, []int64, *Scanner) {
	t.Helper()
	s, err := NewScanner(vfs.OS(), path, start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var recs []Record
	var offs []int64
	for s.Next() {
		r := *s.Record()
		r.Body = bytes.Clone(r.Body)
		r.Pointers = append([]uint64(nil), r.Pointers...)
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
		{"corrupt_record_in_the_middle", func(t *testing.T, path string, offs []int64, _ int64) int {
			flipByte(t, path, offs[4]+FrameHeaderSize+3)
			return 4
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
