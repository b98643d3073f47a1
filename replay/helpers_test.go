package replay

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

type ptr = eventqueue.Pointer

// testingT is what the helpers need of a *testing.T, *testing.B or *rapid.T.
type testingT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(f func())
}

// logSet writes log files into data dirs the way the channel would, record
// by record, with write-order ids the test controls.
type logSet struct {
	tb   testingT
	fs   vfs.FS
	dirs []string
	w    map[uint32]*logfile.Writer
	woid uint64 // last write-order id handed out
	buf  []byte
	// txEvents counts the events each open transaction put or took so
	// far, for its commit record's Count.
	txEvents map[uint64]uint64
}

// newLogSet makes ndirs empty data dirs in a fresh vfs.MemFS, wrapped in a
// vfs.FaultFS (l.faults()).
func newLogSet(tb testingT, ndirs int) *logSet {
	return newLogSetOn(tb, vfs.NewFaultFS(vfs.NewMem()), "/data", ndirs)
}

// newLogSetOn makes ndirs empty data dirs under root on fsys.
func newLogSetOn(tb testingT, fsys vfs.FS, root string, ndirs int) *logSet {
	tb.Helper()
	l := &logSet{tb: tb, fs: fsys, w: map[uint32]*logfile.Writer{}}
	for i := range ndirs {
		d := filepath.Join(root, "d"+strconv.Itoa(i))
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		l.dirs = append(l.dirs, d)
	}
	tb.Cleanup(l.close)
	return l
}

func (l *logSet) close() {
	for id, w := range l.w {
		if err := w.Close(); err != nil {
			l.tb.Errorf("close log %d: %v", id, err)
		}
		delete(l.w, id)
	}
}

// create creates log file id in data dir dir.
func (l *logSet) create(dir int, id uint32) {
	l.tb.Helper()
	w, err := logfile.Create(l.fs, l.dirs[dir], id)
	if err != nil {
		l.tb.Fatal(err)
	}
	if old := l.w[id]; old != nil {
		// The same id in a second dir (an error case): keep both open.
		l.tb.Cleanup(func() { old.Close() })
	}
	l.w[id] = w
}

func (l *logSet) path(id uint32) string { return l.w[id].Path() }

// faults returns the set's fault-injecting filesystem.
func (l *logSet) faults() *vfs.FaultFS { return l.fs.(*vfs.FaultFS) }

// bytes returns the content of log file id.
func (l *logSet) bytes(id uint32) []byte {
	l.tb.Helper()
	b, err := vfs.ReadFile(l.fs, l.path(id))
	if err != nil {
		l.tb.Fatal(err)
	}
	return b
}

// setBytes replaces the content of log file id, as damage would.
func (l *logSet) setBytes(id uint32, b []byte) {
	l.tb.Helper()
	l.writeFile(l.path(id), b, false)
}

// writeFile writes a file with content b (creating it if create is set).
func (l *logSet) writeFile(path string, b []byte, create bool) {
	l.tb.Helper()
	open := l.fs.OpenReadWrite
	if create {
		open = func(name string) (vfs.File, error) { return l.fs.Create(name, 0o600) }
	}
	f, err := open(path)
	if err != nil {
		l.tb.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		l.tb.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		l.tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		l.tb.Fatal(err)
	}
}

// size is the current size of log file id.
func (l *logSet) size(id uint32) int64 { return l.w[id].Size() }

// write appends r to log file id and returns its pointer. A zero
// WriteOrderID takes the next one; an explicit one must be larger than every
// earlier id of the file (the test's business).
func (l *logSet) write(id uint32, r logfile.Record) ptr {
	l.tb.Helper()
	if r.WriteOrderID == 0 {
		l.woid++
		r.WriteOrderID = l.woid
	}
	l.woid = max(l.woid, r.WriteOrderID)
	// A commit carries the number of events its transaction put or took,
	// counted here unless the test set one.
	if l.txEvents == nil {
		l.txEvents = map[uint64]uint64{}
	}
	switch r.Type {
	case logfile.RecordPut:
		l.txEvents[r.TxID]++
	case logfile.RecordTake:
		l.txEvents[r.TxID] += uint64(len(r.Pointers))
	case logfile.RecordCommit:
		if r.Count == 0 {
			r.Count = l.txEvents[r.TxID]
		}
		delete(l.txEvents, r.TxID)
	case logfile.RecordRollback:
		delete(l.txEvents, r.TxID)
	}
	var err error
	l.buf, err = l.w[id].Framing().AppendRecord(l.buf[:0], &r)
	if err != nil {
		l.tb.Fatal(err)
	}
	off, err := l.w[id].Write(l.buf)
	if err != nil {
		l.tb.Fatal(err)
	}
	return eventqueue.NewPointer(id, uint32(off))
}

