package logfile

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
)

// TestRetryRecordRoundTrip: a retry record (type 16) decodes to what was
// encoded, edge values included, and the encoder refuses the bodies the
// decoder would call corrupt.
func TestRetryRecordRoundTrip(t *testing.T) {
	r := Record{Type: RecordRetry, TxID: 9, WriteOrderID: 40, Group: math.MaxUint32,
		Pointers: []uint64{1<<32 | HeaderSize, 1<<64 - 1}, Due: []int64{1, math.MaxInt64}}
	b := mustAppend(t, nil, &r)
	got, n, err := testFraming.DecodeRecord(b)
	if err != nil || n != len(b) {
		t.Fatalf("DecodeRecord: %d of %d bytes, %v", n, len(b), err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("decoded %+v, want %+v", got, r)
	}
	if n := testFraming.EncodedSize(&r); n != len(b) {
		t.Fatalf("EncodedSize %d, encoded %d bytes", n, len(b))
	}
	for name, bad := range map[string]Record{
		"no_pointer":   {Type: RecordRetry, Group: 1},
		"due_missing":  {Type: RecordRetry, Pointers: []uint64{1}},
		"due_zero":     {Type: RecordRetry, Pointers: []uint64{1}, Due: []int64{0}},
		"due_negative": {Type: RecordRetry, Pointers: []uint64{1}, Due: []int64{-5}},
	} {
		if _, err := testFraming.AppendRecord(nil, &bad); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: AppendRecord = %v, want ErrInvalidRecord", name, err)
		}
	}
	// A body one byte short is damage, not a newer record.
	short := frameOf(cat(payloadHead(RecordRetry), []byte{1, 1, 0, 0, 0, 1, 0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0}))
	if _, _, err := testFraming.DecodeRecord(short); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("DecodeRecord of a short retry body = %v, want corruption", err)
	}
}
