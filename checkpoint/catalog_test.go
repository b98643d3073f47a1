package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
)

// sampleCatalog is the catalog the damage table below edits; the comments
// give the byte offset of each entry and field in its version 2 encoding.
func sampleCatalog() *Catalog {
	return &Catalog{WriteOrderID: 1000, NextGroupID: 5, Groups: []Group{
		{ID: 0, Capacity: 64}, // at 24; flags at 51; delivery count at 52
		// at 56; flags at 83; name at 84, dead letter at 89; delivery count
		// at 92; deliveries at 96 (count at 104) and 108 (count at 116)
		{ID: 2, Name: "audit", Since: 77, Capacity: 1000, Policy: 1, MaxDeliveries: 5, DeadLetter: "dlq", Deliveries: []Delivery{
			{Pointer: uint64(eventqueue.NewPointer(1, 16)), Count: 1},
			{Pointer: uint64(eventqueue.NewPointer(1, 32)), Count: 4},
		}},
		// at 120; flags at 147; name at 148; delivery count at 153; CRC at 157
		{ID: 4, Name: "retry", Since: 90, Capacity: 10, Policy: 2, DeadLetterGroup: true},
	}}
}

// sampleCatalogV1 is sampleCatalog without what version 1 cannot hold; the
// comments give the byte offsets of its version 1 encoding.
func sampleCatalogV1() *Catalog {
	return &Catalog{WriteOrderID: 1000, NextGroupID: 5, Groups: []Group{
		{ID: 0, Capacity: 64}, // at 24; reserved byte at 51
		{ID: 2, Name: "audit", Since: 77, Capacity: 1000, Policy: 1, MaxDeliveries: 5, DeadLetter: "dlq"}, // at 52; reserved byte at 79; name at 80, dead letter at 85
		{ID: 4, Name: "retry", Since: 90, Capacity: 10, Policy: 2},                                        // at 88; reserved byte at 115; name at 116; CRC at 121
	}}
}

// withoutV2Fields returns a copy of c without flags and delivery counts: the
// catalog its version 1 file holds.
func withoutV2Fields(c *Catalog) *Catalog {
	v1 := &Catalog{WriteOrderID: c.WriteOrderID, NextGroupID: c.NextGroupID}
	for _, g := range c.Groups {
		g.DeadLetterGroup, g.Deliveries = false, nil
		v1.Groups = append(v1.Groups, g)
	}
	return v1
}

// encodeCatalogV1 returns the version 1 groups file of c, as the releases
// before version 2 wrote it (testdata/v1/groups pins it). c must hold
// nothing that version 1 cannot: no flags, no delivery counts.
func encodeCatalogV1(c *Catalog) []byte {
	be := binary.BigEndian
	dst := append([]byte(nil), catalogMagic...)
	dst = be.AppendUint16(dst, 1)
	dst = be.AppendUint16(dst, 0)
	dst = be.AppendUint64(dst, c.WriteOrderID)
	dst = be.AppendUint32(dst, c.NextGroupID)
	dst = be.AppendUint32(dst, uint32(len(c.Groups)))
	for _, g := range c.Groups {
		if g.DeadLetterGroup || len(g.Deliveries) > 0 {
			panic(fmt.Sprintf("group %d does not fit version 1", g.ID))
		}
		dst = be.AppendUint32(dst, g.ID)
		dst = be.AppendUint64(dst, g.Since)
		dst = be.AppendUint64(dst, uint64(g.Capacity))
		dst = be.AppendUint32(dst, g.MaxDeliveries)
		dst = append(dst, g.Policy, byte(len(g.Name)), byte(len(g.DeadLetter)), 0)
		dst = append(dst, g.Name...)
		dst = append(dst, g.DeadLetter...)
	}
	return be.AppendUint32(dst, crc32.Checksum(dst, crcTable))
}

