package logfile

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flumego/filechannel/internal/seal"
)

// batchSets starts a plain set and an encrypted one, each in its own
// memory FS.
func batchSets(t *testing.T) (plain, encrypted *Set) {
	t.Helper()
	plain = startSet(t, SetOptions{FS: setMem(t, "/p"), Dirs: []string{"/p"}}, Recovered{})
	encrypted = startSet(t, SetOptions{FS: setMem(t, "/e"), Dirs: []string{"/e"}, Keys: goldenKeys, ChannelID: testChannel}, Recovered{})
	return plain, encrypted
}

// A batch encodes its records as its set's files need them, and counts
// what Set.EncodedSize says: a put in an encrypted set has room for its
// seal's tag, other records are the same in both.
func TestBatchEncodesForItsSet(t *testing.T) {
	plain, encrypted := batchSets(t)
	recs := []Record{
		{Type: RecordPut, TxID: 3, Headers: map[string]string{"k": "v"}, Body: []byte("event")},
		{Type: RecordTake, TxID: 4, Pointers: []uint64{1<<32 | 36}},
		{Type: RecordCommit, TxID: 4, CommitType: RecordTake, Count: 1},
	}
	for _, tc := range []struct {
		name  string
		s     *Set
		extra int // over Record.EncodedSize, for the put
	}{{"plain", plain, 0}, {"encrypted", encrypted, seal.Overhead}} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.s.NewBatch()
			for i := range recs {
				want := recs[i].EncodedSize()
				if recs[i].Type == RecordPut {
					want += tc.extra
				}
				if got := tc.s.EncodedSize(&recs[i]); got != want {
					t.Fatalf("EncodedSize(%v) = %d, want %d", recs[i].Type, got, want)
				}
				before := b.Size()
				if err := b.Add(&recs[i]); err != nil {
					t.Fatal(err)
				}
				if b.Offset(i) != before || b.Size()-before != want {
					t.Fatalf("record %d at %d taking %d bytes, want at %d taking %d", i, b.Offset(i), b.Size()-before, before, want)
				}
			}
			a := mustAppendBatch(t, tc.s, 0, b)
			if err := tc.s.Sync(a); err != nil {
				t.Fatal(err)
			}
			r, err := tc.s.Reader(a.W.ID())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			got, err := r.ReadRecord(a.Base + int64(b.Offset(0)))
			if err != nil || string(got.Body) != "event" || got.Headers["k"] != "v" {
				t.Fatalf("the put read back: %+v, %v", got, err)
			}
		})
	}
}

// Append refuses a batch that another set made, whatever the two sets'
// encryption (a plain batch in an encrypted file would be written with its
// body in clear and no room for a seal): nothing is written, and the batch
// is as it was, fit for its own set.
func TestBatchOfAnotherSetRefused(t *testing.T) {
	plain, encrypted := batchSets(t)
	other := startSet(t, SetOptions{FS: setMem(t, "/o"), Dirs: []string{"/o"}}, Recovered{})
	for _, tc := range []struct {
		name     string
		from, to *Set
	}{
		{"plain_into_plain", other, plain},
		{"plain_into_encrypted", plain, encrypted},
		{"encrypted_into_plain", encrypted, plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := putBatch(t, tc.from, 2)
			buf, size := bytes.Clone(b.buf), tc.to.Active(0).Size()
			if _, err := tc.to.Append(0, b); !errors.Is(err, errForeignBatch) {
				t.Fatalf("Append of another set's batch: %v, want %v", err, errForeignBatch)
			}
			if got := tc.to.Active(0).Size(); got != size {
				t.Fatalf("the refused batch was written: file size %d, was %d", got, size)
			}
			if !bytes.Equal(b.buf, buf) || b.Len() != 2 {
				t.Fatal("the refused batch changed")
			}
			mustAppendBatch(t, tc.from, 0, b)
		})
	}
}

