package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/v1, v2, v3 and the fuzz seeds in testdata/fuzz")

// sampleRecords is the fixed set of records the golden files of versions 1
// and 2 hold: every type those versions had, and the edge cases of each
// body.
func sampleRecords() []Record {
	ptrs := make([]uint64, 300)
	for i := range ptrs {
		ptrs[i] = uint64(i+1)<<32 | uint64(headerSizeV1+i*37)
	}
	return []Record{
		{Type: RecordPut, TxID: 1, WriteOrderID: 10, Headers: map[string]string{"timestamp": "1700000000", "host": "a.example", "z": ""}, Body: []byte("hello, channel")},
		{Type: RecordPut, TxID: 1, WriteOrderID: 11},
		{Type: RecordPut, TxID: 1, WriteOrderID: 12, Headers: map[string]string{"": "empty key"}, Body: []byte{0}},
		{Type: RecordCommit, TxID: 1, WriteOrderID: 13, CommitType: RecordPut, Count: 3},
		{Type: RecordTake, TxID: 2, WriteOrderID: 14},
		{Type: RecordTake, TxID: 2, WriteOrderID: 15, Pointers: []uint64{1<<32 | headerSizeV1}},
		{Type: RecordTake, TxID: 2, WriteOrderID: 16, Pointers: ptrs},
		{Type: RecordCommit, TxID: 2, WriteOrderID: 17, CommitType: RecordTake, Count: 301},
		{Type: RecordPut, TxID: 3, WriteOrderID: 18, Body: bytes.Repeat([]byte("0123456789abcdef"), 512)},
		{Type: RecordRollback, TxID: 3, WriteOrderID: 19},
		{Type: RecordPut, TxID: 1<<64 - 1, WriteOrderID: 1<<64 - 1, Body: []byte("max ids")},
	}
}

// groupRecords are the records of the types version 3 added, with the edge
// cases of each body, and write-order ids above sampleRecords' but for the
// last.
func groupRecords() []Record {
	long := strings.Repeat("n", MaxGroupNameLen)
	return []Record{
		{Type: RecordGroups, WriteOrderID: 20, NextGroupID: 1, Catalog: []GroupInfo{{ID: 0, Capacity: 10000}}},
		{Type: RecordGroups, WriteOrderID: 21, NextGroupID: 1 << 20, Catalog: []GroupInfo{
			{ID: 0, Capacity: 10000},
			{ID: 1, Name: "billing", Since: 21, Capacity: 1 << 20, Policy: 1, MaxDeliveries: 5, DeadLetter: "billing-dead"},
			{ID: 200, Name: long, Since: 1<<64 - 2, Capacity: 1<<64 - 1, Policy: 2, MaxDeliveries: math.MaxUint32, DeadLetter: long},
			{ID: 1<<20 - 1, Name: "last"},
		}},
		{Type: RecordGroups, WriteOrderID: 22}, // no group at all
		{Type: RecordGroups, WriteOrderID: 23, NextGroupID: math.MaxUint32, Catalog: []GroupInfo{{ID: math.MaxUint32 - 1, Name: "x"}}},
		{Type: RecordPut, TxID: 4, WriteOrderID: 24, Body: []byte("not for every group")},
		{Type: RecordSkip, TxID: 4, WriteOrderID: 25, Skip: []uint32{0, 200}},
		{Type: RecordCommit, TxID: 4, WriteOrderID: 26, CommitType: RecordPut, Count: 1},
		{Type: RecordTake, TxID: 5, WriteOrderID: 27, Group: 1, Pointers: []uint64{1<<32 | HeaderSize, 1<<32 | 1000}},
		{Type: RecordTake, TxID: 5, WriteOrderID: 28, Group: math.MaxUint32},
		{Type: RecordCommit, TxID: 5, WriteOrderID: 29, CommitType: RecordTake, Count: 2},
		{Type: RecordSkip, TxID: 6, WriteOrderID: 30, Skip: []uint32{math.MaxUint32}},
	}
}

