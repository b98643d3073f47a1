package logfile

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/corrupt"
)

// optionGroupsRecord is a groups record whose groups have take options,
// at their bounds, beside a group with none and one with a filter only.
func optionGroupsRecord() Record {
	return Record{Type: RecordGroups, WriteOrderID: 40, NextGroupID: 5, Catalog: []GroupInfo{
		{ID: 0, Capacity: 10},
		{ID: 1, Name: "orders", Since: 3, Capacity: 7, OrderKey: strings.Repeat("k", MaxOrderKeyLen),
			RetryDelays: []time.Duration{0, time.Second, math.MaxInt64}, LeaseTimeout: time.Minute, ExpireAfter: math.MaxInt64},
		{ID: 2, Name: "f", Capacity: 7, Filter: `headers["a"] == "b"`},
		{ID: 4, Name: "r", Capacity: 7, RetryDelays: make([]time.Duration, MaxRetryDelays)},
	}}
}

// TestOptionGroupsRecord: a groups record in which a group has a take
// option round-trips as type 17, each option alone included; without one
// it stays type 7 (or 14 with a filter), which older builds read.
func TestOptionGroupsRecord(t *testing.T) {
	one := func(g GroupInfo) Record {
		g.ID, g.Name, g.Capacity = 1, "a", 3
		return Record{Type: RecordGroups, NextGroupID: 2, Catalog: []GroupInfo{g}}
	}
	for name, tc := range map[string]struct {
		r   Record
		typ RecordType
	}{
		"bounds":        {optionGroupsRecord(), typeOptionGroups},
		"order_key":     {one(GroupInfo{OrderKey: "customer"}), typeOptionGroups},
		"retry_delays":  {one(GroupInfo{RetryDelays: []time.Duration{time.Millisecond}}), typeOptionGroups},
		"lease_timeout": {one(GroupInfo{LeaseTimeout: time.Second}), typeOptionGroups},
		"expire_after":  {one(GroupInfo{ExpireAfter: time.Hour}), typeOptionGroups},
		"none":          {one(GroupInfo{}), RecordGroups},
		"filter_only":   {one(GroupInfo{Filter: "true"}), typeFilteredGroups},
	} {
		b, err := testFraming.AppendRecord(nil, &tc.r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := RecordType(b[FrameHeaderSize]); got != tc.typ {
			t.Errorf("%s: frame type %d, want %d", name, got, tc.typ)
		}
		got, _, err := testFraming.DecodeRecord(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Type != RecordGroups || !reflect.DeepEqual(got.Catalog, tc.r.Catalog) {
			t.Errorf("%s: decoded %+v, want %+v", name, got.Catalog, tc.r.Catalog)
		}
	}
}

// TestOptionGroupsRecordRefused: the encoder refuses what the decoder
// would: an order key or a list of delays over its bound, a negative
// duration.
func TestOptionGroupsRecordRefused(t *testing.T) {
	for name, g := range map[string]GroupInfo{
		"order_key_too_long":    {OrderKey: strings.Repeat("k", MaxOrderKeyLen+1)},
		"too_many_delays":       {RetryDelays: make([]time.Duration, MaxRetryDelays+1)},
		"negative_delay":        {RetryDelays: []time.Duration{time.Second, -1}},
		"negative_lease":        {LeaseTimeout: -1},
		"negative_expire_after": {ExpireAfter: -time.Second},
	} {
		g.ID, g.Name = 1, "a"
		r := Record{Type: RecordGroups, NextGroupID: 2, Catalog: []GroupInfo{g}}
		if _, err := testFraming.AppendRecord(nil, &r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: %v, want ErrInvalidRecord", name, err)
		}
	}
}

// TestOptionGroupsRecordCorrupt: a type-17 body the writer never produces
// is corrupt, never a panic: no group with an option, each field over its
// bound or overrunning, a duration above 2^63-1, a longer encoding than
// needed, trailing bytes; and every prefix of a valid body.
func TestOptionGroupsRecordCorrupt(t *testing.T) {
	head := payloadHead(typeOptionGroups)
	head = cat([]byte{byte(typeOptionGroups)}, make([]byte, 8), head[9:]) // no transaction id
	entry := []byte{1, 1, 'a', 0, 5, 0, 0, 0, 0}                          // id 1 "a", since 0, capacity 5, block, no limit, no dead letter, no filter
	rec := func(opts ...byte) []byte { return cat(head, []byte{2, 1}, entry, opts) }
	bigKey := cat(appendUvarint(MaxOrderKeyLen+1), make([]byte, MaxOrderKeyLen+1))
	over := appendUvarint(math.MaxInt64 + 1)
	for name, payload := range map[string][]byte{
		"no_option":           rec(0, 0, 0, 0),
		"order_key_too_long":  rec(cat(bigKey, []byte{0, 0, 0})...),
		"order_key_overrun":   rec(5, 'k'),
		"too_many_delays":     rec(cat([]byte{0}, appendUvarint(MaxRetryDelays+1), make([]byte, MaxRetryDelays+1), []byte{0, 0})...),
		"delay_count_overrun": rec(0, 9, 1, 1),
		"delay_over_int64":    rec(cat([]byte{0, 1}, over, []byte{0, 0})...),
		"lease_over_int64":    rec(cat([]byte{0, 0}, over, []byte{0})...),
		"expire_over_int64":   rec(cat([]byte{0, 0, 0}, over)...),
		"delay_not_minimal":   rec(0, 1, 0x81, 0x00, 0, 0),
		"lease_missing":       rec(0, 1, 5),
		"expire_missing":      rec(0, 0, 5),
		"trailing":            rec(0, 0, 5, 0, 9),
	} {
		if _, _, err := testFraming.DecodeRecord(frameOf(payload)); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	ok := rec(1, 'k', 1, 3, 4, 5)
	r, _, err := testFraming.DecodeRecord(frameOf(ok))
	want := GroupInfo{ID: 1, Name: "a", Capacity: 5, OrderKey: "k", RetryDelays: []time.Duration{3}, LeaseTimeout: 4, ExpireAfter: 5}
	if err != nil || r.Type != RecordGroups || !reflect.DeepEqual(r.Catalog, []GroupInfo{want}) {
		t.Fatalf("a valid type 17 record: %+v, %v", r, err)
	}
	for n := len(head); n < len(ok); n++ {
		if _, _, err := testFraming.DecodeRecord(frameOf(ok[:n])); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Errorf("prefix of %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
}

func appendUvarint(x uint64) []byte {
	var b []byte
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}
