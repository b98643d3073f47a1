package owner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden file in testdata/v1 and the fuzz seeds in testdata/fuzz")

// golden is the owner stored in testdata/v1/channel.id.
var golden = Owner{
	ID:            ID{0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0},
	CheckpointDir: "/var/lib/app/fc/checkpoint",
}

// TestGolden: Encode gives the bytes of testdata/v1/channel.id, and they
// decode back: a change of the format cannot slip in.
func TestGolden(t *testing.T) {
	b, err := Encode(golden)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "v1", FileName)
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("Encode differs from %s: the on-disk format changed\n got %x\nwant %x", path, b, want)
	}
	if len(b) != fixedLen+len(golden.CheckpointDir)+crcLen || string(b[:4]) != "FCID" || binary.BigEndian.Uint16(b[4:]) != 1 {
		t.Fatalf("layout: %x", b)
	}
	got, err := Decode(path, want)
	if err != nil || got != golden {
		t.Fatalf("Decode: %+v, %v; want %+v", got, err, golden)
	}
}

// reseal recomputes the trailing CRC of b.
func reseal(b []byte) []byte {
	end := len(b) - crcLen
	binary.BigEndian.PutUint32(b[end:], crc32.Checksum(b[:end], crcTable))
	return b
}

func TestDecodeRejects(t *testing.T) {
	good, err := Encode(golden)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name   string
		b      []byte
		offset int64
	}{
		{"empty", nil, 0},
		{"short_before_version", good[:5], 5},
		{"bad_magic", edit(func(b []byte) []byte { b[0] = 'X'; return reseal(b) }), 0},
		{"version_0", edit(func(b []byte) []byte { b[5] = 0; return reseal(b) }), versionOffset},
		{"short_after_version", good[:fixedLen], fixedLen},
		{"bad_crc", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), int64(len(good) - crcLen)},
		{"flipped_path_byte", edit(func(b []byte) []byte { b[fixedLen+3] ^= 1; return b }), int64(len(good) - crcLen)},
		{"reserved_not_zero", edit(func(b []byte) []byte { b[7] = 1; return reseal(b) }), offReserved},
		{"zero_id", edit(func(b []byte) []byte { clear(b[offID:offPathLen]); return reseal(b) }), offID},
		{"path_length_too_long", edit(func(b []byte) []byte { b[offPathLen+1]++; return reseal(b) }), offPathLen},
		{"trailing_bytes", reseal(append(bytes.Clone(good), 0, 0, 0, 0)), offPathLen},
		{"relative_path", reseal(append(append(append([]byte(nil), good[:offPathLen]...), 0, 3), "a/b\x00\x00\x00\x00"...)), fixedLen},
		{"unclean_path", reseal(append(append(append([]byte(nil), good[:offPathLen]...), 0, 4), "/a/.\x00\x00\x00\x00"...)), fixedLen},
		{"empty_path", reseal(append(append([]byte(nil), good[:offPathLen]...), 0, 0, 0, 0, 0, 0)), fixedLen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("f", tc.b)
			var ce *corrupt.Error
			if !errors.As(err, &ce) || !errors.Is(err, corrupt.ErrCorrupt) {
				t.Fatalf("Decode: %v, want a *corrupt.Error", err)
			}
			if ce.File != "f" || ce.Offset != tc.offset {
				t.Errorf("error %v: file %q offset %d, want f at %d", err, ce.File, ce.Offset, tc.offset)
			}
		})
	}
}

// TestNewerVersionIsRefused: a version above 1 is a *corrupt.FormatError,
// whatever follows it (here: nothing, and a bad CRC).
func TestNewerVersionIsRefused(t *testing.T) {
	good, err := Encode(golden)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{
		append([]byte("FCID"), 0, 2),
		append(append([]byte("FCID"), 0, 9), good[6:]...),
	} {
		_, err := Decode("f", b)
		var fe *corrupt.FormatError
		if !errors.As(err, &fe) || errors.Is(err, corrupt.ErrCorrupt) || fe.Version <= FormatVersion || fe.Offset != versionOffset {
			t.Errorf("Decode(%x): %v, want a *corrupt.FormatError for the version", b, err)
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	for _, o := range []Owner{
		{CheckpointDir: "/x"},
		{ID: golden.ID, CheckpointDir: "x"},
		{ID: golden.ID, CheckpointDir: "/x/"},
		{ID: golden.ID, CheckpointDir: "/" + strings.Repeat("x", 1<<16)},
	} {
		if b, err := Encode(o); err == nil {
			t.Errorf("Encode(%.40v) = %x, want an error", o, b[:8])
		}
	}
}

func TestReadWrite(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Read(fsys, "/d"); ok || err != nil {
		t.Fatalf("Read of a dir without the file: %v %v", ok, err)
	}
	if _, ok, err := Read(fsys, "/nodir"); ok || err != nil {
		t.Fatalf("Read of a missing dir: %v %v", ok, err)
	}
	o := Owner{ID: NewID(), CheckpointDir: "/ck"}
	if err := Write(fsys, "/d", o); err != nil {
		t.Fatal(err)
	}
	// Published: it survives a crash.
	got, ok, err := Read(fsys.CrashClone(false, 0), "/d")
	if !ok || err != nil || got != o {
		t.Fatalf("Read after a crash: %+v %v %v, want %+v", got, ok, err, o)
	}
	if a, b := NewID(), NewID(); a == b || a.IsZero() || len(a.String()) != 32 {
		t.Fatalf("NewID: %v %v", a, b)
	}
}

// fuzzSeeds are FuzzDecode's seeds, checked in under testdata/fuzz.
func fuzzSeeds(t testing.TB) map[string][]byte {
	good, err := Encode(golden)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{"valid": good, "newer": append([]byte("FCID"), 0, 2), "short": good[:10]}
}

// TestFuzzSeedCorpus checks the checked-in seed corpus matches fuzzSeeds;
// -update rewrites it.
func TestFuzzSeedCorpus(t *testing.T) {
	testutil.CheckFuzzSeeds(t, "FuzzDecode", fuzzSeeds(t), *update)
}

func FuzzDecode(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := Decode("f", b)
		if err != nil {
			return
		}
		// Decode is strict: what it accepts encodes to the same bytes.
		e, err := Encode(o)
		if err != nil || !bytes.Equal(e, b) {
			t.Fatalf("Decode(%x) = %+v, which encodes to %x, %v", b, o, e, err)
		}
	})
}
