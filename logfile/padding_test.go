package logfile

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

func TestAppendPadding(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		ok   bool
	}{
		{"smallest", MinPaddingSize, true},
		{"one_filler_byte", MinPaddingSize + 1, true},
		{"a_kilobyte", 1024, true},
		{"largest", MaxFrameSize, true},
		{"too_small", MinPaddingSize - 1, false},
		{"zero", 0, false},
		{"too_large", MaxFrameSize + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := testFraming.AppendPadding([]byte("prefix"), tc.size)
			if !tc.ok {
				if !errors.Is(err, ErrInvalidRecord) || string(out) != "prefix" {
					t.Fatalf("testFraming.AppendPadding(%d) = %d bytes, %v; want ErrInvalidRecord and dst unchanged", tc.size, len(out), err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			frame := out[len("prefix"):]
			if len(frame) != tc.size {
				t.Fatalf("frame of %d bytes, want %d", len(frame), tc.size)
			}
			r, n, err := testFraming.DecodeRecord(frame)
			if err != nil || n != tc.size {
				t.Fatalf("decode: %d bytes, %v", n, err)
			}
			want := Record{Type: RecordPadding, Filler: tc.size - MinPaddingSize}
			requireSameRecord(t, r, want)
			if r.EncodedSize() != tc.size {
				t.Fatalf("EncodedSize %d, want %d", r.EncodedSize(), tc.size)
			}
		})
	}
}

func TestPaddingSizesCoverTheRegionExactly(t *testing.T) {
	for _, n := range []int64{
		0, MinPaddingSize - 1, // nothing covers these
		MinPaddingSize, 1000, MaxFrameSize,
		MaxFrameSize + 1, MaxFrameSize + MinPaddingSize - 1, // the last frame would be too small
		MaxFrameSize + MinPaddingSize, 2*MaxFrameSize + 1, 3*MaxFrameSize + 10,
	} {
		sizes := testFraming.PaddingSizes(n)
		if n < MinPaddingSize {
			if sizes != nil {
				t.Errorf("testFraming.PaddingSizes(%d) = %v, want nil", n, sizes)
			}
			continue
		}
		var sum int64
		for _, s := range sizes {
			if s < MinPaddingSize || s > MaxFrameSize {
				t.Errorf("testFraming.PaddingSizes(%d) has a frame of %d bytes", n, s)
			}
			sum += int64(s)
		}
		if sum != n {
			t.Errorf("testFraming.PaddingSizes(%d) = %v sums to %d", n, sizes, sum)
		}
		if want := (n + MaxFrameSize - 1) / MaxFrameSize; int64(len(sizes)) != want {
			t.Errorf("testFraming.PaddingSizes(%d) uses %d frames, want %d", n, len(sizes), want)
		}
	}
}

// memLog writes a log file id 1 in dir /d of a fresh MemFS from the given
// chunks (encoded records or raw bytes), syncs it, and returns the FS, the
// path and the offset of every chunk.
func memLog(t *testing.T, chunks ...[]byte) (*vfs.MemFS, string, []int64) {
	t.Helper()
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	w, err := testCreate(fsys, "/d", 1)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, c := range chunks {
		off, err := w.Write(c)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return fsys, w.Path(), offs
}

func rec(t *testing.T, woid uint64, body string) []byte {
	return mustAppend(t, nil, &Record{Type: RecordPut, TxID: 1, WriteOrderID: woid, Body: []byte(body)})
}

func padding(t *testing.T, size int) []byte {
	t.Helper()
	b, err := testFraming.AppendPadding(nil, size)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scanned is what a full scan of a file returns.
type scanned struct {
	offs  []int64 // of the records, padding included
	types []RecordType
	woids []uint64
	skips []Skip
	tail  Tail
}

func scanFull(t *testing.T, fsys vfs.FS, path string) scanned {
	t.Helper()
	s, err := NewSalvageScanner(fsys, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out scanned
	for s.Next() {
		out.offs = append(out.offs, s.Offset())
		out.types = append(out.types, s.Record().Type)
		out.woids = append(out.woids, s.Record().WriteOrderID)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	out.skips, out.tail = s.Skipped(), s.Tail()
	return out
}

// TestScannerPaddingHasNoWriteOrderID: padding is returned as a record but
// leaves the last write-order id alone, so that a resync after it still
// rejects older records; and it is never a resync point itself.
func TestScannerPaddingHasNoWriteOrderID(t *testing.T) {
	garbage := []byte("\xff\xff\xff\x00 damaged bytes, not a frame")
	for _, tc := range []struct {
		name      string
		chunks    [][]byte
		wantRecs  []int // indexes of the chunks returned as records
		wantSkips [][2]int
	}{
		{"between_records", [][]byte{rec(t, 10, "a"), padding(t, 40), rec(t, 11, "b")}, []int{0, 1, 2}, nil},
		{"first_in_file", [][]byte{padding(t, MinPaddingSize), rec(t, 3, "a")}, []int{0, 1}, nil},
		{"last_in_file", [][]byte{rec(t, 3, "a"), padding(t, 30)}, []int{0, 1}, nil},
		// A record with a lower id after damage is stale: padding between
		// must not have reset the id to 0.
		{"resync_after_padding_rejects_older", [][]byte{rec(t, 10, "a"), padding(t, 30), garbage, rec(t, 5, "old"), rec(t, 12, "b")},
			[]int{0, 1, 4}, [][2]int{{2, 4}}},
		// Damage then padding (a region a repair overwrote in part): the
		// region still starts at the damage and takes the padding in.
		{"padding_after_damage_is_skipped_with_it", [][]byte{rec(t, 10, "a"), garbage, padding(t, 30), rec(t, 11, "b")},
			[]int{0, 3}, [][2]int{{1, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, path, offs := memLog(t, tc.chunks...)
			got := scanFull(t, fsys, path)
			var want []int64
			for _, i := range tc.wantRecs {
				want = append(want, offs[i])
			}
			if !slices.Equal(got.offs, want) {
				t.Fatalf("records at %v, want %v", got.offs, want)
			}
			if len(got.skips) != len(tc.wantSkips) {
				t.Fatalf("skips %v, want %v", got.skips, tc.wantSkips)
			}
			for i, sk := range tc.wantSkips {
				if got.skips[i].Offset != offs[sk[0]] || got.skips[i].Offset+got.skips[i].Length != offs[sk[1]] {
					t.Fatalf("skip %+v, want chunks %d to %d", got.skips[i], sk[0], sk[1])
				}
			}
			if got.tail != TailClean {
				t.Fatalf("tail %v", got.tail)
			}
		})
	}
}

func TestReaderReturnsPaddingAsItIs(t *testing.T) {
	fsys, path, offs := memLog(t, rec(t, 1, "a"), padding(t, 100))
	r, err := OpenReader(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.ReadRecord(offs[1])
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != RecordPadding || got.Filler != 100-MinPaddingSize {
		t.Fatalf("read %+v, want padding with %d filler bytes", got, 100-MinPaddingSize)
	}
}

// damagedLog is a log file with three records whose middle one is damaged
// (a flipped byte in its body).
func damagedLog(t *testing.T) (fsys *vfs.MemFS, path string, offs []int64, region []byte) {
	t.Helper()
	fsys, path, offs = memLog(t, rec(t, 1, "first"), rec(t, 2, "the damaged record's body"), rec(t, 3, "third"))
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	if _, err := f.ReadAt(b, offs[1]+30); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x55
	if _, err := f.WriteAt(b, offs[1]+30); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	return fsys, path, offs, bytes.Clone(data[offs[1]:offs[2]])
}

// requirePadded checks the file scans as record, padding over the region,
// record, at their old offsets, with no damage left.
func requirePadded(t *testing.T, fsys vfs.FS, path string, offs []int64) {
	t.Helper()
	got := scanFull(t, fsys, path)
	if len(got.skips) != 0 || got.tail != TailClean {
		t.Fatalf("after the repair: skips %v, tail %v", got.skips, got.tail)
	}
	if len(got.offs) != 3 || got.offs[0] != offs[0] || got.offs[1] != offs[1] || got.offs[2] != offs[2] ||
		got.types[1] != RecordPadding || got.woids[2] != 3 {
		t.Fatalf("after the repair: records at %v of types %v, want %v with padding in the middle", got.offs, got.types, offs)
	}
}

func TestPadRegionKeepsTheBytesAndMovesNothing(t *testing.T) {
	fsys, path, offs, region := damagedLog(t)
	if sk := scanFull(t, fsys, path).skips; len(sk) != 1 || sk[0].Offset != offs[1] || sk[0].Length != int64(len(region)) {
		t.Fatalf("before: skips %v", sk)
	}
	keep, err := PadRegion(fsys, path, offs[1], int64(len(region)))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("/d", CorruptName(1, offs[1])); keep != want {
		t.Fatalf("kept in %s, want %s", keep, want)
	}
	// Durable as soon as PadRegion returns.
	after := fsys.CrashClone(true, 1)
	requirePadded(t, after, path, offs)
	if got, err := vfs.ReadFile(after, keep); err != nil || !bytes.Equal(got, region) {
		t.Fatalf("kept %q, %v; want %q", got, err, region)
	}
}

func TestPadRegionRejects(t *testing.T) {
	fsys, path, offs, _ := damagedLog(t)
	size := offs[2] + int64(len(rec(t, 3, "third")))
	for _, tc := range []struct {
		name        string
		path        string
		off, length int64
	}{
		{"not_a_log_name", "/d/other", offs[1], 30},
		{"inside_the_header", path, 4, 30},
		{"too_short", path, offs[1], MinPaddingSize - 1},
		{"past_the_end", path, offs[2], size - offs[2] + 1},
		{"missing_file", "/d/" + LogName(9), offs[1], 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := vfs.ReadFile(fsys, path)
			if keep, err := PadRegion(fsys, tc.path, tc.off, tc.length); err == nil {
				t.Fatalf("PadRegion succeeded, kept in %s", keep)
			}
			if after, _ := vfs.ReadFile(fsys, path); !bytes.Equal(before, after) {
				t.Fatal("the log changed")
			}
		})
	}
}

// TestPadRegionAgainAfterTheCopy: a crash between the copy and the
// overwrite leaves the copy; running again reuses it.
func TestPadRegionAgainAfterTheCopy(t *testing.T) {
	fsys, path, offs, region := damagedLog(t)
	name := filepath.Join("/d", CorruptName(1, offs[1]))
	if err := vfs.WriteFileAtomic(fsys, name, region); err != nil {
		t.Fatal(err)
	}
	keep, err := PadRegion(fsys, path, offs[1], int64(len(region)))
	if err != nil || keep != name {
		t.Fatalf("kept in %s, %v; want %s", keep, err, name)
	}
	requirePadded(t, fsys, path, offs)
	if names, _ := fsys.List("/d"); len(names) != 2 {
		t.Fatalf("files %v, want the log and one .corrupt file", names)
	}
}

// TestCorruptFilesAreNeverReplaced: a .corrupt file of the same name with
// other bytes (left by an earlier attempt whose overwrite tore) stays; the
// copy goes to the next free variant.
func TestCorruptFilesAreNeverReplaced(t *testing.T) {
	fsys, path, offs, region := damagedLog(t)
	taken := []string{CorruptName(1, offs[1]), LogName(1) + "." + itoa(offs[1]) + ".1.corrupt"}
	for i, n := range taken {
		if err := vfs.WriteFileAtomic(fsys, filepath.Join("/d", n), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	keep, err := PadRegion(fsys, path, offs[1], int64(len(region)))
	if want := filepath.Join("/d", LogName(1)+"."+itoa(offs[1])+".2.corrupt"); err != nil || keep != want {
		t.Fatalf("kept in %s, %v; want %s", keep, err, want)
	}
	for i, n := range taken {
		if b, err := vfs.ReadFile(fsys, filepath.Join("/d", n)); err != nil || !bytes.Equal(b, []byte{byte(i)}) {
			t.Fatalf("%s now holds %q, %v", n, b, err)
		}
	}
	if b, err := vfs.ReadFile(fsys, keep); err != nil || !bytes.Equal(b, region) {
		t.Fatalf("kept %q, %v", b, err)
	}
}

// TestPadRegionCrashAtEveryStep crashes PadRegion after each of its
// filesystem operations, with and without torn writes. In every image the
// region's bytes are in the log or in CorruptName(id, off), and a scan then
// a PadRegion of what the scan finds completes the repair, with the
// original bytes in CorruptName(id, off).
func TestPadRegionCrashAtEveryStep(t *testing.T) {
	fsys, path, offs, region := damagedLog(t)
	name := filepath.Join("/d", CorruptName(1, offs[1]))
	var images []*vfs.MemFS
	fsys.SetHook(func(p vfs.CrashPoint) {
		images = append(images, p.Clone(false, 0), p.Clone(true, p.Seq))
	})
	if _, err := PadRegion(fsys, path, offs[1], int64(len(region))); err != nil {
		t.Fatal(err)
	}
	fsys.SetHook(nil)
	if len(images) < 10 {
		t.Fatalf("only %d crash images", len(images))
	}
	for i, img := range images {
		data, err := vfs.ReadFile(img, path)
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		kept, kerr := vfs.ReadFile(img, name)
		inLog := bytes.Equal(data[offs[1]:offs[2]], region)
		if !inLog && (kerr != nil || !bytes.Equal(kept, region)) {
			t.Fatalf("image %d: the region's bytes are neither in the log nor in %s (%v)", i, name, kerr)
		}
		for _, sk := range scanFull(t, img, path).skips {
			if _, err := PadRegion(img, path, sk.Offset, sk.Length); err != nil {
				t.Fatalf("image %d: repair again: %v", i, err)
			}
		}
		requirePadded(t, img, path, offs)
		if kept, err := vfs.ReadFile(img, name); err != nil || !bytes.Equal(kept, region) {
			t.Fatalf("image %d: after the second repair %s holds %q, %v", i, name, kept, err)
		}
	}
}

func TestRewriteHeader(t *testing.T) {
	t.Run("damaged", func(t *testing.T) {
		fsys, path, offs := memLog(t, rec(t, 1, "a"), rec(t, 2, "b"))
		f, _ := fsys.OpenReadWrite(path)
		if _, err := f.WriteAt([]byte("XX"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		old, _ := vfs.ReadFile(fsys, path)
		keep, err := RewriteHeader(fsys, path)
		if want := filepath.Join("/d", CorruptName(1, 0)); err != nil || keep != want {
			t.Fatalf("kept in %s, %v; want %s", keep, err, want)
		}
		after := fsys.CrashClone(true, 3)
		if b, err := vfs.ReadFile(after, keep); err != nil || !bytes.Equal(b, old[:HeaderSize]) {
			t.Fatalf("kept %q, %v", b, err)
		}
		s, err := NewScanner(after, path, 0) // a valid header again
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for s.Next() {
			if s.Offset() != offs[n] {
				t.Fatalf("record %d at %d, want %d", n, s.Offset(), offs[n])
			}
			n++
		}
		s.Close()
		if n != 2 || len(s.Skipped()) != 0 {
			t.Fatalf("%d records, skips %v", n, s.Skipped())
		}
	})
	t.Run("valid_is_left_alone", func(t *testing.T) {
		fsys, path, _ := memLog(t, rec(t, 1, "a"))
		if keep, err := RewriteHeader(fsys, path); keep != "" || err != nil {
			t.Fatalf("RewriteHeader of a valid header: %q, %v", keep, err)
		}
	})
	t.Run("names_another_id", func(t *testing.T) {
		fsys, path, _ := memLog(t, rec(t, 1, "a"))
		f, _ := fsys.OpenReadWrite(path)
		f.WriteAt(testHeader(2), 0)
		f.Close()
		if _, err := RewriteHeader(fsys, path); err == nil {
			t.Fatal("RewriteHeader replaced a valid header naming another id")
		}
	})
	t.Run("shorter_than_a_header", func(t *testing.T) {
		fsys, path, _ := memLog(t)
		f, _ := fsys.OpenReadWrite(path)
		f.Truncate(5)
		f.Close()
		if _, err := RewriteHeader(fsys, path); err == nil {
			t.Fatal("RewriteHeader of a 5-byte file succeeded")
		}
	})
}

// TestCutTailAgainAfterTheCopy: CutTail reuses a copy it published before a
// crash cut it short.
func TestCutTailAgainAfterTheCopy(t *testing.T) {
	tail := []byte("torn half-record")
	fsys, path, offs := memLog(t, rec(t, 1, "a"), tail)
	name := filepath.Join("/d", CorruptName(1, offs[1]))
	if err := vfs.WriteFileAtomic(fsys, name, tail); err != nil {
		t.Fatal(err)
	}
	if keep, err := CutTail(fsys, path, offs[1]); err != nil || keep != name {
		t.Fatalf("kept in %s, %v; want %s", keep, err, name)
	}
	if names, _ := fsys.List("/d"); len(names) != 2 {
		t.Fatalf("files %v, want the log and one .corrupt file", names)
	}
}

// TestPadRegionLongerThanAFrame covers a region longer than the largest
// frame with two padding frames.
func TestPadRegionLongerThanAFrame(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MiB region")
	}
	region := make([]byte, MaxFrameSize+100) // (a scan would step over it byte by byte: too slow here)
	region[0] = 0xff
	fsys, path, offs := memLog(t, rec(t, 1, "first"), region, rec(t, 2, "last"))
	if _, err := PadRegion(fsys, path, offs[1], offs[2]-offs[1]); err != nil {
		t.Fatal(err)
	}
	got := scanFull(t, fsys, path)
	if len(got.skips) != 0 || len(got.offs) != 4 || got.types[1] != RecordPadding || got.types[2] != RecordPadding || got.offs[3] != offs[2] {
		t.Fatalf("after: records at %v of types %v, skips %v", got.offs, got.types, got.skips)
	}
}

// An unsealed frame is not a record until SetWriteOrderID seals it; then
// it is the same frame AppendRecord makes with that write-order id.
func TestAppendUnsealedNeedsSealing(t *testing.T) {
	r := Record{Type: RecordPut, TxID: 9, Headers: map[string]string{"k": "v"}, Body: []byte("body")}
	frame, err := AppendUnsealed(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := testFramingV7.DecodeRecord(frame); err == nil {
		t.Fatal("an unsealed frame decoded")
	}
	testFramingV7.setWriteOrderID(frame, 42)
	r.WriteOrderID = 42
	want, err := testFramingV7.AppendRecord(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frame, want) {
		t.Fatalf("sealed frame %x, want %x", frame, want)
	}
	got, _, err := testFramingV7.DecodeRecord(frame)
	if err != nil || got.WriteOrderID != 42 || string(got.Body) != "body" {
		t.Fatalf("sealed frame decodes to %+v, %v", got, err)
	}
}
