package channel

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// recovery is what Open's steps hand each other.
type recovery struct {
	start  time.Time
	dirs   []dirRole
	ck     *checkpoint.Checkpoint
	st     *checkpoint.State // nil: a full replay
	source string            // replay.FromCheckpoint, FromBackup or FromFullReplay
	res    *replay.Result
	// created: this Open created the checkpoint file (checkpoint.Create,
	// for a full replay or a capacity change). A failed Open removes it
	// unless a checkpoint was written into it (undoCreatedCheckpoint).
	created bool

	// The consumer groups: the checkpoint's catalog (nil: an older
	// release's checkpoint, or none) and the set it belongs to, with the
	// named groups' checkpoints; their states by id; the consumers replay created (fresh); whether the
	// groups differ from the checkpoint's (then a checkpoint is written).
	catalog       *checkpoint.Catalog
	set           *checkpoint.Set
	groupStates   map[uint32]*checkpoint.State
	fresh         map[uint32]*groupState
	groupsChanged bool
	inMemory      []*groupState // groups whose ring resizeGroups moved out of memory
}

// dirRole is a directory Open uses and the Config field naming it.
type dirRole struct{ dir, what string }

// open recovers the channel's committed state. Each step is one of the
// numbered recovery procedure in docs/crash-safety.md §3 (step 1, the
// config, is Open's; step 15 is the "opened" line).
func (c *FileChannel) open() (err error) {
	rc := &recovery{start: time.Now()}
	done := false
	defer func() {
		// A step failed, or panicked (the user's ReplayProgress or
		// logger): undo what Open did, as for an error.
		if !done {
			err = errors.Join(err, c.undoRolls(), c.undoCreatedCheckpoint(rc))
		}
	}()
	steps := []func(*recovery) error{
		c.prepareDirs,           // 2, 3
		c.lockDirs,              // 4
		c.claimDirs,             // 4b, with 4c (checkKeys) before it writes
		c.loadCheckpoint,        // 5
		c.buildGroups,           // 6
		c.replay,                // 7
		c.settleGroups,          // 7b
		c.loadDedup,             // 7c
		c.removeUnfinished,      // 8
		c.cutTornTails,          // 9
		c.syncReplayed,          // 10
		c.startLogs,             // 11
		c.keyWaiting,            // 11b
		c.resizeQueue,           // 12
		c.rollAll,               // 13
		c.finishReclaim,         // 13b
		c.checkpointAfterReplay, // 14
	}
	for _, step := range steps {
		if err := step(rc); err != nil {
			return err
		}
	}
	done = true
	c.log.Info("opened", "queued", c.Len(), "capacity", c.cfg.Capacity, "data_dirs", len(c.cfg.DataDirs),
		"recovered_from", c.stats.recoveredFrom, "duration", time.Since(rc.start).Round(time.Microsecond))
	return nil
}

// checkKeys (step 4c, run by claimDirs once it knows the channel's id)
// refuses, before any file is changed, a log file encrypted with a key
// Config.Keys does not supply or supplies wrong, an encrypted log file when
// Config.Keys is nil, and an encrypted log file of another channel (its
// keys bound to another channel id than claimDirs found): ErrKey.
func (c *FileChannel) checkKeys(*recovery) error {
	if c.cfg.noKeyCheck {
		return nil
	}
	logs, err := logfile.OpenSet(logfile.SetOptions{FS: c.fs, Dirs: c.cfg.DataDirs, AllowDuplicates: true, ChannelID: c.id})
	if err != nil {
		return nil // the replay's listing reports it
	}
	defer logs.Close()
	if err := logs.CheckKeys(logKeys(c.cfg.Keys)); err != nil {
		return fmt.Errorf("filechannel: %w", err)
	}
	return nil
}

