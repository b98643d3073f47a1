package replay

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// ProblemKind names a kind of Problem (or of a note): a stable string that
// tools may match, the one Problem.String, fcreplay and JSON output spell.
type ProblemKind string

// String returns the kind's stable name, such as "torn-tail".
func (k ProblemKind) String() string { return string(k) }

// Problem kinds: stable strings that tools may match.
const (
	// ProblemCheckpointMissing: the checkpoint dir holds no checkpoint; the
	// channel would fall back to the backup or replay every log.
	ProblemCheckpointMissing ProblemKind = "checkpoint-missing"
	// ProblemCheckpointIncomplete: a checkpoint write did not finish (a
	// crash mid-checkpoint, or a failed write).
	ProblemCheckpointIncomplete ProblemKind = "checkpoint-incomplete"
	// ProblemCheckpointCorrupt: a checkpoint file is damaged or missing
	// (Detail holds checkpoint.Open's error).
	ProblemCheckpointCorrupt ProblemKind = "checkpoint-corrupt"
	// ProblemBackupMissing, ProblemBackupIncomplete, ProblemBackupCorrupt:
	// the same for the backup checkpoint, when one is configured. A backup
	// without its backupComplete marker is missing.
	ProblemBackupMissing    ProblemKind = "backup-missing"
	ProblemBackupIncomplete ProblemKind = "backup-incomplete"
	ProblemBackupCorrupt    ProblemKind = "backup-corrupt"

	// ProblemBadHeader: a log file's header is damaged; its records are
	// still read by its name (salvaged), unless the header names another
	// file id.
	ProblemBadHeader ProblemKind = "bad-header"
	// ProblemCorruptRecord: a damaged region in the middle of a log file,
	// followed by valid records (Offset, and the length in Detail).
	ProblemCorruptRecord ProblemKind = "corrupt-record"
	// ProblemTornTail: bytes after the last valid record that are not a
	// record (Offset is the valid end; Detail has the file size), beyond
	// what the checkpoint covers. Normal after a crash (the part of a write
	// that was not synced yet): the channel cuts it on open.
	ProblemTornTail ProblemKind = "torn-tail"
	// ProblemTruncatedLog: a log file whose valid records end (Offset)
	// below the length the checkpoint recorded for it: records the channel
	// had synced, committed and checkpointed were cut off or overwritten.
	// Not a crash's torn tail; Problem.Lost counts the events lost.
	ProblemTruncatedLog ProblemKind = "truncated-log"
	// ProblemUnfinishedCreate: a log file left by a crash inside
	// logfile.Create (short or zero header, no record). The channel
	// deletes it on open.
	ProblemUnfinishedCreate ProblemKind = "unfinished-create"
	// ProblemDuplicateLog: the same log file id in two data dirs; the
	// channel refuses to open.
	ProblemDuplicateLog ProblemKind = "duplicate-log"
	// ProblemWriteOrder: a record whose write-order id is not above the
	// previous record's in the same file.
	ProblemWriteOrder ProblemKind = "write-order"
	// ProblemNotRegularFile: an entry named like one of the channel's files
	// (a log file in a data dir, a checkpoint file or backupComplete) that
	// is not a regular file: a symbolic link, a directory, a named pipe, a
	// socket or a device (Detail says which). Nothing follows a link or
	// opens it. In a data dir it is left alone: no log file, and no new
	// file gets its id; but a replay that needs a log file of its name
	// fails (NeededNotRegular: recovery-failed, and missing-log for
	// queued events), and so does every full replay, Rebuild's and
	// Repair's included. A checkpoint file of the kind makes Open fail, and
	// is not read here (the report goes on as if it were missing).
	ProblemNotRegularFile ProblemKind = "not-a-regular-file"

	// ProblemRecoveryFailed: a replay the channel would do (or the full
	// replay) failed on the files' contents: the channel would not open, or
	// the comparison with a full replay is impossible.
	ProblemRecoveryFailed ProblemKind = "recovery-failed"
	// ProblemCheckpointDisagrees: the recovered queue and a full replay do
	// not hold the same events (see Report.Diff).
	ProblemCheckpointDisagrees ProblemKind = "checkpoint-disagrees"

	// ProblemBadPointer: a queued or in-flight pointer does not read back
	// as a valid put record (or is zero).
	ProblemBadPointer ProblemKind = "bad-pointer"
	// ProblemDuplicatePointer: the recovered queue holds a pointer twice.
	ProblemDuplicatePointer ProblemKind = "duplicate-pointer"
	// ProblemMissingLog: queued or in-flight pointers into a log file that
	// no data dir holds (one problem per file; Detail has the count).
	ProblemMissingLog ProblemKind = "missing-log"
	// ProblemRefcountMismatch: a checkpoint log state's Refs differs from
	// the number of pointers into that file in the checkpoint's ring. The
	// channel trusts Refs to delete log files.
	ProblemRefcountMismatch ProblemKind = "refcount-mismatch"
	// ProblemMissingLogState: the checkpoint's ring or in-flight
	// transactions point into a file it has no log state for.
	ProblemMissingLogState ProblemKind = "missing-log-state"

	// ProblemForeignDataDir: a data dir belongs to another channel (its
	// channel.id names another channel than the checkpoint dir's, or
	// another checkpoint dir when the checkpoint dir records no channel id;
	// the rules of internal/owner's ReadOwners): the channel, Repair and
	// Rebuild refuse to open it (channel.ErrForeignDir). File is its
	// channel.id; Detail names both channels.
	ProblemForeignDataDir ProblemKind = "foreign-data-dir"
	// ProblemForeignBackupDir: the same for the backup checkpoint dir.
	ProblemForeignBackupDir ProblemKind = "foreign-backup-dir"
	// ProblemChannelIDCorrupt: a directory's channel.id is damaged; the
	// channel refuses to open until it is deleted (and then writes it
	// again), unless it is the checkpoint or backup dir's and every data
	// dir vouches for the channel (internal/owner's rule 4): then the channel's
	// next Open writes it again (Detail says so).
	ProblemChannelIDCorrupt ProblemKind = "channel-id-corrupt"
	// ProblemForeignLog: an encrypted log file bound to another channel
	// than the one the directories record (its key record names another
	// channel id): a file of another channel with the same key, copied into
	// a data dir. The channel refuses to open (ErrKey) until it is moved
	// out; no event of it is delivered. File and Offset are its key record.
	ProblemForeignLog ProblemKind = "foreign-log"
	// ProblemBadFilterSkip: a filter skip record (a group's filter kept
	// some of a put commit's events out) that no put commit of this
	// build writes: it names a group never created, a put past its
	// commit's count, or it is followed in its file by a record other
	// than its transaction's commit (a skip record at the very end of a
	// file is a commit a crash cut: normal). The replay applies what it
	// can (an unknown group's record is ignored, ranges past the
	// transaction's events are cut): a written record changed, or a bug.
	ProblemBadFilterSkip ProblemKind = "bad-filter-skip"
	// ProblemBadDuplicate: a duplicate record (a put commit dropped some
	// of its events as duplicates, Config.Dedup) that no put commit of
	// this build writes: it names a put past its commit's count, or it is
	// followed in its file by a record other than its transaction's
	// commit (at the very end of a file: a commit a crash cut, normal).
	// The replay cuts ranges past the transaction's events: a written
	// record changed, or a bug; the groups may hold an event twice or
	// miss one the record names wrongly.
	ProblemBadDuplicate ProblemKind = "bad-duplicate"
)

