package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/internal/vfs"
)

// fuzzFramings are the framings every fuzz input is tried with: version 1
// (the seeds checked in before version 2, still valid as version-1 inputs)
// and versions 2 to 4 with testFraming's salt (the seeds named v2_...:
// the frames of both versions are the same bytes, only the header the
// scanner's file starts with differs), and the encrypted versions 5 and 6
// with that salt, whose puts decode sealed and whose key records differ
// (the seeds named v5_... and v6_...).
var fuzzFramings = []Framing{framingV1, testFramingV2, testFraming, testFramingV5, testFramingV6, testFramingV7, testFramingV8}

// testFramingV5 and testFramingV6 are testFraming in encrypted files of
// versions 5 and 6, without keys: their puts decode sealed.
var (
	testFramingV5 = Framing{version: EncryptedVersion, salt: testFraming.salt}
	testFramingV6 = Framing{version: ChannelBoundVersion, salt: testFraming.salt}
	testFramingV8 = Framing{version: TimedBoundVersion, salt: testFraming.salt}
)

// frameSize is the size of the frame rec was decoded from in a file of
// framing fr: a sealed put's is its sealed body's.
func frameSize(fr Framing, rec *Record) int {
	if rec.Sealed != nil {
		return fr.FrameHeaderSize() + fr.putBodyOffset() + len(rec.Sealed)
	}
	return fr.EncodedSize(rec)
}

// FuzzDecodeRecord feeds arbitrary bytes to DecodeRecord, in each framing,
// twice: as they are (exercising the frame checks), and wrapped as the
// payload of a frame with correct checksums (exercising the payload
// decoder, which random bytes would otherwise never reach). It must never
// panic, fail only with io.ErrUnexpectedEOF, a corruption error or (for a
// checksummed frame of a newer record type) an unsupported-format error,
// and a record that decodes must re-encode to exactly the bytes it came
// from.
//
//	go test ./logfile -run '^$' -fuzz FuzzDecodeRecord -fuzztime 30s
func FuzzDecodeRecord(f *testing.F) {
	for _, seed := range recordSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fr := range fuzzFramings {
			checkDecode(t, fr, b)
			if len(b) <= MaxPayloadSize {
				checkDecode(t, fr, frameFor(fr, b))
			}
		}
	})
}

func checkDecode(t *testing.T, fr Framing, b []byte) {
	r, n, err := fr.DecodeRecord(b)
	if err != nil {
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, corrupt.ErrCorrupt) && !errors.Is(err, corrupt.ErrUnsupportedFormat) {
			t.Fatalf("%v: unexpected error kind: %v", fr, err)
		}
		return
	}
	if n < fr.FrameHeaderSize() || n > len(b) {
		t.Fatalf("%v: frame length %d of %d input bytes", fr, n, len(b))
	}
	if r.Sealed != nil {
		// A sealed put re-encodes only once opened: its sealed body is
		// the rest of the payload, as it is.
		if !fr.Encrypted() || r.Type != RecordPut || frameSize(fr, &r) != n ||
			!bytes.Equal(r.Sealed, b[fr.FrameHeaderSize()+fr.putBodyOffset():n]) ||
			(fr.Timed() && uint64(r.Time) != binary.BigEndian.Uint64(b[fr.FrameHeaderSize()+payloadHeaderSize:])) {
			t.Fatalf("%v: sealed %v record of %d bytes in a frame of %d", fr, r.Type, len(r.Sealed), n)
		}
		return
	}
	if got := fr.EncodedSize(&r); got != n {
		t.Fatalf("%v: EncodedSize %d of a decoded %d-byte frame", fr, got, n)
	}
	re, err := fr.AppendRecord(nil, &r)
	if err != nil {
		t.Fatalf("%v: re-encode: %v", fr, err)
	}
	if !bytes.Equal(re, b[:n]) {
		t.Fatalf("%v: re-encoded frame differs\n got  %x\n want %x", fr, re, b[:n])
	}
}

// FuzzDecodeFileHeader: DecodeFileHeader never panics, fails only with a
// corruption error or (a newer version) an unsupported-format error, and a
// header that decodes re-encodes to the same bytes; recoverFraming (the
// bytes as a damaged header, followed by nothing) never panics either.
//
//	go test ./logfile -run '^$' -fuzz FuzzDecodeFileHeader -fuzztime 30s
func FuzzDecodeFileHeader(f *testing.F) {
	for _, seed := range headerSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := recoverFraming(bytes.NewReader(b), 1, b[:min(len(b), HeaderSize)]); err != nil {
			t.Fatalf("recoverFraming: %v", err)
		}
		id, fr, err := decodeFileHeader(b)
		if err != nil {
			if !errors.Is(err, corrupt.ErrCorrupt) && !errors.Is(err, corrupt.ErrUnsupportedFormat) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if re := appendFileHeader(nil, id, fr); !bytes.Equal(re, b[:fr.HeaderSize()]) {
			t.Fatalf("re-encoded header differs\n got  %x\n want %x", re, b[:fr.HeaderSize()])
		}
	})
}

