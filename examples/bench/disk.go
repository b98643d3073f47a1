package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// batches are the batch sizes of the put and baseline write measurements.
var batches = []int{1, 10, 100, 1000}

// diskWriter is a disk baseline: batch × 1 KiB written to one file, each
// batch with one write and one fdatasync. An appender (newAppender) appends
// to an empty file opened O_APPEND: each fdatasync also makes the file's
// new size and blocks durable. An overwriter (newOverwriter) pwrites into a
// file written and fsynced earlier, going round its region: the blocks are
// allocated and the size does not change, so the fdatasync carries the data
// alone (what a log written into preallocated or recycled files would pay).
type diskWriter struct {
	f      *os.File
	buf    []byte
	region int64 // overwriter: the bytes written earlier, overwritten in turn; 0 for an appender
	off    int64 // overwriter: where the next batch goes
	// syncs, if not nil, gets how long each fdatasync took.
	syncs *[]time.Duration
}

func newAppender(path string, batch int) (*diskWriter, error) {
	return openDiskWriter(path, batch, os.O_APPEND)
}

// newOverwriter writes a file of region bytes (rounded down to whole
// batches, at least one), fsyncs it and returns a diskWriter that
// overwrites it. The file's pages stay in the page cache, as those of a
// file written just before do.
func newOverwriter(path string, batch int, region int64) (*diskWriter, error) {
	w, err := openDiskWriter(path, batch, 0)
	if err != nil {
		return nil, err
	}
	w.region = max(1, region/int64(len(w.buf))) * int64(len(w.buf))
	for off := int64(0); off < w.region; off += int64(len(w.buf)) {
		if _, err := w.f.Write(w.buf); err != nil {
			return nil, errors.Join(err, w.close())
		}
	}
	if err := w.f.Sync(); err != nil {
		return nil, errors.Join(err, w.close())
	}
	return w, nil
}

func openDiskWriter(path string, batch, flag int) (*diskWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|flag, 0o644)
	if err != nil {
		return nil, err
	}
	w := &diskWriter{f: f, buf: make([]byte, batch*1024)}
	for i := range w.buf {
		w.buf[i] = byte(i)
	}
	return w, nil
}

// diskID is the ID of the disk baseline at batch: an appender's
// (overwrite false) or an overwriter's.
func diskID(overwrite bool, batch int) string {
	if overwrite {
		return fmt.Sprintf("disk/overwrite+fdatasync/batch=%d", batch)
	}
	return fmt.Sprintf("disk/write+fdatasync/batch=%d", batch)
}

// meter writes batches until budget passes or max events are written.
func (w *diskWriter) meter() *meter {
	batch := len(w.buf) / 1024
	op := "write+fdatasync"
	if w.region > 0 {
		op = "pwrite+fdatasync, overwrite"
	}
	return &meter{
		res: Result{ID: diskID(w.region > 0, batch), System: "disk", Op: op, Batch: batch, Producers: 1},
		run: func(budget time.Duration, max int64) (int64, error) {
			var n int64
			for start := time.Now(); until(start, budget, n, int64(batch), max); n += int64(batch) {
				if err := w.write(); err != nil {
					return n, err
				}
				t := time.Now()
				if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
					return n, fmt.Errorf("fdatasync: %w", err)
				}
				if w.syncs != nil {
					*w.syncs = append(*w.syncs, time.Since(t))
				}
			}
			return n, nil
		},
	}
}

// write writes one batch: appended, or over the region's next batch.
func (w *diskWriter) write() error {
	if w.region == 0 {
		_, err := w.f.Write(w.buf)
		return err
	}
	if w.off+int64(len(w.buf)) > w.region {
		w.off = 0
	}
	_, err := w.f.WriteAt(w.buf, w.off)
	w.off += int64(len(w.buf))
	return err
}

// close closes and removes the file.
func (w *diskWriter) close() error {
	return errors.Join(w.f.Close(), os.Remove(w.f.Name()))
}

// readFiles reads every file in paths from start to end, 1 MiB at a time
// with pread (as the channel's log scanner does), and returns the bytes
// read and the time it took.
func readFiles(paths []string) (int64, time.Duration, error) {
	r := &seqReader{paths: paths}
	start := time.Now()
	n, err := r.read(1 << 62)
	return n, time.Since(start), errors.Join(err, r.close())
}

// seqReader reads files one after another, each from start to end, in
// 1 MiB preads, a given number of bytes at a time.
type seqReader struct {
	paths []string
	f     *os.File // paths[0], open, read up to off
	off   int64
	buf   []byte
}

// read reads up to n more bytes (fewer at the end of the last file) and
// returns how many it read.
func (r *seqReader) read(n int64) (int64, error) {
	if r.buf == nil {
		r.buf = make([]byte, 1<<20)
	}
	var total int64
	for total < n && len(r.paths) > 0 {
		if r.f == nil {
			f, err := os.Open(r.paths[0])
			if err != nil {
				return total, err
			}
			r.f, r.off = f, 0
		}
		k, err := r.f.ReadAt(r.buf[:min(int64(len(r.buf)), n-total)], r.off)
		r.off += int64(k)
		total += int64(k)
		if errors.Is(err, io.EOF) {
			err = r.f.Close()
			r.f, r.paths = nil, r.paths[1:]
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// close closes the file being read, if any.
func (r *seqReader) close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// dropCache asks the kernel to drop the page cache of each file
// (posix_fadvise DONTNEED, which needs no privilege; the files' pages are
// clean: the channel synced them). A hypervisor may still cache the disk.
func dropCache(paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		if err == nil {
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("drop cache of %s: %w", p, err)
		}
	}
	return nil
}