// prepareDirs (steps 2 and 3) creates the missing directories and syncs
// their parents.
func (c *FileChannel) prepareDirs(rc *recovery) error {
	cfg := c.cfg
	rc.dirs = []dirRole{{cfg.CheckpointDir, "CheckpointDir"}}
	if cfg.BackupCheckpointDir != "" {
		rc.dirs = append(rc.dirs, dirRole{cfg.BackupCheckpointDir, "BackupCheckpointDir"})
	}
	for i, d := range cfg.DataDirs {
		rc.dirs = append(rc.dirs, dirRole{d, fmt.Sprintf("DataDirs[%d]", i)})
	}
	var paths []string
	for _, r := range rc.dirs {
		if err := prepareDir(c.fs, r.dir, r.what); err != nil {
			return err
		}
		paths = append(paths, r.dir)
	}
	return syncParents(c.fs, paths)
}

// refusedCheckpoints returns the error of a file of cfg's checkpoint or
// backup directory that must be neither replaced nor overwritten, or nil:
// one a newer release wrote (matching ErrUnsupportedFormat), or one that is
// not a regular file, such as a symbolic link (matching ErrNotRegular),
// as checkpoint.CheckFormat finds them. Whatever replaces or overwrites
// those directories asks it first.
func refusedCheckpoints(cfg Config) error {
	for _, dir := range []string{cfg.CheckpointDir, cfg.BackupCheckpointDir} {
		if dir == "" {
			continue
		}
		if err := checkpoint.CheckFormat(cfg.fs, dir); errors.Is(err, ErrUnsupportedFormat) || errors.Is(err, ErrNotRegular) {
			return err
		}
	}
	return nil
}

// refusedFullReplay returns the error of an entry of cfg's data dirs named
// like a log file that is not a regular file (a symbolic link left where a
// log file was moved away, say), matching ErrNotRegular, or nil: a full
// replay would not read it, so nothing would say whether committed events
// were left out (replay.NeededNotRegular). Whatever replaces the checkpoint
// with a full replay's asks it first, before anything is changed.
func refusedFullReplay(cfg Config) error {
	logs, err := logfile.OpenSet(logfile.SetOptions{FS: cfg.fs, Dirs: cfg.DataDirs, AllowDuplicates: true})
	if err != nil {
		return nil // the replay's listing reports it
	}
	defer logs.Close()
	return replay.NeededNotRegular(logs, nil)
}

// lockDirs (step 4) locks in_use.lock in every directory, unless the caller
// holds the locks already (Rebuild, Repair).
func (c *FileChannel) lockDirs(rc *recovery) error {
	if c.dirsLocked {
		return nil
	}
	for _, r := range rc.dirs {
		l, err := c.fs.Lock(filepath.Join(r.dir, LockFileName), vfs.FileMode(c.fs))
		if errors.Is(err, vfs.ErrLocked) {
			return fmt.Errorf("%w: %s %s", ErrLocked, r.what, r.dir)
		}
		if err != nil {
			return fmt.Errorf("filechannel: lock %s: %w", r.dir, err)
		}
		c.locks = append(c.locks, l)
	}
	return nil
}

// claimDirs (step 4b) refuses a directory of another channel and records
// this channel's identity in each directory that has none yet, and in a
// checkpoint or backup dir whose damaged channel.id every data dir vouches
// for (healed: logged and counted in Stats.ChannelIDsHealed).
// owner.ReadOwners has the rules, docs/format.md §1.1 the file. Nothing
// is written before every directory is judged, and the keys checked (step
// 4c) with the channel's id: an Open refused for a key changes no file.
func (c *FileChannel) claimDirs(rc *recovery) error {
	own, err := owner.ReadOwners(ownerOptions(c.cfg))
	if err != nil {
		return opErr("read channel ids", err)
	}
	if err := own.Err(); err != nil {
		return opErrNote("open", err, " (nothing was changed)")
	}
	c.id = logfile.ChannelID(own.ID)
	if err := c.checkKeys(rc); err != nil {
		return err
	}
	rec := owner.Owner{ID: own.ID, CheckpointDir: own.CheckpointDir}
	for _, d := range own.Dirs {
		if !d.Write {
			continue
		}
		write := checkpoint.WriteOwner
		if d.Data {
			write = logfile.WriteOwner
		}
		if err := write(c.fs, d.Dir, rec); err != nil {
			return opErr("record channel id", err)
		}
		if d.Healed != nil {
			c.stats.channelIDsHealed++
			c.log.Warn("healed a damaged channel.id: wrote it again from what every data dir's records", "dir", d.Dir, "role", d.Role,
				"channel_id", own.ID.String(), "checkpoint_dir", own.CheckpointDir, "damage", d.Healed)
			continue
		}
		c.log.Info("recorded the channel id", "dir", d.Dir, "role", d.Role, "channel_id", own.ID.String(),
			"checkpoint_dir", own.CheckpointDir, "new_channel", own.New, "was", ownerString(d.Found))
	}
	return nil
}