// Note kinds: findings that are not damage (Report.Notes; OK ignores them).
const (
	// NoteOrderDiffers: the recovered queue and a full replay hold the same
	// events in a different order. Takes rolled back in another order than
	// they were taken put their events back at the head in the rollback
	// order, which no log record says, so this follows from normal use.
	NoteOrderDiffers ProblemKind = "order-differs"
	// NoteDamagedQueued: the recovered queue holds events a full replay
	// does not, and every one of them lies in a damaged range of its log
	// file: the damage's own problem (and its cost) covers them; they are
	// not a disagreement between checkpoint and logs.
	NoteDamagedQueued ProblemKind = "damaged-queued"
)

// States of a checkpoint (CheckpointInfo.State).
const (
	StateComplete   = "complete"
	StateIncomplete = "incomplete"
	StateCorrupt    = "corrupt"
	StateMissing    = "missing"
	StateNone       = "none" // no backup dir configured
)

// Recovery sources (Report.RecoveredFrom), as the channel names them.
const (
	FromCheckpoint = "checkpoint"
	FromBackup     = "backup checkpoint"
	FromFullReplay = "full replay"
)

// maxProblemsPerKind bounds the problems of one kind listed one by one; the
// rest are counted in a last problem of that kind.
const maxProblemsPerKind = 100

