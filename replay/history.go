package replay

import (
	"container/heap"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// The history of a channel is every put commit its log files still hold,
// in commit order (the order of the commit records' write-order ids, the
// order a replay applies them). channel.ResetGroup rebuilds a group's
// queue from it. Each data dir's files are read in id order (a dir's records are in
// write order), and the dirs are merged on the write-order ids, as replay
// merges them; a transaction's puts wait until its commit record (or
// vanish with its rollback record, or with the end of the logs).

// HistoryEvent is one committed event of the history.
type HistoryEvent struct {
	Pointer eventqueue.Pointer
	Put     uint64 // the write-order id of its put record
	Commit  uint64 // the write-order id of its commit record
	// Spilled: its put was written before its commit (its transaction
	// spilled; format version 7 on, where the put says so).
	Spilled bool
	// Time is its commit's time in Unix nanoseconds; 0 in a file older
	// than format version 7.
	Time int64
}

// FormatEventID is the text of an event id (channel.EventID.String): the
// order of its put commit and its put's write-order id, "ORDER" when they
// are the same, "ORDER.SEQ" for a put of a transaction that spilled.
func FormatEventID(order, seq uint64) string {
	if order == seq {
		return strconv.FormatUint(order, 10)
	}
	return strconv.FormatUint(order, 10) + "." + strconv.FormatUint(seq, 10)
}

// stamp gives put rec of log file file (timed: a file that records commit
// times) its id (FormatEventID) and commit time, as a Take does
// (channel's eventStamp): a put of a transaction that spilled takes both
// from its commit, in spilled (Result.Spilled).
func stamp(file uint32, timed bool, rec *logfile.Record, spilled map[uint32]map[uint64]logfile.SpilledCommit) (string, time.Time) {
	order, t := logfile.PutStamp(timed, rec, func(tx uint64) (logfile.SpilledCommit, bool) {
		sc, ok := spilled[file][tx]
		return sc, ok
	})
	if t == 0 {
		return FormatEventID(order, rec.WriteOrderID), time.Time{}
	}
	return FormatEventID(order, rec.WriteOrderID), time.Unix(0, t)
}

// histPut is a put record waiting for its transaction's commit.
type histPut struct {
	ptr     eventqueue.Pointer
	put     uint64
	spilled bool
	out     bool // the filter of the reset's group keeps it out
}

// History reads files (of logs; by id) and calls emit with each committed
// event, in commit order. It stops early when emit returns false. The
// caller keeps appends and deletions out (the channel: commitMu exclusive
// and ckptMu). Damaged regions are stepped over, logged to log (their
// events are not in the history: skipped counts the regions); an I/O
// error ends it.
//
// It reads each file through a memory mapping, its checksums verified on
// a second core (Scanner.MapFile, CheckAhead): an I/O error on a mapped
// page is a fault, which it recovers from and returns as an error.
func History(logs *logfile.Set, files []logfile.File, log *slog.Logger, emit func(HistoryEvent) bool) (skipped int, err error) {
	return FilteredHistory(logs, files, log, nil, emit)
}

// FilteredHistory is History without the events whose headers keep is
// false for (a group's filter, for a reset of a filtered group); nil keep
// is History. keep sees each put's headers (nil: none), valid during the
// call only. A put of an encrypted file is opened with the set's keys
// first; one that does not open (its file's key record is damaged) is
// damage, not in the history, logged; without keys it is an error
// (ErrEncrypted).
func FilteredHistory(logs *logfile.Set, files []logfile.File, log *slog.Logger, keep func(map[string]string) bool,
	emit func(HistoryEvent) bool) (skipped int, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("history: fault at address %#x reading a mapped log file (an I/O error?): %v", fault.Addr(), r)
		}
	}()
	return readHistory(logs, files, log, keep, emit)
}

// readHistory is FilteredHistory, faults aside.
func readHistory(logs *logfile.Set, files []logfile.File, log *slog.Logger, keep func(map[string]string) bool,
	emit func(HistoryEvent) bool) (skipped int, err error) {
	var h histHeap
	byDir := map[string][]logfile.File{}
	var order []string
	for _, f := range files {
		if _, ok := byDir[f.Dir]; !ok {
			order = append(order, f.Dir)
		}
		byDir[f.Dir] = append(byDir[f.Dir], f)
	}
	defer func() {
		for _, d := range h {
			d.close()
			skipped += d.skipped
		}
	}()
	for _, dir := range order {
		d := &histDir{logs: logs, log: log, files: byDir[dir], keep: keep}
		ok, err := d.next()
		if err != nil || !ok {
			d.close()
			skipped += d.skipped
		}
		if err != nil {
			return skipped, err
		}
		if ok {
			h = append(h, d)
		}
	}
	heap.Init(&h)
	pending := &histPending{puts: map[uint64][]histPut{}, dups: map[uint64][]uint32{}}
	for len(h) > 0 {
		d := h[0]
		if !d.apply(pending, emit) {
			return skipped, d.err
		}
		ok, err := d.next()
		if err != nil {
			return skipped, err // the deferred close counts d's regions
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
			skipped += d.skipped
		}
	}
	return skipped, nil
}

