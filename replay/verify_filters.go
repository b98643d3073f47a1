package replay

import (
	"fmt"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// Verify's cross-check of the filter skip records (check 1, as it scans
// each log file). A put commit writes its filter skip records in the same
// batch as its commit record, right before it, in one write to one file
// (channel: fanout.records): so each skip record is followed in its file
// by more records of its transaction and then that transaction's put
// commit, whose Count bounds the skip record's ranges. A skip record with
// nothing after it in its file is what a crash (a torn commit record, cut)
// or a failed write leaves of a commit that never happened: normal, not
// reported. Each group a skip record names must have been created: an id
// below the NextGroupID of some groups record or of the checkpoint's
// catalog (ids are never reused, and every log file begins with a groups
// record).

// A duplicate record (Config.Dedup) is written the same way, right before
// its commit, and is checked the same way, but names no group.

// filterSkipAt is a filter skip record (or, dup, a duplicate record):
// where it is, its transaction, the group it names and the end of its
// last range (put indices).
type filterSkipAt struct {
	path  string
	off   int64
	tx    uint64
	group uint32
	end   uint64
	dup   bool
}

// kind returns the problem kind of a bad s, and what s is, for the detail.
func (s filterSkipAt) kind() (ProblemKind, string) {
	if s.dup {
		return ProblemBadDuplicate, "duplicate record"
	}
	return ProblemBadFilterSkip, fmt.Sprintf("filter skip record (group %d)", s.group)
}

// filterCheck follows one log file's filter skip records (see above).
type filterCheck struct {
	v       *verifier
	pending []filterSkipAt // skip records whose commit has not come yet
}

// see takes the file's next record r, at off.
func (fc *filterCheck) see(path string, off int64, r *logfile.Record) {
	v := fc.v
	if r.Type == logfile.RecordGroups {
		v.nextGroupID = max(v.nextGroupID, r.NextGroupID)
	}
	if len(fc.pending) > 0 && r.TxID != fc.pending[0].tx {
		fc.orphans()
	}
	switch {
	case r.Type == logfile.RecordFilterSkip || r.Type == logfile.RecordDuplicate:
		s := filterSkipAt{path: path, off: off, tx: r.TxID, group: r.Group, dup: r.Type == logfile.RecordDuplicate}
		if n := len(r.Ranges); n >= 2 {
			s.end = uint64(r.Ranges[n-2]) + uint64(r.Ranges[n-1])
		}
		fc.pending = append(fc.pending, s)
		if !s.dup && s.group >= v.nextGroupID { // not created yet as far as the scan knows: checked at the end
			v.filterSkips = append(v.filterSkips, s)
		}
	case r.Type == logfile.RecordCommit && r.CommitType == logfile.RecordPut:
		for _, s := range fc.pending {
			if s.end > r.Count {
				kind, what := s.kind()
				v.rep.add(kind, s.path, s.off, "%s of transaction %d names put %d of it; its commit (offset %d) counts %d puts",
					what, s.tx, s.end-1, off, r.Count)
			}
		}
		fc.pending = fc.pending[:0]
	case r.Type == logfile.RecordCommit || r.Type == logfile.RecordRollback:
		fc.orphans() // a take commit or a rollback of the transaction
	}
}

// orphans reports the pending skip records: a record that is not their
// commit followed them.
func (fc *filterCheck) orphans() {
	for _, s := range fc.pending {
		kind, what := s.kind()
		fc.v.rep.add(kind, s.path, s.off, "%s of transaction %d not followed by its put commit: a record of another kind or transaction comes first",
			what, s.tx)
	}
	fc.pending = fc.pending[:0]
}

// filterGroupProblems reports the filter skip records that name a group
// never created, once every log file is scanned and the checkpoint set
// used (nil: none) is known.
func (v *verifier) filterGroupProblems(used *checkpoint.Set) {
	next := v.nextGroupID
	if used != nil && used.Catalog != nil {
		next = max(next, used.Catalog.NextGroupID)
	}
	for _, s := range v.filterSkips {
		if s.group >= next {
			v.rep.add(ProblemBadFilterSkip, s.path, s.off, "filter skip record of transaction %d names group %d, which was never created (groups get ids below %d)",
				s.tx, s.group, next)
		}
	}
	v.filterSkips = nil
}