// maxDiffShown is how many differing pointers a checkpoint-disagrees
// problem names.
const maxDiffShown = 5

// VerifyOptions configures Verify.
type VerifyOptions struct {
	FS                  vfs.FS
	CheckpointDir       string
	BackupCheckpointDir string // "" = no backup
	DataDirs            []string
	// Logger receives progress (the replays' progress included; their
	// reports of damage are the report's problems). nil = discard.
	Logger *slog.Logger
	// Keys opens the events of encrypted log files for ListEvents (and
	// the dump tool). Verify needs none: checksums cover the stored bytes.
	// nil = encrypted events are listed with an error saying so. The
	// channel's id comes from the directories' channel.id files: an event
	// of a file bound to another channel is listed with an error matching
	// logfile.ErrKey (without a channel.id, each file is read with the
	// channel its key record names).
	Keys logfile.Keys
}

// Problem is one inconsistency.
type Problem struct {
	Kind   ProblemKind // one of the Problem* (or Note*) constants
	File   string      // the file concerned, or ""
	Offset int64       // byte offset in File, or -1 when not about a place in a file
	// Group is the consumer group the problem is about, in a channel with
	// named groups: its checkpoint (checkpoint-*), its recovered queue
	// (checkpoint-disagrees, order-differs, damaged-queued,
	// duplicate-pointer), its checkpoint's bookkeeping (refcount-mismatch,
	// missing-log-state), a pointer only it holds (bad-pointer). nil for
	// the others, and for every problem of a channel whose only group is
	// the unnamed one (so that such a channel reports as before groups).
	Group  *GroupRef
	Detail string

	// What the problem costs, for damage in the log files (corrupt-record,
	// bad-header, torn-tail, truncated-log, bad-pointer); see Cost.
	Cost
}

// Cost is what damage costs in committed events. A count is a lower
// bound: damaged bytes may also have held whole transactions, commit
// record included, of which nothing can be known.
type Cost struct {
	// Lost counts the committed events the channel loses to this damage
	// when it opens as it would now (Report.RecoveredFrom): queued events
	// whose records are damaged (a take skips them), and the damaged
	// events of a committed put transaction written after the checkpoint.
	Lost int
	// LostFullReplay is the same when the queue is rebuilt by a full
	// replay of the logs: after 'fcreplay repair' or 'fcreplay replay'
	// (channel.Repair, channel.Rebuild), or if the checkpoint is lost. It
	// can be larger than Lost: a checkpoint still holds the events of a
	// transaction whose records were damaged after it was written.
	LostFullReplay int
	// Redelivered counts events that committed takes took but that stay
	// queued, because damage took those take records: delivered again,
	// not lost.
	Redelivered int
}

func (c *Cost) add(o Cost) {
	c.Lost += o.Lost
	c.LostFullReplay += o.LostFullReplay
	c.Redelivered += o.Redelivered
}

