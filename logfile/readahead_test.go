package logfile

import (
	"bytes"
	"sync"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// hintLog writes a log of n records of size bytes each and opens a Reader
// of it whose read-ahead hints are counted (not made).
func hintLog(t *testing.T, n, size int) (*Reader, []int64, func() int) {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Type: RecordPut, TxID: 1, WriteOrderID: uint64(i + 1), Body: bytes.Repeat([]byte{byte(i) | 1}, size)}
	}
	path, offs := writeLog(t, t.TempDir(), 7, recs)
	r, err := OpenReader(vfs.OS(), path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hints := 0
	r.willNeed = func(off, n int64) {
		mu.Lock()
		hints++
		mu.Unlock()
	}
	t.Cleanup(func() { r.Close() })
	return r, offs, func() int {
		r.hints.Wait()
		mu.Lock()
		defer mu.Unlock()
		h := hints
		hints = 0
		return h
	}
}

// TestReadAheadHintsPerStream: reading a file in order asks for the read
// ahead once per half of readAhead; reads a little behind (events put
// back by rollbacks or released keys) and a second stream far behind (a
// second consumer group) ask for no hint per read, only per half range
// of their own. Before hints were per stream, each read behind the last
// hinted one asked again.
func TestReadAheadHintsPerStream(t *testing.T) {
	const size = 16 << 10
	n := int(5*readAhead) / size // 40 MiB of records
	r, offs, hints := hintLog(t, n, size)
	read := func(i int) {
		t.Helper()
		if _, err := r.ReadRecord(offs[i]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	perPass := int(5*readAhead/(readAhead/2)) + 2

	for i := range n {
		read(i)
	}
	if h := hints(); h == 0 || h > perPass {
		t.Fatalf("%d hints reading %d records in order; want 1..%d", h, n, perPass)
	}

	for i := range n { // each read then one 50 records back
		read(i)
		read(max(i-50, 0))
	}
	if h := hints(); h > perPass {
		t.Errorf("%d hints reading in order with reads behind; want at most %d", h, perPass)
	}

	for i := range n / 2 { // two groups, 20 MiB apart, in turn
		read(i)
		read(i + n/2)
	}
	if h := hints(); h > 2*perPass {
		t.Errorf("%d hints for two streams read in turn; want at most %d", h, 2*perPass)
	}
}

// TestReadAheadHintsForLongFrames: a stream of frames longer than a block
// (read alone, never from a block) asks for the read ahead too.
func TestReadAheadHintsForLongFrames(t *testing.T) {
	const size = 2 * blockSize
	n := int(3*readAhead) / size
	r, offs, hints := hintLog(t, n, size)
	for i := range n {
		if _, err := r.ReadRecord(offs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if h := hints(); h == 0 || h > 8 {
		t.Fatalf("%d hints reading %d frames of %d B in order; want 1..8", h, n, size)
	}
}