// FuzzScanner scans a log file made of a valid header (file id 1, of each
// framing) followed by arbitrary bytes, with a normal and with a salvage
// scanner. It must never panic or hang, and what it reports must be
// consistent: records in increasing offset and write-order id order, each
// re-read identically by a Reader at its offset; skipped regions and
// records in file order without overlap; End within the file; a scan
// stopped by a record of a newer type stops where the Reader finds that
// record too.
//
//	go test ./logfile -run '^$' -fuzz FuzzScanner -fuzztime 30s
func FuzzScanner(f *testing.F) {
	for _, seed := range scannerSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fr := range fuzzFramings {
			checkScan(t, fr, b)
		}
	})
}

func checkScan(t *testing.T, fr Framing, b []byte) {
	fsys := vfs.NewMem()
	path := "/" + LogName(1)
	file, err := fsys.Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write(append(appendFileHeader(nil, 1, fr), b...)); err != nil {
		t.Fatal(err)
	}
	file.Close()
	size := fr.HeaderSize() + int64(len(b))
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
		pos := fr.HeaderSize() // end of what was accounted for
		var woid uint64
		seen := false // a record that is not padding
		skips := 0
		for s.Next() {
			rec := s.Record()
			if sk := s.Skipped(); len(sk) > skips {
				for _, k := range sk[skips:] {
					if k.Offset != pos || k.Length <= 0 || !errors.Is(k.Err, corrupt.ErrCorrupt) {
						t.Fatalf("%v: skip %+v after position %d", fr, k, pos)
					}
					pos += k.Length
				}
				skips = len(sk)
			}
			if s.Offset() != pos {
				t.Fatalf("%v: record at %d, expected at %d", fr, s.Offset(), pos)
			}
			if rec.Type != RecordPadding { // padding has no write-order id
				if seen && rec.WriteOrderID <= woid {
					t.Fatalf("%v: write-order id %d after %d", fr, rec.WriteOrderID, woid)
				}
				seen, woid = true, rec.WriteOrderID
			}
			again, err := r.ReadRecord(s.Offset())
			if err != nil {
				t.Fatalf("%v: reader at %d: %v", fr, s.Offset(), err)
			}
			if again.WriteOrderID != rec.WriteOrderID || again.Type != rec.Type || !bytes.Equal(again.Body, rec.Body) ||
				!bytes.Equal(again.Sealed, rec.Sealed) {
				t.Fatalf("%v: reader and scanner disagree at %d", fr, s.Offset())
			}
			pos += int64(frameSize(fr, rec))
		}
		if err := s.Err(); err != nil {
			if !errors.Is(err, corrupt.ErrUnsupportedFormat) {
				t.Fatal(err)
			}
			if _, rerr := r.ReadRecord(s.End()); !errors.Is(rerr, corrupt.ErrUnsupportedFormat) {
				t.Fatalf("%v: scan stopped at %d by %v; the reader there says %v", fr, s.End(), err, rerr)
			}
		}
		if len(s.Skipped()) != skips {
			t.Fatalf("%v: skips reported after the last record: %v", fr, s.Skipped()[skips:])
		}
		if s.End() != pos || s.End() > size {
			t.Fatalf("%v: End %d, accounted %d, size %d", fr, s.End(), pos, size)
		}
		if (s.Tail() == TailClean) == (s.TailError() != nil) {
			t.Fatalf("%v: tail %v with error %v", fr, s.Tail(), s.TailError())
		}
		s.Close()
	}
}

// withPrefix returns seeds with every name prefixed.
func withPrefix(prefix string, seeds map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(seeds))
	for name, b := range seeds {
		out[prefix+name] = b
	}
	return out
}

// seedsOf returns the seeds of version 1 under their names and those of
// the salted versions (2 and 3: the same frames) named v2_...
func seedsOf(t testing.TB, seeds func(testing.TB, Framing) map[string][]byte) map[string][]byte {
	out := seeds(t, framingV1)
	for name, b := range withPrefix("v2_", seeds(t, testFraming)) {
		out[name] = b
	}
	for name, b := range withPrefix("v7_", seeds(t, testFramingV7)) {
		out[name] = b
	}
	return out
}

