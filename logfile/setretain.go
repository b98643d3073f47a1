package logfile

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"time"
)

// Retention keeps log files that nothing needs any more (SetOptions.Retention,
// the channel's Config.Retention). Reclaim, instead of deleting every such
// file, deletes only those retention lets go:
//
//   - with MaxAge, a file whose age is MaxAge or more (fileTime);
//   - with MaxBytes, oldest first, while the retained files' valid bytes
//     exceed MaxBytes. Files something needs do not count.
//
// A file whose records complete events of a retained file stays too, and
// is retained (it counts toward MaxBytes). Retained files are never needed
// for what the channel holds: a data dir that runs out of room deletes
// them, oldest first, before it refuses a put (MakeRoom), and a full dir
// does at each Reclaim. The zero value retains nothing: Reclaim deletes as
// it always did.
type Retention struct {
	MaxAge   time.Duration // 0: no age limit
	MaxBytes int64         // 0: no size limit
}

func (r Retention) on() bool { return r.MaxAge > 0 || r.MaxBytes > 0 }

// Retained describes the retained log files (Set.Retained).
type Retained struct {
	Files int
	Bytes int64 // their valid lengths
	// Oldest is the fileTime of the oldest (zero without one).
	Oldest time.Time
}

// fileTime is when a log file's age starts: when its last record was
// written. It is read once the file is no longer written (at Start for the
// files found, at the roll that closes the active one): the file's
// modification time, or, where the filesystem keeps none (or one in the
// future), now (the time it was read: one for all the files Start reads,
// whose order is then their ids'), which makes the file younger, never
// older. Retention's MaxAge, its oldest-first order and the oldest
// retained age all come from here.
func (s *Set) fileTime(path string, now time.Time) time.Time {
	fi, err := s.fs.Stat(path)
	if err != nil || fi.ModTime().IsZero() || fi.ModTime().After(now) {
		return now
	}
	return fi.ModTime()
}

func (s *Set) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// retainedFile is a file retention weighs: its id, fileTime, size and
// data dir.
type retainedFile struct {
	id   uint32
	t    time.Time
	size int64
	dir  string
}

// byAge returns the files of ids that exist, oldest first (then by id).
func (s *Set) byAge(ids []uint32) []retainedFile {
	s.mu.RLock()
	out := make([]retainedFile, 0, len(ids))
	for _, id := range ids {
		if f := s.files[id]; f != nil {
			out = append(out, retainedFile{id, f.written, f.size, f.Dir})
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b retainedFile) int {
		return cmp.Or(a.t.Compare(b.t), compareIDs(a.id, b.id))
	})
	return out
}

// retain returns the files of free (files nothing needs, closed under
// Complete) that retention lets go; Reclaim deletes them, the others are
// retained. With MaxBytes, files younger than MaxAge are kept newest first
// while the retained bytes (the kept files and those completing them)
// stay within it: the first that does not fit goes, and every older one.
func (s *Set) retain(free []uint32) []uint32 {
	r := s.opts.Retention
	now := s.now()
	files := s.byAge(free)
	keep := map[uint32]bool{}
	del := s.closeOver(free)
	for _, f := range slices.Backward(files) {
		if r.MaxAge > 0 && now.Sub(f.t) >= r.MaxAge {
			break
		}
		keep[f.id] = true
		d := s.closeOver(slices.DeleteFunc(slices.Clone(free), func(id uint32) bool { return keep[id] }))
		if r.MaxBytes > 0 && s.bytesOutside(files, d) > r.MaxBytes {
			break
		}
		del = d
	}
	return del
}

// bytesOutside sums the sizes of the files not in del.
func (s *Set) bytesOutside(files []retainedFile, del []uint32) int64 {
	gone := setOf(del)
	var n int64
	for _, f := range files {
		if !gone[f.id] {
			n += f.size
		}
	}
	return n
}

// setRetained records the files of free that still exist as the retained
// ones (after Reclaim deleted what retention let go).
func (s *Set) setRetained(free []uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.retained)
	for _, id := range free {
		if s.files[id] != nil {
			s.retained[id] = true
		}
	}
	s.countRetainedLocked()
}

// countRetainedLocked stores the counts of the retained files, in all and
// per dir. The caller holds mu.
func (s *Set) countRetainedLocked() {
	s.retainedN.Store(int64(len(s.retained)))
	per := map[string]int64{}
	for id := range s.retained {
		if f := s.files[id]; f != nil {
			per[f.Dir]++
		}
	}
	for _, d := range s.dirs {
		d.retained.Store(per[d.path])
	}
}

// forgetRetained drops a deleted file from the retained ones.
func (s *Set) forgetRetained(id uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retained[id] {
		delete(s.retained, id)
		s.countRetainedLocked()
	}
}

