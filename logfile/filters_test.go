package logfile

import (
	"errors"
	"testing"
)

// TestFilterRecords: a groups record with a filter round-trips as type 14
// (type 7 without one), and a filter skip record round-trips; both refuse
// what their decoders would refuse.
func TestFilterRecords(t *testing.T) {
	plain := Record{Type: RecordGroups, NextGroupID: 3, Catalog: []GroupInfo{{ID: 1, Name: "a", Capacity: 5}, {ID: 2, Name: "b", Capacity: 5}}}
	withF := plain
	withF.Catalog = []GroupInfo{{ID: 1, Name: "a", Capacity: 5}, {ID: 2, Name: "b", Capacity: 5, Filter: `headers["x"] == "y"`}}
	skip := Record{Type: RecordFilterSkip, TxID: 7, WriteOrderID: 9, Group: 2, Ranges: []uint32{0, 2, 5, 1}}
	for _, tc := range []struct {
		r   Record
		typ RecordType
	}{{plain, RecordGroups}, {withF, typeFilteredGroups}, {skip, RecordFilterSkip}} {
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
			if got.Catalog[i] != tc.r.Catalog[i] {
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
	} {
		if _, err := testFraming.AppendRecord(nil, &r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%+v: %v, want ErrInvalidRecord", r, err)
		}
	}
}
