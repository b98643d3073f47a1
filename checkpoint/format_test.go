package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/v1 (but its groups catalog: no release writes version 1 any more), testdata/v2/groups and the fuzz seeds under testdata/fuzz")

// reCRC recomputes the trailing CRC of a meta or inflight file, so a test
// edit trips the check it targets instead of the checksum.
func reCRC(b []byte) []byte {
	body := b[:len(b)-crcLen]
	binary.BigEndian.PutUint32(b[len(body):], crc32.Checksum(body, crcTable))
	return b
}

func put32(off int, v uint32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], v); return reCRC(b) }
}

func put64(off int, v uint64) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], v); return reCRC(b) }
}

func putByte(off int, v byte) func([]byte) []byte {
	return func(b []byte) []byte { b[off] = v; return reCRC(b) }
}

func appendTrailing(b []byte) []byte {
	body := append(b[:len(b)-crcLen:len(b)-crcLen], 0, 0, 0, 0)
	return reCRC(append(body, 0, 0, 0, 0))
}

func flipNoCRC(off int) func([]byte) []byte {
	return func(b []byte) []byte { b[off] ^= 1; return b }
}

func cut(n int) func([]byte) []byte { return func(b []byte) []byte { return b[:n] } }

type decodeCase struct {
	name    string
	edit    func([]byte) []byte
	wantOff int64
}

// checkCorrupt fails t unless err is a *corrupt.Error for file at off.
func checkCorrupt(t *testing.T, err error, file string, off int64) {
	t.Helper()
	var ce *corrupt.Error
	if !errors.As(err, &ce) || !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("got %v, want a *corrupt.Error", err)
	}
	if ce.File != file || ce.Offset != off {
		t.Fatalf("corrupt.Error at %s:%d (%v), want %s:%d", ce.File, ce.Offset, ce, file, off)
	}
}

func sampleMeta() *Meta {
	return &Meta{
		WriteOrderID: 1000, Capacity: 64, Head: 3, Size: 10, NextFileID: 5, MaxTxID: 77,
		Time: time.Unix(1_700_000_000, 5), RingCRC: 0xC0FFEE01,
		Logs: []LogState{
			{FileID: 1, Position: 4096, Refs: 6, Completes: []uint32{2, 3}}, // at 68; completes at 92
			{FileID: 4, Position: 16, Refs: 4},                              // at 100; CRC at 124
		},
	}
}

// spilledMeta is sampleMeta with spilled commits in both log entries.
func spilledMeta() *Meta {
	m := sampleMeta()
	m.Logs[0].Spilled = []SpilledTx{{Tx: 7, WriteOrderID: 900, Time: 1_700_000_000_000_000_001}, {Tx: 1<<64 - 1, WriteOrderID: 1<<64 - 1, Time: 1<<63 - 1}}
	m.Logs[1].Spilled = []SpilledTx{{Tx: 8, WriteOrderID: 950}} // a commit of unknown time
	m.Logs[0].Index = LogIndex{Known: true, FirstCommit: 12, LastCommit: 900, MinTime: 1_700_000_000_000_000_000, MaxTime: 1_700_000_000_000_000_001}
	// m.Logs[1]: an index not known (a file of an older checkpoint)
	return m
}