// ownerString describes what a channel.id recorded, for the log.
func ownerString(o *owner.Owner) string {
	if o == nil {
		return "none"
	}
	return o.ID.String() + " " + o.CheckpointDir
}

// loadCheckpoint (step 5) opens the checkpoint, falling back to the backup
// and then to a fresh one (a full replay); rc.source says which. An I/O or
// permission error fails Open: it says nothing about the checkpoint's
// contents, so the checkpoint is not thrown away.
func (c *FileChannel) loadCheckpoint(rc *recovery) error {
	dir, backup := c.cfg.CheckpointDir, c.cfg.BackupCheckpointDir
	// A fallback would replace the checkpoint or restore the backup, and
	// the next checkpoint overwrites the backup: files a newer release
	// wrote, and links or other entries that are not files, are refused
	// first.
	if err := refusedCheckpoints(c.cfg); err != nil {
		return opErr("open checkpoint", err)
	}
	ck, st, err := c.openCheckpointSet(rc, dir)
	if err == nil {
		rc.ck, rc.st, rc.source = ck, st, replay.FromCheckpoint
		return nil
	}
	damaged := errors.Is(err, ErrCorrupt) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, checkpoint.ErrIncomplete)
	if !errors.Is(err, checkpoint.ErrNoCheckpoint) && !(errors.Is(err, checkpoint.ErrBadCheckpoint) && damaged) {
		return opErr("open checkpoint", err)
	}
	if errors.Is(err, checkpoint.ErrBadCheckpoint) {
		c.log.Warn("checkpoint unusable", "dir", dir, "err", err)
	}
	if backup != "" && checkpoint.HasBackup(c.fs, backup) {
		if rerr := checkpoint.RestoreBackup(c.fs, backup, dir); rerr != nil {
			c.log.Warn("restore backup checkpoint failed", "dir", backup, "err", rerr)
		} else if ck, st, berr := c.openCheckpointSet(rc, dir); berr == nil {
			c.log.Info("using backup checkpoint", "dir", backup, "write_order_id", st.WriteOrderID)
			rc.ck, rc.st, rc.source = ck, st, replay.FromBackup
			return nil
		} else {
			c.log.Warn("backup checkpoint unusable", "dir", backup, "err", berr)
		}
	}
	if err := refusedFullReplay(c.cfg); err != nil {
		return opErr("open", err) // before the checkpoint dir is emptied
	}
	if errors.Is(err, checkpoint.ErrBadCheckpoint) {
		c.log.Warn("no usable checkpoint: replaying every log file in full", "dir", dir)
	}
	if err := checkpoint.Remove(c.fs, dir); err != nil {
		return opErr("remove bad checkpoint", err)
	}
	if ck, err = checkpoint.Create(c.fs, dir, c.cfg.Capacity); err != nil {
		return opErr("full replay", err)
	}
	rc.ck, rc.st, rc.source, rc.created = ck, nil, replay.FromFullReplay, true
	return nil
}

// openCheckpointSet opens the checkpoint set in dir, all or nothing
// (checkpoint.OpenSet has the rules: a set not at one write-order id is
// incomplete, a damaged part matches checkpoint.ErrBadCheckpoint). Without
// a catalog the checkpoint is an older release's: the unnamed group alone,
// on the top ring.
func (c *FileChannel) openCheckpointSet(rc *recovery, dir string) (*checkpoint.Checkpoint, *checkpoint.State, error) {
	set, err := checkpoint.OpenSet(c.fs, dir)
	if err != nil {
		return nil, nil, err
	}
	rc.catalog, rc.set = set.Catalog, set
	return set.Top, set.State, nil
}