// deadLetterRecords are the records of the types version 4 added, with
// the edge cases of each body, and write-order ids above groupRecords'.
func deadLetterRecords() []Record {
	return []Record{
		{Type: RecordGroups, WriteOrderID: 31, NextGroupID: 3, Catalog: []GroupInfo{
			{ID: 0, Capacity: 10, MaxDeliveries: 3, DeadLetter: "dlq"},
			{ID: 2, Name: "dlq", Since: 31, Capacity: 5, Policy: 1, DeadLetterGroup: true},
		}},
		{Type: RecordDeliver, TxID: 7, WriteOrderID: 32, Pointers: []uint64{1<<32 | HeaderSize}, Counts: []uint32{1}},
		{Type: RecordDeliver, TxID: 7, WriteOrderID: 33, Group: math.MaxUint32, Pointers: []uint64{1, 1<<64 - 1},
			Counts: []uint32{200, math.MaxUint32}},
		{Type: RecordTake, TxID: 8, WriteOrderID: 34, Pointers: []uint64{1<<32 | HeaderSize}},
		{Type: RecordMove, TxID: 8, WriteOrderID: 35, Group: 2, Pointers: []uint64{1<<32 | HeaderSize}},
		{Type: RecordCommit, TxID: 8, WriteOrderID: 36, CommitType: RecordTake, Count: 1},
	}
}

// allRecordsV4 is the fixed set of records the version-4 golden file
// holds: allRecords with deadLetterRecords before the last one.
func allRecordsV4() []Record {
	s := allRecords()
	return slices.Concat(s[:len(s)-1], deadLetterRecords(), s[len(s)-1:])
}

// withTimes returns recs as a version 7 or 8 file holds them: each put
// commit with a time (a fixed base plus its write-order id), each put with
// its transaction's commit time, 0 for a transaction without a commit (as
// if it had spilled), and math.MaxInt64 for a put of the last transaction
// id (the largest time).
func withTimes(recs []Record) []Record {
	recs = slices.Clone(recs)
	const base = 1_700_000_000_000_000_000
	commits := map[uint64]int64{1<<64 - 1: math.MaxInt64}
	for i := range recs {
		if r := &recs[i]; r.Type == RecordCommit && r.CommitType == RecordPut {
			r.Time = base + int64(r.WriteOrderID)
			commits[r.TxID] = r.Time
		}
	}
	for i := range recs {
		if r := &recs[i]; r.Type == RecordPut {
			r.Time = commits[r.TxID]
		}
	}
	return recs
}

// allRecords is the fixed set of records the version-3 golden file holds:
// sampleRecords with groupRecords before the last one (whose write-order id
// is the largest).
func allRecords() []Record {
	s := sampleRecords()
	return slices.Concat(s[:len(s)-1], groupRecords(), s[len(s)-1:])
}

func mustAppend(t testing.TB, dst []byte, r *Record) []byte {
	t.Helper()
	out, err := testFraming.AppendRecord(dst, r)
	if err != nil {
		t.Fatalf("testFraming.AppendRecord(%v): %v", r.Type, err)
	}
	return out
}

// frameOf wraps payload in a frame of testFraming with a correct length and
// checksums, so tests can hand the payload decoder bytes the writer never
// produces. A payload shorter than the 17 fixed bytes gets a frame whose
// length is already invalid in version 2 (and zero checksums).
func frameOf(payload []byte) []byte { return frameFor(testFraming, payload) }

// frameFor is frameOf for framing f.
func frameFor(f Framing, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	b = append(b, make([]byte, f.FrameHeaderSize()-4)...)
	b = append(b, payload...)
	if f.version == 1 || len(payload) >= payloadHeaderSize {
		f.seal(b)
	}
	return b
}

// payloadHead is the fixed part of a payload.
func payloadHead(t RecordType) []byte {
	b := []byte{byte(t)}
	b = binary.BigEndian.AppendUint64(b, 7)
	return binary.BigEndian.AppendUint64(b, 8)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// normalized maps the empty forms a decoder may return to nil, so records
// compare by content.
func normalized(r Record) Record {
	if len(r.Headers) == 0 {
		r.Headers = nil
	}
	if len(r.Body) == 0 {
		r.Body = nil
	}
	if len(r.Pointers) == 0 {
		r.Pointers = nil
	}
	if len(r.Catalog) == 0 {
		r.Catalog = nil
	}
	if len(r.Skip) == 0 {
		r.Skip = nil
	}
	return r
}

func requireSameRecord(t testing.TB, got, want Record) {
	t.Helper()
	if g, w := normalized(got), normalized(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("record mismatch\n got  %+v\n want %+v", g, w)
	}
}

// requireCorrupt checks err is a *corrupt.Error for file at off.
func requireCorrupt(t testing.TB, err error, file string, off int64) *corrupt.Error {
	t.Helper()
	var ce *corrupt.Error
	if !errors.As(err, &ce) || !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("got %v (%T), want a *corrupt.Error", err, err)
	}
	if ce.File != file || ce.Offset != off {
		t.Fatalf("corruption at %q offset %d, want %q offset %d (%v)", ce.File, ce.Offset, file, off, err)
	}
	return ce
}