func TestDecodeCatalogRejects(t *testing.T) {
	putStr := func(off int, s string) func([]byte) []byte {
		return func(b []byte) []byte { copy(b[off:], s); return reCRC(b) }
	}
	p0 := sampleCatalog().Groups[1].Deliveries[0].Pointer
	cases := []decodeCase{
		{"bad_checksum", flipNoCRC(30), 157},
		{"too_short", cut(20), 20},
		{"bad_magic", putByte(0, 'X'), 0},
		{"meta_magic", putByte(3, 'M'), 0},
		{"version_0", putByte(5, 0), 4},
		{"reserved_not_zero", putByte(7, 1), 6},
		{"count_too_large", put32(20, 0xFFFFFFFF), 20},
		{"count_past_the_bytes_left", put32(20, 5), 20}, // 133 bytes of entries hold no 5 fixed parts
		{"count_one_too_many", put32(20, 4), 157},       // a fourth entry would start at the CRC
		{"capacity_zero", put64(36, 0), 36},
		{"capacity_too_large", put64(36, 1<<63), 36},
		{"policy_unknown", putByte(48, 3), 48},
		{"unnamed_group_named", putByte(49, 1), 49},
		{"name_empty", putByte(81, 0), 81},
		{"name_too_long", putByte(81, 65), 81},
		{"dead_letter_too_long", putByte(82, 65), 82},
		{"flags_unknown_bit", putByte(83, 2), 83},
		{"flags_high_bit", putByte(51, 0x80), 51},
		{"flags_unknown_with_dead_letter", putByte(147, 0x03), 147},
		{"names_truncated", putByte(145, 64), 148},
		{"delivery_count_truncated", putByte(146, 2), 155}, // a 2-byte dead letter leaves 2 of the count's 4 bytes
		{"delivery_count_too_large", put32(92, 0xFFFFFFFF), 92},
		{"delivery_count_past_the_bytes_left", put32(92, 6), 92}, // 61 bytes left hold 5 entries
		{"last_delivery_count_past_the_end", put32(153, 1), 153},
		{"delivery_pointer_zero", put64(96, 0), 96},
		{"second_delivery_pointer_zero", put64(108, 0), 108},
		{"delivery_count_zero", put32(104, 0), 104},
		{"second_delivery_count_zero", put32(116, 0), 116},
		{"delivery_pointers_equal", put64(108, p0), 108},
		{"delivery_pointers_descending", put64(108, p0-1), 108},
		// Group 2's third delivery is group 4's id and since (a valid
		// pointer and count); group 4's entry is then 25 bytes.
		{"entry_truncated", put32(92, 3), 132},
		{"ids_not_ascending", put32(120, 2), 120},
		{"id_not_below_next", put32(16, 4), 120},
		{"duplicate_name", putStr(148, "audit"), 148},
		{"trailing_bytes", appendTrailing, 157},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCatalog(tc.edit(EncodeCatalog(sampleCatalog())))
			checkCorrupt(t, err, CatalogName, tc.wantOff)
		})
	}
}

// TestDecodeCatalogV1Rejects: the version 1 layout (no flags, no delivery
// counts) is still checked field by field.
func TestDecodeCatalogV1Rejects(t *testing.T) {
	putStr := func(off int, s string) func([]byte) []byte {
		return func(b []byte) []byte { copy(b[off:], s); return reCRC(b) }
	}
	cases := []decodeCase{
		{"bad_checksum", flipNoCRC(30), 121},
		{"too_short", cut(20), 20},
		{"count_too_large", put32(20, 0xFFFFFFFF), 20},
		{"count_one_too_many", put32(20, 4), 20},
		{"capacity_zero", put64(36, 0), 36},
		{"policy_unknown", putByte(48, 3), 48},
		{"unnamed_group_named", putByte(49, 1), 49},
		{"name_empty", putByte(77, 0), 77},
		{"name_too_long", putByte(77, 65), 77},
		{"dead_letter_too_long", putByte(78, 65), 78},
		// The flags byte of version 2 is reserved in version 1: even the
		// dead-letter bit is damage there.
		{"entry_reserved_dead_letter_bit", putByte(79, groupFlagDeadLetter), 79},
		{"entry_reserved_unknown_bit", putByte(115, 2), 115},
		{"unnamed_entry_reserved_not_zero", putByte(51, 0x80), 51},
		{"names_truncated", putByte(113, 64), 116},
		{"entry_truncated", putByte(77, 36), 119}, // group 2's name swallows group 4's entry
		{"ids_not_ascending", put32(88, 2), 88},
		{"id_not_below_next", put32(16, 4), 88},
		{"duplicate_name", putStr(116, "audit"), 116},
		// Version 1 has no delivery counts: 4 more bytes are trailing.
		{"trailing_bytes", appendTrailing, 121},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCatalog(tc.edit(encodeCatalogV1(sampleCatalogV1())))
			checkCorrupt(t, err, CatalogName, tc.wantOff)
		})
	}
}

