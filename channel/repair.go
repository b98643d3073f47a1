package channel

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// RepairKind names a kind of RepairAction: a stable string that tools may
// match, the one logs, fcreplay and JSON output spell.
type RepairKind string

// String returns the kind's stable name, such as "cut-torn-tail".
func (k RepairKind) String() string { return string(k) }

// Repair action kinds (RepairAction.Kind): stable strings tools may match.
const (
	// RepairCutTornTail: the bytes after a log file's last valid record
	// that are not a record were cut (logfile.CutTail).
	RepairCutTornTail RepairKind = "cut-torn-tail"
	// RepairPadDamagedRegion: a damaged region in the middle of a log file
	// was overwritten in place with padding records (logfile.PadRegion), so
	// that no record after it moves.
	RepairPadDamagedRegion RepairKind = "pad-damaged-region"
	// RepairRewriteHeader: a damaged log file header was replaced by a
	// valid one for the id in the file's name (logfile.RewriteHeader).
	RepairRewriteHeader RepairKind = "rewrite-header"
	// RepairRemoveEmptyLog: a log file left by a crash while it was created
	// (no record) was removed.
	RepairRemoveEmptyLog RepairKind = "remove-empty-log"
	// RepairCannotPad: a damaged region shorter than the smallest padding
	// record of its file (logfile.Framing.MinPaddingSize: 29 bytes, 25 in a
	// version-1 file) was left as it is. Replay still steps over it.
	RepairCannotPad RepairKind = "cannot-pad"
	// RepairCannotRepair: a log file Repair leaves alone and the channel
	// cannot open with: a valid header naming another file id (a renamed
	// file), or an id also held by another data dir. Detail says which; the
	// operator must move the file away. No rebuild follows.
	RepairCannotRepair RepairKind = "cannot-repair"
)

// RepairOptions configures Repair.
type RepairOptions struct {
	// DryRun reports the actions a repair would take and changes nothing.
	DryRun bool
	// Progress and ProgressEvery are passed to the rebuild that ends a
	// repair (see RebuildOptions).
	Progress      func(replay.Progress)
	ProgressEvery time.Duration
}

// RepairAction is one change Repair made (or, in a dry run, would make).
type RepairAction struct {
	Kind   RepairKind // a Repair* constant
	File   string     // the log file
	Offset int64      // where in File: the region, the torn tail, 0 for the header; -1 for a whole file
	Length int64      // bytes removed, overwritten or kept; the file size for remove-empty-log
	// KeptIn is the .corrupt file holding the removed or overwritten bytes
	// ("" for remove-empty-log, cannot-pad and cannot-repair). In a dry run
	// it is the name the copy would get, logfile.CorruptName(id, Offset).
	KeptIn string
	Detail string // why: the damage found
	// Lost counts the committed events this damage costs once the repair
	// has rebuilt the checkpoint (a full replay): replay.Cost's
	// LostFullReplay of the problem Verify reports for it, before the
	// repair. A lower bound; 0 for a torn tail beyond what the checkpoint
	// covers and for a log left empty by a crash.
	Lost int
}

// RepairReport is what Repair did.
type RepairReport struct {
	Actions []RepairAction
	// Problems is what Verify reports after the repair; empty = clean. In a
	// dry run, what it reports now.
	Problems []replay.Problem
	// Rebuild is the report of the rebuild that ends a repair; nil in a dry
	// run, and when a cannot-repair action prevents it.
	Rebuild *RebuildReport
	// Before is the cost of the damage found before the repair (Verify's
	// Report.Cost): Lost is what opening the channel without a repair
	// would lose, LostFullReplay what the repair loses. When the second is
	// larger, draining the channel before the repair saves the difference.
	Before replay.Cost
}

