package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// FuzzDecodeRecord feeds arbitrary bytes to DecodeRecord twice: as they are
// (exercising the frame checks), and wrapped as the payload of a frame with
// a correct checksum (exercising the payload decoder, which random bytes
// would otherwise never reach). It must never panic, fail only with
// io.ErrUnexpectedEOF, a corruption error or (for a checksummed frame of a
// newer record type) an unsupported-format error, and a record that decodes
// must re-encode to exactly the bytes it came from.
//
//	go test ./logfile -run '^$' -fuzz FuzzDecodeRecord -fuzztime 30s
func FuzzDecodeRecord(f *testing.F) {
	for _, seed := range recordSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		if len(b) <= MaxPayloadSize {
			checkDecode(t, frameOf(b))
		}
	})
}

func checkDecode(t *testing.T, b []byte) {
	r, n, err := DecodeRecord(b)
	if err != nil {
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, corrupt.ErrCorrupt) && !errors.Is(err, corrupt.ErrUnsupportedFormat) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		return
	}
	if n < FrameHeaderSize || n > len(b) {
		t.Fatalf("frame length %d of %d input bytes", n, len(b))
	}
	if got := r.EncodedSize(); got != n {
		t.Fatalf("EncodedSize %d of a decoded %d-byte frame", got, n)
	}
	re, err := AppendRecord(nil, &r)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if !bytes.Equal(re, b[:n]) {
		t.Fatalf("re-encoded frame differs\n got  %x\n want %x", re, b[:n])
	}
}

// FuzzDecodeFileHeader: DecodeFileHeader never panics, fails only with a
// corruption error or (a newer version) an unsupported-format error, and a
// header that decodes re-encodes to the same bytes.
//
//	go test ./logfile -run '^$' -fuzz FuzzDecodeFileHeader -fuzztime 30s
func FuzzDecodeFileHeader(f *testing.F) {
	for _, seed := range headerSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := DecodeFileHeader(b)
		if err != nil {
			if !errors.Is(err, corrupt.ErrCorrupt) && !errors.Is(err, corrupt.ErrUnsupportedFormat) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if re := AppendFileHeader(nil, id); !bytes.Equal(re, b[:HeaderSize]) {
			t.Fatalf("re-encoded header differs\n got  %x\n want %x", re, b[:HeaderSize])
		}
	})
}

// FuzzScanner scans a log file made of a valid header (file id 1) followed by
// arbitrary bytes, with a normal and with a salvage scanner. It must never
// panic or hang, and what it reports must be consistent: records in
// increasing offset and write-order id order, each re-read identically by a
// Reader at its offset; skipped regions and records in file order without
// overlap; End within the file; a scan stopped by a record of a newer type
// stops where the Reader finds that record too.
//
//	go test ./logfile -run '^$' -fuzz FuzzScanner -fuzztime 30s
func FuzzScanner(f *testing.F) {
	for _, seed := range scannerSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fsys := vfs.NewMem()
		path := "/" + LogName(1)
		file, err := fsys.Create(path, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.Write(append(AppendFileHeader(nil, 1), b...)); err != nil {
			t.Fatal(err)
		}
		file.Close()
		size := int64(HeaderSize + len(b))
		r, err := OpenReader(fsys, path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for _, salvage := range []bool{false, true} {
			open := NewScanner
			if salvage {
				open = NewSalvageScanner
			}
			s, err := open(fsys, path, 0)
			if err != nil {
				t.Fatal(err)
			}
			var pos int64 = HeaderSize // end of what was accounted for
			var woid uint64
			seen := false // a record that is not padding
			skips := 0
			for s.Next() {
				rec := s.Record()
				if sk := s.Skipped(); len(sk) > skips {
					for _, k := range sk[skips:] {
						if k.Offset != pos || k.Length <= 0 || !errors.Is(k.Err, corrupt.ErrCorrupt) {
							t.Fatalf("skip %+v after position %d", k, pos)
						}
						pos += k.Length
					}
					skips = len(sk)
				}
				if s.Offset() != pos {
					t.Fatalf("record at %d, expected at %d", s.Offset(), pos)
				}
				if rec.Type != RecordPadding { // padding has no write-order id
					if seen && rec.WriteOrderID <= woid {
						t.Fatalf("write-order id %d after %d", rec.WriteOrderID, woid)
					}
					seen, woid = true, rec.WriteOrderID
				}
				again, err := r.ReadRecord(s.Offset())
				if err != nil {
					t.Fatalf("reader at %d: %v", s.Offset(), err)
				}
				if again.WriteOrderID != rec.WriteOrderID || again.Type != rec.Type || !bytes.Equal(again.Body, rec.Body) {
					t.Fatalf("reader and scanner disagree at %d", s.Offset())
				}
				pos += int64(rec.EncodedSize())
			}
			if err := s.Err(); err != nil {
				if !errors.Is(err, corrupt.ErrUnsupportedFormat) {
					t.Fatal(err)
				}
				if _, rerr := r.ReadRecord(s.End()); !errors.Is(rerr, corrupt.ErrUnsupportedFormat) {
					t.Fatalf("scan stopped at %d by %v; the reader there says %v", s.End(), err, rerr)
				}
			}
			if len(s.Skipped()) != skips {
				t.Fatalf("skips reported after the last record: %v", s.Skipped()[skips:])
			}
			if s.End() != pos || s.End() > size {
				t.Fatalf("End %d, accounted %d, size %d", s.End(), pos, size)
			}
			if (s.Tail() == TailClean) == (s.TailError() != nil) {
				t.Fatalf("tail %v with error %v", s.Tail(), s.TailError())
			}
			s.Close()
		}
	})
}

