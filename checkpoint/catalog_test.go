package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// sampleCatalog is the catalog the damage table below edits; the comments
// give the byte offset of each entry.
func sampleCatalog() *Catalog {
	return &Catalog{WriteOrderID: 1000, NextGroupID: 5, Groups: []Group{
		{ID: 0, Capacity: 64}, // at 24
		{ID: 2, Name: "audit", Since: 77, Capacity: 1000, Policy: 1, MaxDeliveries: 5, DeadLetter: "dlq"}, // at 52; name at 80, dead letter at 85
		{ID: 4, Name: "retry", Since: 90, Capacity: 10, Policy: 2},                                        // at 88; name at 116; CRC at 121
	}}
}

func TestDecodeCatalogRejects(t *testing.T) {
	putStr := func(off int, s string) func([]byte) []byte {
		return func(b []byte) []byte { copy(b[off:], s); return reCRC(b) }
	}
	cases := []decodeCase{
		{"bad_checksum", flipNoCRC(30), 121},
		{"too_short", cut(20), 20},
		{"bad_magic", putByte(0, 'X'), 0},
		{"meta_magic", putByte(3, 'M'), 0},
		{"version_0", putByte(5, 0), 4},
		{"reserved_not_zero", putByte(7, 1), 6},
		{"count_too_large", put32(20, 0xFFFFFFFF), 20},
		{"count_one_too_many", put32(20, 4), 20},
		{"capacity_zero", put64(36, 0), 36},
		{"capacity_too_large", put64(36, 1<<63), 36},
		{"policy_unknown", putByte(48, 3), 48},
		{"unnamed_group_named", putByte(49, 1), 49},
		{"name_empty", putByte(77, 0), 77},
		{"name_too_long", putByte(77, 65), 77},
		{"dead_letter_too_long", putByte(78, 65), 78},
		{"entry_reserved_not_zero", putByte(79, 1), 79},
		{"names_truncated", putByte(113, 64), 116},
		{"entry_truncated", putByte(77, 36), 119}, // group 2's name swallows group 4's entry
		{"ids_not_ascending", put32(88, 2), 88},
		{"id_not_below_next", put32(16, 4), 88},
		{"duplicate_name", putStr(116, "audit"), 116},
		{"trailing_bytes", appendTrailing, 121},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCatalog(tc.edit(EncodeCatalog(sampleCatalog())))
			checkCorrupt(t, err, CatalogName, tc.wantOff)
		})
	}
}

func TestDecodeCatalogNewerVersion(t *testing.T) {
	b := EncodeCatalog(sampleCatalog())
	for what, edit := range map[string]func([]byte) []byte{
		"version_2":                put16(versionOffset, 2),
		"version_65535":            put16(versionOffset, 0xFFFF),
		"version_2_other_checksum": func(b []byte) []byte { b = put16(versionOffset, 2)(b); b[len(b)-1] ^= 1; return b },
		"version_2_other_length":   func(b []byte) []byte { return put16(versionOffset, 2)(b)[:versionEnd] },
	} {
		t.Run(what, func(t *testing.T) {
			e := edit(bytes.Clone(b))
			_, err := DecodeCatalog(e)
			requireNewer(t, err, CatalogName, uint64(e[versionOffset])<<8|uint64(e[versionOffset+1]))
		})
	}
}

func put16(off int, v uint16) func([]byte) []byte {
	return func(b []byte) []byte { b[off], b[off+1] = byte(v>>8), byte(v); return reCRC(b) }
}

// randomCatalog returns a valid catalog with up to 8 groups, the unnamed
// one among them or not.
func randomCatalog(rng *rand.Rand) *Catalog {
	c := &Catalog{WriteOrderID: rng.Uint64()}
	id := uint32(0)
	if rng.IntN(2) == 0 {
		c.Groups = append(c.Groups, Group{Capacity: 1 + rng.IntN(1<<20), Since: rng.Uint64(), Policy: uint8(rng.IntN(3)), MaxDeliveries: rng.Uint32()})
	}
	for i := range rng.IntN(8) {
		id += 1 + uint32(rng.IntN(100))
		c.Groups = append(c.Groups, Group{
			ID: id, Name: strings.Repeat(string(rune('a'+i)), 1+rng.IntN(MaxGroupNameLen)), Since: rng.Uint64(),
			Capacity: 1 + rng.IntN(1<<30), Policy: uint8(rng.IntN(3)), MaxDeliveries: rng.Uint32(),
			DeadLetter: strings.Repeat("d", rng.IntN(MaxGroupNameLen+1)),
		})
	}
	c.NextGroupID = id + 1 + uint32(rng.IntN(3))
	return c
}

func TestCatalogRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for i := range 300 {
		c := randomCatalog(rng)
		if i == 0 {
			c = &Catalog{} // everything empty or zero
		}
		if err := validateCatalog(c); err != nil {
			t.Fatalf("random catalog invalid: %v", err)
		}
		b := EncodeCatalog(c)
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
		checkCorrupt(t, err, path(dir, CatalogName), 121)
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

// TestGoldenCatalogV1 pins the version 1 groups format: encoding the golden
// catalog gives testdata/v1/groups byte for byte, and it decodes back.
func TestGoldenCatalogV1(t *testing.T) {
	name := filepath.Join("testdata", "v1", CatalogName)
	got := EncodeCatalog(goldenCatalog())
	if *update {
		if err := os.WriteFile(name, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenCatalogV1 -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from testdata/v1: the on-disk format changed", CatalogName)
	}
	c, err := DecodeCatalog(want)
	if err != nil || !reflect.DeepEqual(c, goldenCatalog()) {
		t.Fatalf("DecodeCatalog(golden) = %+v, %v", c, err)
	}
}