// writeLog writes recs to a new log file id in dir (testFraming), one
// Write each, and returns the path and the frame offset of every record.
func writeLog(t testing.TB, dir string, id uint32, recs []Record) (string, []int64) {
	t.Helper()
	return writeLogWith(t, dir, id, recs, testFraming)
}

// writeLogWith is writeLog with framing fr (framingV1: a version-1 file).
func writeLogWith(t testing.TB, dir string, id uint32, recs []Record, fr Framing) (string, []int64) {
	t.Helper()
	w, err := create(vfs.OS(), dir, id, fr)
	if err != nil {
		t.Fatal(err)
	}
	offs := make([]int64, len(recs))
	for i := range recs {
		frame, err := fr.AppendRecord(nil, &recs[i])
		if err != nil {
			t.Fatal(err)
		}
		off, err := w.Write(frame)
		if err != nil {
			t.Fatal(err)
		}
		offs[i] = off
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path(), offs
}

func appendToFile(t testing.TB, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

var errInjected = errors.New("injected fault")

// faultFS is the OS filesystem with files whose next WriteAt or Sync can be
// made to fail, and whose Sync can be slowed or gated.
type faultFS struct {
	vfs.FS
	onCreate func(*faultFile) // configures each created file before use
	last     *faultFile
}

func newFaultFS() *faultFS { return &faultFS{FS: vfs.OS()} }

func (f *faultFS) Create(name string, perm fs.FileMode) (vfs.File, error) {
	file, err := f.FS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	ff := &faultFile{File: file}
	if f.onCreate != nil {
		f.onCreate(ff)
	}
	f.last = ff
	return ff, nil
}

type faultFile struct {
	vfs.File
	failWrite atomic.Bool // the next WriteAt writes half of p, then fails
	failSync  atomic.Bool // the next Sync fails
	// lateFail: the next Sync syncs, then fails anyway, as an fsync that
	// wrote the pages and still returns EIO.
	lateFail  atomic.Bool
	syncHook  func() // runs at the start of every Sync when set
	syncCalls atomic.Int64
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.failWrite.CompareAndSwap(true, false) {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, errInjected
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	f.syncCalls.Add(1)
	if f.syncHook != nil {
		f.syncHook()
	}
	if f.failSync.CompareAndSwap(true, false) {
		return errInjected
	}
	if f.lateFail.CompareAndSwap(true, false) {
		return errors.Join(f.File.Sync(), errInjected)
	}
	return f.File.Sync()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

func tempLogPath(t testing.TB, id uint32) string {
	return filepath.Join(t.TempDir(), LogName(id))
}

// testFraming is the framing of the files the tests make with testCreate:
// version 4 with a fixed salt, so that frames built without a file
// (mustAppend, frameOf) are valid in them. testFramingV7 is the version
// this build writes (FormatVersion) with that salt.
var (
	testFraming   = Framing{version: 4, salt: 0x5a175a17_0badf00d}
	testFramingV7 = Framing{version: TimedVersion, salt: testFraming.salt}
)

// testFramingV2 is testFraming in a version-2 file: the same frames, a
// header that says 2.
var testFramingV2 = Framing{version: 2, salt: testFraming.salt}

// testFramingV3 is testFraming in a version-3 file.
var testFramingV3 = Framing{version: 3, salt: testFraming.salt}

// testCreate is Create with testFraming's salt.
func testCreate(fsys vfs.FS, dir string, id uint32) (*Writer, error) {
	return create(fsys, dir, id, testFraming)
}

// testHeader is the header of log file id with testFraming.
func testHeader(id uint32) []byte { return appendFileHeader(nil, id, testFraming) }