// scannerSeeds are record sequences (without the file header), intact and
// damaged in the ways a crash or a bad disk damages them.
func scannerSeeds(t testing.TB) map[string][]byte {
	var all []byte
	var offs []int
	for _, r := range sampleRecords() {
		offs = append(offs, len(all))
		all = mustAppend(t, all, &r)
	}
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x40; return b }
	// A repair's result: record 4 overwritten with padding, in place.
	padded := bytes.Clone(all)
	pad, err := AppendPadding(nil, offs[5]-offs[4])
	if err != nil {
		t.Fatal(err)
	}
	copy(padded[offs[4]:], pad)
	return map[string][]byte{
		"repaired_middle": padded,
		"intact":          all,
		"torn_tail":       all[:len(all)-7],
		"garbage_tail":    append(bytes.Clone(all), "garbage"...),
		"zero_tail":       append(bytes.Clone(all), make([]byte, 100)...),
		"damaged_middle":  flip(all, offs[4]+FrameHeaderSize+2),
		"damaged_length":  flip(all, offs[2]),
		"damaged_first":   flip(all, offs[0]+5),
		"empty":           {},
	}
}

func recordSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	for i, r := range sampleRecords() {
		seeds[fmt.Sprintf("valid_%02d_%v", i, r.Type)] = mustAppend(t, nil, &r)
	}
	put := mustAppend(t, nil, &Record{Type: RecordPut, Headers: map[string]string{"k": "v"}, Body: []byte("body")})
	seeds["truncated_put"] = put[:len(put)-1]
	badCRC := bytes.Clone(put)
	badCRC[len(badCRC)-1] ^= 1
	seeds["bad_checksum"] = badCRC
	seeds["zero_fill"] = make([]byte, 16)
	pad, err := AppendPadding(nil, MinPaddingSize+15)
	if err != nil {
		t.Fatal(err)
	}
	seeds["valid_padding"] = pad
	seeds["payload_padding"] = cat([]byte{byte(RecordPadding)}, make([]byte, 20))
	// Payloads for the wrapped path.
	seeds["payload_put"] = cat(payloadHead(RecordPut), []byte{1, 1, 'k', 1, 'v', 2, 'h', 'i'})
	seeds["payload_take"] = cat(payloadHead(RecordTake), []byte{1, 0, 0, 0, 1, 0, 0, 0, 16})
	seeds["payload_commit"] = cat(payloadHead(RecordCommit), []byte{2, 0x81, 0x01})
	return seeds
}

func headerSeeds() map[string][]byte {
	bad := AppendFileHeader(nil, 9)
	bad[0] = 'X'
	return map[string][]byte{
		"valid_7":     AppendFileHeader(nil, 7),
		"valid_max":   AppendFileHeader(nil, 1<<32-1),
		"bad_magic":   bad,
		"short":       AppendFileHeader(nil, 3)[:10],
		"with_record": append(AppendFileHeader(nil, 1), 0, 0, 0, 1),
	}
}

// TestFuzzSeedCorpus checks the checked-in seed corpus matches the seeds
// above; -update rewrites it.
func TestFuzzSeedCorpus(t *testing.T) {
	for target, seeds := range map[string]map[string][]byte{
		"FuzzDecodeRecord":     recordSeeds(t),
		"FuzzDecodeFileHeader": headerSeeds(),
		"FuzzScanner":          scannerSeeds(t),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, b := range seeds {
			path := filepath.Join(dir, name)
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(got) != want {
				t.Errorf("%s is stale (run with -update)", path)
			}
		}
	}
}

// FuzzMappedScanner: a scan through a memory mapping, with and without the
// CRC checker running ahead, finds exactly what a buffered scan finds.
func FuzzMappedScanner(f *testing.F) {
	for _, seed := range scannerSeeds(f) {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, LogName(1))
		if err := os.WriteFile(path, append(AppendFileHeader(nil, 1), b...), 0o644); err != nil {
			t.Fatal(err)
		}
		type step struct {
			off  int64
			woid uint64
			typ  RecordType
		}
		scan := func(mapped, ahead bool) (steps []step, skips []Skip, end int64, tail Tail) {
			s, err := NewScanner(vfs.OS(), path, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if mapped && !s.MapFile() && len(b) > 0 {
				t.Fatal("not mapped")
			}
			if ahead {
				s.CheckAhead()
			}
			for s.Next() {
				steps = append(steps, step{s.Offset(), s.Record().WriteOrderID, s.Record().Type})
			}
			if err := s.Err(); err != nil && !errors.Is(err, corrupt.ErrUnsupportedFormat) {
				t.Fatal(err)
			}
			for _, k := range s.Skipped() {
				skips = append(skips, Skip{Offset: k.Offset, Length: k.Length})
			}
			return steps, skips, s.End(), s.Tail()
		}
		s0, k0, e0, t0 := scan(false, false)
		for _, mode := range [][2]bool{{true, false}, {true, true}} {
			s1, k1, e1, t1 := scan(mode[0], mode[1])
			if !slices.Equal(s0, s1) || !slices.Equal(k0, k1) || e0 != e1 || t0 != t1 {
				t.Fatalf("mapped=%v ahead=%v: records %v skips %v end %d tail %v; buffered: %v %v %d %v",
					mode[0], mode[1], s1, k1, e1, t1, s0, k0, e0, t0)
			}
		}
	})
}