func TestDecodeCatalogNewerVersion(t *testing.T) {
	for _, b := range [][]byte{EncodeCatalog(sampleCatalog()), encodeCatalogV1(sampleCatalogV1())} {
		for what, edit := range map[string]func([]byte) []byte{
			"version_6":                put16(versionOffset, 6),
			"version_65535":            put16(versionOffset, 0xFFFF),
			"version_6_other_checksum": func(b []byte) []byte { b = put16(versionOffset, 6)(b); b[len(b)-1] ^= 1; return b },
			"version_6_other_length":   func(b []byte) []byte { return put16(versionOffset, 6)(b)[:versionEnd] },
			"version_6_other_flags":    func(b []byte) []byte { return putByte(51, 0xFF)(put16(versionOffset, 6)(b)) },
		} {
			t.Run(fmt.Sprintf("from_v%d/%s", b[versionOffset+1], what), func(t *testing.T) {
				e := edit(bytes.Clone(b))
				_, err := DecodeCatalog(e)
				requireNewerThan(t, err, CatalogName, uint64(e[versionOffset])<<8|uint64(e[versionOffset+1]), catalogVersion)
			})
		}
	}
}

func put16(off int, v uint16) func([]byte) []byte {
	return func(b []byte) []byte { b[off], b[off+1] = byte(v>>8), byte(v); return reCRC(b) }
}

// randomCatalog returns a valid catalog with up to 8 groups, the unnamed
// one among them or not, some of them dead-letter groups and with delivery
// counts.
func randomCatalog(rng *rand.Rand) *Catalog {
	deliveries := func() []Delivery {
		var ds []Delivery
		p := uint64(0)
		for range rng.IntN(6) {
			step := 1 + rng.Uint64N(1<<40)
			if rng.IntN(20) == 0 {
				step = 1 + rng.Uint64N(math.MaxUint64/8) // the high bits too
			}
			if p > math.MaxUint64-step {
				break
			}
			p += step
			count := 1 + rng.Uint32N(10)
			if rng.IntN(10) == 0 {
				count = 1 + rng.Uint32N(math.MaxUint32)
			}
			ds = append(ds, Delivery{Pointer: p, Count: count})
		}
		return ds
	}
	c := &Catalog{WriteOrderID: rng.Uint64()}
	id := uint32(0)
	if rng.IntN(2) == 0 {
		c.Groups = append(c.Groups, Group{
			Capacity: 1 + rng.IntN(1<<20), Since: rng.Uint64(), Policy: uint8(rng.IntN(3)), MaxDeliveries: rng.Uint32(),
			DeadLetterGroup: rng.IntN(4) == 0, Deliveries: deliveries(),
		})
	}
	for i := range rng.IntN(8) {
		id += 1 + uint32(rng.IntN(100))
		c.Groups = append(c.Groups, Group{
			ID: id, Name: strings.Repeat(string(rune('a'+i)), 1+rng.IntN(MaxGroupNameLen)), Since: rng.Uint64(),
			Capacity: 1 + rng.IntN(1<<30), Policy: uint8(rng.IntN(3)), MaxDeliveries: rng.Uint32(),
			DeadLetter:      strings.Repeat("d", rng.IntN(MaxGroupNameLen+1)),
			DeadLetterGroup: rng.IntN(4) == 0, Deliveries: deliveries(),
		})
	}
	c.NextGroupID = id + 1 + uint32(rng.IntN(3))
	return c
}

