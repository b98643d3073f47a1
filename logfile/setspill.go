package logfile

import "maps"

// SpilledCommit is the commit of a put transaction that spilled: its puts
// were written before its commit record (a large transaction), so they
// hold no commit time (Record.Time 0, versions 7 and 8), and their event
// ids take their order from the commit (the channel's EventID).
type SpilledCommit struct {
	WriteOrderID uint64 // the commit record's write-order id
	Time         int64  // the commit's time, Unix nanoseconds
}

// PutStamp gives put rec, read from a file that records commit times
// (timed: format version 7 on) or not, the order of its event's id and its
// commit time (Unix nanoseconds; 0: unknown). A put written with its commit
// has its own write-order id and time; a put of a transaction that spilled
// (time 0 in a timed file) has its commit's, which spilled finds by the
// put's transaction id. The id's second part is always the put's own
// write-order id. Take (channel's eventStamp) and the read-only tools
// (replay) give events their ids through it.
func PutStamp(timed bool, rec *Record, spilled func(tx uint64) (SpilledCommit, bool)) (order uint64, nanos int64) {
	switch {
	case !timed:
		return rec.WriteOrderID, 0
	case rec.Time != 0:
		return rec.WriteOrderID, rec.Time
	}
	if sc, ok := spilled(rec.TxID); ok {
		return sc.WriteOrderID, sc.Time
	}
	return rec.WriteOrderID, 0
}

// NoteSpilledCommit records the commit c of spilled put transaction tx,
// whose puts are in the log files files, so that SpilledCommit finds it
// for a put of any of them. It is kept as long as each file exists
// (deleting a file forgets its entries) and is recovered by replay: from
// the commit records it reads, and from the checkpoint for commits before
// it (Recovered.Spilled).
func (s *Set) NoteSpilledCommit(files []uint32, tx uint64, c SpilledCommit) {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	for _, f := range files {
		m := s.spilled[f]
		if m == nil {
			m = map[uint64]SpilledCommit{}
			s.spilled[f] = m
		}
		m[tx] = c
	}
}

// SpilledCommit returns the commit of spilled put transaction tx whose put
// is in log file file, if NoteSpilledCommit recorded it.
func (s *Set) SpilledCommit(file uint32, tx uint64) (SpilledCommit, bool) {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	c, ok := s.spilled[file][tx]
	return c, ok
}

// SpilledCommits returns a copy of the spilled commits recorded for the
// puts of log file file, by transaction id (nil if none).
func (s *Set) SpilledCommits(file uint32) map[uint64]SpilledCommit {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	return maps.Clone(s.spilled[file])
}

// forgetSpilled drops the spilled commits and the index of deleted log
// file file.
func (s *Set) forgetSpilled(file uint32) {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	delete(s.spilled, file)
	delete(s.index, file)
}

// spillState returns a copy of file's spilled commits and its index, as a
// checkpoint records them.
func (s *Set) spillState(file uint32) (map[uint64]SpilledCommit, FileIndex) {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	return maps.Clone(s.spilled[file]), s.fileIndexLocked(file)
}
