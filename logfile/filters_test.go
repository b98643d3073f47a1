package logfile

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
)

// TestFilterRecords: a groups record with a filter round-trips as type 14
// (type 7 without one), and a filter skip record round-trips; both refuse
// what their decoders would refuse.
func TestFilterRecords(t *testing.T) {
	plain := Record{Type: RecordGroups, NextGroupID: 3, Catalog: []GroupInfo{{ID: 1, Name: "a", Capacity: 5}, {ID: 2, Name: "b", Capacity: 5}}}
	withF := plain
	withF.Catalog = []GroupInfo{{ID: 1, Name: "a", Capacity: 5}, {ID: 2, Name: "b", Capacity: 5, Filter: `headers["x"] == "y"`}}
	skip := Record{Type: RecordFilterSkip, TxID: 7, WriteOrderID: 9, Group: 2, Ranges: []uint32{0, 2, 5, 1}}
	dup := Record{Type: RecordDuplicate, TxID: 7, WriteOrderID: 10, Ranges: []uint32{1, 3}}
	for _, tc := range []struct {
		r   Record
		typ RecordType
	}{{plain, RecordGroups}, {withF, typeFilteredGroups}, {skip, RecordFilterSkip}, {dup, RecordDuplicate}} {
		b, err := testFraming.AppendRecord(nil, &tc.r)
		if err != nil {
			t.Fatal(err)
		}
		if got := RecordType(b[FrameHeaderSize]); got != tc.typ {
			t.Fatalf("%v: frame type %d, want %d", tc.r.Type, got, tc.typ)
		}
		got, _, err := testFraming.DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != tc.r.Type || len(got.Catalog) != len(tc.r.Catalog) || len(got.Ranges) != len(tc.r.Ranges) {
			t.Fatalf("decoded %+v, want %+v", got, tc.r)
		}
		for i := range got.Catalog {
			if !reflect.DeepEqual(got.Catalog[i], tc.r.Catalog[i]) {
				t.Fatalf("entry %d: %+v, want %+v", i, got.Catalog[i], tc.r.Catalog[i])
			}
		}
		for i := range got.Ranges {
			if got.Ranges[i] != tc.r.Ranges[i] {
				t.Fatalf("ranges %v, want %v", got.Ranges, tc.r.Ranges)
			}
		}
	}
	long := withF
	long.Catalog = []GroupInfo{{ID: 1, Name: "a", Filter: string(make([]byte, MaxFilterLen+1))}}
	for _, r := range []Record{long,
		{Type: RecordFilterSkip, Group: 1},
		{Type: RecordFilterSkip, Group: 1, Ranges: []uint32{0}},
		{Type: RecordFilterSkip, Group: 1, Ranges: []uint32{0, 0}},
		{Type: RecordFilterSkip, Group: 1, Ranges: []uint32{0, 2, 2, 1}}, // touching
		{Type: RecordFilterSkip, Group: 1, Ranges: []uint32{3, 1, 1, 1}}, // out of order
		{Type: RecordDuplicate},
		{Type: RecordDuplicate, Ranges: []uint32{0, 2, 2, 1}}, // touching
	} {
		if _, err := testFraming.AppendRecord(nil, &r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%+v: %v, want ErrInvalidRecord", r, err)
		}
	}
}

// TestFilterRecordsCorrupt: bodies the writer never produces are corrupt:
// a type 14 groups record in which no group has a filter, a filter over
// the limit, filter skip ranges out of order or empty.
func TestFilterRecordsCorrupt(t *testing.T) {
	head := func(typ RecordType, tx uint64) []byte {
		b := binary.BigEndian.AppendUint64([]byte{byte(typ)}, tx)
		return binary.BigEndian.AppendUint64(b, 8)
	}
	entry := []byte{1, 1, 'a', 0, 5, 0, 0, 0} // id 1 "a", since 0, capacity 5, block, no limit, no dead letter
	long := binary.AppendUvarint(nil, MaxFilterLen+1)
	for name, payload := range map[string][]byte{
		"no_filter":         cat(head(typeFilteredGroups, 0), []byte{2, 1}, entry, []byte{0}),
		"filter_too_long":   cat(head(typeFilteredGroups, 0), []byte{2, 1}, entry, long, make([]byte, MaxFilterLen+1)),
		"filter_truncated":  cat(head(typeFilteredGroups, 0), []byte{2, 1}, entry, []byte{5, 'x'}),
		"ranges_none":       cat(head(RecordFilterSkip, 7), []byte{1, 0}),
		"ranges_touching":   cat(head(RecordFilterSkip, 7), []byte{1, 2, 0, 2, 2, 1}),
		"ranges_count_zero": cat(head(RecordFilterSkip, 7), []byte{1, 1, 3, 0}),
		"ranges_trailing":   cat(head(RecordFilterSkip, 7), []byte{1, 1, 3, 1, 9}),
		"dup_none":          cat(head(RecordDuplicate, 7), []byte{0}),
		"dup_touching":      cat(head(RecordDuplicate, 7), []byte{2, 0, 2, 2, 1}),
		"dup_trailing":      cat(head(RecordDuplicate, 7), []byte{1, 3, 1, 9}),
		"dup_overrun":       cat(head(RecordDuplicate, 7), []byte{3, 3, 1}),
	} {
		if _, _, err := testFraming.DecodeRecord(frameOf(payload)); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	ok := cat(head(typeFilteredGroups, 0), []byte{2, 1}, entry, []byte{1, 'x'})
	if r, _, err := testFraming.DecodeRecord(frameOf(ok)); err != nil || r.Type != RecordGroups || r.Catalog[0].Filter != "x" {
		t.Fatalf("a valid type 14 record: %+v, %v", r, err)
	}
}