// TestCatalogRoundTrip: a valid catalog encodes to version 2 bytes that
// decode back to it and re-encode byte for byte; without flags and delivery
// counts, its version 1 bytes decode to it too.
func TestCatalogRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	var flags, deliveries int
	for i := range 300 {
		c := randomCatalog(rng)
		if i == 0 {
			c = &Catalog{} // everything empty or zero
		}
		for _, g := range c.Groups {
			if g.DeadLetterGroup {
				flags++
			}
			deliveries += len(g.Deliveries)
		}
		if err := validateCatalog(c); err != nil {
			t.Fatalf("random catalog invalid: %v", err)
		}
		b := EncodeCatalog(c)
		if v := binary.BigEndian.Uint16(b[versionOffset:]); v != catalogUnfilteredVersion {
			t.Fatalf("EncodeCatalog wrote version %d, want %d", v, catalogUnfilteredVersion)
		}
		got, err := DecodeCatalog(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("got %+v, want %+v", got, c)
		}
		if !bytes.Equal(EncodeCatalog(got), b) {
			t.Fatal("catalog re-encoding differs")
		}

		v1 := withoutV2Fields(c)
		got, err = DecodeCatalog(encodeCatalogV1(v1))
		if err != nil {
			t.Fatalf("version 1: %v", err)
		}
		if !reflect.DeepEqual(got, v1) {
			t.Fatalf("version 1: got %+v, want %+v", got, v1)
		}
		if got, err = DecodeCatalog(EncodeCatalog(got)); err != nil || !reflect.DeepEqual(got, v1) {
			t.Fatalf("version 1 rewritten as version 2: got %+v, %v; want %+v", got, err, v1)
		}
	}
	if flags == 0 || deliveries == 0 {
		t.Fatalf("random catalogs had %d dead-letter groups, %d delivery counts", flags, deliveries)
	}
}

func TestWriteCatalogRejectsInvalid(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Catalog)
	}{
		{"ids_unsorted", func(c *Catalog) { c.Groups[1].ID = 5; c.NextGroupID = 6 }},
		{"ids_duplicate", func(c *Catalog) { c.Groups[2].ID = 2 }},
		{"id_not_below_next", func(c *Catalog) { c.NextGroupID = 4 }},
		{"no_next_for_unnamed", func(c *Catalog) { c.Groups = c.Groups[:1]; c.NextGroupID = 0 }},
		{"unnamed_group_named", func(c *Catalog) { c.Groups[0].Name = "x" }},
		{"name_empty", func(c *Catalog) { c.Groups[1].Name = "" }},
		{"name_too_long", func(c *Catalog) { c.Groups[1].Name = strings.Repeat("n", MaxGroupNameLen+1) }},
		{"dead_letter_too_long", func(c *Catalog) { c.Groups[1].DeadLetter = strings.Repeat("n", MaxGroupNameLen+1) }},
		{"capacity_zero", func(c *Catalog) { c.Groups[2].Capacity = 0 }},
		{"capacity_negative", func(c *Catalog) { c.Groups[0].Capacity = -1 }},
		{"policy_unknown", func(c *Catalog) { c.Groups[1].Policy = 3 }},
		{"names_duplicate", func(c *Catalog) { c.Groups[2].Name = "audit" }},
		{"delivery_pointer_zero", func(c *Catalog) { c.Groups[1].Deliveries[0].Pointer = 0 }},
		{"unnamed_delivery_pointer_zero", func(c *Catalog) { c.Groups[0].Deliveries = []Delivery{{Pointer: 0, Count: 1}} }},
		{"delivery_count_zero", func(c *Catalog) { c.Groups[1].Deliveries[1].Count = 0 }},
		{"unnamed_delivery_count_zero", func(c *Catalog) { c.Groups[0].Deliveries = []Delivery{{Pointer: 1, Count: 0}} }},
		{"delivery_pointers_equal", func(c *Catalog) {
			c.Groups[1].Deliveries[1].Pointer = c.Groups[1].Deliveries[0].Pointer
		}},
		{"delivery_pointers_descending", func(c *Catalog) {
			d := c.Groups[1].Deliveries
			d[0], d[1] = d[1], d[0]
		}},
		{"later_group_delivery_out_of_order", func(c *Catalog) {
			c.Groups[2].Deliveries = []Delivery{{Pointer: 7, Count: 1}, {Pointer: 8, Count: 2}, {Pointer: 8, Count: 3}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t, "/cp")
			c := sampleCatalog()
			tc.edit(c)
			if err := WriteCatalog(mem, "/cp", c); err == nil || !strings.Contains(err.Error(), "invalid catalog") {
				t.Fatalf("WriteCatalog = %v, want an invalid-catalog error", err)
			}
			if names, _ := mem.List("/cp"); len(names) != 0 {
				t.Fatalf("a rejected WriteCatalog left %v", names)
			}
		})
	}
	if err := WriteCatalog(newMem(t, "/cp"), "/cp", nil); err == nil {
		t.Fatal("WriteCatalog(nil) accepted")
	}
	// The limits themselves are valid.
	c := sampleCatalog()
	c.Groups[1].Name, c.Groups[1].DeadLetter = strings.Repeat("n", MaxGroupNameLen), strings.Repeat("d", MaxGroupNameLen)
	if err := validateCatalog(c); err != nil {
		t.Fatalf("names of %d bytes: %v", MaxGroupNameLen, err)
	}
	c = sampleCatalog()
	for i := range c.Groups {
		c.Groups[i].DeadLetterGroup = true
	}
	c.Groups[0].Deliveries = []Delivery{{Pointer: 1, Count: 1}, {Pointer: math.MaxUint64, Count: math.MaxUint32}}
	if err := validateCatalog(c); err != nil {
		t.Fatalf("extreme delivery counts: %v", err)
	}
	if got, err := DecodeCatalog(EncodeCatalog(c)); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("extreme delivery counts: DecodeCatalog = %+v, %v", got, err)
	}
}