// The zero Batch belongs to no set: it takes no record, and no set
// appends it.
func TestBatchZeroValue(t *testing.T) {
	plain, _ := batchSets(t)
	var b Batch
	if err := b.Add(&Record{Type: RecordPut, TxID: 1, Body: []byte("x")}); !errors.Is(err, errForeignBatch) || b.Len() != 0 {
		t.Fatalf("Add to a zero Batch: %v, %d records; want %v and none", err, b.Len(), errForeignBatch)
	}
	if _, err := plain.Append(0, &b); !errors.Is(err, errForeignBatch) {
		t.Fatalf("Append of a zero Batch: %v, want %v", err, errForeignBatch)
	}
}

// A record that does not fit leaves the batch as it was: in an encrypted
// set, a put that fits in clear but not with its seal's tag.
func TestBatchAddTooLarge(t *testing.T) {
	_, encrypted := batchSets(t)
	b := putBatch(t, encrypted, 1)
	size := b.Size()
	r := Record{Type: RecordPut, TxID: 2}
	r.Body = make([]byte, MaxPayloadSize-r.payloadSize(true)-uvarintLen(MaxPayloadSize)) // fits in clear
	if r.payloadSize(true) > MaxPayloadSize {
		t.Fatalf("test record of payload %d does not fit in clear", r.payloadSize(true))
	}
	if err := b.Add(&r); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Add of a put too large with its seal: %v, want %v", err, ErrTooLarge)
	}
	if b.Len() != 1 || b.Size() != size {
		t.Fatalf("after the refused Add: %d records, %d bytes; want 1, %d", b.Len(), b.Size(), size)
	}
	mustAppendBatch(t, encrypted, 0, b)
}

// Truncate keeps the first records, Reset none (and forgets After,
// Completes and Drain); both keep the memory.
func TestBatchTruncateReset(t *testing.T) {
	plain, _ := batchSets(t)
	b := putBatch(t, plain, 3)
	second, capacity := b.Offset(1), b.Cap()
	b.Truncate(1)
	if b.Len() != 1 || b.Size() != second {
		t.Fatalf("Truncate(1): %d records, %d bytes; want 1, %d", b.Len(), b.Size(), second)
	}
	b.Truncate(2) // more than it holds: nothing changes
	if b.Len() != 1 {
		t.Fatalf("Truncate(2) of 1 record: %d records", b.Len())
	}
	b.Completes, b.Drain = []uint32{1}, true
	b.Reset()
	if b.Len() != 0 || b.Size() != 0 || b.Cap() != capacity || b.Completes != nil || b.Drain {
		t.Fatalf("Reset: %d records, %d bytes, cap %d (was %d), completes %v, drain %v", b.Len(), b.Size(), b.Cap(), capacity, b.Completes, b.Drain)
	}
}

// A batch Append wrote is not written again until Reset: its records are
// sealed for where they went, and an encrypted put's body sealed a second
// time opens to the first seal's bytes: a record that reads as damage.
func TestBatchAppendedOnce(t *testing.T) {
	_, encrypted := batchSets(t)
	b := putBatch(t, encrypted, 1)
	a := mustAppendBatch(t, encrypted, 0, b)
	size := encrypted.Active(0).Size()
	if _, err := encrypted.Append(0, b); !errors.Is(err, errBatchWritten) {
		t.Fatalf("second Append of a batch: %v, want %v", err, errBatchWritten)
	}
	if got := encrypted.Active(0).Size(); got != size {
		t.Fatalf("the batch was written again: file size %d, was %d", got, size)
	}
	b.Reset()
	if err := b.Add(&Record{Type: RecordPut, TxID: 2, Body: []byte("again")}); err != nil {
		t.Fatal(err)
	}
	a2 := mustAppendBatch(t, encrypted, 0, b)
	if err := encrypted.Sync(a2); err != nil {
		t.Fatal(err)
	}
	r, err := encrypted.Reader(a.W.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	for _, c := range []struct {
		off  int64
		body string
	}{{a.Base, "put 0"}, {a2.Base, "again"}} {
		if got, err := r.ReadRecord(c.off); err != nil || string(got.Body) != c.body {
			t.Fatalf("the put at %d: %q, %v; want %q", c.off, got.Body, err, c.body)
		}
	}
}