// TestMetaVersions: checkpoint.meta version 2 (this build's) adds each
// log's index and spilled commits, and round-trips them; version 1 (the previous
// release's) still reads, with none; testdata/meta2 pins version 2.
// go test ./checkpoint -run TestMetaVersions -update
func TestMetaVersions(t *testing.T) {
	want := spilledMeta()
	b := EncodeMeta(want)
	golden := filepath.Join("testdata", "meta2", MetaName)
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := os.ReadFile(golden); err != nil || !bytes.Equal(g, b) {
		t.Fatalf("checkpoint.meta differs from %s (%v): the on-disk format changed", golden, err)
	}
	got, err := DecodeMeta(b)
	if err != nil || !reflect.DeepEqual(&got, want) {
		t.Fatalf("DecodeMeta = %+v, %v; want %+v", got, err, want)
	}
	old := sampleMeta()
	got, err = DecodeMeta(appendMetaAs(nil, want, 1))
	// Version 1 has neither: Index not Known.
	if err != nil || !reflect.DeepEqual(&got, old) {
		t.Fatalf("version 1: DecodeMeta = %+v, %v; want %+v", got, err, old)
	}
	for _, tc := range []decodeCase{
		// Log 0 at 68, its completes at 92, its index at 100, its
		// spilled count at 133, its two spilled commits at 137 and 161.
		{"index_flags_unknown_bit", putByte(100, 3), 100},
		{"index_first_after_last", put64(101, 901), 100},
		{"index_times_reversed", put64(117, 1_700_000_000_000_000_002), 100},
		{"index_time_out_of_range", put64(125, 1<<63), 100},
		{"index_unknown_with_values", putByte(100, 0), 100},
		{"index_empty_with_times", put64(101, 0), 100},
		{"spilled_not_ascending", put64(161, 7), 161},
		{"spilled_time_out_of_range", put64(153, 1<<63), 153},
		{"spilled_count_too_large", put32(133, 1000), 133},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeMeta(tc.edit(EncodeMeta(spilledMeta())))
			checkCorrupt(t, err, MetaName, tc.wantOff)
		})
	}
}

func TestDecodeMetaRejects(t *testing.T) {
	cases := []decodeCase{
		{"bad_checksum", flipNoCRC(30), 124},
		{"too_short", cut(20), 20},
		{"bad_magic", putByte(0, 'X'), 0},
		{"version_0", putByte(5, 0), 4}, // no release writes it: damage
		{"reserved_not_zero", putByte(7, 1), 6},
		{"capacity_zero", put64(16, 0), 16},
		{"capacity_too_large", put64(16, 1<<63), 16},
		{"head_at_capacity", put64(24, 64), 24},
		{"size_above_capacity", put64(32, 65), 32},
		{"time_out_of_range", put64(52, 1<<63), 52},
		{"ring_crc_of_empty_queue", func(b []byte) []byte { return put32(60, 1)(put64(32, 0)(b)) }, 60},
		{"log_count_too_large", put32(64, 0xFFFFFFFF), 64},
		{"log_ids_not_ascending", put32(100, 1), 100},
		{"position_out_of_range", put64(72, 1<<63), 72},
		{"refs_out_of_range", put64(80, 1<<63), 80},
		{"completes_count_too_large", put32(88, 1000), 88},
		{"completes_not_ascending", put32(96, 2), 96},
		{"log_entry_truncated", put32(88, 3), 104}, // log 0 swallows log 1's id
		{"trailing_bytes", appendTrailing, 124},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeMeta(tc.edit(appendMetaAs(nil, sampleMeta(), 1)))
			checkCorrupt(t, err, MetaName, tc.wantOff)
		})
	}
}

func sampleInflight() []eventqueue.InflightTx {
	return []eventqueue.InflightTx{
		{Tx: 1, Pointers: []eventqueue.Pointer{5, 6}}, // at 20; pointers at 32
		{Tx: 2}, // at 48
	}
}

func TestDecodeInflightRejects(t *testing.T) {
	cases := []decodeCase{
		{"bad_checksum", flipNoCRC(40), 60},
		{"too_short", cut(23), 23},
		{"bad_magic", putByte(3, 'T'), 0}, // a takes file read as puts
		{"version_0", putByte(5, 0), 4},
		{"reserved_not_zero", putByte(6, 1), 6},
		{"tx_count_too_large", put32(16, 1<<31), 16},
		{"tx_entry_truncated", put32(16, 3), 60},
		{"duplicate_tx", put64(48, 1), 48},
		{"pointer_count_too_large", put32(28, 100), 28},
		{"zero_pointer", put64(32, 0), 32},
		{"trailing_bytes", appendTrailing, 60},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeInflight(InflightPuts, tc.edit(EncodeInflight(InflightPuts, 9, sampleInflight())))
			checkCorrupt(t, err, InflightPutsName, tc.wantOff)
		})
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i := range 200 {
		st := randomState(rng, 1+rng.IntN(1<<20), rng.Uint64())
		if i == 0 {
			st = &State{Meta: Meta{Capacity: 1}} // everything empty or zero
		}
		b := EncodeMeta(&st.Meta)
		m, err := DecodeMeta(b)
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, &State{Meta: m}, &State{Meta: st.Meta})
		if !bytes.Equal(EncodeMeta(&m), b) {
			t.Fatal("meta re-encoding differs")
		}
		for _, kind := range []InflightKind{InflightPuts, InflightTakes} {
			b := EncodeInflight(kind, st.WriteOrderID, st.InflightTakes)
			w, txs, err := DecodeInflight(kind, b)
			if err != nil {
				t.Fatal(err)
			}
			if w != st.WriteOrderID || !reflect.DeepEqual(txs, st.InflightTakes) {
				t.Fatalf("%s: got %d %v, want %d %v", kind, w, txs, st.WriteOrderID, st.InflightTakes)
			}
		}
	}
	if s := InflightKind(7).String(); s != "InflightKind(7)" {
		t.Fatalf("String = %q", s)
	}
}