// TestWriteReadCatalog: ReadCatalog reads back what WriteCatalog published,
// durably; a dir without a catalog is fs.ErrNotExist; damage names the file.
func TestWriteReadCatalog(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		if _, err := ReadCatalog(fsys, dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("ReadCatalog of a dir without one = %v, want fs.ErrNotExist", err)
		}
		want := sampleCatalog()
		if err := WriteCatalog(fsys, dir, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCatalog(fsys, dir)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("ReadCatalog = %+v, %v; want %+v", got, err, want)
		}
		if names, _ := fsys.List(dir); !reflect.DeepEqual(names, []string{CatalogName}) {
			t.Fatalf("dir holds %v", names)
		}
		patch(t, fsys, path(dir, CatalogName), 30, []byte{0xFF})
		_, err = ReadCatalog(fsys, dir)
		checkCorrupt(t, err, path(dir, CatalogName), 157)
	})
	mem := newMem(t, "/cp")
	if err := WriteCatalog(mem, "/cp", sampleCatalog()); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCatalog(mem.CrashClone(false, 0), "/cp"); err != nil || !reflect.DeepEqual(got, sampleCatalog()) {
		t.Fatalf("after a power loss: ReadCatalog = %+v, %v", got, err)
	}
}

// goldenCatalog is the catalog stored in testdata/v1/groups.
func goldenCatalog() *Catalog {
	return &Catalog{WriteOrderID: 0x0102030405060708, NextGroupID: 3, Groups: []Group{
		{ID: 0, Since: 0, Capacity: 8},
		{ID: 2, Name: "audit", Since: 0x0102030405060700, Capacity: 16, Policy: 1, MaxDeliveries: 3, DeadLetter: "dead"},
	}}
}

// TestGoldenCatalogV1 pins the version 1 groups format, which this release
// reads but no longer writes: testdata/v1/groups (never rewritten, not even
// by -update) is encodeCatalogV1 of the golden catalog byte for byte and
// still decodes to it; rewritten, it is version 2 with the same content.
func TestGoldenCatalogV1(t *testing.T) {
	name := filepath.Join("testdata", "v1", CatalogName)
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encodeCatalogV1(goldenCatalog()), want) {
		t.Fatalf("%s differs from the version 1 encoding of the golden catalog", name)
	}
	c, err := DecodeCatalog(want)
	if err != nil || !reflect.DeepEqual(c, goldenCatalog()) {
		t.Fatalf("DecodeCatalog(golden) = %+v, %v", c, err)
	}
	b := EncodeCatalog(c)
	if v := binary.BigEndian.Uint16(b[versionOffset:]); v != catalogUnfilteredVersion {
		t.Fatalf("rewritten as version %d", v)
	}
	if c, err = DecodeCatalog(b); err != nil || !reflect.DeepEqual(c, goldenCatalog()) {
		t.Fatalf("DecodeCatalog(golden rewritten) = %+v, %v", c, err)
	}
}