// histDir reads one data dir's files in id order.
type histDir struct {
	logs    *logfile.Set
	log     *slog.Logger
	files   []logfile.File
	sc      *logfile.Scanner
	file    uint32
	skipped int
	keep    func(map[string]string) bool // FilteredHistory's; nil: every event
	err     error                        // why apply stopped, if not emit
	// the current record's fields
	typ, commitType logfile.RecordType
	tx, woid        uint64
	off             int64
	time            int64
	ranges          []uint32 // a duplicate record's (copied)
	timed           bool     // the current file records commit times
}

// histPending is the transactions whose commit the history has not read
// yet: their puts, and the puts their duplicate records drop (ranges).
type histPending struct {
	puts map[uint64][]histPut
	dups map[uint64][]uint32
}

// next moves to the dir's next record that has a write-order id; false at
// the end of its last file.
func (d *histDir) next() (bool, error) {
	for {
		if d.sc == nil {
			if len(d.files) == 0 {
				return false, nil
			}
			f := d.files[0]
			d.files = d.files[1:]
			sc, _, err := d.logs.Scan(f, 0)
			if err != nil {
				return false, err
			}
			d.sc, d.file, d.timed = sc, f.ID, sc.Framing().Timed()
			if sc.MapFile() {
				sc.CheckAhead()
			}
		}
		for d.sc.Next() {
			r := d.sc.Record()
			if r.Type == logfile.RecordPadding {
				continue
			}
			d.typ, d.commitType, d.tx, d.woid, d.off, d.time = r.Type, r.CommitType, r.TxID, r.WriteOrderID, d.sc.Offset(), r.Time
			d.ranges = nil
			if r.Type == logfile.RecordDuplicate {
				d.ranges = slices.Clone(r.Ranges)
			}
			return true, nil
		}
		if err := d.sc.Err(); err != nil {
			d.close()
			return false, fmt.Errorf("read log %d: %w", d.file, err)
		}
		d.close()
	}
}

// close closes the current scanner, adding the damaged regions it
// stepped over to skipped.
func (d *histDir) close() {
	if d.sc == nil {
		return
	}
	if n := len(d.sc.Skipped()); n > 0 {
		d.skipped += n
		d.log.Warn("history: damaged regions stepped over; their events are not in it", "file", d.file, "regions", n)
	}
	d.sc.Close()
	d.sc = nil
}

// apply applies the current record to pending and emits the events its
// commit commits (not those its duplicate records drop); false when emit
// asked to stop.
func (d *histDir) apply(pending *histPending, emit func(HistoryEvent) bool) bool {
	switch {
	case d.typ == logfile.RecordPut:
		// An event the filter keeps out stays in pending (out), so that
		// the put indices of a duplicate record still name the right puts.
		out := false
		if d.keep != nil {
			keep, err := d.kept()
			if err != nil {
				d.err = err
				return false
			}
			out = !keep
		}
		pending.puts[d.tx] = append(pending.puts[d.tx], histPut{ptr: eventqueue.NewPointer(d.file, uint32(d.off)), put: d.woid, out: out,
			spilled: d.timed && d.time == 0})
	case d.typ == logfile.RecordDuplicate:
		pending.dups[d.tx] = append(pending.dups[d.tx], d.ranges...)
	case d.typ == logfile.RecordRollback:
		delete(pending.puts, d.tx)
		delete(pending.dups, d.tx)
	case d.typ == logfile.RecordCommit && d.commitType == logfile.RecordPut:
		puts, dups := pending.puts[d.tx], pending.dups[d.tx]
		delete(pending.puts, d.tx)
		delete(pending.dups, d.tx)
		for i, p := range puts {
			if p.out || inRanges(dups, i) {
				continue
			}
			if !emit(HistoryEvent{Pointer: p.ptr, Put: p.put, Commit: d.woid, Spilled: p.spilled, Time: d.time}) {
				return false
			}
		}
	}
	return true
}

// kept reports whether the current put's headers pass d.keep, opening
// the put with the set's keys if it is sealed.
func (d *histDir) kept() (bool, error) {
	rec := d.sc.Record()
	if rec.Sealed == nil {
		return d.keep(rec.Headers), nil
	}
	if !d.logs.Encrypted() {
		return false, fmt.Errorf("put at offset %d of log %d: %w (to apply a filter to it)", d.off, d.file, ErrEncrypted)
	}
	opened, err := readPut(d.logs, d.file, d.off)
	if err == nil {
		return d.keep(opened.Headers), nil
	}
	d.log.Warn("history: an encrypted event that does not open is not in a filtered history", "file", d.file, "offset", d.off, "err", err)
	return false, nil
}

// histHeap orders the dirs by their current record's write-order id.
type histHeap = woidHeap[*histDir]

func (d *histDir) currentWOID() uint64 { return d.woid }

// ScanHistory is FilteredHistory over the log files of opts' data dirs,
// read-only (no lock taken: the channel must not be open); opts.Keys opens
// encrypted puts for keep.
func ScanHistory(opts VerifyOptions, keep func(map[string]string) bool, emit func(HistoryEvent) bool) (skipped int, err error) {
	if err := opts.check(); err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	v := newVerifier(opts)
	defer v.closeAll()
	if _, err := v.readOwners(); err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	if err := v.openSet(); err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	return FilteredHistory(v.set, v.set.Files(), v.log, keep, emit)
}
