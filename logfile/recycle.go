package logfile

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/flumego/filechannel/internal/vfs"
)

// Recycling consumed log files (SetOptions.RecycleLogFiles).
//
// A file laid out with zeros ahead of the writes (layout.go) has every byte
// written twice: zeros, then records. A consumed file's blocks are already
// allocated and durable, so in steady state the set reuses them: a file
// Reclaim would delete is renamed into its data dir's pool instead
// (RecycleName, deleteRound), and the next roll of that dir takes it from
// the pool, writes and fsyncs a new header (RecycledVersion, a fresh salt,
// the new id) with zeros up to recycleHeadSize, renames it to the new id's
// LogName and fsyncs the dir (recycleLog). The records then overwrite the
// old file's bytes. docs/format.md §3.9 has the rules; in short:
//
//   - No old record is read as new: every frame is sealed with its file's
//     salt, drawn again for the new file, and the old bytes right after
//     the header, where a damaged header's salt is derived from
//     (recoverFraming), are zeroed with the header.
//   - The header is durable before the rename is issued, and the rename
//     into the pool was durable (its round's dir fsync returned) before the
//     file is reused: a crash leaves the pool file (with either header) or
//     the new log file with its new header, never a log name whose header
//     names another file.
//   - The bytes after the new records are not zeros: in a recycled file
//     the first invalid frame that no sync mark vouches for ends the file
//     (TailLeftover; Scanner.tornTail), in every file of a dir.

// recycleHeadSize is how much of a recycled file recycleLog rewrites before
// reuse: the header and zeros after it, so that no old frame starts where a
// damaged header's salt would be derived from (at HeaderSize).
const recycleHeadSize = 4096

// recyclable returns f's dir, its pool place taken, if f, a file Reclaim
// deletes, may go into that pool instead (nil if not): recycling is on, the
// pool has room, the dir is neither full nor short of space, and the file's
// size is at most MaxFileSize (a file a big append made larger would keep
// too much space).
func (s *Set) recyclable(f *setFile) *dir {
	n := s.opts.RecycleLogFiles
	if n <= 0 || s.opts.MaxFileSize <= 0 || f.size > s.opts.MaxFileSize {
		return nil
	}
	for _, d := range s.dirs {
		if d.path != f.Dir {
			continue
		}
		if d.full.Load() || d.lowSpace.Load() {
			return nil
		}
		d.poolMu.Lock()
		defer d.poolMu.Unlock()
		if len(d.pool)+d.pending >= n {
			return nil
		}
		d.pending++
		return d
	}
	return nil
}

// unpend gives back a pool place recyclable promised.
func (s *Set) unpend(d *dir) {
	d.poolMu.Lock()
	d.pending = max(d.pending-1, 0)
	d.poolMu.Unlock()
}

// pooled is a file deleteRound renamed into its dir's pool; it joins the
// pool once the dir's fsync made the rename durable (settlePooled).
type pooled struct {
	d  *dir
	id uint32
}

// retire takes log file f off the disk for deleteRound: with recycle, into
// its dir's pool (renamed to RecycleName) if it may be recycled, else
// removed. A failed rename falls back to a removal.
func (s *Set) retire(f *setFile, recycle bool) (pool *pooled, err error) {
	if !recycle {
		return nil, s.fs.Remove(f.Path)
	}
	if d := s.recyclable(f); d != nil {
		if err := s.fs.Rename(f.Path, filepath.Join(f.Dir, RecycleName(f.ID))); err == nil {
			return &pooled{d, f.ID}, nil
		}
		s.unpend(d)
	}
	return nil, s.fs.Remove(f.Path)
}

// settlePooled adds the files renamed into dir path's pool once its fsync
// returned (synced); if it failed, the renames may not be durable, and a
// header written over such a file could come back under its old name after
// a crash: they are removed instead.
func (s *Set) settlePooled(path string, ps []pooled, synced error) error {
	var errs []error
	for _, p := range ps {
		if p.d.path != path {
			continue
		}
		p.d.poolMu.Lock()
		p.d.pending = max(p.d.pending-1, 0)
		if synced == nil {
			p.d.pool = append(p.d.pool, p.id)
		}
		p.d.poolMu.Unlock()
		if synced != nil {
			errs = append(errs, s.fs.Remove(filepath.Join(path, RecycleName(p.id))))
		}
	}
	return errors.Join(errs...)
}

