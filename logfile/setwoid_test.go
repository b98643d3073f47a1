package logfile

import "testing"

func TestSetWriteOrderIDKeepsFrameValid(t *testing.T) {
	for _, r := range []Record{
		{Type: RecordPut, TxID: 3, Headers: map[string]string{"k": "v"}, Body: []byte("body")},
		{Type: RecordTake, TxID: 4, Pointers: []uint64{1<<32 | 16}},
		{Type: RecordCommit, TxID: 5, CommitType: RecordTake},
	} {
		buf, err := testFraming.AppendRecord(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		testFraming.setWriteOrderID(buf, 1<<40+7)
		got, n, err := testFraming.DecodeRecord(buf)
		if err != nil || n != len(buf) {
			t.Fatalf("%v: decode after SetWriteOrderID: %v (n=%d)", r.Type, err, n)
		}
		if got.WriteOrderID != 1<<40+7 || got.TxID != r.TxID {
			t.Fatalf("%v: got woid %d tx %d", r.Type, got.WriteOrderID, got.TxID)
		}
	}
}