func (l *logSet) put(id uint32, tx uint64) ptr {
	return l.write(id, logfile.Record{Type: logfile.RecordPut, TxID: tx, Body: []byte("event of tx " + strconv.FormatUint(tx, 10))})
}

// puts writes n put records of tx.
func (l *logSet) puts(id uint32, tx uint64, n int) []ptr {
	ps := make([]ptr, n)
	for i := range ps {
		ps[i] = l.put(id, tx)
	}
	return ps
}

func (l *logSet) take(id uint32, tx uint64, ps ...ptr) {
	raw := make([]uint64, len(ps))
	for i, p := range ps {
		raw[i] = uint64(p)
	}
	l.write(id, logfile.Record{Type: logfile.RecordTake, TxID: tx, Pointers: raw})
}

func (l *logSet) commitPut(id uint32, tx uint64) {
	l.write(id, logfile.Record{Type: logfile.RecordCommit, TxID: tx, CommitType: logfile.RecordPut})
}

func (l *logSet) commitTake(id uint32, tx uint64) {
	l.write(id, logfile.Record{Type: logfile.RecordCommit, TxID: tx, CommitType: logfile.RecordTake})
}

func (l *logSet) rollback(id uint32, tx uint64) {
	l.write(id, logfile.Record{Type: logfile.RecordRollback, TxID: tx})
}

// putCommitted writes a put transaction of n events and its commit.
func (l *logSet) putCommitted(id uint32, tx uint64, n int) []ptr {
	ps := l.puts(id, tx, n)
	l.commitPut(id, tx)
	return ps
}

// takeCommitted writes a take transaction's take record and commit.
func (l *logSet) takeCommitted(id uint32, tx uint64, ps ...ptr) {
	l.take(id, tx, ps...)
	l.commitTake(id, tx)
}

// run replays the set's dirs onto q (an empty queue of capacity 1024 when
// nil) from st.
func (l *logSet) run(st *checkpoint.State, q *eventqueue.Queue) (*Result, *eventqueue.Queue, error) {
	l.tb.Helper()
	if q == nil {
		q = newQueue(l.tb, 1024, 0, nil)
	}
	res, err := Run(Options{FS: l.fs, DataDirs: l.dirs, Checkpoint: st, Queue: q})
	return res, q, err
}

// mustRun is run that fails the test on an error and checks the queue.
func (l *logSet) mustRun(st *checkpoint.State, q *eventqueue.Queue) (*Result, *eventqueue.Queue) {
	l.tb.Helper()
	res, q, err := l.run(st, q)
	if err != nil {
		l.tb.Fatalf("Run: %v", err)
	}
	if err := q.Check(); err != nil {
		l.tb.Fatalf("queue after Run: %v", err)
	}
	return res, q
}

// newQueue builds a queue of capacity holding ring from ring position head,
// as the channel loads it from a checkpoint.
func newQueue(tb testingT, capacity, head int, ring []ptr) *eventqueue.Queue {
	tb.Helper()
	slots := eventqueue.NewMemSlots(capacity)
	refs := map[uint32]int{}
	for i, p := range ring {
		slots[(head+i)%capacity] = uint64(p)
		refs[p.FileID()]++
	}
	q, err := eventqueue.New(slots, capacity, head, len(ring), refs)
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// state builds a checkpoint State at write-order id w over ring, with every
// log file of l at its current size (so nothing before W is rescanned)
// unless positions overrides it.
func (l *logSet) state(w uint64, ring []ptr) *checkpoint.State {
	st := &checkpoint.State{Meta: checkpoint.Meta{WriteOrderID: w, Size: len(ring)}}
	refs := map[uint32]int{}
	for _, p := range ring {
		refs[p.FileID()]++
	}
	var ids []uint32
	for id := range l.w {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		st.Logs = append(st.Logs, checkpoint.LogState{FileID: id, Position: l.size(id), Refs: refs[id]})
		st.NextFileID = id + 1
	}
	return st
}

func logState(st *checkpoint.State, id uint32) *checkpoint.LogState {
	for i := range st.Logs {
		if st.Logs[i].FileID == id {
			return &st.Logs[i]
		}
	}
	panic(fmt.Sprintf("no log state for file %d", id))
}

// cat concatenates pointer lists.
func cat(lists ...[]ptr) []ptr {
	var out []ptr
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// without returns ps minus the pointers in drop, order kept.
func without(ps []ptr, drop ...ptr) []ptr {
	var out []ptr
	for _, p := range ps {
		if !slices.Contains(drop, p) {
			out = append(out, p)
		}
	}
	return out
}

func wantQueue(tb testingT, q *eventqueue.Queue, want []ptr) {
	tb.Helper()
	got := q.Pointers()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		tb.Fatalf("queue after replay:\n got  %v\n want %v", got, want)
	}
}
