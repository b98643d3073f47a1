package logfile

import (
	"bytes"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// Benchmarks; reproduce with
//
//	go test ./logfile -run '^$' -bench . -benchmem

func benchPut() Record {
	return Record{Type: RecordPut, TxID: 42, WriteOrderID: 1 << 40,
		Headers: map[string]string{"timestamp": "1700000000000", "host": "web-17.example"},
		Body:    bytes.Repeat([]byte("x"), 1024)}
}

func benchTake() Record {
	ptrs := make([]uint64, 100)
	for i := range ptrs {
		ptrs[i] = 3<<32 | uint64(HeaderSize+i*1100)
	}
	return Record{Type: RecordTake, TxID: 43, WriteOrderID: 1<<40 + 1, Pointers: ptrs}
}

func BenchmarkAppendRecord(b *testing.B) {
	for _, bc := range []struct {
		name string
		rec  Record
	}{
		{"put_1KiB", benchPut()},
		{"take_100_pointers", benchTake()},
		{"commit", Record{Type: RecordCommit, CommitType: RecordPut}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dst := make([]byte, 0, 4096)
			b.SetBytes(int64(bc.rec.EncodedSize()))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = testFraming.AppendRecord(dst[:0], &bc.rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeRecord(b *testing.B) {
	for _, bc := range []struct {
		name string
		rec  Record
	}{
		{"put_1KiB", benchPut()},
		{"put_1KiB_no_headers", Record{Type: RecordPut, Body: make([]byte, 1024)}},
		{"take_100_pointers", benchTake()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			frame := mustAppend(b, nil, &bc.rec)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := testFraming.DecodeRecord(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScanner replays a file of 1 KiB puts, each batch of 100 followed
// by its commit, as recovery does.
func BenchmarkScanner(b *testing.B) {
	put := benchPut()
	commit := Record{Type: RecordCommit, CommitType: RecordPut}
	w, err := testCreate(vfs.OS(), b.TempDir(), 1)
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	records := 0
	for batch := 0; batch < 100; batch++ {
		buf = buf[:0]
		for i := 0; i < 100; i++ {
			buf = mustAppend(b, buf, &put)
		}
		buf = mustAppend(b, buf, &commit)
		records += 101
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(w.Size())
	b.ReportAllocs()
	for b.Loop() {
		s, err := NewScanner(vfs.OS(), w.Path(), 0)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for s.Next() {
			n++
		}
		if s.Err() != nil || n != records {
			b.Fatalf("scanned %d of %d records: %v", n, records, s.Err())
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkWriteSync is the durable put path: 100 encoded 1 KiB puts and a
// commit in one Write, then Sync. Throughput depends on the disk's fsync.
func BenchmarkWriteSync(b *testing.B) {
	put, commit := benchPut(), Record{Type: RecordCommit, CommitType: RecordPut}
	var buf []byte
	for i := 0; i < 100; i++ {
		buf = mustAppend(b, buf, &put)
	}
	buf = mustAppend(b, buf, &commit)
	w, err := testCreate(vfs.OS(), b.TempDir(), 1)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		off, err := w.Write(buf)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.SyncTo(off + int64(len(buf))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100*float64(b.N)/b.Elapsed().Seconds(), "puts/s")
}
