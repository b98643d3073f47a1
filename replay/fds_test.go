package replay

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// goroutineFS records the most goroutines running at any open or read of
// a file through it: Run opens files on its own goroutine and the sources'
// goroutines read them.
type goroutineFS struct {
	vfs.FS
	peak atomic.Int64
}

func (g *goroutineFS) sample() {
	n := int64(runtime.NumGoroutine())
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
}

func (g *goroutineFS) Open(name string) (vfs.File, error) {
	g.sample()
	f, err := g.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return goroutineFile{f, g}, nil
}

type goroutineFile struct {
	vfs.File
	g *goroutineFS
}

func (f goroutineFile) ReadAt(p []byte, off int64) (int, error) {
	f.g.sample()
	return f.File.ReadAt(p, off)
}

// writePairs writes pairs × len(dirs) log files of txs put transactions
// each, as the channel's dirs write at the same time: the records of the
// files active at once (one per dir) interleave, the next ones follow. It
// returns the committed events in commit order.
func writePairs(t *testing.T, fsys vfs.FS, dirs []string, pairs, txs int) []ptr {
	t.Helper()
	var want []ptr
	var woid, tx uint64
	var buf []byte
	write := func(w *logfile.Writer, r logfile.Record) int64 {
		woid++
		r.WriteOrderID = woid
		var err error
		if buf, err = w.Framing().AppendRecord(buf[:0], &r); err != nil {
			t.Fatal(err)
		}
		off, err := w.Write(buf)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	id := uint32(0)
	for range pairs {
		ws := make([]*logfile.Writer, len(dirs))
		for d := range dirs {
			id++
			w, err := logfile.Create(fsys, dirs[d], id)
			if err != nil {
				t.Fatal(err)
			}
			ws[d] = w
		}
		for range txs {
			for _, w := range ws {
				tx++
				off := write(w, logfile.Record{Type: logfile.RecordPut, TxID: tx, Body: []byte("event")})
				write(w, logfile.Record{Type: logfile.RecordCommit, TxID: tx, CommitType: logfile.RecordPut, Count: 1})
				want = append(want, ptr(uint64(w.ID())<<32|uint64(off)))
			}
		}
		for _, w := range ws {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return want
}

// Replay of thousands of log files holds about one open file (one scanner,
// one reader goroutine) per data dir, not one per file: a file is open only
// while the merge is inside its write-order ids. Long files show the
// goroutines (a reader stays blocked once it is two batches ahead), many
// small ones the descriptors. Verify stays bounded too.
func TestReplayManyFilesBoundsOpenFiles(t *testing.T) {
	dirs := []string{"/data/d0", "/data/d1"}
	for _, tc := range []struct {
		name       string
		pairs, txs int // files per dir; put transactions per file
	}{
		{"many_small_files", 1000, 3},
		{"long_files", 50, sourceBatch*(sourceBatches+1)/2 + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ff := vfs.NewFaultFS(vfs.NewMem())
			gfs := &goroutineFS{FS: ff}
			for _, d := range dirs {
				if err := ff.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			want := writePairs(t, ff, dirs, tc.pairs, tc.txs)
			files, bound := len(dirs)*tc.pairs, len(dirs)+1 // one more while a file is peeked or opens
			if n := ff.OpenFiles(); n != 0 {
				t.Fatalf("%d files open before the replay", n)
			}
			base := int64(runtime.NumGoroutine())

			q := newQueue(t, len(want), 0, nil)
			res, err := Run(Options{FS: gfs, DataDirs: dirs, Queue: q})
			if err != nil {
				t.Fatal(err)
			}
			wantQueue(t, q, want)
			if len(res.Logs) != files {
				t.Fatalf("replay saw %d log files, want %d", len(res.Logs), files)
			}
			t.Logf("replay of %d files: at most %d open at once, %d goroutines beside the test's",
				files, ff.PeakOpenFiles(), gfs.peak.Load()-base)
			if peak := ff.PeakOpenFiles(); peak > bound {
				t.Errorf("replay of %d files held %d open at once, want at most %d", files, peak, bound)
			}
			if extra := gfs.peak.Load() - base; extra > int64(bound) {
				t.Errorf("replay of %d files ran %d goroutines of its own at once, want at most %d", files, extra, bound)
			}
			if n := ff.OpenFiles(); n != 0 {
				t.Fatalf("%d files left open after the replay", n)
			}

			ff.ResetPeakOpenFiles()
			rep, err := Verify(VerifyOptions{FS: gfs, CheckpointDir: "/ckpt", DataDirs: dirs})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Queued != len(want) || rep.FullReplayQueued != len(want) {
				t.Fatalf("Verify: %d queued events (%d by a full replay), want %d", rep.Queued, rep.FullReplayQueued, len(want))
			}
			t.Logf("Verify of %d files: at most %d open at once", files, ff.PeakOpenFiles())
			if peak, max := ff.PeakOpenFiles(), logfile.DefaultMaxOpenReaders+bound; peak > max {
				t.Errorf("Verify of %d files held %d open at once, want at most %d", files, peak, max)
			}
		})
	}
}

// A file the checkpoint counts queued events in must exist: Run refuses
// to replay without it (checkQueuedFiles, one map lookup per file, not a
// search of every file).
func TestRunRefusesMissingQueuedFile(t *testing.T) {
	l := newLogSet(t, 1)
	l.create(0, 1)
	l.create(0, 2)
	ring := l.putCommitted(1, 1, 2)
	l.putCommitted(2, 2, 1)
	st := l.state(l.woid, ring)
	if err := l.fs.Remove(l.path(1)); err != nil {
		t.Fatal(err)
	}
	_, _, err := l.run(st, newQueue(t, 8, 0, ring))
	if err == nil || !strings.Contains(err.Error(), "log file "+logfile.LogName(1)+" holds 2 queued events according to the checkpoint but is missing") {
		t.Fatalf("Run without a file the checkpoint counts queued events in: %v", err)
	}
}
