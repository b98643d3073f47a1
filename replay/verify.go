package replay

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// Verify checks a closed channel's files without changing a byte of them:
//
//  0. every directory's channel.id (owner.ReadOwners): a data dir or backup dir
//     that belongs to another channel, a damaged file;
//  1. the checkpoint and the backup checkpoint: complete, incomplete,
//     corrupt or missing; with consumer groups a checkpoint is a set (its
//     top level, its groups catalog, every named group's checkpoint, all at
//     one write-order id: checkpoint.OpenSet), usable only whole, as the
//     channel's Open uses it;
//  2. every log file, scanned in full from its header: damaged header,
//     damaged regions in the middle, torn tail, a file left by an
//     unfinished create, the same id in two data dirs, write-order ids
//     that do not increase within a file;
//  3. the queues recovered as the channel recovers them (checkpoint, else
//     the backup, else a full replay) against the queues of a full replay of
//     every log, consumer group by consumer group: the channel keeps log
//     files so that both hold the same events, and a difference is a lost
//     or resurrected event (or a group only one of them has);
//  4. every pointer of every group's recovered queue and every pointer in
//     flight at the checkpoint used reads back (logfile.Reader) as a valid
//     put record of an existing log file;
//  5. the per-file reference counts of each checkpoint of the set equal the
//     counts of its ring, and every file its ring or in-flight transactions
//     point into has a log state.
//
// Each inconsistency is a Problem with one of the Problem* kinds. The
// checkpoint files are copied into a vfs.MemFS and opened there, and the
// replays only read the data dirs, so Verify needs no lock and writes
// nothing; it must not run while the channel is open (the files would change
// under it).
//
// Cost: memory for a copy of the checkpoint files (8 bytes a slot of every
// group's ring up to its last non-zero byte: a file's tail of zeros, such
// as a sparse one grown to gigabytes, is not copied; copiesFS) and a few slices of pointers as long as the queues; time
// for about two scans of every log file (the full replay and the check of
// each file; the recovery replays only what follows the checkpoint) and one
// ReadRecord per queued pointer (once for an event several groups hold), in
// file order: 1.4 s for 1M queued events of 100 bytes in the page cache
// (2-core EPYC, one group).
//
// Verify returns an error only for bad options, I/O errors and files a
// newer release wrote (a checkpoint or backup file of a newer format
// version, a log file of a newer version or with a record of a type this
// build does not know: an error wrapping corrupt.ErrUnsupportedFormat,
// which is not damage); damage of any kind is a Problem.
func Verify(opts VerifyOptions) (*Report, error) {
	start := time.Now()
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	v := newVerifier(opts)
	err := v.run()
	if cerr := v.closeAll(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	v.rep.summarize()
	v.rep.Duration = time.Since(start)
	v.log.Info("verify done", "problems", len(v.rep.Problems), "recovered_from", v.rep.RecoveredFrom,
		"queued", v.rep.Queued, "duration", v.rep.Duration.Round(time.Millisecond))
	return v.rep, nil
}

// check validates the options of Verify and Events.
func (opts *VerifyOptions) check() error {
	switch {
	case opts.FS == nil:
		return errors.New("no FS")
	case opts.CheckpointDir == "":
		return errors.New("no checkpoint dir")
	case len(opts.DataDirs) == 0:
		return errors.New("no data dirs")
	case opts.BackupCheckpointDir != "" && filepath.Clean(opts.BackupCheckpointDir) == filepath.Clean(opts.CheckpointDir):
		return errors.New("the backup dir is the checkpoint dir")
	}
	return nil
}

// verifier holds one Verify's (or Events') state: the checkpoint copies,
// readers and the report their loading fills in. Close it with closeAll.
type verifier struct {
	opts VerifyOptions
	log  *slog.Logger
	rep  *Report
	mem  *copiesFS // copies of the checkpoint files, at their own paths

	logs map[uint32]*LogInfo // first file of each id with records
	puts int64               // put records in every log
	set  *logfile.Set        // the data dirs' log files, duplicates listed
	// channel is the channel's id as its directories record it (readOwners;
	// zero when none does): the set refuses encrypted files bound to
	// another.
	channel logfile.ChannelID
	closers []io.Closer

	journalRead    bool
	journalEntries []checkpoint.JournalEntry // the delivery journal's (journal)

	// The damaged ranges of the log files and the problems naming them,
	// for the costs (verify_cost.go).
	ranges map[string][]damageRange // by log path
	places map[placeKey]int         // problem index by where damage starts
	// disagrees is the index of each group's checkpoint-disagrees
	// problem, by group id.
	disagrees map[uint32]int
	// replayed is the full replay's queues as a set (every group's events);
	// nil when it failed.
	replayed map[eventqueue.Pointer]bool
	// refs names each consumer group the checkpoint or a replay has, by id
	// (ref).
	refs map[uint32]*GroupRef
	// nextGroupID is the largest NextGroupID of the logs' groups records;
	// filterSkips the filter skip records naming a group not below it
	// when they were read (verify_filters.go).
	nextGroupID uint32
	filterSkips []filterSkipAt
}

func newVerifier(opts VerifyOptions) *verifier {
	v := &verifier{opts: opts, log: opts.Logger, rep: &Report{}, mem: newCopiesFS(), disagrees: map[uint32]int{}}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	return v
}

func (v *verifier) run() error {
	if err := v.checkOwners(); err != nil {
		return err
	}
	if err := v.scanLogs(); err != nil {
		return err
	}
	used, err := v.pickCheckpoint()
	if err != nil {
		return err
	}
	v.tailProblems(used)
	v.filterGroupProblems(used)

	// The recovered queues (queue A) and the checkpoint's own pointers.
	var rec recovery
	if used != nil {
		if rec, err = v.recoverFrom(used); err != nil {
			return err
		}
	}
	// A full replay (queue B).
	full, fullRes, err := v.fullReplay()
	if err != nil {
		return err
	}
	if used == nil {
		rec = recovery{groups: full, res: fullRes}
	}
	v.compareGroups(rec, full, fullRes, used)
	v.costs(rec.groups, rec.res, full, fullRes)
	if err := v.checkPointers(rec.groups, rec.inflight); err != nil {
		return err
	}
	v.nameGroups()
	return nil
}

// checkOwners reports the directories that belong to another channel and
// the damaged channel.id files (check 0): what makes the channel refuse to
// open (owner.ReadOwners).
func (v *verifier) checkOwners() error {
	own, err := v.readOwners()
	if err != nil {
		return err
	}
	damaged := own.Damaged
	for _, d := range own.Dirs {
		if d.Healed != nil {
			damaged = append(damaged, fmt.Errorf("%w; every data dir vouches for this channel: the channel's next Open writes it again", d.Healed))
		}
	}
	for _, err := range damaged {
		file, off := "", int64(-1)
		if ce := (*corrupt.Error)(nil); errors.As(err, &ce) {
			file, off = ce.File, ce.Offset
		}
		v.rep.add(ProblemChannelIDCorrupt, file, off, "%v", err)
	}
	for _, fe := range own.Foreign {
		kind := ProblemForeignDataDir
		if fe.Role == "BackupCheckpointDir" {
			kind = ProblemForeignBackupDir
		}
		v.rep.add(kind, fe.File, -1, "%s", fe.Detail())
	}
	return nil
}

// readOwners reads the directories' channel.id files (owner.ReadOwners) and
// keeps the channel's id, if they record one: encrypted log files bound to
// another channel are then refused, as Open refuses them.
func (v *verifier) readOwners() (*owner.Owners, error) {
	own, err := owner.ReadOwners(v.ownerOptions())
	if err != nil {
		return nil, err
	}
	if !own.New {
		v.channel = logfile.ChannelID(own.ID)
	}
	return own, nil
}

// ownerOptions names the channel's directories for owner.ReadOwners.
func (v *verifier) ownerOptions() owner.Options {
	return owner.Options{FS: v.opts.FS, CheckpointDir: v.opts.CheckpointDir,
		BackupCheckpointDir: v.opts.BackupCheckpointDir, DataDirs: v.opts.DataDirs}
}

// emptyQueue returns an empty in-memory queue of capacity max(n, 1), for a
// full replay.
func emptyQueue(n int) (*eventqueue.Queue, error) {
	n = max(n, 1)
	return eventqueue.New(eventqueue.NewMemSlots(n), n, 0, 0, map[uint32]int{})
}

// countTx counts the pointers of txs listed under transaction id tx.
func countTx(txs []eventqueue.InflightTx, tx uint64) int {
	n := 0
	for _, t := range txs {
		if t.Tx == tx {
			n += len(t.Pointers)
		}
	}
	return n
}

func countPointers(txs []eventqueue.InflightTx) int {
	n := 0
	for _, tx := range txs {
		n += len(tx.Pointers)
	}
	return n
}

// scanLogs scans every log file of every data dir in full (check 2).
func (v *verifier) scanLogs() error {
	if err := v.openSet(); err != nil {
		return err
	}
	for _, d := range v.set.Missing() {
		v.log.Warn("verify: data dir does not exist", "dir", d)
	}
	for _, n := range v.set.NotRegular() {
		v.rep.add(ProblemNotRegularFile, n.Path, -1,
			"%s named like a log file: not read, changed or removed, its id not reused; a full replay (Rebuild, Repair) refuses it, "+
				"and so does the channel where a log file it needs has that name: if it stands for a log file moved elsewhere, "+
				"move the file back into the data dir in its place (the channel follows no symbolic link), else move it out of the data dir",
			vfs.TypeName(n.Mode))
	}
	for _, f := range v.set.Listed() {
		if f.Duplicate != "" {
			v.rep.add(ProblemDuplicateLog, f.Path, -1, "log file id %d is also in %s", f.ID, f.Duplicate)
		}
		info, err := v.scanLog(f)
		if err != nil {
			return err
		}
		v.rep.Logs = append(v.rep.Logs, info)
	}
	v.indexLogs()
	return nil
}

// notRegular is v.set's NotRegular, or none before the set is open.
func (v *verifier) notRegular() []logfile.NotRegular {
	if v.set == nil {
		return nil
	}
	return v.set.NotRegular()
}

// openSet lists the data dirs' log files (duplicates included, as
// problems), once.
func (v *verifier) openSet() error {
	if v.set != nil {
		return nil
	}
	set, err := logfile.OpenSet(logfile.SetOptions{FS: v.opts.FS, Dirs: v.opts.DataDirs, AllowDuplicates: true, Logger: v.log,
		Keys: v.opts.Keys, ChannelID: v.channel})
	if err != nil {
		return err
	}
	v.set = set
	v.closers = append(v.closers, set)
	return nil
}

// checkBinding reports a key record that binds its file to another channel
// than the one the directories record (check 2): Open refuses the file.
func (v *verifier) checkBinding(path string, off int64, r *logfile.Record) {
	if v.channel == (logfile.ChannelID{}) || r.ChannelID == (logfile.ChannelID{}) || r.ChannelID == v.channel {
		return
	}
	v.rep.add(ProblemForeignLog, path, off, "the file is encrypted for channel %s, not for this channel %s: a log file of another channel, copied here; the channel refuses to open (ErrKey) until it is moved out of the data dir",
		hex.EncodeToString(r.ChannelID[:]), hex.EncodeToString(v.channel[:]))
}

// indexLogs fills in v.logs: the file of each id whose records the
// channel reads (the first data dir's).
func (v *verifier) indexLogs() {
	v.logs = map[uint32]*LogInfo{}
	for i := range v.rep.Logs {
		l := &v.rep.Logs[i]
		if _, seen := v.logs[l.ID]; !seen && !l.Unfinished && !l.duplicate {
			v.logs[l.ID] = l
		}
	}
}

// scanLog scans one log file from its header to its end.
func (v *verifier) scanLog(f logfile.File) (LogInfo, error) {
	path := f.Path
	info := LogInfo{ID: f.ID, Dir: f.Dir, Path: path, duplicate: f.Duplicate != ""}
	fi, err := v.opts.FS.Stat(path)
	if err != nil {
		return info, err
	}
	info.Size = fi.Size()
	if f.Unfinished {
		info.Unfinished = true
		v.rep.add(ProblemUnfinishedCreate, path, -1, "%d bytes, no record: left by a crash while the file was created", info.Size)
		return info, nil
	}
	sc, salvaged, err := v.set.Scan(f, 0)
	if errors.Is(err, corrupt.ErrCorrupt) {
		// A valid header naming another file: the replay refuses it, and
		// no record of it reads back.
		info.HeaderErr = err
		v.addTail(path, 0, v.rep.add(ProblemBadHeader, path, 0, "%v", err))
		return info, nil
	}
	if err != nil {
		return info, err
	}
	defer sc.Close()
	if err := v.countRecords(sc, &info); err != nil {
		return info, err
	}
	v.puts += info.Puts
	if err := v.measureEnd(sc, &info); err != nil {
		return info, err
	}
	v.reportSkipped(sc, salvaged, &info)
	return info, nil
}

// countRecords reads sc's records into info's counts, first and last
// write-order ids and key, and reports write-order ids out of order.
func (v *verifier) countRecords(sc *logfile.Scanner, info *LogInfo) error {
	path := info.Path
	var lastWOID uint64
	badOrder := 0
	fc := filterCheck{v: v}
	for sc.Next() {
		r := sc.Record()
		if r.Type == logfile.RecordPadding {
			info.Padding++ // no write-order id: not in the order check
			continue
		}
		fc.see(path, sc.Offset(), r)
		info.Records++
		switch r.Type {
		case logfile.RecordPut:
			info.Puts++
		case logfile.RecordTake:
			info.Takes++
		case logfile.RecordRollback:
			info.Rollbacks++
		case logfile.RecordCommit:
			info.Commits++
		case logfile.RecordKey:
			info.KeyID, info.ChannelID = r.KeyID, r.ChannelID
			v.checkBinding(path, sc.Offset(), r)
		}
		if info.Records == 1 {
			info.FirstWOID = r.WriteOrderID
		} else if r.WriteOrderID <= lastWOID {
			if badOrder == 0 {
				v.rep.add(ProblemWriteOrder, path, sc.Offset(), "write-order id %d after %d", r.WriteOrderID, lastWOID)
			}
			badOrder++
		}
		lastWOID = r.WriteOrderID
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if badOrder > 1 {
		v.rep.add(ProblemWriteOrder, path, -1, "%d records in all have a write-order id not above the previous record's", badOrder)
	}
	info.LastWOID = lastWOID
	return nil
}

// measureEnd records where sc's valid records end, the tail after them
// (and the non-zero bytes of a torn one), the version and the file size.
func (v *verifier) measureEnd(sc *logfile.Scanner, info *LogInfo) error {
	info.End, info.Tail, info.TailErr = sc.End(), sc.Tail(), sc.TailError()
	info.Version = sc.Framing().Version()
	if info.Tail == logfile.TailTorn {
		nz, err := logfile.NonZeroEnd(v.opts.FS, info.Path, info.End)
		if err != nil {
			return err
		}
		info.TornBytes = nz - info.End
	}
	var err error
	info.Size, err = sc.Size()
	return err
}

// reportSkipped reports the damaged ranges sc skipped: a salvaged header
// (the first range, at offset 0) as a bad header, the rest as corrupt
// records kept in info.Skipped.
func (v *verifier) reportSkipped(sc *logfile.Scanner, salvaged bool, info *LogInfo) {
	path := info.Path
	for i, sk := range sc.Skipped() {
		if salvaged && i == 0 && sk.Offset == 0 {
			info.HeaderErr = sk.Err
			v.addRange(path, 0, sk.Length, v.rep.add(ProblemBadHeader, path, 0, "%v (the records after it are read)", sk.Err))
			continue
		}
		info.Skipped = append(info.Skipped, sk)
		v.addRange(path, sk.Offset, sk.Offset+sk.Length,
			v.rep.add(ProblemCorruptRecord, path, sk.Offset, "%d damaged bytes skipped: %v", sk.Length, sk.Err))
	}
}

// tailProblems reports each log file's tail, once the checkpoint recovery
// uses is known: a torn tail beyond what the checkpoint covers is normal
// after a crash; valid records that end below the length the checkpoint
// recorded mean that synced, checkpointed records were cut off.
func (v *verifier) tailProblems(used *checkpoint.Set) {
	positions := map[uint32]int64{}
	if used != nil {
		for _, l := range used.State.Logs {
			positions[l.FileID] = l.Position
		}
	}
	for i := range v.rep.Logs {
		l := &v.rep.Logs[i]
		if l.Unfinished || (l.HeaderErr != nil && l.End == 0) {
			continue
		}
		torn := ""
		if l.Tail == logfile.TailTorn {
			torn = fmt.Sprintf("; %d bytes after it are not a record: %v", l.TornBytes, l.TailErr)
		}
		switch pos := positions[l.ID]; {
		case l.End < pos:
			v.addTail(l.Path, l.End, v.rep.add(ProblemTruncatedLog, l.Path, l.End,
				"the valid records end here, below offset %d, the length the checkpoint recorded (file size %d%s): records that were synced and checkpointed were cut off or overwritten; not a crash's torn tail",
				pos, l.Size, torn))
		case l.Tail == logfile.TailTorn:
			v.addTail(l.Path, l.End, v.rep.add(ProblemTornTail, l.Path, l.End, "%d bytes that are not a record (file size %d%s): %v",
				l.TornBytes, l.Size, zerosAfter(l), l.TailErr))
		}
	}
}

// zerosAfter describes the zeros after a torn tail's bytes, if any.
func zerosAfter(l *LogInfo) string {
	if z := l.Size - l.End - l.TornBytes; z > 0 {
		return fmt.Sprintf(", with %d zero bytes after them", z)
	}
	return ""
}

// replay runs a replay with opts as the channel would (see runReplay). A
// failure caused by the files' contents is a problem (a nil Result); an
// I/O error is returned.
func (v *verifier) replay(what string, opts Options) (*Result, error) {
	res, err := v.runReplay(what, opts)
	if err != nil {
		if ioError(err) {
			return nil, err
		}
		v.rep.add(ProblemRecoveryFailed, "", -1, "%s: %v", what, err)
		return nil, nil
	}
	return res, nil
}

// ioError reports whether a replay's error is an I/O error rather than one
// caused by the files' contents.
func ioError(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && !errors.Is(err, corrupt.ErrCorrupt)
}

// journal returns the delivery journal's entries (read once), or none if
// it cannot be read: its counts only add to what the logs say.
func (v *verifier) journal() []checkpoint.JournalEntry {
	if !v.journalRead {
		v.journalRead = true
		entries, err := checkpoint.ReadJournal(v.opts.FS, v.opts.CheckpointDir)
		if err != nil {
			v.log.Warn("verify: the delivery journal cannot be read: its delivery counts are left out", "err", err)
		}
		v.journalEntries = entries
	}
	return v.journalEntries
}

// runReplay runs a replay with opts (the checkpoint and the queues; the
// logs and the logger are Verify's) and returns its error as it is.
func (v *verifier) runReplay(what string, opts Options) (*Result, error) {
	// The replay's own reports of damage would repeat the problems: only
	// its progress goes to the logger.
	opts.Logger = slog.New(progressOnly{v.log.Handler()}).With("verify", what)
	if err := v.openSet(); err != nil {
		return nil, err
	}
	opts.Logs = v.set
	opts.Journal = v.journal()
	res, err := Run(opts)
	if err != nil {
		return nil, err
	}
	v.log.Debug("verify: replay done", "from", what, "records", res.Records, "groups", len(res.Groups))
	return res, nil
}

// compare reports how group g's recovered queue differs from a full
// replay's (check 3) in d. Both are sorted only when they differ.
func (v *verifier) compare(g *GroupRef, d *QueueDiff, recovered, replayed []eventqueue.Pointer) {
	if slices.Equal(recovered, replayed) {
		return
	}
	a, b := slices.Clone(recovered), slices.Clone(replayed)
	slices.Sort(a)
	slices.Sort(b)
	for i, j := 0, 0; i < len(a) || j < len(b); {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			d.OnlyRecovered = append(d.OnlyRecovered, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			d.OnlyReplayed = append(d.OnlyReplayed, b[j])
			j++
		default:
			i++
			j++
		}
	}
	if len(d.OnlyRecovered) == 0 && len(d.OnlyReplayed) == 0 {
		d.Reordered = true
		for d.FirstReorder < len(recovered) && recovered[d.FirstReorder] == replayed[d.FirstReorder] {
			d.FirstReorder++
		}
		i := d.FirstReorder
		v.rep.Notes = append(v.rep.Notes, Problem{Kind: NoteOrderDiffers, Offset: -1, Group: g,
			Detail: fmt.Sprintf("the recovered queue and a full replay hold the same %d events in a different order: at index %d %v and %v",
				len(recovered), i, recovered[i], replayed[i])})
		return
	}
	if len(d.OnlyReplayed) == 0 && !slices.ContainsFunc(d.OnlyRecovered, func(p eventqueue.Pointer) bool {
		_, damaged := v.rangeOf(p)
		return !damaged
	}) {
		v.rep.Notes = append(v.rep.Notes, Problem{Kind: NoteDamagedQueued, Offset: -1, Group: g,
			Detail: fmt.Sprintf("recovery from the %s gives %d events, a full replay %d: %d only in the recovered queue%s, each in a damaged range",
				v.rep.RecoveredFrom, len(recovered), len(replayed), len(d.OnlyRecovered), firstPointers(d.OnlyRecovered))})
		return
	}
	v.disagrees[g.ID] = v.rep.addGroup(g, ProblemCheckpointDisagrees, "", -1,
		"recovery from the %s gives %d events, a full replay %d: %d only in the recovered queue%s, %d only in the full replay%s",
		v.rep.RecoveredFrom, len(recovered), len(replayed),
		len(d.OnlyRecovered), firstPointers(d.OnlyRecovered), len(d.OnlyReplayed), firstPointers(d.OnlyReplayed))
}

// firstPointers formats the first few pointers of ps as " (a, b, ...)".
func firstPointers(ps []eventqueue.Pointer) string {
	if len(ps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" (")
	for i, p := range ps[:min(len(ps), maxDiffShown)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
	if len(ps) > maxDiffShown {
		b.WriteString(", ...")
	}
	b.WriteByte(')')
	return b.String()
}

// Roles of a checked pointer, for problem details.
const (
	roleQueued uint8 = 1 << iota
	roleInflightPut
	roleInflightTake
)

type rolePointer struct {
	p    eventqueue.Pointer
	role uint8
	// group is the consumer group of a queued pointer or an in-flight
	// take (not of an in-flight put: it is no group's yet).
	group uint32
}

func roleString(r uint8) string {
	var parts []string
	if r&roleQueued != 0 {
		parts = append(parts, "queued")
	}
	if r&roleInflightPut != 0 {
		parts = append(parts, "in flight (put)")
	}
	if r&roleInflightTake != 0 {
		parts = append(parts, "in flight (take)")
	}
	return strings.Join(parts, ", ")
}

// checkPointers reads back every queued pointer of every group and every
// in-flight pointer once, in file and offset order (check 4). A pointer
// into a damaged range is not a problem of its own: the damage's problem
// counts it (Cost).
func (v *verifier) checkPointers(groups []groupQueue, inflight []rolePointer) error {
	n := len(inflight)
	for _, g := range groups {
		n += len(g.ptrs)
	}
	all := make([]rolePointer, 0, n)
	for _, g := range groups {
		for _, p := range g.ptrs {
			all = append(all, rolePointer{p: p, role: roleQueued, group: g.info.ID})
		}
	}
	all = append(all, inflight...)
	slices.SortFunc(all, func(a, b rolePointer) int {
		return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.role, b.role), cmp.Compare(a.group, b.group))
	})
	missing := map[uint32]int{}
	var of []uint32 // the groups holding the pointer
	for i := 0; i < len(all); {
		p, role, run := all[i].p, uint8(0), 0
		of = of[:0]
		for ; i < len(all) && all[i].p == p; i++ {
			rp := all[i]
			role |= rp.role
			if rp.role != roleInflightPut && !slices.Contains(of, rp.group) {
				of = append(of, rp.group)
			}
			if rp.role != roleQueued {
				continue
			}
			if run++; i+1 == len(all) || all[i+1] != rp {
				if run > 1 {
					v.rep.addGroup(v.refOf(rp.group), ProblemDuplicatePointer, "", -1, "pointer %v is queued %d times", p, run)
				}
				run = 0
			}
		}
		var g *GroupRef
		if len(of) == 1 {
			g = v.refOf(of[0])
		}
		if p == 0 {
			v.rep.addGroup(g, ProblemBadPointer, "", -1, "the zero pointer is %s%s", roleString(role), v.groupsOf(of))
			continue
		}
		v.rep.PointersChecked++
		l := v.logs[p.FileID()]
		if l == nil {
			missing[p.FileID()]++
			continue
		}
		l.Held = true
		if _, damaged := v.rangeOf(p); damaged {
			continue
		}
		if err := v.readBack(p, role, of, g, l); err != nil {
			return err
		}
	}
	ids := make([]uint32, 0, len(missing))
	for id := range missing {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		in := "a log file no data dir holds"
		for _, n := range v.notRegular() {
			if n.ID == id {
				in = fmt.Sprintf("a log file no data dir holds as a regular file: %s is %s; move the file back into the data dir in its place",
					n.Path, vfs.TypeName(n.Mode))
				break
			}
		}
		v.rep.add(ProblemMissingLog, logfile.LogName(id), -1, "%d queued or in-flight pointers into %s", missing[id], in)
	}
	return nil
}

// readBack reads the record p points to in l as a take would, and reports
// a bad-pointer problem (charged when the channel would deliver the event)
// unless it is a valid put. Only I/O errors are returned.
// of is the groups holding p; g is the group holding it if only one does.
func (v *verifier) readBack(p eventqueue.Pointer, role uint8, of []uint32, g *GroupRef, l *LogInfo) error {
	what := func() string { return roleString(role) + " pointer " + p.String() + v.groupsOf(of) }
	r, err := v.reader(l)
	if errors.Is(err, corrupt.ErrCorrupt) {
		// A header naming another file id.
		v.rep.addGroup(g, ProblemBadPointer, l.Path, int64(p.Offset()), "%s: %v", what(), err)
		return nil
	}
	if err != nil {
		return err
	}
	rec, err := r.ReadRecord(int64(p.Offset()))
	r.Release()
	var why string
	switch {
	case errors.Is(err, corrupt.ErrCorrupt):
		why = err.Error()
	case err != nil:
		return err
	case rec.Type != logfile.RecordPut:
		why = fmt.Sprintf("the record there is a %v, not a put", rec.Type)
	}
	if why == "" {
		return nil
	}
	bad := v.rep.addGroup(g, ProblemBadPointer, l.Path, int64(p.Offset()), "%s: %s", what(), why)
	if role&(roleQueued|roleInflightTake) != 0 { // an event the channel would deliver
		c := Cost{Lost: 1}
		if !v.replayed[p] {
			c.LostFullReplay = 1
		}
		v.charge(bad, c)
	}
	return nil
}

// reader returns a reference to the reader of log file l, from the set's
// cache of open readers; the caller releases it.
func (v *verifier) reader(l *LogInfo) (logfile.ReaderRef, error) {
	return v.set.Reader(l.ID)
}

// progressOnly passes on the records of a handler below slog.LevelWarn.
type progressOnly struct{ h slog.Handler }

func (p progressOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l < slog.LevelWarn && p.h.Enabled(ctx, l)
}
func (p progressOnly) Handle(ctx context.Context, r slog.Record) error { return p.h.Handle(ctx, r) }
func (p progressOnly) WithAttrs(as []slog.Attr) slog.Handler           { return progressOnly{p.h.WithAttrs(as)} }
func (p progressOnly) WithGroup(name string) slog.Handler              { return progressOnly{p.h.WithGroup(name)} }

// closeAll closes the checkpoints and readers.
func (v *verifier) closeAll() error {
	var errs []error
	for _, c := range v.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
