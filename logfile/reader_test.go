package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// readerRecords adds a frame larger than the reader's first read, in the
// middle and as the last record of the file.
func readerRecords() []Record {
	recs := sampleRecords()
	big := Record{Type: RecordPut, TxID: 9, WriteOrderID: 99, Headers: map[string]string{"k": "v"}, Body: bytes.Repeat([]byte{7}, 3*readGuess)}
	return append(append(recs[:3:3], big), append(recs[3:], big)...)
}

func TestReaderReadsBackWrittenOffsets(t *testing.T) {
	recs := readerRecords()
	path, offs := writeLog(t, t.TempDir(), 4, recs)
	r, err := OpenReader(vfs.OS(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.ID() != 4 {
		t.Fatalf("ID %d, want 4", r.ID())
	}
	for i := len(recs) - 1; i >= 0; i-- { // any order
		got, err := r.ReadRecord(offs[i])
		if err != nil {
			t.Fatalf("record %d at %d: %v", i, offs[i], err)
		}
		requireSameRecord(t, got, recs[i])
	}
}

func TestReaderBodyIsOwnedByCaller(t *testing.T) {
	path, offs := writeLog(t, t.TempDir(), 1, readerRecords())
	r, err := OpenReader(vfs.OS(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, i := range []int{0, 3} { // a small frame (pooled buffer) and a large one
		a, err := r.ReadRecord(offs[i])
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(a.Body)
		for j := range a.Body {
			a.Body[j] = 0xee
		}
		b, err := r.ReadRecord(offs[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Body, want) {
			t.Fatalf("record %d: changing one returned Body changed the next read", i)
		}
		if cap(b.Body) > 2*len(b.Body)+64 {
			t.Fatalf("record %d: %d-byte Body pins a %d-byte buffer", i, len(b.Body), cap(b.Body))
		}
	}
}

func TestReaderConcurrentReads(t *testing.T) {
	recs := readerRecords()
	path, offs := writeLog(t, t.TempDir(), 1, recs)
	r, err := OpenReader(vfs.OS(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				i := (g + k) % len(recs)
				got, err := r.ReadRecord(offs[i])
				if err != nil {
					t.Error(err)
					return
				}
				if got.WriteOrderID != recs[i].WriteOrderID || len(got.Body) != len(recs[i].Body) {
					t.Errorf("record %d read back wrong", i)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestReadRecordCorruption(t *testing.T) {
	recs := []Record{
		{Type: RecordPut, TxID: 1, WriteOrderID: 1, Body: []byte("first")},
		{Type: RecordPut, TxID: 1, WriteOrderID: 2, Body: bytes.Repeat([]byte("b"), 100)},
		{Type: RecordPut, TxID: 1, WriteOrderID: 3, Body: bytes.Repeat([]byte("c"), 2*readGuess)},
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, offs []int64, end int64) int64 // returns the offset to read
		eof    bool                                                           // the error also wraps io.ErrUnexpectedEOF
	}{
		{"offset_zero", func(*testing.T, string, []int64, int64) int64 { return 0 }, false},
		{"offset_inside_header", func(*testing.T, string, []int64, int64) int64 { return HeaderSize - 1 }, false},
		{"offset_at_eof", func(_ *testing.T, _ string, _ []int64, end int64) int64 { return end }, true},
		{"offset_past_eof", func(_ *testing.T, _ string, _ []int64, end int64) int64 { return end + 100 }, true},
		{"offset_inside_a_record", func(_ *testing.T, _ string, offs []int64, _ int64) int64 { return offs[1] + FrameHeaderSize + 12 }, false}, // in the write-order id: a zero length
		{"zero_fill_at_offset", func(t *testing.T, path string, _ []int64, end int64) int64 {
			appendToFile(t, path, make([]byte, 64))
			return end
		}, false},
		{"small_frame_cut_short", func(t *testing.T, path string, offs []int64, _ int64) int64 {
			truncate(t, path, offs[1]+50)
			return offs[1]
		}, true},
		{"large_frame_cut_short", func(t *testing.T, path string, offs []int64, end int64) int64 {
			truncate(t, path, end-1)
			return offs[2]
		}, true},
		{"flipped_body_byte", func(t *testing.T, path string, offs []int64, _ int64) int64 {
			flipByte(t, path, offs[1]+40)
			return offs[1]
		}, false},
		{"flipped_body_byte_past_first_read", func(t *testing.T, path string, offs []int64, _ int64) int64 {
			flipByte(t, path, offs[2]+readGuess+10)
			return offs[2]
		}, false},
		{"length_claims_past_eof", func(t *testing.T, path string, offs []int64, _ int64) int64 {
			writeAt(t, path, offs[1], binary.BigEndian.AppendUint32(nil, 1<<20))
			return offs[1]
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, offs := writeLog(t, t.TempDir(), 1, recs)
			off := tc.damage(t, path, offs, fileSize(t, path))
			r, err := OpenReader(vfs.OS(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, err = r.ReadRecord(off)
			requireCorrupt(t, err, path, off)
			if tc.eof != errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error %v: wraps io.ErrUnexpectedEOF = %v, want %v", err, !tc.eof, tc.eof)
			}
			// The other records are still readable.
			if got, err := r.ReadRecord(offs[0]); err != nil || got.WriteOrderID != 1 {
				t.Fatalf("first record after the damage: %v", err)
			}
		})
	}
}

func TestOpenReaderBadHeader(t *testing.T) {
	valid := testHeader(7)
	for _, tc := range []struct {
		name     string
		fileName string
		contents []byte
	}{
		{"empty_file", LogName(7), nil},
		{"short_header", LogName(7), valid[:10]},
		{"bad_magic", LogName(7), append([]byte("XCLG"), valid[4:]...)},
		{"bad_checksum", LogName(7), append(valid[:15:15], valid[15]^1)},
		{"id_differs_from_name", LogName(8), valid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.fileName)
			if err := os.WriteFile(path, tc.contents, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenReader(vfs.OS(), path)
			requireCorrupt(t, err, path, 0)
			_, err = NewScanner(vfs.OS(), path, 0)
			requireCorrupt(t, err, path, 0)
		})
	}
}

func TestOpenReaderMissingFile(t *testing.T) {
	if _, err := OpenReader(vfs.OS(), tempLogPath(t, 1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReader of a missing file = %v, want ErrNotExist", err)
	}
}

func TestOpenReaderAcceptsAnyNameWithValidHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "copy-of-a-log")
	if err := os.WriteFile(path, testHeader(7), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReader(vfs.OS(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.ID() != 7 {
		t.Fatalf("ID %d, want 7", r.ID())
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// countFS counts the ReadAt calls of the files it opens.
type countFS struct {
	vfs.FS
	reads *int64
	mu    *sync.Mutex
}

type countFile struct {
	vfs.File
	fs countFS
}

func (c countFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return countFile{File: f, fs: c}, nil
}

func (f countFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	*f.fs.reads++
	f.fs.mu.Unlock()
	return f.File.ReadAt(p, off)
}

// TestReaderReadsInOrderThroughBlocks: records read in file order cost one
// read per block of them, not one each, and come back exact, big frames
// (longer than a block) and a damaged one included, and in any order.
func TestReaderReadsInOrderThroughBlocks(t *testing.T) {
	var recs []Record
	for i := range 400 {
		recs = append(recs, Record{Type: RecordPut, TxID: uint64(i + 1), WriteOrderID: uint64(i + 1), Body: bytes.Repeat([]byte{byte(i)}, 1000)})
	}
	recs[200].Body = bytes.Repeat([]byte{9}, 3*blockSize) // longer than a block
	path, offs := writeLog(t, t.TempDir(), 5, recs)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, offs[300]+40); err != nil { // damage record 300's body
		t.Fatal(err)
	}
	f.Close()
	var reads int64
	fsys := countFS{FS: vfs.OS(), reads: &reads, mu: &sync.Mutex{}}
	r, err := OpenReader(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reads = 0
	for i := range recs {
		got, err := r.ReadRecord(offs[i])
		if i == 300 {
			requireCorrupt(t, err, path, offs[i])
			continue
		}
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		requireSameRecord(t, got, recs[i])
	}
	if max := int64(len(recs) / 20); reads > max {
		t.Errorf("%d reads for %d records read in order, want at most %d", reads, len(recs), max)
	}
	// Four takers at their own positions, in turn (consumer groups):
	// each keeps its own block.
	reads = 0
	starts := []int{0, 100, 230, 340}
	for k := range 40 {
		for _, s := range starts {
			i := s + k
			if got, err := r.ReadRecord(offs[i]); err != nil || !bytes.Equal(got.Body, recs[i].Body) {
				t.Fatalf("record %d of a taker at %d: %v", i, s, err)
			}
		}
	}
	if reads > 20 {
		t.Errorf("%d reads for 4 takers reading 40 records each in order, want at most 20", reads)
	}
	for i := len(recs) - 1; i >= 0; i -= 7 { // backwards
		if i == 300 {
			continue
		}
		if got, err := r.ReadRecord(offs[i]); err != nil || !bytes.Equal(got.Body, recs[i].Body) {
			t.Fatalf("record %d backwards: %v", i, err)
		}
	}
}

// TestReaderBlockNeverServesStaleBytes: a block read while the file ended
// in zeros laid out ahead holds zeros where records are written later;
// those records still read back, from the file.
func TestReaderBlockNeverServesStaleBytes(t *testing.T) {
	mem := vfs.NewMem()
	w, err := testCreate(mem, "/", 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.layOut(1<<20, 256<<10, 1<<30, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReader(mem, w.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 50 {
		rec := Record{Type: RecordPut, TxID: uint64(i + 1), WriteOrderID: uint64(i + 1), Body: bytes.Repeat([]byte{byte(i + 1)}, 700)}
		off, err := w.Write(mustAppend(t, nil, &rec))
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadRecord(off) // the block read for record 0 holds zeros here
		if err != nil {
			t.Fatalf("record %d, written after the block was read: %v", i, err)
		}
		requireSameRecord(t, got, rec)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
