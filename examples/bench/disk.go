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

// appender is the disk baseline: batch × 1 KiB appended to one file, each
// batch with one write and one fdatasync.
type appender struct {
	f   *os.File
	buf []byte
}

func newAppender(path string, batch int) (*appender, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	a := &appender{f: f, buf: make([]byte, batch*1024)}
	for i := range a.buf {
		a.buf[i] = byte(i)
	}
	return a, nil
}

// meter appends batches until budget passes or max events are written.
func (a *appender) meter(batch int) *meter {
	return &meter{
		res: Result{ID: fmt.Sprintf("disk/write+fdatasync/batch=%d", batch), System: "disk",
			Op: "write+fdatasync", Batch: batch, Producers: 1},
		run: func(budget time.Duration, max int64) (int64, error) {
			var n int64
			for start := time.Now(); until(start, budget, n, int64(batch), max); n += int64(batch) {
				if _, err := a.f.Write(a.buf); err != nil {
					return n, err
				}
				if err := unix.Fdatasync(int(a.f.Fd())); err != nil {
					return n, fmt.Errorf("fdatasync: %w", err)
				}
			}
			return n, nil
		},
	}
}

// close closes and removes the file.
func (a *appender) close() error {
	return errors.Join(a.f.Close(), os.Remove(a.f.Name()))
}

// readFiles reads every file in paths from start to end, 1 MiB at a time
// with pread (as the channel's log scanner does), and returns the bytes
// read and the time it took.
func readFiles(paths []string) (int64, time.Duration, error) {
	buf := make([]byte, 1<<20)
	var total int64
	start := time.Now()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, 0, err
		}
		for off := int64(0); ; {
			n, err := f.ReadAt(buf, off)
			off += int64(n)
			total += int64(n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return 0, 0, err
			}
		}
		if err := f.Close(); err != nil {
			return 0, 0, err
		}
	}
	return total, time.Since(start), nil
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