// Repair fixes the damage a scan of the closed channel's log files finds,
// without moving any record (take records and checkpoints point at put
// records by file and offset):
//
//   - a log file left by a crash inside its creation (no record) is removed,
//     and its directory fsynced;
//   - a damaged file header is rewritten for the id in the file's name;
//   - each damaged region in the middle of a file is overwritten with
//     padding records (a region shorter than 25 bytes cannot be: it is
//     reported as cannot-pad and left);
//   - a torn tail is cut.
//
// Every byte removed or overwritten is first copied to a .corrupt file next
// to the log (logfile.CorruptName), published with the write-tmp, fsync,
// rename, fsync-dir recipe, and the log is fsynced after the change: after a
// crash at any point the bytes are in one of the two places, and running
// Repair again finishes the job (an existing .corrupt file is reused when it
// holds the same bytes, and never replaced). Then, unless DryRun, Repair
// rebuilds the checkpoint from the logs (Rebuild, with cfg's Capacity and
// Groups: every consumer group's ring), so that it no longer points at
// records that are now padding, and last runs Verify, whose problems go in
// the report.
//
// Events in damaged regions are lost, as replay already treated them; the
// intact events of a put transaction that lost a record are kept (padding
// counts as damage for replay's report of such transactions). A file a newer release wrote
// stops Repair with an error matching ErrUnsupportedFormat before it changes
// anything (the Verify it starts with refuses it), and so does a checkpoint
// file that is not a regular file, with one matching ErrNotRegular, or an
// entry named like a log file that is not one (its rebuild is a full replay,
// which could not read it: see Rebuild). Repair takes every
// directory's lock (ErrLocked while the channel is open); a missing directory is
// created, except in a dry run. On an error after changes were made, Repair
// returns the report of what it did with the error.
func Repair(cfg Config, opts RepairOptions) (*RepairReport, error) {
	if opts.ProgressEvery < 0 {
		return nil, fmt.Errorf("filechannel: repair: ProgressEvery %v is negative", opts.ProgressEvery)
	}
	full, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	missing := missingCreate
	if opts.DryRun {
		missing = missingSkip
	}
	locks, err := lockDirs(full, "repair", missing)
	if err != nil {
		return nil, err
	}
	defer locks.Close()
	if err := refuseForeign(full, "repair"); err != nil {
		return nil, err
	}

	// What the damage costs, before anything changes: the actions say it,
	// and a dry run reports these problems as they are now.
	before, err := replay.Verify(verifyOptions(full))
	if err != nil {
		return nil, opErr("repair", err)
	}
	// Its rebuild would refuse them after the logs were changed.
	err = refusedCheckpoints(full)
	if err == nil {
		err = refusedFullReplay(full) // its rebuild is a full replay
	}
	if err != nil {
		return nil, opErrNote("repair", err, " (nothing was changed)")
	}
	r := &repairer{fs: full.fs, dry: opts.DryRun, rep: &RepairReport{Before: before.Cost}}
	if err := r.repairLogs(full); err != nil {
		return r.partial(opErr("repair", err))
	}
	r.costActions(before.Problems)
	for _, a := range r.rep.Actions {
		full.Logger.Warn("repair", "action", a.Kind, "file", a.File, "offset", a.Offset, "length", a.Length,
			"kept_in", a.KeptIn, "lost", a.Lost, "detail", a.Detail, "dry_run", opts.DryRun)
	}
	if opts.DryRun {
		r.rep.Problems = before.Problems
		return r.rep, nil
	}
	if !r.blocked {
		rb, err := rebuild(cfg, full, RebuildOptions{Progress: opts.Progress, ProgressEvery: opts.ProgressEvery})
		if err != nil {
			return r.partial(opErr("repair", err))
		}
		r.rep.Rebuild = rb
	}
	vrep, err := replay.Verify(verifyOptions(full))
	if err != nil {
		return r.partial(opErr("repair", err))
	}
	r.rep.Problems = vrep.Problems
	return r.rep, nil
}

// repairer holds one Repair's state.
type repairer struct {
	fs      vfs.FS
	dry     bool
	rep     *RepairReport
	blocked bool         // a cannot-repair action: no rebuild
	logs    *logfile.Set // the data dirs' log files, duplicates listed
}

// partial returns the report of what was done so far (nil if nothing) with
// err.
func (r *repairer) partial(err error) (*RepairReport, error) {
	if len(r.rep.Actions) == 0 || r.dry {
		return nil, err
	}
	return r.rep, err
}

func (r *repairer) add(a RepairAction) {
	r.rep.Actions = append(r.rep.Actions, a)
}

// costActions sets each action's Lost from the problem Verify reported at
// the same place before the repair.
func (r *repairer) costActions(problems []replay.Problem) {
	type place struct {
		file string
		off  int64
	}
	lost := map[place]int{}
	for _, p := range problems {
		if p.LogDamage() {
			lost[place{p.File, p.Offset}] += p.LostFullReplay
		}
	}
	for i := range r.rep.Actions {
		a := &r.rep.Actions[i]
		a.Lost = lost[place{a.File, a.Offset}]
	}
}