// Retained returns the number, bytes and oldest fileTime of the retained
// log files (as of the last Reclaim, less those deleted since).
func (s *Set) Retained() Retained {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var r Retained
	for id := range s.retained {
		f := s.files[id]
		if f == nil { // being deleted, or the set is closed
			continue
		}
		r.Files++
		r.Bytes += f.size
		if r.Oldest.IsZero() || f.written.Before(r.Oldest) {
			r.Oldest = f.written
		}
	}
	return r
}

// RetentionDue reports whether a retained file has reached MaxAge: the
// channel then runs a Reclaim even when nothing was written.
func (s *Set) RetentionDue() bool {
	age := s.opts.Retention.MaxAge
	if age <= 0 || s.retainedN.Load() == 0 {
		return false
	}
	oldest := s.Retained().Oldest
	return !oldest.IsZero() && s.now().Sub(oldest) >= age
}

// MakeRoom deletes retained log files of data dir i, oldest first, while
// the dir is full (Full; its space reserve is written again as soon as
// there is room for it) or n more bytes would leave it less than min free
// (min < 0: only fullness counts), and returns how many it deleted. unheld
// is Reclaim's: a file it does not return stays. A file goes with the
// retained files of any dir whose events it completes, in Reclaim's
// rounds: a file completing a retained file's events is deleted after it,
// never before. The channel calls it before it refuses a put for space.
func (s *Set) MakeRoom(i int, n, min int64, unheld func(candidates []uint32) []uint32) (int, error) {
	d := s.dirs[i]
	if d.retained.Load() == 0 {
		return 0, nil
	}
	short := func() bool {
		if d.full.Load() {
			s.keepReserve(d, true)
			if d.full.Load() {
				return true
			}
		}
		if min < 0 {
			return false
		}
		free, err := s.freeSpace(d)
		return err == nil && free-n < min
	}
	if !short() {
		return 0, nil
	}
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	return s.shedLocked(d, short, unheld)
}

// HoldDeletes keeps every log file where it is until the returned func is
// called: Reclaim and MakeRoom wait (a deletion in progress finishes
// first). A caller that reads files nothing holds yet (a group's reset,
// reading retained files to queue their events) holds it while it reads
// them and until what it queued holds them; it must not call Reclaim or
// MakeRoom meanwhile.
func (s *Set) HoldDeletes() (release func()) {
	s.gcMu.Lock()
	return s.gcMu.Unlock
}

// shedLocked deletes d's retained files, oldest first, while short says
// so. A file goes with the files whose events it completes (the retained
// files of any dir it needs gone first, completesClosure), in Reclaim's
// rounds; one that completes a file that is not a retained one nothing
// holds stays. The caller holds gcMu.
func (s *Set) shedLocked(d *dir, short func() bool, unheld func([]uint32) []uint32) (int, error) {
	s.mu.RLock()
	ids := slices.Collect(maps.Keys(s.retained))
	s.mu.RUnlock()
	slices.Sort(ids)
	free := setOf(unheld(ids))
	var list []uint32
	for _, f := range s.byAge(ids) {
		if free[f.id] && f.dir == d.path {
			list = append(list, f.id)
		}
	}
	deleted := 0
	var errs []error
	for ; len(list) > 0 && short(); list = list[1:] {
		if !free[list[0]] {
			continue // gone with an earlier one
		}
		del := s.completesClosure(list[0], free)
		if del == nil {
			continue
		}
		for _, id := range del {
			delete(free, id) // deleted, or failed and left alone
		}
		n, err := s.deleteInRounds(del, false) // to free space: none kept for reuse
		deleted += n
		errs = append(errs, err)
		s.log.Warn("deleted retained log files to make room in a data dir short of space", "dir", d.path, "deleted", n)
	}
	return deleted, errors.Join(errs...)
}

// completesClosure returns id and every existing file whose events it
// completes, directly or through others: what must go for id to go. It
// returns nil if one of them is not in ok.
func (s *Set) completesClosure(id uint32, ok map[uint32]bool) []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.depMu.Lock()
	defer s.depMu.Unlock()
	in := map[uint32]bool{id: true}
	for next := []uint32{id}; len(next) > 0; {
		f := next[len(next)-1]
		next = next[:len(next)-1]
		for of := range s.completes[f] {
			if _, exists := s.files[of]; !exists || in[of] {
				continue
			}
			if !ok[of] {
				return nil
			}
			in[of] = true
			next = append(next, of)
		}
	}
	return slices.Sorted(maps.Keys(in))
}

// shedFullDirsLocked makes room in every full data dir from its retained
// files, until it has its space reserve back. The caller holds gcMu.
func (s *Set) shedFullDirsLocked(unheld func([]uint32) []uint32) {
	for _, d := range s.dirs {
		if !d.full.Load() || d.retained.Load() == 0 {
			continue
		}
		short := func() bool { s.keepReserve(d, true); return d.full.Load() }
		if _, err := s.shedLocked(d, short, unheld); err != nil {
			s.log.Error("delete retained log files in a full data dir", "dir", d.path, "err", err)
		}
	}
}