// undoRolls runs when a step of Open fails: it deletes the log files
// rollAll created, which hold nothing yet, so that Opens retried (on a full
// disk, say) do not leave one more empty file each.
func (c *FileChannel) undoRolls() error {
	if c.logs == nil {
		return nil
	}
	if err := c.logs.RemoveEmptyActive(); err != nil {
		return fmt.Errorf("filechannel: remove the log files Open created: %w", err)
	}
	return nil
}

// undoCreatedCheckpoint runs when a step of Open fails: it removes the
// checkpoint this Open created (rc.created) unless a checkpoint was written
// into it since. Such a file holds an empty or half-migrated ring marked
// incomplete, which the next Open would discard anyway (the logs hold every
// event), and can be large: leaving it would only keep its disk space. A
// checkpoint Open found or restored from the backup, or one written by
// this Open, is never removed.
func (c *FileChannel) undoCreatedCheckpoint(rc *recovery) error {
	if !rc.created || c.lastCkptTime.Load() != 0 {
		return nil
	}
	var errs []error
	if c.top != nil {
		errs = append(errs, c.top.Close())
		if c.main != nil && c.main.ckpt == c.top {
			c.main.ckpt = nil
		}
		c.top = nil
	}
	if err := checkpoint.Remove(c.fs, c.cfg.CheckpointDir); err != nil {
		errs = append(errs, err)
	} else {
		c.log.Info("removed the checkpoint this failed Open had created", "dir", c.cfg.CheckpointDir)
	}
	if err := errors.Join(errs...); err != nil {
		return opErr("remove the checkpoint Open created", err)
	}
	return nil
}

// replay (step 7) lists the data dirs' log files and replays what follows
// the checkpoint onto the queue.
func (c *FileChannel) replay(rc *recovery) error {
	logs, err := logfile.OpenSet(logfile.SetOptions{FS: c.fs, Dirs: c.cfg.DataDirs, Logger: c.log,
		MaxFileSize: c.cfg.MaxFileSize, MaxOpenReaders: c.cfg.MaxOpenLogFiles,
		OnCreate: c.metrics.logCreated, OnDelete: c.metrics.logDeleted, FileStart: c.fileStart,
		Reserve: max(c.cfg.SpaceReserve, 0), Preallocate: max(c.cfg.Preallocate, 0),
		PreallocateMinFree: max(c.cfg.MinimumRequiredSpace, 0) + max(c.cfg.SpaceReserve, 0),
		Keys:               logKeys(c.cfg.Keys), ChannelID: c.id,
		Retention: logfile.Retention{MaxAge: c.cfg.Retention.MaxAge, MaxBytes: c.cfg.Retention.MaxBytes}, Now: c.cfg.now,
		BeforeDelete: c.persistDedup, RecycleLogFiles: c.cfg.RecycleLogFiles})
	if err != nil {
		return fmt.Errorf("filechannel: %w", err)
	}
	c.logs = logs
	rc.fresh = map[uint32]*groupState{}
	ropts := replay.Options{Logs: logs, Checkpoint: rc.st, Logger: c.log,
		Groups: c.replaySeeds(rc), NextGroupID: c.nextGroupID, NewQueue: c.newReplayQueue(rc), ReadJournal: c.readJournal,
		DedupHeader: c.cfg.Dedup.Header}
	if c.main != nil {
		ropts.Queue = c.main.queue
	}
	if c.cfg.ReplayProgress != nil {
		ropts.Progress, ropts.ProgressEvery = c.cfg.ReplayProgress, c.cfg.ReplayProgressEvery
	}
	res, err := replay.Run(ropts)
	if err != nil {
		return fmt.Errorf("filechannel: %w", err)
	}
	rc.res = res
	c.log.Info("replay done", "source", rc.source, "records", res.Records, "skipped", res.Skipped,
		"puts", res.Puts, "takes", res.Takes, "returned", res.Returned, "groups", len(res.Groups),
		"duration", res.Duration.Round(time.Microsecond))
	c.stats.replayRecords, c.stats.replaySkipped = res.Records, res.Skipped
	c.stats.replayCorrupt, c.stats.replayDamagedTxs = int64(res.Corrupt), int64(res.DamagedTxs)
	return nil
}