// repairLogs repairs every log file of every data dir, by data dir then id.
func (r *repairer) repairLogs(cfg Config) error {
	set, err := logfile.OpenSet(logfile.SetOptions{FS: r.fs, Dirs: cfg.DataDirs, AllowDuplicates: true})
	if err != nil {
		return err
	}
	defer set.Close()
	r.logs = set
	listed := set.Listed()
	for _, dir := range cfg.DataDirs {
		for _, f := range listed {
			if f.Dir != dir {
				continue
			}
			if f.Duplicate != "" {
				r.blocked = true
				r.add(RepairAction{Kind: RepairCannotRepair, File: f.Path, Offset: -1,
					Detail: fmt.Sprintf("log file id %d is also in %s: the channel cannot open with both; move one away", f.ID, f.Duplicate)})
				continue
			}
			if err := r.repairLog(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// repairLog scans log file f in full and repairs what the scan finds, in
// file order.
func (r *repairer) repairLog(f logfile.File) error {
	id, path := f.ID, f.Path
	if f.Unfinished {
		fi, err := r.fs.Stat(path)
		if err != nil {
			return err
		}
		r.add(RepairAction{Kind: RepairRemoveEmptyLog, File: path, Offset: -1, Length: fi.Size(),
			Detail: "no record: left by a crash while the file was created"})
		if r.dry {
			return nil
		}
		return r.logs.RemoveFile(f)
	}

	found, err := scanDamage(r.logs, f)
	if errors.Is(err, ErrCorrupt) {
		r.blocked = true
		r.add(RepairAction{Kind: RepairCannotRepair, File: path, Offset: 0, Length: logfile.HeaderSize,
			Detail: fmt.Sprintf("%v: move the file away (or rename it after the id its header names)", err)})
		return nil
	}
	if err != nil {
		return err
	}
	for _, sk := range found.skips {
		a := RepairAction{File: path, Offset: sk.Offset, Length: sk.Length, Detail: sk.Err.Error()}
		switch {
		case found.salvaged && sk.Offset == 0:
			a.Kind = RepairRewriteHeader
		case sk.Length < int64(found.minPad):
			a.Kind = RepairCannotPad
			a.Detail = fmt.Sprintf("%d bytes, fewer than the %d of the smallest padding record: %v", sk.Length, found.minPad, sk.Err)
			r.add(a)
			continue
		default:
			a.Kind = RepairPadDamagedRegion
		}
		a.KeptIn = filepath.Join(filepath.Dir(path), logfile.CorruptName(id, sk.Offset))
		if !r.dry {
			if a.Kind == RepairRewriteHeader {
				a.KeptIn, err = logfile.RewriteHeader(r.fs, path)
			} else {
				a.KeptIn, err = logfile.PadRegion(r.fs, path, sk.Offset, sk.Length)
			}
			if err != nil {
				return err
			}
		}
		r.add(a)
	}
	if found.tail == logfile.TailTorn {
		a := RepairAction{Kind: RepairCutTornTail, File: path, Offset: found.end, Length: found.size - found.end,
			KeptIn: filepath.Join(filepath.Dir(path), logfile.CorruptName(id, found.end)), Detail: fmt.Sprint(found.tailErr)}
		if !r.dry {
			if a.KeptIn, err = r.logs.CutTail(f, found.end); err != nil {
				return err
			}
		}
		r.add(a)
	}
	return nil
}

// damage is what a full scan of a log file found wrong.
type damage struct {
	salvaged  bool           // the header is damaged: skips[0] is it
	skips     []logfile.Skip // damaged regions, in file order
	end, size int64          // the valid end and the file size
	minPad    int            // the smallest padding frame of the file's format version
	tail      logfile.Tail
	tailErr   error
}

// scanDamage scans log file f from its header to its end. A valid header
// naming another file id is a corruption error.
func scanDamage(logs *logfile.Set, f logfile.File) (d damage, err error) {
	sc, salvaged, err := logs.Scan(f, 0)
	d.salvaged = salvaged
	if err != nil {
		return d, err
	}
	defer func() {
		if cerr := sc.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for sc.Next() {
	}
	if err := sc.Err(); err != nil {
		return d, err
	}
	d.skips = sc.Skipped()
	d.salvaged = d.salvaged && len(d.skips) > 0 && d.skips[0].Offset == 0
	d.end, d.tail, d.tailErr = sc.End(), sc.Tail(), sc.TailError()
	d.minPad = sc.Framing().MinPaddingSize()
	d.size, err = sc.Size()
	return d, err
}
