package logfile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Complete records that log file file holds records completing events of
// log file of: take records that take events stored in of, or the commit of
// puts a transaction spilled to of. While of exists, file must stay: a full
// replay (after every checkpoint is lost) reading of without file would
// bring taken events back, or drop committed ones. A file completing its
// own events needs nothing and is not recorded.
func (s *Set) Complete(file, of uint32) {
	if file == of {
		return
	}
	s.depMu.Lock()
	defer s.depMu.Unlock()
	m := s.completes[file]
	if m == nil {
		m = map[uint32]struct{}{}
		s.completes[file] = m
	}
	m[of] = struct{}{}
}

// Completes returns the files whose events file's records complete, in
// ascending order.
func (s *Set) Completes(file uint32) []uint32 {
	s.depMu.Lock()
	defer s.depMu.Unlock()
	return slices.Sorted(maps.Keys(s.completes[file]))
}

// FileState is what a checkpoint records about one log file.
type FileState struct {
	ID uint32
	// Position: every record before it has a write-order id at or below
	// the snapshot's, so replay may start reading the file there.
	Position int64
	// Completes lists, ascending, the files whose events its records
	// complete (see Complete).
	Completes []uint32
	// Spilled is the commits of the spilled put transactions whose puts
	// the file holds, by transaction id (see NoteSpilledCommit).
	Spilled map[uint64]SpilledCommit
	// Index is what the file's events span (see FileIndex).
	Index FileIndex
}

// Snapshot is the log set's part of a checkpoint: the write-order id W it
// covers and each file's state at W.
type Snapshot struct {
	WriteOrderID uint64
	NextFileID   uint32
	Files        []FileState // by id

	set  *Set
	sync []syncTarget // active writers to sync before the checkpoint counts
	// keep: the files the checkpoint needs; maxID: the last file id that
	// existed at W (later files hold records after W).
	keep  map[uint32]bool
	maxID uint32
}

// Snapshot reserves the write-order id W of a checkpoint and records each
// file's state at W. The caller must keep appends out while it runs (the
// channel holds its commit lock exclusively), so that every record at or
// below W is written and none after it is. An active writer that has failed
// counts only up to its last good fsync.
func (s *Set) Snapshot() *Snapshot {
	sn := &Snapshot{
		set:          s,
		WriteOrderID: s.nextWOID.Add(1) - 1,
		NextFileID:   s.nextFileID.Load(),
		keep:         map[uint32]bool{},
		maxID:        s.nextFileID.Load() - 1,
	}
	active := map[uint32]int64{}
	for _, d := range s.dirs {
		d.mu.Lock()
		if w := d.w; w != nil {
			active[w.ID()] = w.Size()
			if w.Err() != nil {
				// Its next append rolls it; what it wrote after its last
				// good fsync was taken back. There is nothing to sync.
				active[w.ID()] = w.Synced()
			} else {
				sn.sync = append(sn.sync, syncTarget{d, w, w.Size()})
			}
			sn.keep[w.ID()] = true
		}
		d.mu.Unlock()
	}
	s.mu.RLock()
	for id, f := range s.files {
		pos, ok := active[id]
		if !ok {
			pos = f.size
		}
		spilled, index := s.spillState(id)
		sn.Files = append(sn.Files, FileState{ID: id, Position: pos, Completes: s.Completes(id), Spilled: spilled, Index: index})
	}
	s.mu.RUnlock()
	slices.SortFunc(sn.Files, func(a, b FileState) int { return compareIDs(a.ID, b.ID) })
	return sn
}

// Keep adds log file id to what the checkpoint needs (a file its queues or
// in-flight transactions point into).
func (sn *Snapshot) Keep(id uint32) { sn.keep[id] = true }

// Sync makes every record at or below the snapshot's W durable: it syncs
// the writers that were active at the snapshot (a rolled file was synced
// when it was rolled).
func (sn *Snapshot) Sync() error {
	for _, t := range sn.sync {
		// SyncTo, not Sync: the writer may have been rolled (synced to
		// its end, then closed) since the snapshot, by a commit that does
		// not wait for the checkpoint.
		if err := t.w.SyncTo(t.end); err != nil {
			return err
		}
		sn.set.markSynced(t.d, t.w)
	}
	return nil
}

