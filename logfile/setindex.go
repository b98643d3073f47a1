package logfile

// FileIndex is what the events a log file stores span in commit order:
// the first and the last put commit (by the write-order ids of their
// commit records) with an event in the file, and the least and the
// greatest of their commit times. Every event of a commit C has an id
// whose order is at most C's write-order id and above that of the commit
// before C, so a reset to an event id or to a time can start at the first
// file whose LastCommit or MaxTime reaches it (docs/format.md §3.8).
type FileIndex struct {
	// Known is false for a file whose index was not recorded: a file a
	// checkpoint of an older release listed, whose commits before that
	// checkpoint the recovery did not read. Such a file must be scanned.
	Known bool
	// FirstCommit and LastCommit are 0 while the file stores no event.
	FirstCommit, LastCommit uint64
	// MinTime and MaxTime are Unix nanoseconds; 0 for the commits of
	// files older than format version 7, which record no time.
	MinTime, MaxTime int64
}

// Add returns x extended with a commit (its commit record's write-order id
// woid, its time t) that stored events in the file. An unknown index
// stays unknown.
func (x FileIndex) Add(woid uint64, t int64) FileIndex {
	if !x.Known {
		return x
	}
	if x.FirstCommit == 0 {
		return FileIndex{Known: true, FirstCommit: woid, LastCommit: woid, MinTime: t, MaxTime: t}
	}
	x.FirstCommit, x.LastCommit = min(x.FirstCommit, woid), max(x.LastCommit, woid)
	x.MinTime, x.MaxTime = min(x.MinTime, t), max(x.MaxTime, t)
	return x
}

// NoteEvents records that put commit woid, of time t, stored events in
// each of files: their FileIndex grows to cover it. A file without an
// index yet (a new one) starts known and empty. Concurrent commits may
// note in any order: the index keeps the extremes.
func (s *Set) NoteEvents(files []uint32, woid uint64, t int64) {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	for _, f := range files {
		x, ok := s.index[f]
		if !ok {
			x.Known = true
		}
		s.index[f] = x.Add(woid, t)
	}
}

// FileIndex returns log file id's index, and false if the set has no
// index for it (a file no commit stored events in since it was created or
// recovered, and one the set does not hold: known and empty, as far as
// the set can tell).
func (s *Set) FileIndex(id uint32) (FileIndex, bool) {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	x, ok := s.index[id]
	return x, ok
}

// fileIndexLocked is FileIndex with spillMu held, defaulting to a known,
// empty index.
func (s *Set) fileIndexLocked(id uint32) FileIndex {
	if x, ok := s.index[id]; ok {
		return x
	}
	return FileIndex{Known: true}
}