// recordsFor returns recs as a file of framing fr holds them: withTimes
// in versions 7 and 8.
func recordsFor(fr Framing, recs []Record) []Record {
	if fr.Timed() {
		return withTimes(recs)
	}
	return recs
}

// encryptedRecords returns the frames of an encrypted file of version v
// (testFraming's salt, goldenKeys, bound to testChannel in version 6) that
// follow its header: its key record, then sampleRecords with every put
// sealed; and the offset of each frame in those bytes.
func encryptedRecords(t testing.TB, v uint16) ([]byte, []int) {
	fr := encryptedTestFraming(t, goldenKeys, v, 1, testChannel)
	key := keyRecord(fr)
	recs := append([]Record{key}, sampleRecords()...)
	if fr.Timed() {
		recs = withTimes(recs)
	}
	var all []byte
	var offs []int
	for i := range recs {
		offs = append(offs, len(all))
		frame, err := appendUnsealedEncrypted(nil, &recs[i], fr.Timed())
		if err != nil {
			t.Fatal(err)
		}
		if err := fr.sealFrame(frame, HeaderSize+int64(len(all)), recs[i].WriteOrderID); err != nil {
			t.Fatal(err)
		}
		all = append(all, frame...)
	}
	return all, offs
}

// encryptedSeeds are the seeds of the encrypted versions, named v5_... and
// v6_...: for FuzzScanner (scanner) their records, intact and damaged in
// the key record and in a sealed put; for FuzzDecodeRecord the key record
// and a sealed put.
func encryptedSeeds(t testing.TB, scanner bool) map[string][]byte {
	out := map[string][]byte{}
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x40; return b }
	for _, v := range []uint16{EncryptedVersion, ChannelBoundVersion, TimedBoundVersion} {
		all, offs := encryptedRecords(t, v)
		p := fmt.Sprintf("v%d_", v)
		if scanner {
			out[p+"intact"] = all
			out[p+"damaged_key_record"] = flip(all, offs[0]+FrameHeaderSize+payloadHeaderSize+3)
			out[p+"damaged_sealed_put"] = flip(all, offs[1]+FrameHeaderSize+payloadHeaderSize+5)
			out[p+"torn_tail"] = all[:len(all)-7]
			continue
		}
		out[p+"key"] = all[:offs[1]]
		out[p+"sealed_put"] = all[offs[1]:offs[2]]
	}
	return out
}

// scannerSeeds are record sequences (without the file header), intact and
// damaged in the ways a crash or a bad disk damages them.
func scannerSeeds(t testing.TB) map[string][]byte {
	out := seedsOf(t, scannerSeedsOf)
	for name, b := range encryptedSeeds(t, true) {
		out[name] = b
	}
	return out
}

func scannerSeedsOf(t testing.TB, fr Framing) map[string][]byte {
	var all []byte
	var offs []int
	for _, r := range recordsFor(fr, sampleRecords()) {
		offs = append(offs, len(all))
		var err error
		if all, err = fr.AppendRecord(all, &r); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x40; return b }
	// A repair's result: record 4 overwritten with padding, in place.
	padded := bytes.Clone(all)
	pad, err := fr.AppendPadding(nil, offs[5]-offs[4])
	if err != nil {
		t.Fatal(err)
	}
	copy(padded[offs[4]:], pad)
	// The records of version 3, and that sequence damaged in a groups
	// record and in a skip record.
	var groups []byte
	var goffs []int
	for _, r := range groupRecords() {
		goffs = append(goffs, len(groups))
		if groups, err = fr.AppendRecord(groups, &r); err != nil {
			t.Fatal(err)
		}
	}
	return map[string][]byte{
		"groups_intact":          groups,
		"groups_damaged_catalog": flip(groups, goffs[1]+fr.FrameHeaderSize()+30),
		"groups_damaged_skip":    flip(groups, goffs[5]+fr.FrameHeaderSize()+18),
		"repaired_middle":        padded,
		"intact":                 all,
		"torn_tail":              all[:len(all)-7],
		"garbage_tail":           append(bytes.Clone(all), "garbage"...),
		"zero_tail":              append(bytes.Clone(all), make([]byte, 100)...),
		"damaged_middle":         flip(all, offs[4]+fr.FrameHeaderSize()+2),
		"damaged_length":         flip(all, offs[2]),
		"damaged_first":          flip(all, offs[0]+5),
		"empty":                  {},
	}
}

func recordSeeds(t testing.TB) map[string][]byte {
	out := seedsOf(t, recordSeedsOf)
	for name, b := range encryptedSeeds(t, false) {
		out[name] = b
	}
	return out
}