// syncTarget is an active writer of a Snapshot, its data dir and its size
// at the snapshot.
type syncTarget struct {
	d   *dir
	w   *Writer
	end int64
}

// Reclaim deletes the log files that neither the checkpoint of sn nor the
// live channel needs, and returns how many it deleted. A candidate is a
// file not active, not kept by sn, not created after sn; unheld then
// returns those of the candidates nothing points into now (the channel
// asks its queues and in-flight sets). A file whose records complete
// events of a file that stays, stays too (see Complete).
//
// The deletions go in rounds, each followed by a sync of the dirs it
// touched: first the files that complete no other candidate, then the
// files that completed only those, and so on. So a power loss in the
// middle never leaves a file without the files that complete its events,
// and a file whose deletion fails keeps them too. Files that complete
// each other (a cycle, across data dirs) go in one round. Each deletion is
// logged.
//
// With SetOptions.Retention, the files nothing needs are retained as it
// says (setretain.go): only those it lets go are deleted, and the files
// completing a retained file's events stay with it.
//
// Then (deleted or not) every full data dir gets its space reserve back
// where there is room for twice its size (setreserve.go); with retention,
// a dir still full then has its retained files deleted, oldest first,
// until it does.
func (s *Set) Reclaim(sn *Snapshot, unheld func(candidates []uint32) []uint32) (int, error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	if s.opts.Retention.on() {
		defer s.shedFullDirsLocked(unheld)
	}
	defer s.KeepReserves()
	var cand []uint32
	s.mu.RLock()
	for id, f := range s.files {
		if f.size == 0 || sn.keep[id] || id > sn.maxID { // size 0: an active file
			continue
		}
		cand = append(cand, id)
	}
	s.mu.RUnlock()
	if len(cand) == 0 {
		s.setRetained(nil)
		return 0, nil
	}
	slices.Sort(cand)
	free := unheld(cand)
	// Only candidates, whatever the callback returned.
	free = slices.DeleteFunc(free, func(id uint32) bool { _, found := slices.BinarySearch(cand, id); return !found })
	left := s.closeOver(free)
	if s.opts.Retention.on() {
		deleted, err := s.deleteInRounds(s.retain(left), true)
		s.setRetained(left)
		return deleted, err
	}
	return s.deleteInRounds(left, true)
}

// FinishReclaim deletes what a Reclaim a crash interrupted left behind:
// the files that a file now missing completed (see Complete), and the
// files those complete, and so on, that unheld lets go (as Reclaim asks
// it) and that no staying file completes. Reclaim deletes a round's files
// before it syncs their dirs, and any other directory sync (a roll in
// another data dir, a deletion of another round) can make one deletion
// durable before the others: a power loss then leaves a file without a
// file that completes its events (one of a cycle across data dirs, or of
// a later round). A checkpoint keeps that harmless, but writing the next
// one makes the checkpoint unusable for a moment, and a power loss then
// leaves a full replay, which would bring the events those missing
// records took back. Open calls it, after Start (which knows, from the
// checkpoint, what the missing files completed) and before its first
// checkpoint; it returns how many files it deleted.
func (s *Set) FinishReclaim(unheld func(candidates []uint32) []uint32) (int, error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	cand := s.leftByDeletion()
	if len(cand) == 0 {
		return 0, nil
	}
	free := unheld(cand)
	free = slices.DeleteFunc(free, func(id uint32) bool { _, found := slices.BinarySearch(cand, id); return !found })
	return s.deleteInRounds(s.closeOver(free), true)
}

// leftByDeletion returns, ascending, the existing files (not active) that
// a missing file completes, directly or through other such files.
func (s *Set) leftByDeletion() []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.depMu.Lock()
	defer s.depMu.Unlock()
	var todo []uint32
	for id := range s.completes {
		if s.files[id] == nil {
			todo = append(todo, id)
		}
	}
	found := map[uint32]bool{}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for of := range s.completes[id] {
			if f := s.files[of]; f != nil && f.size != 0 && !found[of] {
				found[of] = true
				todo = append(todo, of)
			}
		}
	}
	return slices.Sorted(maps.Keys(found))
}

