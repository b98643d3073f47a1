package logfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/flumego/filechannel/internal/vfs"
)

// ReserveName is the space reserve file of a data dir (SetOptions.Reserve):
// zeros, published through ReserveName+".tmp". It is not a log file name,
// so ListLogs and the catalog ignore it.
const ReserveName = "space.reserve"

// The space reserve. A data dir whose disk fills up can still be drained
// only if take commits find room for their records, and a checkpoint for
// its files, before any log file can be deleted; so the live set keeps a
// file of SetOptions.Reserve bytes in each data dir, and gives it back to
// the filesystem when that room is needed:
//
//   - Start writes it where it is missing and there is room for twice its
//     size, and counts a dir without it as full.
//   - A roll or an append that fails with ENOSPC removes it: the dir is
//     full. The failed batch is written again at once if it drains the
//     channel (Batch.Drain); other batches fail as they would have.
//   - While a dir is full, only draining batches are appended there, and
//     only while the free space left after them is at least a quarter of
//     the reserve: that quarter is kept for the checkpoint whose log
//     deletions make room (its files usually share the disk).
//   - ReleaseReserves removes every dir's reserve (Open, when its
//     checkpoint finds no room).
//   - After each Reclaim (and at each KeepReserves), a full dir with room
//     for twice the reserve gets it back and is no longer full.
//
// Puts are the caller's to refuse while Full says so.

// startReserves makes the reserve of every data dir that has none (one of
// any size counts), after removing what a crash left of an unfinished one.
// Without a reserve configured, one left by an earlier configuration is
// removed.
func (s *Set) startReserves() {
	for _, d := range s.dirs {
		path := s.reservePath(d)
		if err := removeIfExists(s.fs, path+".tmp"); err != nil {
			s.log.Error("remove unfinished space reserve", "file", path+".tmp", "err", err)
		}
		_, err := s.fs.Stat(path)
		switch {
		case s.opts.Reserve <= 0:
			if err == nil {
				s.log.Info("removing the space reserve: none is configured", "file", path)
				if err := removeIfExists(s.fs, path); err != nil {
					s.log.Error("remove space reserve", "file", path, "err", err)
				}
			}
		case err != nil:
			d.full.Store(true)
			s.keepReserve(d, false)
		}
	}
}

// KeepReserves gives every full data dir its space reserve back where
// there is room for twice its size. Reclaim calls it after its deletions;
// the channel also calls it when it skips a checkpoint (nothing written),
// so that room made by others ends a full dir's refusal of puts.
func (s *Set) KeepReserves() {
	if s.opts.Reserve <= 0 {
		return
	}
	for _, d := range s.dirs {
		if d.full.Load() {
			s.keepReserve(d, true)
		}
	}
}

// keepReserve writes d's reserve if d is full and its disk has room for
// twice the reserve's size. A failure is logged, and leaves d full.
func (s *Set) keepReserve(d *dir, again bool) {
	d.reserveMu.Lock()
	defer d.reserveMu.Unlock()
	if !d.full.Load() {
		return
	}
	size := s.opts.Reserve
	free, err := s.fs.FreeSpace(d.path)
	if err != nil {
		s.log.Error("space reserve: free space", "dir", d.path, "err", err)
		return
	}
	if free < 2*size {
		if !again {
			s.log.Warn("data dir has no room for its space reserve: puts there fail until a checkpoint makes room",
				"dir", d.path, "free_bytes", free, "reserve_bytes", size)
		}
		return
	}
	path := s.reservePath(d)
	if err := vfs.WriteFileAtomicFrom(s.fs, path, io.LimitReader(zeroReader{}, size)); err != nil {
		s.log.Error("write space reserve", "file", path, "err", errors.Join(err, removeIfExists(s.fs, path+".tmp")))
		return
	}
	d.full.Store(false)
	d.freeChecked.Store(0)
	if again {
		s.log.Info("data dir has its space reserve again: puts go on", "dir", d.path, "reserve_bytes", size)
	}
}

// releaseReserve removes d's reserve (its disk is full), and reports
// whether that freed its room.
func (s *Set) releaseReserve(d *dir) bool {
	if s.opts.Reserve <= 0 {
		return false
	}
	d.reserveMu.Lock()
	defer d.reserveMu.Unlock()
	if d.full.Load() {
		return false
	}
	path := s.reservePath(d)
	if err := removeIfExists(s.fs, path); err != nil {
		s.log.Error("remove space reserve", "file", path, "err", err)
		return false
	}
	d.full.Store(true)
	d.freeChecked.Store(0)
	if err := s.fs.SyncDir(d.path); err != nil {
		// The room is free now; a crash may bring the name back.
		s.log.Error("remove space reserve: sync dir", "dir", d.path, "err", err)
	}
	s.log.Warn("data dir is full: removed its space reserve so that takes can commit; puts fail there until a checkpoint makes room",
		"dir", d.path, "reserve_bytes", s.opts.Reserve)
	return true
}

// ReleaseReserves removes the space reserve of every data dir that holds
// one, and reports whether any did. Open calls it when the checkpoint it
// writes after replay finds the disk full.
func (s *Set) ReleaseReserves() bool {
	released := false
	for _, d := range s.dirs {
		if s.releaseReserve(d) {
			released = true
		}
	}
	return released
}

// Full reports whether data dir i is without its space reserve: it ran out
// of space (or never had room for the reserve) and no checkpoint has made
// room since. Puts must not go there.
func (s *Set) Full(i int) bool { return s.dirs[i].full.Load() }

// roomForDrainLocked checks, while d is full, that a draining batch of n
// bytes (plus a new file's header when the dir rolls) leaves a quarter of
// the reserve free, and refuses any other batch. d.mu is held.
func (s *Set) roomForDrainLocked(d *dir, n int64, drain bool) error {
	if !drain {
		return fmt.Errorf("data dir %s is full: its room is kept for take commits until a checkpoint makes room: %w",
			d.path, syscall.ENOSPC)
	}
	free, err := s.freeSpace(d)
	if err != nil {
		return err
	}
	if keep := s.opts.Reserve / 4; free-n-HeaderSize < keep {
		return fmt.Errorf("data dir %s is full: %d bytes free, of which the last %d are kept for the checkpoint that makes room: %w",
			d.path, free, keep, syscall.ENOSPC)
	}
	return nil
}

func (s *Set) reservePath(d *dir) string { return filepath.Join(d.path, ReserveName) }

func removeIfExists(fsys vfs.FS, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// zeroReader reads zeros.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