// goldenCatalogV2 is the catalog stored in testdata/v2/groups: a
// dead-letter group, and a group with several delivery counts.
func goldenCatalogV2() *Catalog {
	return &Catalog{WriteOrderID: 0x0102030405060708, NextGroupID: 4, Groups: []Group{
		{ID: 0, Since: 0, Capacity: 8},
		{ID: 2, Name: "audit", Since: 0x0102030405060700, Capacity: 16, Policy: 1, MaxDeliveries: 3, DeadLetter: "dead", Deliveries: []Delivery{
			{Pointer: uint64(eventqueue.NewPointer(1, 16)), Count: 1},
			{Pointer: uint64(eventqueue.NewPointer(1, 48)), Count: 2},
			{Pointer: uint64(eventqueue.NewPointer(2, 8)), Count: 3},
		}},
		{ID: 3, Name: "dead", Since: 0x0102030405060705, Capacity: 4, Policy: 2, DeadLetterGroup: true},
	}}
}

// goldenCatalogV2Bytes is testdata/v2/groups spelled out field by field
// (see format.go), so that the file pins the format, not EncodeCatalog.
const goldenCatalogV2Bytes = `
46434752 0002 0000                // magic "FCGR", version 2, reserved
0102030405060708                  // W
00000004 00000003                 // next group id 4, 3 groups
00000000 0000000000000000         // group 0, since 0
0000000000000008 00000000         // capacity 8, max deliveries 0
00 00 00 00                       // policy 0, no name, no dead letter, flags 0
00000000                          // 0 delivery counts
00000002 0102030405060700         // group 2, since
0000000000000010 00000003         // capacity 16, max deliveries 3
01 05 04 00                       // policy 1, name 5, dead letter 4, flags 0
6175646974 64656164               // "audit", "dead"
00000003                          // 3 delivery counts:
0000000100000010 00000001         //   pointer (1, 16): 1
0000000100000030 00000002         //   pointer (1, 48): 2
0000000200000008 00000003         //   pointer (2, 8): 3
00000003 0102030405060705         // group 3, since
0000000000000004 00000000         // capacity 4, max deliveries 0
02 04 00 01                       // policy 2, name 4, no dead letter, flags: a dead-letter group
64656164                          // "dead"
00000000                          // 0 delivery counts
`

// TestGoldenCatalogV2 pins the version 2 groups format: encoding the golden
// catalog gives testdata/v2/groups byte for byte (-update rewrites it), the
// file is the layout spelled out above, and it decodes back.
func TestGoldenCatalogV2(t *testing.T) {
	name := filepath.Join("testdata", "v2", CatalogName)
	got := EncodeCatalog(goldenCatalogV2())
	if *update {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenCatalogV2 -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from testdata/v2: the on-disk format changed", CatalogName)
	}
	var spelled []byte
	for _, line := range strings.Split(goldenCatalogV2Bytes, "\n") {
		line, _, _ = strings.Cut(line, "//")
		b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(line), " ", ""))
		if err != nil {
			t.Fatalf("goldenCatalogV2Bytes: %v", err)
		}
		spelled = append(spelled, b...)
	}
	spelled = binary.BigEndian.AppendUint32(spelled, crc32.Checksum(spelled, crcTable))
	if !bytes.Equal(want, spelled) {
		t.Fatalf("testdata/v2/%s is not the layout spelled out:\n% x\nwant\n% x", CatalogName, want, spelled)
	}
	c, err := DecodeCatalog(want)
	if err != nil || !reflect.DeepEqual(c, goldenCatalogV2()) {
		t.Fatalf("DecodeCatalog(golden) = %+v, %v", c, err)
	}
}