// deleteInRounds deletes the files of left in Reclaim's rounds, and returns
// how many it deleted. left must hold no file whose events a file outside
// it, that exists, completes (closeOver). recycle: a file may go into its
// dir's pool instead (retire); not when the deletions are to free space.
func (s *Set) deleteInRounds(left []uint32, recycle bool) (int, error) {
	if len(left) > 0 && s.opts.BeforeDelete != nil {
		if err := s.opts.BeforeDelete(); err != nil {
			return 0, fmt.Errorf("before deleting log files: %w", err)
		}
	}
	deleted := 0
	var errs []error
	for len(left) > 0 {
		round := s.nextRound(left)
		n, failed, err := s.deleteRound(round, recycle)
		deleted += n
		errs = append(errs, err)
		done := setOf(round)
		left = slices.DeleteFunc(left, func(id uint32) bool { return done[id] })
		if failed {
			// The files that could not be deleted stay, and so do the
			// files completing their events.
			left = s.closeOver(left)
		}
	}
	return deleted, errors.Join(errs...)
}

// nextRound returns the files of left that complete no other file of
// left; when every file completes another (cycles), all of left.
func (s *Set) nextRound(left []uint32) []uint32 {
	in := setOf(left)
	s.depMu.Lock()
	defer s.depMu.Unlock()
	var round []uint32
	for _, id := range left {
		waits := false
		for of := range s.completes[id] {
			if of != id && in[of] {
				waits = true
				break
			}
		}
		if !waits {
			round = append(round, id)
		}
	}
	if len(round) == 0 {
		return slices.Clone(left)
	}
	return round
}

// deleteRound removes the files of ids (or, with recycle, renames them
// into their dir's pool: retire), then syncs the dirs that lost one. A file
// whose removal fails stays in the set (failed reports it).
func (s *Set) deleteRound(ids []uint32, recycle bool) (deleted int, failed bool, err error) {
	var errs []error
	var pooled []pooled
	dirs := map[string]bool{}
	for _, id := range ids {
		// Out of the set first, then out of the cache, then off the disk:
		// a Reader meanwhile finds no file (a *corrupt.Error, as after
		// the deletion) or a reader opened before, which stays valid
		// until released.
		s.mu.Lock()
		f := s.files[id]
		delete(s.files, id)
		s.mu.Unlock()
		if f == nil {
			continue
		}
		errs = append(errs, s.readers.evict(id))
		p, err := s.retire(f, recycle)
		if p != nil {
			pooled = append(pooled, *p)
		}
		if err != nil {
			s.mu.Lock()
			s.files[id] = f // it stays
			s.mu.Unlock()
			errs = append(errs, err)
			failed = true
			continue
		}
		dirs[f.Dir] = true
		s.depMu.Lock()
		delete(s.completes, id)
		s.depMu.Unlock()
		s.forgetSpilled(id)
		s.forgetRetained(id)
		deleted++
		if s.opts.OnDelete != nil {
			s.opts.OnDelete(id)
		}
		if p != nil {
			s.log.Info("kept a consumed log file for reuse", "file", f.Path, "as", RecycleName(id))
		} else {
			s.log.Info("deleted log file", "file", f.Path, "id", LogName(id))
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		err := s.fs.SyncDir(d)
		errs = append(errs, err, s.settlePooled(d, pooled, err))
		s.forgetFreeSpaceOf(d)
	}
	return deleted, failed, errors.Join(errs...)
}

// setOf returns ids as a set.
func setOf(ids []uint32) map[uint32]bool {
	m := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// closeOver drops from cand, until nothing changes, every file that
// completes events of a file that exists and is not a candidate.
func (s *Set) closeOver(cand []uint32) []uint32 {
	in := setOf(cand)
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.depMu.Lock()
	defer s.depMu.Unlock()
	for changed := true; changed; {
		changed = false
		for id := range in {
			for of := range s.completes[id] {
				if _, exists := s.files[of]; exists && !in[of] {
					delete(in, id)
					changed = true
					break
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(in))
}
