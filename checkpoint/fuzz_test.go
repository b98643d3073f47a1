package checkpoint

// Fuzz targets: one per decoder of bytes read from disk (checkpoint.meta,
// the inflight files, the groups catalog, the checkpoint header slots) and one for the whole
// directory as Open reads it (header, metadata, inflight files, ring CRC).
// Run one with, for example:
//
//	go test -run '^$' -fuzz '^FuzzOpen$' -fuzztime 10s ./checkpoint/
//
// Seed corpora live in testdata/fuzz/FuzzXxx; TestWriteFuzzSeeds rewrites
// them with -update.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// requireDecodeError fails t unless err, from DecodeMeta or DecodeInflight,
// is a *corrupt.Error or (a newer version) a *corrupt.FormatError.
func requireDecodeError(t *testing.T, err error) {
	t.Helper()
	var ce *corrupt.Error
	var fe *corrupt.FormatError
	if !errors.As(err, &ce) && !errors.As(err, &fe) {
		t.Fatalf("error is neither a *corrupt.Error nor a *corrupt.FormatError: %v", err)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(EncodeMeta(sampleMeta()))
	f.Add(EncodeMeta(&Meta{Capacity: 1}))
	f.Add(EncodeMeta(spilledMeta()))
	f.Add(appendMetaAs(nil, sampleMeta(), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			requireDecodeError(t, err)
			return
		}
		if err := validateMeta(&m); err != nil {
			t.Fatalf("decoded an invalid meta: %v", err)
		}
		if !bytes.Equal(appendMetaAs(nil, &m, binary.BigEndian.Uint16(b[versionOffset:])), b) {
			t.Fatal("decode then encode does not reproduce the input")
		}
	})
}

func FuzzDecodeInflight(f *testing.F) {
	f.Add(EncodeInflight(InflightPuts, 9, sampleInflight()), false)
	f.Add(EncodeInflight(InflightTakes, 0, nil), true)
	f.Fuzz(func(t *testing.T, b []byte, takes bool) {
		kind := InflightPuts
		if takes {
			kind = InflightTakes
		}
		w, txs, err := DecodeInflight(kind, b)
		if err != nil {
			requireDecodeError(t, err)
			return
		}
		if err := validateInflight(kind, txs); err != nil {
			t.Fatalf("decoded invalid transactions: %v", err)
		}
		if !bytes.Equal(EncodeInflight(kind, w, txs), b) {
			t.Fatal("decode then encode does not reproduce the input")
		}
	})
}

