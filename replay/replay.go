package replay

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// Options configures Run.
type Options struct {
	FS       vfs.FS
	DataDirs []string
	// Checkpoint is the state loaded with the queue, or nil for a full replay
	// (then Queue must be empty and every record is applied).
	Checkpoint *checkpoint.State
	// Queue is the queue to rebuild: loaded from the checkpoint's ring, or
	// empty. Run leaves it holding the recovered state, with no index.
	Queue  *eventqueue.Queue
	Logger *slog.Logger
	// ProgressEvery is how often a long replay logs its progress and calls
	// Progress; 0 = 10s.
	ProgressEvery time.Duration
	// Progress, if set, is called about every ProgressEvery while the logs
	// are read, and once at the end (with Bytes == TotalBytes), on Run's
	// goroutine. nil = none.
	Progress func(Progress)
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
	// TakesFrom maps a log file to the files whose events its records
	// complete: the files its take records point into and the files holding
	// the spilled puts its commit records commit (the checkpoint's knowledge
	// merged with what was scanned). A file must not be deleted while a
	// file it maps to exists, or a full replay would resurrect taken events
	// or drop committed ones.
	TakesFrom map[uint32]map[uint32]struct{}

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
	// transactions dropped whole (applying the rest would make part of a
	// transaction visible) and take transactions missing take records
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
	// Put: a put transaction, dropped whole (its Events are lost). Else a
	// take transaction: the Events-Found events its lost take records took
	// stay queued and are delivered again.
	Put          bool
	TxID         uint64
	File         string // the log file holding its commit record
	CommitOffset int64
	Events       int // the events its commit record counts
	Found        int // the records of it the replay found
	Cause        Place

	found []eventqueue.Pointer // a put transaction's puts the replay found
}