func recordSeedsOf(t testing.TB, fr Framing) map[string][]byte {
	appendRec := func(r *Record) []byte {
		b, err := fr.AppendRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	seeds := map[string][]byte{}
	for i, r := range recordsFor(fr, sampleRecords()) {
		seeds[fmt.Sprintf("valid_%02d_%v", i, r.Type)] = appendRec(&r)
	}
	for i, r := range recordsFor(fr, groupRecords()) {
		seeds[fmt.Sprintf("valid_groups_%02d_%v", i, r.Type)] = appendRec(&r)
	}
	og := optionGroupsRecord()
	seeds["valid_option_groups"] = appendRec(&og)
	put := appendRec(&Record{Type: RecordPut, Headers: map[string]string{"k": "v"}, Body: []byte("body")})
	seeds["truncated_put"] = put[:len(put)-1]
	badCRC := bytes.Clone(put)
	badCRC[len(badCRC)-1] ^= 1
	seeds["bad_checksum"] = badCRC
	seeds["zero_fill"] = make([]byte, 16)
	pad, err := fr.AppendPadding(nil, fr.MinPaddingSize()+15)
	if err != nil {
		t.Fatal(err)
	}
	seeds["valid_padding"] = pad
	if fr.version == 1 {
		// Payloads for the wrapped path (the same in every version).
		seeds["payload_padding"] = cat([]byte{byte(RecordPadding)}, make([]byte, 20))
		seeds["payload_put"] = cat(payloadHead(RecordPut), []byte{1, 1, 'k', 1, 'v', 2, 'h', 'i'})
		seeds["payload_take"] = cat(payloadHead(RecordTake), []byte{1, 0, 0, 0, 1, 0, 0, 0, 16})
		seeds["payload_commit"] = cat(payloadHead(RecordCommit), []byte{2, 0x81, 0x01})
		seeds["payload_group_take"] = cat(payloadHead(typeGroupTake), []byte{3, 1, 0, 0, 0, 1, 0, 0, 0, 36})
		seeds["payload_groups"] = cat([]byte{byte(RecordGroups)}, make([]byte, 8), payloadHead(RecordGroups)[9:],
			[]byte{3, 2, 0, 0, 0, 0, 0, 0, 0, 2, 1, 'g', 5, 0x80, 0x01, 1, 3, 1, 'd'})
		seeds["payload_skip"] = cat(payloadHead(RecordSkip), []byte{2, 0, 0x81, 0x01})
		seeds["payload_deliver"] = cat(payloadHead(RecordDeliver), []byte{2, 1, 0, 0, 0, 1, 0, 0, 0, 36, 0x81, 0x01})
		seeds["payload_move"] = cat(payloadHead(RecordMove), []byte{0x81, 0x01, 1, 0, 0, 0, 1, 0, 0, 0, 36})
	}
	return seeds
}

func headerSeeds() map[string][]byte {
	out := headerSeedsOf(framingV1)
	for _, fr := range []Framing{testFramingV2, testFramingV3, testFraming, testFramingV5, testFramingV6, testFramingV7, testFramingV8} {
		prefix := fmt.Sprintf("v%d_", fr.version)
		for name, b := range withPrefix(prefix, headerSeedsOf(fr)) {
			out[name] = b
		}
		// A salted header damaged in each of the places recoverFraming
		// looks at.
		h := appendFileHeader(nil, 1, fr)
		for name, i := range map[string]int{"bad_first_copy": 13, "bad_second_copy": 27} {
			b := bytes.Clone(h)
			b[i] ^= 1
			out[prefix+name] = b
		}
	}
	return out
}

func headerSeedsOf(fr Framing) map[string][]byte {
	bad := appendFileHeader(nil, 9, fr)
	bad[0] = 'X'
	return map[string][]byte{
		"valid_7":     appendFileHeader(nil, 7, fr),
		"valid_max":   appendFileHeader(nil, 1<<32-1, fr),
		"bad_magic":   bad,
		"short":       appendFileHeader(nil, 3, fr)[:10],
		"with_record": append(appendFileHeader(nil, 1, fr), 0, 0, 0, 1),
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
		testutil.CheckFuzzSeeds(t, target, seeds, *update)
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
		for _, fr := range fuzzFramings {
			checkMappedScan(t, filepath.Join(dir, LogName(1)), fr, b)
		}
	})
}

func checkMappedScan(t *testing.T, path string, fr Framing, b []byte) {
	if err := os.WriteFile(path, append(appendFileHeader(nil, 1, fr), b...), 0o644); err != nil {
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
			t.Fatalf("%v: mapped=%v ahead=%v: records %v skips %v end %d tail %v; buffered: %v %v %d %v",
				fr, mode[0], mode[1], s1, k1, e1, t1, s0, k0, e0, t0)
		}
	}
}