// FuzzDecodeCatalog: an accepted groups file is valid. A version 2 to 5
// file re-encodes byte for byte (a version 3 one has a filter, 4 waiting
// events, 5 a take option); a version 1 file has no flags and no delivery
// counts, is encodeCatalogV1 of what it decodes to byte for byte, and
// rewritten (as version 2) decodes to the same catalog.
func FuzzDecodeCatalog(f *testing.F) {
	f.Add(EncodeCatalog(sampleCatalog()))
	f.Add(EncodeCatalog(&Catalog{}))
	f.Add(EncodeCatalog(goldenCatalogV2()))
	f.Add(EncodeCatalog(filteredCatalog()))
	f.Add(EncodeCatalog(optionsCatalog()))
	f.Add(encodeCatalogV1(sampleCatalogV1()))
	f.Add(encodeCatalogV1(&Catalog{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCatalog(b)
		if err != nil {
			requireDecodeError(t, err)
			return
		}
		if err := validateCatalog(c); err != nil {
			t.Fatalf("decoded an invalid catalog: %v", err)
		}
		enc := EncodeCatalog(c)
		switch v := binary.BigEndian.Uint16(b[versionOffset:]); v {
		case catalogVersion, catalogWaitingVersion, catalogFilteredVersion, catalogUnfilteredVersion:
			if !bytes.Equal(enc, b) {
				t.Fatal("decode then encode does not reproduce the input")
			}
		case 1:
			for _, g := range c.Groups {
				if g.DeadLetterGroup || g.Deliveries != nil {
					t.Fatalf("version 1 gave group %d flags or delivery counts: %+v", g.ID, g)
				}
			}
			if !bytes.Equal(encodeCatalogV1(c), b) {
				t.Fatal("decode then version 1 encode does not reproduce the input")
			}
			again, err := DecodeCatalog(enc)
			if err != nil {
				t.Fatalf("version 1 rewritten as version 2: %v", err)
			}
			if !reflect.DeepEqual(again, c) {
				t.Fatalf("version 1 rewritten as version 2 decodes to %+v, want %+v", again, c)
			}
		default:
			t.Fatalf("accepted version %d", v)
		}
	})
}

// FuzzDecodeHeader feeds decodeHeader the first bytes of a checkpoint file
// and the file's length. It must answer corrupt or incomplete, or accept a
// complete, self-consistent header that re-encodes to its bytes.
func FuzzDecodeHeader(f *testing.F) {
	files := goldenFiles(f)
	cp := files[CheckpointName]
	f.Add(cp[:headerUsed*8], int64(len(cp)))
	f.Add(make([]byte, headerUsed*8), int64(len(cp)))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		h, err := decodeHeader(CheckpointName, b, size)
		if err != nil {
			var ce *corrupt.Error
			var fe *corrupt.FormatError
			if !errors.As(err, &ce) && !errors.As(err, &fe) && !errors.Is(err, ErrIncomplete) {
				t.Fatalf("error is neither a *corrupt.Error, a *corrupt.FormatError nor ErrIncomplete: %v", err)
			}
			return
		}
		var enc [headerUsed * 8]byte
		for i, v := range h {
			binary.BigEndian.PutUint64(enc[i*8:], v)
		}
		if !bytes.Equal(enc[:], b[:headerUsed*8]) {
			t.Fatal("decode then encode does not reproduce the header")
		}
		capacity := h[slotCapacity]
		switch {
		case h[slotMagic] != magicVersion, h[slotMarker] != markerComplete:
			t.Fatalf("accepted magic %#x, marker %#x", h[slotMagic], h[slotMarker])
		case h[slotHeaderCRC] != uint64(headerCRC(&h)):
			t.Fatal("accepted a bad header CRC")
		case capacity < 1 || capacity > maxCapacity || size != (int64(capacity)+hs)*8:
			t.Fatalf("accepted capacity %d for file length %d", capacity, size)
		case h[slotHead] >= capacity || h[slotSize] > capacity:
			t.Fatalf("accepted head %d, size %d for capacity %d", h[slotHead], h[slotSize], capacity)
		}
	})
}

// FuzzOpen builds a checkpoint directory on a MemFS from four fuzzed files
// and opens it. Open must fail with ErrBadCheckpoint (incomplete or
// corrupt: a MemFS has no I/O errors) or with ErrUnsupportedFormat alone (a
// newer version), or return a checkpoint whose live ring matches its ring
// CRC and loads into a queue.
func FuzzOpen(f *testing.F) {
	files := goldenFiles(f)
	f.Add(files[CheckpointName], files[MetaName], files[InflightPutsName], files[InflightTakesName])
	f.Fuzz(func(t *testing.T, cp, meta, puts, takes []byte) {
		mem := newMem(t, "/cp")
		for name, b := range map[string][]byte{CheckpointName: cp, MetaName: meta, InflightPutsName: puts, InflightTakesName: takes} {
			replace(t, mem, path("/cp", name), b)
		}
		c, st, err := Open(mem, "/cp")
		if err != nil {
			newer := errors.Is(err, corrupt.ErrUnsupportedFormat)
			bad := errors.Is(err, ErrBadCheckpoint) && (errors.Is(err, ErrIncomplete) || errors.Is(err, corrupt.ErrCorrupt))
			if newer == bad || (newer && errors.Is(err, corrupt.ErrCorrupt)) {
				t.Fatalf("Open = %v, want ErrBadCheckpoint (incomplete or corrupt) or ErrUnsupportedFormat alone", err)
			}
			return
		}
		defer c.Close()
		ring := make([]uint64, st.Capacity)
		for i := range ring {
			ring[i] = binary.BigEndian.Uint64(cp[(hs+i)*8:])
		}
		if want := wantRingCRC(ring, st.Head, st.Size); st.RingCRC != want {
			t.Fatalf("accepted RingCRC %#08x, live ring gives %#08x", st.RingCRC, want)
		}
		q, err := eventqueue.New(c, st.Capacity, st.Head, st.Size, nil)
		if err != nil {
			t.Fatalf("accepted checkpoint does not load: %v", err)
		}
		if len(q.Pointers()) != st.Size {
			t.Fatalf("queue holds %d pointers, want %d", len(q.Pointers()), st.Size)
		}
	})
}

