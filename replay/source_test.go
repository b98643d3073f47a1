package replay

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// The reader goroutine hands over every record, in order, with the fields
// the replay needs, across batch boundaries.
func TestSourceBatchesEveryRecord(t *testing.T) {
	l := newLogSetOn(t, vfs.OS(), t.TempDir(), 1)
	l.create(0, 1)
	var want []uint64
	for tx := uint64(1); tx <= 5; tx++ {
		l.putCommitted(1, tx, sourceBatch/2+3) // records straddle batches
	}
	l.w[1].Sync()
	path := filepath.Join(l.dirs[0], logfile.LogName(1))
	sc, err := logfile.NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for sc.Next() {
		want = append(want, sc.Record().WriteOrderID)
	}
	sc.Close()

	sc, err = logfile.NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &source{sc: sc, id: 1, path: path}
	defer s.sc.Close()
	var got []uint64
	for s.advance() {
		got = append(got, s.woid)
		if s.rec.WriteOrderID != s.woid || s.size <= 0 || s.off < logfile.HeaderSize {
			t.Fatalf("record %d: %+v off %d size %d", len(got), s.rec, s.off, s.size)
		}
	}
	if s.fault != nil || s.sc.Err() != nil {
		t.Fatal(s.fault, s.sc.Err())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("records with write-order ids %v, want %v", got, want)
	}
	if s.end != sc.End() {
		t.Fatalf("end %d, scanner end %d", s.end, sc.End())
	}
}

// A fault while reading the mapped file (here: the file shrank under the
// mapping, as an I/O error would also fault) ends the scan with an error
// instead of killing the process.
func TestSourceTurnsAMappingFaultIntoAnError(t *testing.T) {
	l := newLogSetOn(t, vfs.OS(), t.TempDir(), 1)
	l.create(0, 1)
	for tx := uint64(1); tx <= 40; tx++ {
		l.putCommitted(1, tx, 100)
	}
	l.w[1].Sync()
	path := filepath.Join(l.dirs[0], logfile.LogName(1))
	sc, err := logfile.NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.MapFile() {
		t.Fatal("not mapped")
	}
	if err := os.Truncate(path, logfile.HeaderSize+1); err != nil {
		t.Fatal(err)
	}
	s := &source{sc: sc, id: 1, path: path}
	defer s.sc.Close()
	for s.advance() {
	}
	if s.fault == nil || !strings.Contains(s.fault.Error(), "fault") {
		t.Fatalf("fault = %v", s.fault)
	}
}

// Stopping a source whose reader is blocked on a full queue returns.
func TestSourceStopsEarly(t *testing.T) {
	l := newLogSetOn(t, vfs.OS(), t.TempDir(), 1)
	l.create(0, 1)
	for tx := uint64(1); tx <= 10; tx++ {
		l.putCommitted(1, tx, sourceBatch)
	}
	l.w[1].Sync()
	sc, err := logfile.NewScanner(vfs.OS(), filepath.Join(l.dirs[0], logfile.LogName(1)), 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &source{sc: sc, id: 1}
	if !s.advance() {
		t.Fatal("no record")
	}
	s.stop()
	s.stop()
	if err := s.sc.Close(); err != nil {
		t.Fatal(err)
	}
}