// takePooled returns a file of d's pool to reuse, oldest first, and
// whether there was one.
func (d *dir) takePooled() (uint32, bool) {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	if len(d.pool) == 0 {
		return 0, false
	}
	id := d.pool[0]
	d.pool = slices.Delete(d.pool, 0, 1)
	return id, true
}

// RecycleStats returns how many files the set started by recycling a
// consumed one, and how many wait in the pools now.
func (s *Set) RecycleStats() (recycled int64, pooled int) {
	for i := range s.dirs {
		pooled += s.PoolSize(i)
	}
	return s.recycled.Load(), pooled
}

// PoolSize returns how many consumed files wait in data dir i's pool.
func (s *Set) PoolSize(i int) int {
	d := s.dirs[i]
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	return len(d.pool)
}

// newLog gives d a new log file id: a file of its pool recycled, if there
// is one and that works, else one created. A pool file that cannot be
// recycled is removed (logged).
func (s *Set) newLog(d *dir, id uint32) (*Writer, error) {
	old, ok := d.takePooled()
	if !ok {
		return s.createLog(d.path, id)
	}
	fr, err := s.framingFor(id)
	if err != nil {
		return nil, fmt.Errorf("create log %d in %s: %w", id, d.path, err)
	}
	from := filepath.Join(d.path, RecycleName(old))
	w, err := recycleLog(s.fs, d.path, from, id, fr)
	if err == nil {
		s.recycled.Add(1)
		s.log.Info("recycled a consumed log file", "dir", d.path, "old", RecycleName(old), "new", LogName(id))
		return w, nil
	}
	s.log.Warn("cannot recycle a consumed log file: creating one", "dir", d.path, "file", from, "err", err)
	// Whichever name it has now (a crash could leave either), it holds no
	// record of the new file: no record was written.
	_ = s.fs.Remove(from)
	_ = s.fs.Remove(filepath.Join(d.path, LogName(id)))
	_ = s.fs.SyncDir(d.path)
	return s.createLog(d.path, id)
}

// recycleLog makes the pool file from log file id of dir, with framing fr
// (recycled): it writes the header and zeros up to recycleHeadSize over its
// first bytes and fsyncs them, and only then renames it to LogName(id) and
// fsyncs dir. The old bytes after recycleHeadSize stay, laid out: the
// records overwrite them.
func recycleLog(fsys vfs.FS, dir, from string, id uint32, fr Framing) (*Writer, error) {
	fr.recycled = true
	f, err := fsys.OpenReadWrite(from)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {

		head := appendFileHeader(make([]byte, 0, recycleHeadSize), id, fr)
		_, err = f.WriteAt(head[:recycleHeadSize], 0)
	}
	if err == nil {
		err = f.Sync() // before the rename: see the package's crash rules
	}
	err = errors.Join(err, f.Close())
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LogName(id))
	if err := fsys.Rename(from, path); err != nil {
		return nil, err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return nil, err
	}
	if f, err = fsys.OpenReadWrite(path); err != nil {
		return nil, err
	}
	w := newWriter(f, id, path, fr)
	// Allocated and durable: the old file's bytes (a file shorter than
	// recycleHeadSize grew to it).
	w.lay.laidTo = max(fi.Size(), recycleHeadSize)
	return w, nil
}

// adoptPools puts the pool files OpenSet found back into their dirs' pools
// (Start), as many as RecycleLogFiles allows, oldest first, and removes the
// others: a pool file holds nothing the channel needs (its rename into the
// pool was a deletion), whichever header it has.
func (s *Set) adoptPools() {
	for _, d := range s.dirs {
		removed := false
		for _, id := range d.listedPool {
			path := filepath.Join(d.path, RecycleName(id))
			fi, err := s.fs.Stat(path)
			if err == nil && s.opts.RecycleLogFiles > len(d.pool) && s.opts.MaxFileSize > 0 && fi.Size() <= s.opts.MaxFileSize {
				d.pool = append(d.pool, id)
				continue
			}
			if err := s.fs.Remove(path); err != nil {
				s.log.Warn("cannot remove a consumed log file kept for reuse", "file", path, "err", err)
				continue
			}
			removed = true
		}
		d.listedPool = nil
		if removed {
			if err := s.fs.SyncDir(d.path); err != nil {
				s.log.Warn("sync a data dir", "dir", d.path, "err", err)
			}
		}
	}
}