// goldenFiles returns the four files of the golden checkpoint (goldenState),
// written by Write on a MemFS.
func goldenFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	st, ring := goldenState()
	mem := newMem(tb, "/cp")
	c, err := Create(mem, "/cp", st.Capacity)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	for r, v := range ring {
		c.SetSlot(r, v)
	}
	c.Freeze()
	err = c.Write(st)
	c.Thaw(err == nil)
	if err != nil {
		tb.Fatal(err)
	}
	files := make(map[string][]byte)
	for _, name := range checkpointFiles {
		if files[name], err = vfs.ReadFile(mem, path("/cp", name)); err != nil {
			tb.Fatal(err)
		}
	}
	return files
}

// TestWriteFuzzSeeds writes the seed corpora under testdata/fuzz (with
// -update): valid files and near misses of each kind of damage.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	quote := func(bs ...[]byte) string {
		var s string
		for _, b := range bs {
			s += fmt.Sprintf("[]byte(%q)\n", b)
		}
		return s
	}

	meta := EncodeMeta(sampleMeta())
	for name, b := range map[string][]byte{
		"valid":           meta,
		"empty":           EncodeMeta(&Meta{Capacity: 1}),
		"bad_checksum":    flipNoCRC(30)(bytes.Clone(meta)),
		"log_truncated":   put32(88, 3)(bytes.Clone(meta)),
		"huge_log_count":  put32(64, 0xFFFFFFFF)(bytes.Clone(meta)),
		"ring_crc_empty":  put32(60, 1)(put64(32, 0)(bytes.Clone(meta))),
		"head_past_end":   put64(24, 64)(bytes.Clone(meta)),
		"trailing_bytes":  appendTrailing(bytes.Clone(meta)),
		"takes_unordered": put32(96, 2)(bytes.Clone(meta)),
	} {
		writeSeed(t, "FuzzDecodeMeta", name, quote(b))
	}

	infl := EncodeInflight(InflightPuts, 9, sampleInflight())
	for name, b := range map[string][]byte{
		"valid":         infl,
		"empty":         EncodeInflight(InflightPuts, 1, nil),
		"dup_tx":        put64(48, 1)(bytes.Clone(infl)),
		"huge_tx_count": put32(16, 1<<31)(bytes.Clone(infl)),
		"zero_pointer":  put64(32, 0)(bytes.Clone(infl)),
	} {
		writeSeed(t, "FuzzDecodeInflight", name, quote(b)+"bool(false)\n")
	}
	writeSeed(t, "FuzzDecodeInflight", "valid_takes", quote(EncodeInflight(InflightTakes, 9, sampleInflight()))+"bool(true)\n")

	cat := EncodeCatalog(sampleCatalog())
	catV1 := encodeCatalogV1(sampleCatalogV1())
	for name, b := range map[string][]byte{
		"valid":                   cat,
		"valid_golden":            EncodeCatalog(goldenCatalogV2()),
		"empty":                   EncodeCatalog(&Catalog{}),
		"bad_checksum":            flipNoCRC(30)(bytes.Clone(cat)),
		"huge_group_count":        put32(20, 0xFFFFFFFF)(bytes.Clone(cat)),
		"names_truncated":         putByte(145, 64)(bytes.Clone(cat)),
		"duplicate_name":          func(b []byte) []byte { copy(b[148:], "audit"); return reCRC(b) }(bytes.Clone(cat)),
		"id_not_below":            put32(16, 4)(bytes.Clone(cat)),
		"trailing_bytes":          appendTrailing(bytes.Clone(cat)),
		"newer_version":           put16(versionOffset, 3)(bytes.Clone(cat)),
		"flags_unknown":           putByte(147, 0x03)(bytes.Clone(cat)),
		"huge_delivery_count":     put32(92, 0xFFFFFFFF)(bytes.Clone(cat)),
		"delivery_count_past_end": put32(153, 1)(bytes.Clone(cat)),
		"delivery_pointer_zero":   put64(96, 0)(bytes.Clone(cat)),
		"delivery_count_zero":     put32(104, 0)(bytes.Clone(cat)),
		"deliveries_unordered":    put64(108, sampleCatalog().Groups[1].Deliveries[0].Pointer)(bytes.Clone(cat)),
		"v1_valid":                catV1,
		"v1_empty":                encodeCatalogV1(&Catalog{}),
		"v1_flags":                putByte(79, groupFlagDeadLetter)(bytes.Clone(catV1)),
		"v1_names_truncated":      putByte(113, 64)(bytes.Clone(catV1)),
		"v1_trailing_bytes":       appendTrailing(bytes.Clone(catV1)),
		"v1_as_version_2":         put16(versionOffset, 2)(bytes.Clone(catV1)),
	} {
		writeSeed(t, "FuzzDecodeCatalog", name, quote(b))
	}

	files := goldenFiles(t)
	cp := files[CheckpointName]
	hdr := cp[:headerUsed*8]
	// setSlot returns hdr with header slot i set to v and, if crc, a matching
	// header CRC.
	setSlot := func(i int, v uint64, crc bool) []byte {
		b := bytes.Clone(hdr)
		binary.BigEndian.PutUint64(b[i*8:], v)
		if crc {
			var h [headerUsed]uint64
			for j := range h {
				h[j] = binary.BigEndian.Uint64(b[j*8:])
			}
			binary.BigEndian.PutUint64(b[slotHeaderCRC*8:], uint64(headerCRC(&h)))
		}
		return b
	}
	size := int64(len(cp))
	for name, seed := range map[string]struct {
		b    []byte
		size int64
	}{
		"valid":             {hdr, size},
		"zero":              {make([]byte, headerUsed*8), size},
		"truncated":         {hdr[:20], size},
		"incomplete":        {setSlot(slotMarker, markerIncomplete, false), size},
		"bad_crc":           {setSlot(slotTime, 1, false), size},
		"crc_high_bits":     {setSlot(slotHeaderCRC, 1<<40|binary.BigEndian.Uint64(hdr[slotHeaderCRC*8:]), false), size},
		"unsupported_ver":   {setSlot(slotMagic, magicVersion+1, true), size},
		"head_at_capacity":  {setSlot(slotHead, 8, true), size},
		"length_mismatch":   {hdr, size - 8},
		"capacity_too_high": {setSlot(slotCapacity, 1<<62, true), size},
	} {
		writeSeed(t, "FuzzDecodeHeader", name, quote(seed.b)+fmt.Sprintf("int64(%d)\n", seed.size))
	}

	garble := func(off int) []byte { b := bytes.Clone(cp); b[off] ^= 0x20; return b }
	other, _ := goldenState()
	other.WriteOrderID++
	for name, fs := range map[string][4][]byte{
		"valid":              {cp, files[MetaName], files[InflightPutsName], files[InflightTakesName]},
		"live_slot_garbled":  {garble((hs+7)*8 + 6), files[MetaName], files[InflightPutsName], files[InflightTakesName]},
		"stale_slot_garbled": {garble((hs+3)*8 + 6), files[MetaName], files[InflightPutsName], files[InflightTakesName]},
		"incomplete":         {setSlotIn(cp, slotMarker, markerIncomplete), files[MetaName], files[InflightPutsName], files[InflightTakesName]},
		"ring_truncated":     {cp[:len(cp)-8], files[MetaName], files[InflightPutsName], files[InflightTakesName]},
		"meta_of_other_w":    {cp, EncodeMeta(&other.Meta), files[InflightPutsName], files[InflightTakesName]},
		"inflight_swapped":   {cp, files[MetaName], files[InflightTakesName], files[InflightPutsName]},
		"all_empty":          {nil, nil, nil, nil},
	} {
		writeSeed(t, "FuzzOpen", name, quote(fs[0], fs[1], fs[2], fs[3]))
	}
}

// setSlotIn returns a copy of b with slot i set to v.
func setSlotIn(b []byte, i int, v uint64) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint64(b[i*8:], v)
	return b
}

func writeSeed(t *testing.T, target, name, body string) {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("go test fuzz v1\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
}