// filteredCatalog is a catalog with a filtered group: written as version 3.
func filteredCatalog() *Catalog {
	c := sampleCatalog()
	c.Groups[len(c.Groups)-1].Filter = `headers["tag"] in ["a", "b"]`
	return c
}

// TestCatalogFilters: a catalog with a filter is written as version 3 and
// decodes to itself; one without is version 2, which builds before
// filters read; a version 3 file without a filter, or with a filter too
// long or truncated, is corrupt.
func TestCatalogFilters(t *testing.T) {
	c := filteredCatalog()
	b := EncodeCatalog(c)
	if v := binary.BigEndian.Uint16(b[versionOffset:]); v != 3 {
		t.Fatalf("filtered catalog written as version %d", v)
	}
	got, err := DecodeCatalog(b)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("DecodeCatalog = %+v, %v; want %+v", got, err, c)
	}
	long := filteredCatalog()
	long.Groups[0].Filter = strings.Repeat("x", maxFilterLen+1)
	if err := validateCatalog(long); err == nil {
		t.Fatal("validateCatalog took a filter over the limit")
	}
	// A version 2 encoding relabelled 3: no entry has a filter field.
	plain := EncodeCatalog(sampleCatalog())
	if _, err := DecodeCatalog(resum(put16(versionOffset, 3)(plain))); err == nil {
		t.Fatal("version 3 without filter fields accepted")
	}
	// Truncated: the last entry's filter cut short.
	short := bytes.Clone(b[:len(b)-crcLen-3])
	if _, err := DecodeCatalog(binary.BigEndian.AppendUint32(short, crc32.Checksum(short, crcTable))); err == nil {
		t.Fatal("truncated filter accepted")
	}
}

// resum recomputes b's trailing checksum.
func resum(b []byte) []byte {
	body := b[:len(b)-crcLen]
	return binary.BigEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, crcTable))
}

// TestCatalogWaitingRoundTrip: a catalog whose group has waiting events is
// version 4 and decodes to what was encoded; one without stays version 2
// (or 3 with a filter), which older builds read; a version 4 catalog
// without a waiting event, or with a due time of 0, is corrupt.
func TestCatalogWaitingRoundTrip(t *testing.T) {
	c := sampleCatalog()
	c.Groups[0].Waiting = []Waiting{{Pointer: 1<<32 | 16, Due: 1}, {Pointer: 2<<32 | 8, Due: math.MaxInt64}}
	b := EncodeCatalog(c)
	if v := binary.BigEndian.Uint16(b[versionOffset:]); v != 4 {
		t.Fatalf("version %d, want 4", v)
	}
	got, err := DecodeCatalog(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("decoded %+v, want %+v", got, c)
	}
	if v := binary.BigEndian.Uint16(EncodeCatalog(sampleCatalog())[versionOffset:]); v != catalogUnfilteredVersion {
		t.Fatalf("a catalog without waiting events or filters is version %d, want 2", v)
	}
	// The same groups as version 4 with no waiting events.
	c.Groups[0].Waiting = nil
	if _, err := DecodeCatalog(reencodeAs4(t, c)); err == nil {
		t.Fatal("a version 4 catalog without a waiting event decoded")
	}
	c.Groups[0].Waiting = []Waiting{{Pointer: 1, Due: 0}}
	if err := validateCatalog(c); err == nil {
		t.Fatal("validateCatalog took a due time of 0")
	}
}

// reencodeAs4 encodes c in version 4 whatever its waiting events.
func reencodeAs4(t *testing.T, c *Catalog) []byte {
	t.Helper()
	c.Groups[len(c.Groups)-1].Waiting = []Waiting{{Pointer: 9, Due: 9}}
	b := EncodeCatalog(c)
	c.Groups[len(c.Groups)-1].Waiting = nil
	// Drop the last entry's one waiting event (16 bytes) and set its count to 0.
	body := b[:len(b)-4-waitingLen]
	binary.BigEndian.PutUint32(body[len(body)-4:], 0)
	return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, crcTable))
}
