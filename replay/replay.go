package replay

import (
	"cmp"
	"container/heap"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// Options configures Run.
type Options struct {
	// Logs is the data log files to replay (logfile.OpenSet). nil = list
	// FS and DataDirs (a file id in two dirs is then an error).
	Logs     *logfile.Set
	FS       vfs.FS
	DataDirs []string
	// Checkpoint is the state loaded with the queue, or nil for a full replay
	// (then Queue must be empty and every record is applied).
	Checkpoint *checkpoint.State
	// Queue is the unnamed consumer group's queue to rebuild: loaded from
	// the checkpoint's ring, or empty. Run leaves it holding the recovered
	// state, with no index. With Groups nil it is the only group seeded
	// (an older release's checkpoint, or a full replay): group 0, with
	// the checkpoint's in-flight takes.
	Queue *eventqueue.Queue
	// Groups seeds the consumer groups from the checkpoint's catalog, each
	// with its ring and in-flight takes (Queue and Checkpoint.InflightTakes
	// are then ignored); NextGroupID is the catalog's. A full replay (no
	// Checkpoint) seeds none: it starts with the unnamed group on Queue,
	// and the first groups record of the logs replaces it.
	Groups      []GroupSeed
	NextGroupID uint32
	// NewQueue returns an empty queue for a group the logs create (one
	// the checkpoint does not have). nil = in memory, of the group's
	// capacity.
	NewQueue func(logfile.GroupInfo) (*eventqueue.Queue, error)
	// Journal is the delivery journal's entries (checkpoint.ReadJournal),
	// or nil: an event still queued in its group ends with the largest
	// count the replay or the journal gives it (GroupResult.Deliveries).
	Journal []checkpoint.JournalEntry
	// ReadJournal, if set and Journal is nil, returns the journal's
	// entries; Run calls it once, before it builds the queues, with the
	// groups as the logs leave them, so that the caller reads the journal
	// only when a group counts deliveries. Its error is Run's.
	ReadJournal func(groups []logfile.GroupInfo) ([]checkpoint.JournalEntry, error)
	Logger      *slog.Logger
	// ProgressEvery is how often a long replay logs its progress and calls
	// Progress; 0 = 10s.
	ProgressEvery time.Duration
	// Progress, if set, is called about every ProgressEvery while the logs
	// are read, and once at the end (with Bytes == TotalBytes), on Run's
	// goroutine. nil = none.
	Progress func(Progress)
	// DedupHeader is the channel's Config.Dedup.Header: the replay reads
	// the value of this header of every committed put it replays, and
	// returns its id (Result.DedupIDs). An encrypted put is opened for it
	// with the keys of Logs (logfile.SetOptions.Keys); one that does not
	// open is counted (Result.DedupUnread). "" = none: no put is opened.
	DedupHeader string
}

// Progress is how far a replay has come.
type Progress struct {
	Records int64 // records read so far (padding aside)
	// Bytes is how many bytes of the log files the replay has consumed so
	// far, out of TotalBytes: the sum over the files of their size minus
	// where the scan starts. At the end every file is consumed in full, so
	// the last call has Bytes == TotalBytes.
	Bytes, TotalBytes int64
	Elapsed           time.Duration
}

// CapacityError is returned (wrapped) by Run when the recovered events do
// not fit in the queue's capacity; it unwraps to eventqueue.ErrFull. The
// queue is then in no useful state.
type CapacityError struct {
	Needed   int // the events the replay recovered
	Capacity int // the queue's capacity
}

func (e *CapacityError) Error() string {
	return fmt.Sprintf("%d recovered events do not fit in capacity %d", e.Needed, e.Capacity)
}

// Unwrap returns eventqueue.ErrFull.
func (e *CapacityError) Unwrap() error { return eventqueue.ErrFull }

// LogFile describes one data log file seen by the replay.
type LogFile struct {
	ID    uint32
	Dir   string // the data dir holding it
	Path  string
	Start int64        // offset the scan started at
	End   int64        // offset just past the last valid record
	Tail  logfile.Tail // what follows End
	// TailErr describes the invalid bytes at End when Tail is TailTorn.
	TailErr error
	// Size is the file's size when the scan ended; [End, Size) is the
	// torn tail.
	Size int64
	// Skipped lists the damaged regions in the middle of the file (after
	// Start) that the replay stepped over, each followed by valid records.
	Skipped []logfile.Skip
}

// Result is what a replay found and did.
type Result struct {
	Logs            []LogFile // every log file in the data dirs, by id
	MaxWriteOrderID uint64    // the largest write-order id seen (at least the checkpoint's)
	MaxTxID         uint64    // the largest transaction id seen
	MaxFileID       uint32    // the largest log file id seen or recorded
	// Completes maps a log file to the files whose events its records
	// complete: the files its take records point into and the files holding
	// the spilled puts its commit records commit (the checkpoint's knowledge
	// merged with what was scanned; see logfile.Set.Complete). A file must
	// not be deleted while a file it maps to exists, or a full replay would
	// resurrect taken events or drop committed ones.
	Completes map[uint32][]uint32
	// Spilled is the commits of spilled put transactions, by the file
	// holding their puts and transaction id (see
	// logfile.Set.NoteSpilledCommit): the checkpoint's merged with the
	// commit records replayed. Events of those puts take their ids and
	// times from them.
	Spilled map[uint32]map[uint64]logfile.SpilledCommit
	// Index is what each log file's events span (logfile.FileIndex): the
	// checkpoint's, extended with the put commits replayed. A file the
	// checkpoint listed without one (an older release's checkpoint) is
	// not known; a file missing has no event.
	Index map[uint32]logfile.FileIndex

	// Empty lists log files left by a crash while they were being created
	// (shorter than a header, or a header of zeros): they hold no record and
	// are not in Logs. The caller may delete them.
	Empty []string

	Records   int64 // records read
	Skipped   int64 // records at or before the checkpoint's write-order id
	Puts      int64 // events appended by committed put transactions
	Takes     int64 // events removed by committed take transactions
	Commits   int64 // commit records applied
	Rollbacks int64 // rollback records seen
	Returned  int   // in-flight takes returned to the head
	Dropped   int   // uncommitted puts dropped
	// Missing counts the taken pointers not found in the queue; of those,
	// MissingDeleted point into log files that no longer exist (normal: a
	// file is deleted once every event in it is taken, and a full replay
	// still reads the takes). The rest are logged in one line.
	Missing, MissingDeleted int
	// Corrupt counts the damaged regions skipped in the middle of log
	// files (see LogFile.Skipped), a damaged file header included.
	Corrupt int
	// DamagedTxs counts committed transactions damage took records of: put
	// transactions missing put records (their intact events are delivered,
	// the damaged ones lost) and take transactions missing take records
	// (the events those took stay queued).
	DamagedTxs int
	// Padding counts the padding records stepped over: regions a repair
	// overwrote (channel.Repair). They count as damage for the commit-count
	// check (see DamagedTxs), but not in Records or Corrupt.
	Padding int64
	// Damaged lists the committed transactions counted in DamagedTxs, with
	// the damage blamed for each.
	Damaged []DamagedTx
	// Truncated lists the log files that are shorter than the checkpoint
	// says they were when it was written: committed data cut off, not a
	// crash's torn tail (the channel syncs a file before a checkpoint
	// records its length). Each is logged as an error.
	Truncated []TruncatedLog
	Bytes     int64 // log bytes scanned: up to each file's valid end
	Duration  time.Duration

	// Groups is the consumer groups the logs end with, by id, each with its
	// recovered queue; NextGroupID the id the next new group gets.
	Groups      []GroupResult
	NextGroupID uint32
	// GroupsCreated and GroupsRemoved count the groups records' changes
	// replayed; GroupSkips the events put transactions did not deliver to
	// a group (skip records: a full DropNewest group), GroupDrops the
	// events dropped from a full DropOldest group; TakesOfNoGroup the
	// committed takes of groups that no longer exist.
	// Catalogs counts the groups records applied: none means the logs
	// after the checkpoint do not say which groups exist.
	Catalogs                     int
	GroupsCreated, GroupsRemoved int
	GroupSkips, GroupDrops       int64
	TakesOfNoGroup               int
	// FilteredOut counts the events filter skip records kept out of a
	// group (its filter did not match them at their put commit).
	FilteredOut int64
	// Duplicates counts the events duplicate records dropped (no group
	// received them).
	Duplicates int64
	// DedupIDs (with Options.DedupHeader) is, in commit order, the
	// deduplication id and commit time of every committed put replayed
	// that has the header and that its commit did not drop.
	DedupIDs []checkpoint.DedupEntry
	// DedupUnread counts the committed puts whose deduplication id the
	// replay could not read (logged once per log file, or per commit of
	// puts in flight at the checkpoint): an encrypted put that does not
	// open (its file's key record damaged, its sealed bytes changed, or
	// no keys), a damaged record.
	// Their ids are not in DedupIDs.
	DedupUnread int64
	// Deliveries counts the delivery counts the deliver records replayed
	// carry; Moved the events committed take transactions moved to
	// another group (dead letters, rejects, redrives).
	Deliveries, Moved int
}

// Place is a damaged place in a log file: a region skipped in the middle,
// padding a repair wrote over damage, or a torn tail.
type Place struct {
	File    string // the log file's path
	Offset  int64  // where the damage starts; -1 when no place is known
	Padding bool   // padding records: damage that a repair already removed
	Tail    bool   // the torn tail at Offset
}

// DamagedTx is a committed transaction that damage took records of.
type DamagedTx struct {
	// Put: a put transaction: its Found intact events are delivered, the
	// Events-Found others are lost. Else a take transaction: the
	// Events-Found events its lost take records took stay queued and are
	// delivered again.
	Put          bool
	TxID         uint64
	File         string // the log file holding its commit record
	CommitOffset int64
	Events       int // the events its commit record counts
	Found        int // the records of it the replay found
	Cause        Place

	found []eventqueue.Pointer // a put transaction's puts the replay found
}

// Lost is the number of committed events the replay lost with t: the put
// records of a put transaction it could not read (at most: some may have
// been in log files deleted because they were taken), none of a take
// transaction's.
func (t DamagedTx) Lost() int {
	if t.Put {
		return t.Events - t.Found
	}
	return 0
}

// Redelivered is the number of events that stay queued although a
// committed take took them: those of a take transaction's lost records.
func (t DamagedTx) Redelivered() int {
	if t.Put {
		return 0
	}
	return t.Events - t.Found
}

// TruncatedLog is a log file cut below what the checkpoint recorded.
type TruncatedLog struct {
	Path     string
	Size     int64 // the file's size now
	End      int64 // the end of its last valid record
	Position int64 // its length when the checkpoint was written
	// Events counts the queued events (ring and in flight at the
	// checkpoint) whose records were at or after End: committed events
	// lost, which a take skips as damaged.
	Events int
}

// Run replays the logs onto opts.Queue. It returns an error when a log file
// cannot be read, when two data dirs hold the same file id, when a file the
// checkpoint says holds queued events is missing, or when the recovered
// events do not fit in the queue's capacity (wrapping a *CapacityError).
//
// Its steps are those of docs/crash-safety.md §3 step 7, one method each.
func Run(opts Options) (*Result, error) {
	r, err := newRun(opts)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer r.close()
	r.seedFromCheckpoint() // 7.1
	steps := []func() error{
		r.peekFiles,        // 7.2
		r.checkQueuedFiles, // 7.3
		r.merge,            // 7.4
		r.finishScans,      // 7.5
		r.apply,            // 7.6
		r.findTruncated,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
	r.res.Duration = time.Since(r.start)
	return r.res, nil
}

// run is one replay in progress.
type run struct {
	opts  Options
	logs  *logfile.Set
	log   *slog.Logger
	every time.Duration
	start time.Time
	res   *Result

	w         uint64                         // the checkpoint's write-order id (0: full replay)
	positions map[uint32]int64               // where each file's unreplayed records start
	ckptRefs  map[uint32]int                 // queued events per file, per the checkpoint
	completes map[uint32]map[uint32]struct{} // becomes Result.Completes
	a         *applier
	sources   []*source
	total     int64 // bytes to consume: the sum over files of size minus start
}

func newRun(opts Options) (*run, error) {
	r := &run{opts: opts, logs: opts.Logs, log: opts.Logger, every: opts.ProgressEvery, start: time.Now(),
		res: &Result{Spilled: map[uint32]map[uint64]logfile.SpilledCommit{}, Index: map[uint32]logfile.FileIndex{}}, positions: map[uint32]int64{}, ckptRefs: map[uint32]int{},
		completes: map[uint32]map[uint32]struct{}{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.every <= 0 {
		r.every = 10 * time.Second
	}
	if r.logs == nil {
		logs, err := logfile.OpenSet(logfile.SetOptions{FS: opts.FS, Dirs: opts.DataDirs, Logger: r.log})
		if err != nil {
			return nil, err
		}
		r.logs = logs
	}
	r.a = &applier{
		txPuts:    map[uint64][]eventqueue.Pointer{},
		txTakes:   map[uint64][]takePart{},
		txSkips:   map[uint64][]uint32{},
		txMoves:   map[uint64][]takePart{},
		txSpilled: map[uint64]bool{},
		puts:      eventqueue.NewInflight(), // spilled puts in flight at W
		groups:    map[uint32]*groupState{},
		res:       r.res,
		completes: r.completes,
		sources:   map[uint32]*source{},
		dedup:     dedupReader{header: opts.DedupHeader, logs: r.logs, log: r.log},
	}
	return r, nil
}

// close stops the reader goroutines and closes the scanners still open
// (Run returning on an error), and the log set if Run opened it.
func (r *run) close() {
	for _, s := range r.sources {
		s.stop()
		s.finish()
	}
	if r.opts.Logs == nil {
		r.logs.Close()
	}
}

// seedFromCheckpoint (7.1) starts from the checkpoint: W, each file's
// position and queued count, its dependencies, the transactions in flight
// at W, the largest transaction and file ids.
func (r *run) seedFromCheckpoint() {
	st := r.opts.Checkpoint
	r.seedGroups()
	if st == nil {
		return
	}
	r.w = st.WriteOrderID
	r.res.MaxWriteOrderID = st.WriteOrderID
	r.res.MaxTxID = st.MaxTxID
	if st.NextFileID > 0 {
		r.res.MaxFileID = st.NextFileID - 1
	}
	for _, l := range st.Logs {
		r.positions[l.FileID] = l.Position
		r.ckptRefs[l.FileID] = l.Refs
		for _, f := range l.Completes {
			addCompletes(r.completes, l.FileID, f)
		}
		for _, s := range l.Spilled {
			addSpilled(r.res.Spilled, l.FileID, s.Tx, logfile.SpilledCommit{WriteOrderID: s.WriteOrderID, Time: s.Time})
		}
		r.res.Index[l.FileID] = logfile.FileIndex(l.Index)
	}
	r.a.puts.Load(st.InflightPuts)
	for _, e := range st.InflightPuts {
		r.res.MaxTxID = max(r.res.MaxTxID, e.Tx)
	}
	for _, g := range r.a.groups {
		for _, e := range g.takes.Entries() {
			r.res.MaxTxID = max(r.res.MaxTxID, e.Tx)
		}
	}
}

// seedGroups starts the consumer groups from Options.Groups, or, without
// them, with the unnamed group on Options.Queue (its in-flight takes the
// checkpoint's).
func (r *run) seedGroups() {
	a := r.a
	a.nextGroupID = r.opts.NextGroupID
	if r.opts.Groups == nil || r.opts.Checkpoint == nil {
		q := r.opts.Queue
		info := logfile.GroupInfo{}
		if q != nil {
			info.Capacity = uint64(q.Capacity())
		}
		g := newGroupState(info, 0)
		g.queue, g.seeded = q, q != nil
		if st := r.opts.Checkpoint; st != nil {
			g.takes.Load(st.InflightTakes)
		}
		a.groups[0] = g
		a.nextGroupID = max(a.nextGroupID, 1)
		return
	}
	for _, seed := range r.opts.Groups {
		g := newGroupState(seed.Info, 0)
		g.queue, g.seeded = seed.Queue, true
		g.takes.Load(seed.Inflight)
		for p, n := range seed.Deliveries {
			g.delivered(p, n)
		}
		for p, due := range seed.Waiting {
			g.waitUntil(p, due)
		}
		a.groups[seed.Info.ID] = g
	}
	a.noteDeadLetterGroups()
}

// peekFiles (7.2) sets the unfinished creates aside and reads the start of
// every other log file, at the checkpoint's position in it: the
// write-order id of its first record there (source.first), which is when
// merge needs it open. A file with no record there is scanned to its end
// now. One file is open at a time.
func (r *run) peekFiles() error {
	for _, f := range r.logs.Listed() {
		if f.Duplicate != "" {
			return fmt.Errorf("log file id %d exists in two data dirs (%s and %s)", f.ID, f.Duplicate, f.Dir)
		}
		if f.Unfinished {
			// A crash inside logfile.Create: the file holds no record.
			r.res.Empty = append(r.res.Empty, f.Path)
			continue
		}
		s := &source{file: f, from: r.positions[f.ID], id: f.ID, path: f.Path, logIndex: len(r.res.Logs), dedupHeader: r.opts.DedupHeader,
			logs: r.logs}
		r.sources = append(r.sources, s)
		r.a.sources[f.ID] = s
		r.res.MaxFileID = max(r.res.MaxFileID, f.ID)
		start, size, err := s.peek(r.logs)
		if err != nil {
			return err
		}
		r.res.Logs = append(r.res.Logs, LogFile{ID: f.ID, Dir: f.Dir, Path: f.Path, Start: start, Size: size})
		r.total += max(size-start, 0)
		if s.closed {
			// Only padding, or nothing, after start: the peek was the
			// whole scan.
			r.res.Padding += int64(len(s.pads))
		}
	}
	return nil
}

// checkQueuedFiles (7.3) fails if a log file the replay needs is not a
// regular file (NeededNotRegular), or if a file the checkpoint counts
// queued events in is missing.
func (r *run) checkQueuedFiles() error {
	if err := NeededNotRegular(r.logs, r.opts.Checkpoint); err != nil {
		return err
	}
	for id, refs := range r.ckptRefs {
		if refs > 0 && r.a.sources[id] == nil { // every file in res.Logs has a source
			return fmt.Errorf("log file %s holds %d queued events according to the checkpoint but is missing from every data dir", logfile.LogName(id), refs)
		}
	}
	return nil
}

// merge (7.4) hands the records of every file to the applier in
// write-order id order (a k-way merge over a heap of sources), skipping
// those at or below W.
//
// A file's records have increasing ids, so a file is opened only once the
// merge reaches the id of its first record (peekFiles), and closed at its
// end: the files open at once are those whose ids interleave, one per data
// dir as the channel writes them (a dir writes one file at a time, its
// files in id order), however many files there are. Files moved between
// dirs are merged as correctly, only with more of them open.
func (r *run) merge() error {
	res, a := r.res, r.a
	var h scanHeap
	// The files still to open, by the id of their first record.
	var pending []*source
	for _, s := range r.sources {
		if !s.closed {
			pending = append(pending, s)
		}
	}
	slices.SortFunc(pending, func(x, y *source) int { return cmp.Compare(x.first, y.first) })
	// Room for the committed puts up front (growing a slice of millions
	// by doubling showed up as a third of the apply work): at most what
	// the queue can still hold, at most one per 128 log bytes.
	room := r.total / 128
	if q := r.opts.Queue; q != nil && len(r.opts.Groups) <= 1 {
		room = min(int64(q.Capacity()-q.Size()), room)
	}
	a.committed = make([]eventqueue.Pointer, 0, max(0, room))
	lastLog := time.Now()
	for n := 1; ; n++ {
		for len(pending) > 0 && (h.Len() == 0 || pending[0].first < h[0].woid) {
			s := pending[0]
			pending = pending[1:]
			if err := s.open(r.logs); err != nil {
				return err
			}
			if s.advance() {
				heap.Push(&h, s)
			} else {
				s.finish()
			}
		}
		if h.Len() == 0 {
			break
		}
		s := h[0]
		rec := &s.rec
		if n&(progressCheck-1) == 0 && time.Since(lastLog) >= r.every {
			lastLog = time.Now()
			r.reportProgress(r.consumed())
		}
		switch {
		case rec.Type == logfile.RecordPadding:
			// A region a repair overwrote: no transaction's records, but
			// damage for the commit-count check.
			res.Padding++
			s.pads = append(s.pads, logfile.Skip{Offset: s.off, Length: s.size})
		default:
			res.Records++
			res.MaxTxID = max(res.MaxTxID, rec.TxID)
			res.MaxWriteOrderID = max(res.MaxWriteOrderID, rec.WriteOrderID)
			if rec.Type == logfile.RecordTake {
				// Kept for every scanned take record, even old ones: a
				// superset only makes log deletion more careful.
				for _, p := range rec.Pointers {
					addCompletes(r.completes, s.id, eventqueue.Pointer(p).FileID())
				}
			}
			if rec.WriteOrderID <= r.w {
				res.Skipped++
			} else {
				a.apply(s, s.off, rec, r.log)
			}
		}
		if s.advance() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
			s.finish()
		}
	}
	return nil
}

// reportProgress logs how far the replay has come and calls
// Options.Progress.
func (r *run) reportProgress(bytes int64) {
	p := Progress{Records: r.res.Records, Bytes: bytes, TotalBytes: r.total, Elapsed: time.Since(r.start)}
	r.log.Info("replay progress", "records", p.Records, "bytes", p.Bytes, "total_bytes", p.TotalBytes,
		"elapsed", p.Elapsed.Round(time.Millisecond))
	if r.opts.Progress != nil {
		r.opts.Progress(p)
	}
}

// finishScans (7.5) records each scanner's result: an I/O error fails the
// replay; the valid end, the tail and the damaged regions are kept in
// Result.Logs, and each region and torn tail is logged.
func (r *run) finishScans() error {
	res := r.res
	for _, s := range r.sources {
		if err := s.sc.Err(); err != nil {
			return fmt.Errorf("read %s: %w", s.path, err)
		}
		if s.fault != nil {
			return s.fault
		}
		l := &res.Logs[s.logIndex]
		l.End, l.Tail, l.TailErr = s.sc.End(), s.sc.Tail(), s.sc.TailError()
		l.Skipped = s.sc.Skipped()
		res.Bytes += l.End - l.Start
		res.Corrupt += len(l.Skipped)
		var err error
		if l.Size, err = s.sc.Size(); err != nil {
			return err
		}
		for _, sk := range l.Skipped {
			r.log.Error("replay: skipped a damaged region of a log file", "file", l.Path, "offset", sk.Offset, "length", sk.Length, "err", sk.Err)
		}
		if l.Tail == logfile.TailTorn {
			r.log.Warn("replay: log file has a torn tail", "file", l.Path, "valid_end", l.End, "size", l.Size, "err", l.TailErr)
		}
		if s.unread > 0 {
			r.log.Warn("replay: encrypted puts that do not open: their deduplication ids are unknown", "file", l.Path,
				"puts", s.unread, "first_offset", s.unreadOff, "err", s.unreadErr)
		}
	}
	if r.opts.Progress != nil {
		r.opts.Progress(Progress{Records: res.Records, Bytes: r.total, TotalBytes: r.total, Elapsed: time.Since(r.start)})
	}
	return nil
}

// apply (7.6) builds the recovered queue in one pass (applier.finish).
func (r *run) apply() error {
	newQueue := r.opts.NewQueue
	if newQueue == nil {
		newQueue = memQueue
	}
	journal := r.opts.Journal
	if journal == nil && r.opts.ReadJournal != nil {
		infos := make([]logfile.GroupInfo, 0, len(r.a.groups))
		for _, g := range r.a.sortedGroups() {
			infos = append(infos, g.info)
		}
		var err error
		if journal, err = r.opts.ReadJournal(infos); err != nil {
			return err
		}
	}
	groups, err := r.a.finish(newQueue, journal, r.log)
	if err != nil {
		return err
	}
	r.res.Groups, r.res.NextGroupID = groups, r.a.nextGroupID
	r.res.Completes = map[uint32][]uint32{}
	for f, of := range r.completes {
		r.res.Completes[f] = slices.Sorted(maps.Keys(of))
	}
	return nil
}

// findTruncated finds the log files shorter than the checkpoint's position
// in them (Result.Truncated), scans each to find where its valid records
// end, counts the recovered events whose records were cut off, and logs
// each: committed data lost, which an operator must know about. The extra
// scan and the walk of the queue happen only when such a file exists.
func (r *run) findTruncated() error {
	res := r.res
	cut := map[uint32]int{} // file id -> index in res.Truncated
	for _, l := range res.Logs {
		if pos := r.positions[l.ID]; l.Size < pos {
			end, err := r.logs.ValidEnd(l.File())
			if err != nil {
				return err
			}
			cut[l.ID] = len(res.Truncated)
			res.Truncated = append(res.Truncated, TruncatedLog{Path: l.Path, Size: l.Size, End: end, Position: pos})
		}
	}
	if len(cut) == 0 {
		return nil
	}
	// An event queued for several groups counts once.
	seen := map[eventqueue.Pointer]struct{}{}
	for _, g := range res.Groups {
		for _, p := range g.Queue.Pointers() {
			i, ok := cut[p.FileID()]
			if _, dup := seen[p]; !ok || dup || int64(p.Offset()) < res.Truncated[i].End {
				continue
			}
			seen[p] = struct{}{}
			res.Truncated[i].Events++
		}
	}
	for _, t := range res.Truncated {
		r.log.Error("replay: log file is shorter than the checkpoint recorded: committed events were cut off (not a crash's torn tail; was the file truncated or copied incompletely?)",
			"file", t.Path, "size", t.Size, "valid_end", t.End, "checkpoint_position", t.Position, "events_lost", t.Events)
	}
	return nil
}

// memQueue is the default Options.NewQueue: an empty queue in memory, of
// the group's capacity (slots touched only as events are added).
func memQueue(g logfile.GroupInfo) (*eventqueue.Queue, error) {
	capacity := int(min(g.Capacity, 1<<31-1))
	if capacity < 1 {
		return nil, fmt.Errorf("capacity %d", g.Capacity)
	}
	return eventqueue.New(eventqueue.NewMemSlots(capacity), capacity, 0, 0, map[uint32]int{})
}

// File returns the log set's description of l.
func (l LogFile) File() logfile.File { return logfile.File{ID: l.ID, Dir: l.Dir, Path: l.Path} }

// progressCheck is how many records go by between two looks at the clock
// (a power of two).
const progressCheck = 4096

// consumed is how many bytes the scanners have read past their starts.
func (r *run) consumed() int64 {
	var n int64
	for _, s := range r.sources {
		n += max(s.end-r.res.Logs[s.logIndex].Start, 0)
	}
	return n
}

// addCompletes records in m that log file file completes events of log
// file of (see Result.Completes); a file completing its own needs nothing.
func addCompletes(m map[uint32]map[uint32]struct{}, file, of uint32) {
	if file == of {
		return
	}
	s := m[file]
	if s == nil {
		s = map[uint32]struct{}{}
		m[file] = s
	}
	s[of] = struct{}{}
}

// woidHeap orders readers of log files (a replay's sources, a history's
// dirs) by the write-order id of their current record: the merge of the
// data dirs into write order.
type woidHeap[T interface{ currentWOID() uint64 }] []T

func (h woidHeap[T]) Len() int           { return len(h) }
func (h woidHeap[T]) Less(i, j int) bool { return h[i].currentWOID() < h[j].currentWOID() }
func (h woidHeap[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *woidHeap[T]) Push(x any)        { *h = append(*h, x.(T)) }
func (h *woidHeap[T]) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// scanHeap orders sources by the write-order id of their current record.
type scanHeap = woidHeap[*source]

func (s *source) currentWOID() uint64 { return s.woid }