// removeUnfinished (step 8) deletes the log files a crash left unfinished
// while they were created.
func (c *FileChannel) removeUnfinished(*recovery) error {
	for _, f := range c.logs.Listed() {
		if !f.Unfinished {
			continue
		}
		c.log.Warn("removing a log file left empty by a crash during its creation", "file", f.Path)
		if err := c.logs.RemoveFile(f); err != nil {
			return fmt.Errorf("filechannel: %w", err)
		}
	}
	return nil
}

// cutTornTails (step 9) cuts the torn tail of every log file whose scan
// ended on bytes that are not a record: a write that a crash cut short, or
// damage after the last record. The bytes are kept for the operator, and
// later replays and readers see a clean end. It also trims the zeros that
// a run which did not close a file left laid out after its records.
func (c *FileChannel) cutTornTails(rc *recovery) error {
	for _, l := range rc.res.Logs {
		if l.Tail == logfile.TailClean && l.Size > l.End {
			// Zeros laid out ahead of the writes of a run that did not
			// close the file (Config.Preallocate): give the space back.
			// Best effort: zeros are a clean end whether or not they go.
			if _, err := c.logs.CutTail(l.File(), l.End); err != nil {
				c.log.Warn("cannot trim the zeros after a log file's records", "file", l.Path, "valid_end", l.End, "err", err)
			} else {
				c.log.Info("trimmed the zeros laid out after a log file's records", "file", l.Path, "valid_end", l.End, "bytes", l.Size-l.End)
			}
			continue
		}
		if l.Tail != logfile.TailTorn {
			continue
		}
		keep, err := c.logs.CutTail(l.File(), l.End)
		if errors.Is(err, syscall.ENOSPC) {
			// CutTail changes the log only once the copy is kept. The
			// file is never appended to again, and every scan stops at
			// its valid end: leave the tail to an Open with room.
			c.log.Warn("no room to keep a torn tail: left in place for now", "file", l.Path, "valid_end", l.End,
				"bytes", l.Size-l.End, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("filechannel: %w", err)
		}
		c.stats.tornTails++
		c.log.Warn("cut a torn tail from a log file", "file", l.Path, "valid_end", l.End,
			"bytes", l.Size-l.End, "kept_in", keep, "reason", l.TailErr)
	}
	return nil
}

// syncReplayed (step 10) fsyncs every log file replay read records from.
// Replay read them through the page cache: after a failed fsync (or with
// NoSync) a killed process leaves records there that a power loss would
// still take away, and the checkpoint of step 14 will say they are covered.
func (c *FileChannel) syncReplayed(rc *recovery) error {
	for _, l := range rc.res.Logs {
		if l.End > l.Start {
			if err := vfs.SyncFile(c.fs, l.Path); err != nil {
				return fmt.Errorf("filechannel: %w", err)
			}
		}
	}
	return nil
}

// startLogs (step 11) sets the ids above everything seen and hands the log
// set the valid length of every file (readers are opened by takes, at most
// MaxOpenLogFiles at a time).
func (c *FileChannel) startLogs(rc *recovery) error {
	res := rc.res
	c.nextTxID.Store(res.MaxTxID + 1)
	ends := make(map[uint32]int64, len(res.Logs))
	for _, l := range res.Logs {
		ends[l.ID] = l.End
	}
	err := c.logs.Start(logfile.Recovered{MaxWriteOrderID: res.MaxWriteOrderID, MaxFileID: res.MaxFileID,
		Ends: ends, Completes: res.Completes, Spilled: res.Spilled, Index: res.Index})
	if err != nil {
		return fmt.Errorf("filechannel: %w", err)
	}
	c.stats.replayDuration = time.Since(rc.start)
	return nil
}

// resizeQueue (step 12) moves each group's queue into a checkpoint of its
// configured capacity where needed, and starts the capacity gates
// (resizeGroups); then it starts a new delivery journal holding the
// recovered counts (openJournal; replay merged the old one's).
func (c *FileChannel) resizeQueue(rc *recovery) error {
	c.stats.recoveredFrom = rc.source
	if err := c.resizeGroups(rc); err != nil {
		return err
	}
	if rc.groupsChanged && c.stats.recoveredFrom == rc.source {
		c.stats.recoveredFrom += ", groups changed"
	}
	if err := c.openJournal(); err != nil {
		return err
	}
	return c.findStaleGroupDirs()
}

// rollAll (step 13) starts a new log file in every data dir: old ones may
// end in a torn record and are never appended to again. A dir whose disk
// has no room for the new file (the roll removed its space reserve) is left
// without one: its first append rolls.
func (c *FileChannel) rollAll(*recovery) error {
	for i := range c.logs.NumDirs() {
		err := c.logs.Roll(i)
		if errors.Is(err, syscall.ENOSPC) {
			c.log.Warn("no room for a new log file: the data dir's first append makes it", "dir", c.logs.DirPath(i), "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("filechannel: %w", err)
		}
	}
	return nil
}

// finishReclaim (step 13b) deletes the log files a deletion round of the
// previous run's last checkpoint was to delete, when the crash made only
// part of the round durable: a file whose events a missing file's records
// completed (took) must go before the checkpoint of step 14, or any later
// one, is written, since a power loss while it is written leaves a full
// replay, which would read that file's events without those takes and
// bring them back (logfile.Set.FinishReclaim). Neither the recovered
// channel nor the checkpoint it started from (still the one a power loss
// meanwhile leaves) may need them. A failure is logged: the files stay, as
// they were.
func (c *FileChannel) finishReclaim(rc *recovery) error {
	needed := checkpointNeeds(rc)
	unheld := func(cand []uint32) []uint32 {
		return slices.DeleteFunc(c.unheld(cand), func(id uint32) bool { return needed[id] })
	}
	n, err := c.logs.FinishReclaim(unheld)
	if err != nil {
		c.log.Error("delete the log files an interrupted deletion left", "deleted", n, "err", err)
	} else if n > 0 {
		c.log.Warn("deleted the log files a crash left while deleting them", "deleted", n)
	}
	return nil
}

// checkpointNeeds returns the log files the checkpoint Open started from
// points into: queued (its rings' Refs), waiting, or in flight at its W.
func checkpointNeeds(rc *recovery) map[uint32]bool {
	needed := map[uint32]bool{}
	states := []*checkpoint.State{rc.st}
	for _, st := range rc.groupStates {
		states = append(states, st)
	}
	for _, st := range states {
		if st == nil {
			continue
		}
		for _, l := range st.Logs {
			if l.Refs > 0 {
				needed[l.FileID] = true
			}
		}
		for _, tx := range slices.Concat(st.InflightPuts, st.InflightTakes) {
			for _, p := range tx.Pointers {
				needed[p.FileID()] = true
			}
		}
	}
	if rc.catalog != nil {
		for _, g := range rc.catalog.Groups {
			for _, w := range g.Waiting {
				needed[eventqueue.Pointer(w.Pointer).FileID()] = true
			}
		}
	}
	return needed
}

// checkpointAfterReplay (step 14) writes a checkpoint, which makes the next
// recovery start from here and deletes what is no longer needed, unless
// the main checkpoint was used unchanged and replay found nothing after it
// (with Retention, it is written all the same: its Reclaim finds the
// retained files).
func (c *FileChannel) checkpointAfterReplay(rc *recovery) error {
	if rc.source == replay.FromCheckpoint && c.stats.recoveredFrom == rc.source && rc.res.Records == rc.res.Skipped &&
		len(c.staleGroupDirs) == 0 && c.cfg.Retention == (Retention{}) {
		c.lastCkptW.Store(rc.st.WriteOrderID)
		return nil
	}
	err := c.checkpoint()
	if errors.Is(err, syscall.ENOSPC) && c.logs.ReleaseReserves() {
		err = c.checkpoint() // on the room the data dirs' reserves held
	}
	if errors.Is(err, syscall.ENOSPC) {
		// The logs hold every event, and the periodic checkpoints try
		// again (Health reports the failure meanwhile): open, so that
		// sinks can drain the disk.
		c.log.Error("checkpoint after replay failed for lack of space: opening all the same, so that sinks can drain the channel",
			"err", err)
		return nil
	}
	if err != nil {
		return opErr("checkpoint after replay", err)
	}
	return nil
}