// String describes c, or is "" for no cost.
func (c Cost) String() string {
	var parts []string
	if c.Lost > 0 || c.LostFullReplay > 0 {
		s := "costs " + plural(c.Lost, "committed event")
		if c.LostFullReplay != c.Lost {
			s += " (" + strconv.Itoa(c.LostFullReplay) + " after a repair or full replay)"
		}
		parts = append(parts, s)
	}
	if c.Redelivered > 0 {
		parts = append(parts, plural(c.Redelivered, "taken event")+" delivered again")
	}
	return strings.Join(parts, "; ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// LogDamage reports whether p is damage at a place in a log file (File
// and Offset name where it starts): corrupt-record, bad-header, torn-tail
// or truncated-log, the places a repair acts on.
func (p Problem) LogDamage() bool {
	switch p.Kind {
	case ProblemCorruptRecord, ProblemBadHeader, ProblemTornTail, ProblemTruncatedLog:
		return true
	}
	return false
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(string(p.Kind))
	if p.Group != nil {
		b.WriteString(" (" + p.Group.String() + ")")
	}
	if p.File != "" {
		b.WriteString(" " + p.File)
		if p.Offset >= 0 {
			b.WriteString(" at offset " + strconv.FormatInt(p.Offset, 10))
		}
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	if c := p.Cost.String(); c != "" {
		b.WriteString(" [" + c + "]")
	}
	return b.String()
}

// GroupRef names a consumer group.
type GroupRef struct {
	ID   uint32 // 0: the unnamed group
	Name string // "" for the unnamed group
}

// String is `group "audit"`, or "the unnamed group".
func (g GroupRef) String() string {
	if g.ID == 0 {
		return "the unnamed group"
	}
	return "group " + strconv.Quote(g.Name)
}

// CheckpointInfo describes the checkpoint or the backup.
type CheckpointInfo struct {
	Dir   string
	State string // a State* constant
	Err   error  // why it is not complete
	// Read from a complete checkpoint only: its top level (the unnamed
	// group's ring, or an empty ring of one slot when there is none).
	WriteOrderID         uint64
	Capacity, Head, Size int
	Time                 time.Time
	LogStates            int // log file states recorded
	// Catalog is the consumer groups it lists (its groups file); nil
	// without one: an older release's checkpoint, the unnamed group alone.
	Catalog *checkpoint.Catalog
}

// GroupReport is one consumer group as the recovery and a full replay
// leave it.
type GroupReport struct {
	// Info is the group as the recovery ends it (its capacity and policy
	// those of the groups record or catalog that last listed it), else as
	// the full replay does. Capacity is 0 when nothing says it: the
	// unnamed group a full replay assumes when neither a checkpoint nor a
	// groups record lists the groups.
	Info logfile.GroupInfo
	// Queued is the number of events queued for the group after the
	// channel opens (-1: that recovery fails, or it has no such group);
	// FullReplayQueued a full replay's (-1: it fails, or has no such
	// group).
	Queued, FullReplayQueued int
	// InflightTakes counts its events in flight at the checkpoint used
	// (they return to its head). Of them, InflightWaiting are listed
	// under the pseudo transaction checkpoint.WaitingTx (events waiting
	// for their retry delay) and InflightParked under checkpoint.ParkedTx
	// (events parked behind a held key, GroupConfig.OrderKey): no take
	// transaction holds those.
	InflightTakes                   int
	InflightWaiting, InflightParked int
	// Diff is how its recovered queue differs from a full replay's.
	Diff QueueDiff
	// Deliveries is the delivery counts of its queued events as the
	// recovery ends them (GroupResult.Deliveries: groups with
	// MaxDeliveries); nil for none, and when the recovery fails or does
	// not have the group.
	Deliveries map[eventqueue.Pointer]uint32
	// Waiting is the due times (Unix nanoseconds) of its queued events
	// that wait for their retry delay (GroupResult.Waiting: counted in
	// Queued; the channel keeps them out of its queue until due); nil for
	// none.
	Waiting map[eventqueue.Pointer]int64
	// HeadID and Oldest are the id and the commit time of the event at
	// the head of its recovered queue, the oldest it holds (what a Take
	// gives as Event.ID and Event.Time): its position and, against the
	// clock, its lag. "" and zero when the queue is empty or the event
	// does not read; Oldest is zero for an event of a log file older
	// than format version 7.
	HeadID string
	Oldest time.Time
}

// Ref names g.
func (g *GroupReport) Ref() GroupRef { return GroupRef{ID: g.Info.ID, Name: g.Info.Name} }

// LogInfo describes one log file, scanned in full.
type LogInfo struct {
	ID        uint32
	Dir, Path string
	Size      int64 // file size
	End       int64 // just past the last valid record

	// Counts of the valid records, by type (padding aside).
	Records, Puts, Takes, Rollbacks, Commits int64
	// Padding counts the padding records: regions a repair overwrote.
	Padding int64
	// FirstWOID and LastWOID are the write-order ids of the first and last
	// valid records; 0 when there is none.
	FirstWOID, LastWOID uint64

	Tail    logfile.Tail
	TailErr error // why the bytes at End are not a record, for a torn tail
	// Version is the file's format version (5 and 6: encrypted), and
	// KeyID the key an encrypted file names in its key record ("" for
	// others); ChannelID the channel a version-6 file is bound to (zero
	// for others).
	Version   uint16
	KeyID     string
	ChannelID logfile.ChannelID
	// TornBytes is, for a torn tail, how many bytes from End on are not
	// zero: the torn write, without the zeros laid out after it
	// (Config.Preallocate), which Size counts.
	TornBytes int64
	// HeaderErr is a damaged header: the file was salvaged, or skipped if
	// the header names another file id.
	HeaderErr error
	Skipped   []logfile.Skip // damaged regions after the header
	// Unfinished: left by a crash inside logfile.Create; holds no record.
	Unfinished bool
	// Held: a group's recovered queue, or a transaction in flight at the
	// checkpoint used, points into the file. A file with records that
	// nothing holds is one the channel deletes at its next checkpoint, or
	// retains (Config.Retention).
	Held bool

	duplicate bool // another data dir listed first holds the same id
}

// QueueDiff is how the recovered queue differs from a full replay's.
type QueueDiff struct {
	// OnlyRecovered holds the events the recovered queue has and a full
	// replay does not (resurrected, or lost to a full replay); OnlyReplayed
	// the reverse. Sorted by pointer.
	OnlyRecovered, OnlyReplayed []eventqueue.Pointer
	// Reordered: same events, different order; FirstReorder is the first
	// index where they differ.
	Reordered    bool
	FirstReorder int
}

// Report is what Verify found.
type Report struct {
	Checkpoint, Backup CheckpointInfo
	Logs               []LogInfo // by id, then data dir order
	// RecoveredFrom is where the channel would recover from: FromCheckpoint,
	// FromBackup or FromFullReplay.
	RecoveredFrom string
	// Queued is the number of events the channel would hold after opening,
	// as FileChannel.Len counts them (the unnamed group's, else the largest
	// of the groups'); -1 if that replay failed. FullReplayQueued is a full
	// replay's. Groups has each group's.
	Queued, FullReplayQueued int
	// InflightPuts and InflightTakes count the events in flight at the
	// checkpoint used (the takes of every group).
	InflightPuts, InflightTakes int
	// PointersChecked counts the distinct pointers read back.
	PointersChecked int
	// Diff is the unnamed group's Groups[i].Diff (zero without one).
	Diff QueueDiff
	// Groups is every consumer group the recovery or a full replay ends
	// with, by id: one, the unnamed group, for a channel without named
	// groups.
	Groups   []GroupReport
	Problems []Problem
	Notes    []Problem
	// Cost is the sum of the problems' costs, those not listed one by one
	// included, and of damage a repair already padded (no problem names
	// it).
	Cost     Cost
	Duration time.Duration

	perKind map[ProblemKind]int // problems per kind, for the bound
}

// OK reports whether Verify found no problem (notes aside).
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// String lists the problems, one a line.
func (r *Report) String() string {
	if r.OK() {
		return "ok"
	}
	var b strings.Builder
	for i, p := range r.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// add records a problem, keeping at most maxProblemsPerKind of each kind.
// It returns the problem's index in r.Problems, or -1 when it is only
// counted.
func (r *Report) add(kind ProblemKind, file string, off int64, format string, args ...any) int {
	return r.addGroup(nil, kind, file, off, format, args...)
}

// addGroup is add for a problem about consumer group g (nil: none).
func (r *Report) addGroup(g *GroupRef, kind ProblemKind, file string, off int64, format string, args ...any) int {
	if r.perKind == nil {
		r.perKind = map[ProblemKind]int{}
	}
	r.perKind[kind]++
	if r.perKind[kind] > maxProblemsPerKind {
		return -1
	}
	r.Problems = append(r.Problems, Problem{Kind: kind, File: file, Offset: off, Group: g, Detail: fmt.Sprintf(format, args...)})
	return len(r.Problems) - 1
}

// Group returns the report of the consumer group with the given id, or
// nil.
func (r *Report) Group(id uint32) *GroupReport {
	for i := range r.Groups {
		if r.Groups[i].Info.ID == id {
			return &r.Groups[i]
		}
	}
	return nil
}

// summarize adds, for each kind over the bound, a problem counting the ones
// not listed.
func (r *Report) summarize() {
	kinds := make([]ProblemKind, 0, len(r.perKind))
	for k, n := range r.perKind {
		if n > maxProblemsPerKind {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		r.Problems = append(r.Problems, Problem{Kind: k, Offset: -1,
			Detail: fmt.Sprintf("%d more problems of this kind not listed", r.perKind[k]-maxProblemsPerKind)})
	}
}