// goldenState is the checkpoint stored in testdata/v1.
func goldenState() (*State, map[int]uint64) {
	st := &State{
		Meta: Meta{
			WriteOrderID: 0x0102030405060708, Capacity: 8, Head: 6, Size: 4, NextFileID: 3, MaxTxID: 41,
			Time: time.Unix(1_750_000_000, 123456789),
			Logs: []LogState{{FileID: 1, Position: 8192, Refs: 3, Completes: nil}, {FileID: 2, Position: 64, Refs: 1, Completes: []uint32{1}}},
		},
		InflightPuts:  []eventqueue.InflightTx{{Tx: 40, Pointers: []eventqueue.Pointer{eventqueue.NewPointer(2, 512)}}},
		InflightTakes: []eventqueue.InflightTx{{Tx: 39, Pointers: []eventqueue.Pointer{eventqueue.NewPointer(1, 16), eventqueue.NewPointer(1, 32)}}},
	}
	ring := map[int]uint64{ // ring positions 6, 7, 0, 1
		6: uint64(eventqueue.NewPointer(1, 48)), 7: uint64(eventqueue.NewPointer(1, 64)),
		0: uint64(eventqueue.NewPointer(1, 80)), 1: uint64(eventqueue.NewPointer(2, 96)),
	}
	return st, ring
}

// TestGoldenV1 pins the version 1 format: writing the golden state must give
// the files in testdata/v1 byte for byte, and Open must read them back.
func TestGoldenV1(t *testing.T) {
	st, ring := goldenState()
	files := goldenFiles(t)
	golden := filepath.Join("testdata", "v1")
	for _, name := range checkpointFiles {
		got := files[name]
		if name == MetaName {
			// testdata/v1 has version 1 of checkpoint.meta (TestMetaVersions
			// pins version 2).
			m, err := DecodeMeta(got)
			if err != nil {
				t.Fatal(err)
			}
			got = appendMetaAs(nil, &m, 1)
		}
		if *update {
			if err := os.MkdirAll(golden, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(golden, name), got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(filepath.Join(golden, name))
		if err != nil {
			t.Fatalf("%v (run go test -run TestGoldenV1 -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from testdata/v1: the on-disk format changed", name)
		}
	}
	// The fixture itself, copied into a fresh filesystem, opens to the state.
	fresh := newMem(t, "/g")
	for _, name := range checkpointFiles {
		b, err := os.ReadFile(filepath.Join(golden, name))
		if err != nil {
			t.Fatal(err)
		}
		replace(t, fresh, path("/g", name), b)
	}
	c2, got := mustOpen(t, fresh, "/g")
	sameState(t, got, st)
	ringSlots := make([]uint64, st.Capacity)
	for r, v := range ring {
		ringSlots[r] = v
	}
	if want := wantRingCRC(ringSlots, st.Head, st.Size); got.RingCRC != want {
		t.Fatalf("golden RingCRC = %#08x, want %#08x", got.RingCRC, want)
	}
	q, err := eventqueue.New(c2, st.Capacity, got.Head, got.Size, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []eventqueue.Pointer{eventqueue.Pointer(ring[6]), eventqueue.Pointer(ring[7]), eventqueue.Pointer(ring[0]), eventqueue.Pointer(ring[1])}
	if !slices.Equal(q.Pointers(), want) {
		t.Fatalf("golden queue = %v, want %v", q.Pointers(), want)
	}
}