// Lost is the number of committed events the replay lost with t: every
// event of a put transaction (applying the rest would make part of it
// visible), none of a take transaction's.
func (t DamagedTx) Lost() int {
	if t.Put {
		return t.Events
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
func Run(opts Options) (*Result, error) {
	start := time.Now()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	every := opts.ProgressEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	var (
		w         uint64
		positions = map[uint32]int64{}
		ckptRefs  = map[uint32]int{}
		res       = &Result{TakesFrom: map[uint32]map[uint32]struct{}{}}
		puts      = eventqueue.NewInflight() // spilled puts in flight at W
		takes     = eventqueue.NewInflight() // takes in flight at W
	)
	if st := opts.Checkpoint; st != nil {
		w = st.WriteOrderID
		res.MaxTxID = st.MaxTxID
		if st.NextFileID > 0 {
			res.MaxFileID = st.NextFileID - 1
		}
		for _, l := range st.Logs {
			positions[l.FileID] = l.Position
			ckptRefs[l.FileID] = l.Refs
			for _, f := range l.TakesFrom {
				AddTakesFrom(res.TakesFrom, l.FileID, f)
			}
		}
		puts.Load(st.InflightPuts)
		takes.Load(st.InflightTakes)
		for _, e := range append(slices.Clone(st.InflightPuts), st.InflightTakes...) {
			res.MaxTxID = max(res.MaxTxID, e.Tx)
		}
	}
	res.MaxWriteOrderID = w

	scanners, err := openScanners(opts, positions, res)
	defer func() {
		for _, s := range scanners {
			s.stop()
			s.sc.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	for id, refs := range ckptRefs {
		if refs > 0 && !slices.ContainsFunc(res.Logs, func(l LogFile) bool { return l.ID == id }) {
			return nil, fmt.Errorf("replay: log file %s holds %d queued events according to the checkpoint but is missing from every data dir", logfile.LogName(id), refs)
		}
	}

	a := applier{
		txPuts:  map[uint64][]eventqueue.Pointer{},
		txTakes: map[uint64][]eventqueue.Pointer{},
		taken:   map[eventqueue.Pointer]struct{}{},
		puts:    puts,
		takes:   takes,
		res:     res,
		sources: map[uint32]*source{},
	}
	for _, s := range scanners {
		a.sources[s.id] = s
	}
	h := scanHeap(nil)
	for _, s := range scanners {
		if s.advance() {
			h = append(h, s)
		}
	}
	heap.Init(&h)
	var total int64
	for _, l := range res.Logs {
		total += max(l.Size-l.Start, 0)
	}
	// Room for the committed puts up front (growing a slice of millions
	// by doubling showed up as a third of the apply work): at most what
	// the queue can still hold, at most one per 128 log bytes.
	a.committed = make([]eventqueue.Pointer, 0, max(0, min(int64(opts.Queue.Capacity()-opts.Queue.Size()), total/128)))
	progress := func(bytes int64) Progress {
		return Progress{Records: res.Records, Bytes: bytes, TotalBytes: total, Elapsed: time.Since(start)}
	}
	lastLog := time.Now()
	for n := 1; h.Len() > 0; n++ {
		s := h[0]
		r := &s.rec
		if n&(progressCheck-1) == 0 && time.Since(lastLog) >= every {
			lastLog = time.Now()
			p := progress(consumed(scanners, res.Logs))
			log.Info("replay progress", "records", p.Records, "bytes", p.Bytes, "total_bytes", p.TotalBytes,
				"elapsed", p.Elapsed.Round(time.Millisecond))
			if opts.Progress != nil {
				opts.Progress(p)
			}
		}
		if r.Type == logfile.RecordPadding {
			// A region a repair overwrote: no transaction's records, but
			// damage for the commit-count check.
			res.Padding++
			s.pads = append(s.pads, logfile.Skip{Offset: s.off, Length: s.size})
			if s.advance() {
				heap.Fix(&h, 0)
			} else {
				heap.Pop(&h)
			}
			continue
		}
		res.Records++
		res.MaxTxID = max(res.MaxTxID, r.TxID)
		res.MaxWriteOrderID = max(res.MaxWriteOrderID, r.WriteOrderID)
		if r.Type == logfile.RecordTake {
			// Kept for every scanned take record, even old ones: a superset
			// only makes log deletion more careful.
			for _, p := range r.Pointers {
				if f := eventqueue.Pointer(p).FileID(); f != s.id {
					AddTakesFrom(res.TakesFrom, s.id, f)
				}
			}
		}
		if r.WriteOrderID <= w {
			res.Skipped++
		} else {
			a.apply(s, s.off, r, log)
		}
		if s.advance() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	for _, s := range scanners {
		if err := s.sc.Err(); err != nil {
			return nil, fmt.Errorf("replay: read %s: %w", s.path, err)
		}
		if s.fault != nil {
			return nil, fmt.Errorf("replay: %w", s.fault)
		}
		l := &res.Logs[s.logIndex]
		l.End, l.Tail, l.TailErr = s.sc.End(), s.sc.Tail(), s.sc.TailError()
		l.Skipped = s.sc.Skipped()
		res.Bytes += l.End - l.Start
		res.Corrupt += len(l.Skipped)
		if l.Size, err = s.sc.Size(); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		for _, sk := range l.Skipped {
			log.Error("replay: skipped a damaged region of a log file", "file", l.Path, "offset", sk.Offset, "length", sk.Length, "err", sk.Err)
		}
		if l.Tail == logfile.TailTorn {
			log.Warn("replay: log file has a torn tail", "file", l.Path, "valid_end", l.End, "size", l.Size, "err", l.TailErr)
		}
	}
	if opts.Progress != nil {
		opts.Progress(progress(total))
	}
	if err := a.finish(opts.Queue, log); err != nil {
		return nil, err
	}
	if err := truncated(opts.FS, res, positions, opts.Queue, log); err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	return res, nil
}

// truncated finds the log files shorter than the checkpoint's position in
// them (Result.Truncated), scans each to find where its valid records end,
// counts the recovered events whose records were cut off, and logs each:
// committed data lost, which an operator must know about. The extra scan
// and the walk of the queue happen only when such a file exists.
func truncated(fsys vfs.FS, res *Result, positions map[uint32]int64, q *eventqueue.Queue, log *slog.Logger) error {
	cut := map[uint32]int{} // file id -> index in res.Truncated
	for _, l := range res.Logs {
		if pos := positions[l.ID]; l.Size < pos {
			end, err := validEnd(fsys, l.Path)
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
	for _, p := range q.Pointers() {
		if i, ok := cut[p.FileID()]; ok && int64(p.Offset()) >= res.Truncated[i].End {
			res.Truncated[i].Events++
		}
	}
	for _, t := range res.Truncated {
		log.Error("replay: log file is shorter than the checkpoint recorded: committed events were cut off (not a crash's torn tail; was the file truncated or copied incompletely?)",
			"file", t.Path, "size", t.Size, "valid_end", t.End, "checkpoint_position", t.Position, "events_lost", t.Events)
	}
	return nil
}

// validEnd scans the log file at path from its header and returns the end
// of its last valid record.
func validEnd(fsys vfs.FS, path string) (int64, error) {
	sc, _, err := logfile.OpenScanner(fsys, path, 0)
	if err != nil {
		return 0, fmt.Errorf("replay: open %s: %w", path, err)
	}
	defer sc.Close()
	for sc.Next() {
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("replay: read %s: %w", path, err)
	}
	return sc.End(), nil
}

// progressCheck is how many records go by between two looks at the clock
// (a power of two).
const progressCheck = 4096

// consumed is how many bytes the scanners have read past their starts.
func consumed(scanners []*source, logs []LogFile) int64 {
	var n int64
	for _, s := range scanners {
		n += max(s.end-logs[s.logIndex].Start, 0)
	}
	return n
}

// AddTakesFrom records in m that log file file completes events of log file
// from (see Result.TakesFrom).
func AddTakesFrom(m map[uint32]map[uint32]struct{}, file, from uint32) {
	s := m[file]
	if s == nil {
		s = map[uint32]struct{}{}
		m[file] = s
	}
	s[from] = struct{}{}
}

// openScanners lists the log files of every data dir and opens a scanner on
// each, positioned where the checkpoint says its unreplayed records start.
func openScanners(opts Options, positions map[uint32]int64, res *Result) ([]*source, error) {
	seen := map[uint32]string{}
	var out []*source
	for _, dir := range opts.DataDirs {
		ids, err := logfile.ListLogs(opts.FS, dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return out, fmt.Errorf("replay: list %s: %w", dir, err)
		}
		for _, id := range ids {
			path := filepath.Join(dir, logfile.LogName(id))
			if other, dup := seen[id]; dup {
				return out, fmt.Errorf("replay: log file id %d exists in two data dirs (%s and %s)", id, other, dir)
			}
			seen[id] = dir
			if empty, err := UnfinishedCreate(opts.FS, path); err != nil {
				return out, fmt.Errorf("replay: %w", err)
			} else if empty {
				// A crash inside logfile.Create: the file holds no record.
				res.Empty = append(res.Empty, path)
				continue
			}
			start := positions[id]
			sc, _, err := logfile.OpenScanner(opts.FS, path, start)
			if err != nil {
				return out, fmt.Errorf("replay: open %s: %w", path, err)
			}
			res.MaxFileID = max(res.MaxFileID, id)
			size, err := sc.Size()
			if err != nil {
				return append(out, &source{sc: sc, id: id, path: path}), fmt.Errorf("replay: %w", err)
			}
			res.Logs = append(res.Logs, LogFile{ID: id, Dir: dir, Path: path, Start: max(start, logfile.HeaderSize), Size: size})
			out = append(out, &source{sc: sc, id: id, path: path})
		}
	}
	slices.SortFunc(res.Logs, func(a, b LogFile) int { return int(a.ID) - int(b.ID) })
	for _, s := range out {
		s.logIndex = slices.IndexFunc(res.Logs, func(l LogFile) bool { return l.ID == s.id })
	}
	return out, nil
}

// scanHeap orders sources by the write-order id of their current record.
type scanHeap []*source

func (h scanHeap) Len() int           { return len(h) }
func (h scanHeap) Less(i, j int) bool { return h[i].woid < h[j].woid }
func (h scanHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *scanHeap) Push(x any)        { *h = append(*h, x.(*source)) }
func (h *scanHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// UnfinishedCreate reports whether the log file at path was cut short by a
// crash inside logfile.Create: shorter than a file header, or nothing but
// zeros. Such a file holds no record; the channel deletes it on Open.
// Anything else with a bad header is corruption, reported by the scanner. A
// short header a newer release began (its magic and a newer version) is not
// unfinished: it is that release's file, and the error says so (a
// *corrupt.FormatError).
func UnfinishedCreate(fsys vfs.FS, path string) (bool, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var hdr [logfile.HeaderSize]byte
	n, err := f.ReadAt(hdr[:], 0)
	if n < len(hdr) {
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		var fe *corrupt.FormatError
		if _, herr := logfile.DecodeFileHeader(hdr[:n]); errors.As(herr, &fe) {
			fe.File = path
			return false, fe
		}
		return true, nil
	}
	if hdr != [logfile.HeaderSize]byte{} {
		return false, nil
	}
	// Create syncs the header before any record is written, so a zeroed
	// header followed by anything but zeros is damage, not an unfinished
	// create.
	buf := make([]byte, 64<<10)
	for off := int64(logfile.HeaderSize); ; {
		n, err := f.ReadAt(buf, off)
		for _, b := range buf[:n] {
			if b != 0 {
				return false, nil
			}
		}
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
	}
}
