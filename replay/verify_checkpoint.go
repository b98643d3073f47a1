package replay

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Loading the checkpoint and the backup the way the channel's Open does
// (Verify's check 1), into a vfs.MemFS, and checking a checkpoint's own
// bookkeeping (check 5).

// pickCheckpoint loads the checkpoint and the backup into the MemFS and
// returns the one recovery starts from, as the channel picks it: the
// checkpoint if complete, else the backup if complete, else nil (a full
// replay). It fills in the report's Checkpoint, Backup and RecoveredFrom,
// and a problem for each one that is not usable.
func (v *verifier) pickCheckpoint() (*checkpoint.Set, error) {
	primary, err := v.loadCheckpoint()
	if err != nil {
		return nil, err
	}
	var backup *checkpoint.Set
	if v.opts.BackupCheckpointDir == "" {
		v.rep.Backup = CheckpointInfo{State: StateNone}
	} else if backup, err = v.loadBackup(); err != nil {
		return nil, err
	}
	switch {
	case primary != nil:
		v.rep.RecoveredFrom = FromCheckpoint
		return primary, nil
	case backup != nil:
		v.rep.RecoveredFrom = FromBackup
		return backup, nil
	}
	v.rep.RecoveredFrom = FromFullReplay
	return nil, nil
}

// loadCheckpoint copies the checkpoint into the MemFS, at the same path,
// and opens it there. It returns nil when the checkpoint is not complete.
func (v *verifier) loadCheckpoint() (*checkpoint.Set, error) {
	dir := v.opts.CheckpointDir
	info := &v.rep.Checkpoint
	info.Dir = dir
	if err := v.copyDir(dir, false); err != nil {
		return nil, err
	}
	set, err := checkpoint.OpenSet(v.mem, dir)
	return v.opened(info, set, err, ProblemCheckpointMissing, ProblemCheckpointIncomplete, ProblemCheckpointCorrupt)
}

// loadBackup copies the backup into the MemFS, at the same path, and opens
// it there. It returns nil when the backup is not complete. The channel
// restores a backup (checkpoint.RestoreBackup) into the checkpoint dir
// before opening it; the restore copies the files byte for byte, so opening
// the copy in place gives the same result, with errors naming the backup's
// files.
func (v *verifier) loadBackup() (*checkpoint.Set, error) {
	dir := v.opts.BackupCheckpointDir
	info := &v.rep.Backup
	info.Dir = dir
	if err := v.copyDir(dir, true); err != nil {
		return nil, err
	}
	// Refused even without backupComplete: the channel's next backup
	// would overwrite the files.
	if err := checkpoint.CheckFormat(v.mem, dir); err != nil {
		return nil, err
	}
	if !checkpoint.HasBackup(v.mem, dir) {
		info.State, info.Err = StateMissing, checkpoint.ErrNoBackup
		v.rep.add(ProblemBackupMissing, dir, -1, "no complete backup (no %s marker)", checkpoint.BackupCompleteName)
		return nil, nil
	}
	set, err := checkpoint.OpenSet(v.mem, dir)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		// backupComplete without the files: RestoreBackup would fail.
		err = fmt.Errorf("%w: %w", checkpoint.ErrBadCheckpoint, err)
	}
	return v.opened(info, set, err, ProblemBackupMissing, ProblemBackupIncomplete, ProblemBackupCorrupt)
}

// opened classifies the result of checkpoint.OpenSet in the MemFS. The
// real files were already read without an I/O error, so every failure here
// is about their contents: files a newer release wrote are returned as the
// error, anything else is a problem (one for each group checkpoint that
// spoils the set).
func (v *verifier) opened(info *CheckpointInfo, set *checkpoint.Set, err error,
	missing, incomplete, bad ProblemKind) (*checkpoint.Set, error) {
	switch {
	case errors.Is(err, corrupt.ErrUnsupportedFormat):
		return nil, err // not damage: this build cannot check them
	case err == nil:
		v.closers = append(v.closers, set)
		if set.Catalog != nil {
			for _, g := range set.Catalog.Groups {
				v.ref(g.GroupInfo())
			}
		}
		st := set.State
		info.State = StateComplete
		info.WriteOrderID, info.Capacity, info.Head, info.Size = st.WriteOrderID, st.Capacity, st.Head, st.Size
		info.Time, info.LogStates, info.Catalog = st.Time, len(st.Logs), set.Catalog
		return set, nil
	}
	info.Err = err
	parts := []error{err}
	if ges := groupErrors(err); len(ges) > 0 {
		parts = ges
	}
	for i, part := range parts {
		state := v.unusable(info.Dir, part, missing, incomplete, bad)
		if i == 0 {
			info.State = state
		}
	}
	return nil, nil
}

// unusable reports the problem err makes of the checkpoint set in dir (a
// group checkpoint's, when err is a *checkpoint.GroupError; the catalog's,
// when it is a *checkpoint.CatalogError) and returns the State it gives the
// set.
func (v *verifier) unusable(dir string, err error, missing, incomplete, bad ProblemKind) string {
	var g *GroupRef
	var ge *checkpoint.GroupError
	if errors.As(err, &ge) {
		g = v.ref(ge.Group.GroupInfo())
	}
	var ce *checkpoint.CatalogError
	switch {
	case errors.Is(err, checkpoint.ErrIncomplete):
		file := filepath.Join(dir, checkpoint.CheckpointName)
		switch {
		case ge != nil:
			file = filepath.Join(ge.Dir, checkpoint.CheckpointName)
		case errors.As(err, &ce):
			file = ce.File // at another W
		}
		v.rep.addGroup(g, incomplete, file, -1, "%v", err)
		return StateIncomplete
	case errors.Is(err, checkpoint.ErrNoCheckpoint) && ge == nil:
		v.rep.add(missing, dir, -1, "no checkpoint")
		return StateMissing
	}
	file, off := dir, int64(-1)
	var cerr *corrupt.Error
	switch {
	case errors.As(err, &cerr):
		file, off = cerr.File, cerr.Offset
	case ge != nil:
		file = ge.Dir
	}
	v.rep.addGroup(g, bad, file, off, "%v", err)
	return StateCorrupt
}

// groupErrors returns the group checkpoints' errors that checkpoint.OpenSet
// joined into err, if it is those.
func groupErrors(err error) []error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []error
	for _, e := range errs {
		if ge := (*checkpoint.GroupError)(nil); errors.As(e, &ge) {
			out = append(out, ge)
		}
	}
	return out
}

// copyDir copies the checkpoint files of dir (and backupComplete if
// backup) that exist into the same directory of the MemFS.
func (v *verifier) copyDir(dir string, backup bool) error {
	if err := v.mem.MkdirAll(dir, vfs.DirMode(v.mem)); err != nil {
		return err
	}
	names := []string{checkpoint.CheckpointName, checkpoint.MetaName, checkpoint.InflightPutsName, checkpoint.InflightTakesName}
	if backup {
		names = append(names, checkpoint.BackupCompleteName)
	}
	names = append(names, checkpoint.CatalogName)
	for _, name := range names {
		if err := v.copyFile(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return v.copyGroupDirs(dir)
}

// copyGroupDirs copies the consumer groups' checkpoint dirs of dir (every
// group-N present, listed in the catalog or not: the channel refuses a
// newer one of any) into the MemFS. A group-N entry that is not a
// directory is not copied: a not-a-regular-file problem (the channel
// refuses it).
func (v *verifier) copyGroupDirs(dir string) error {
	names, err := v.opts.FS.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		id, ok := checkpoint.ParseGroupDirName(name)
		if !ok {
			continue
		}
		gdir := checkpoint.GroupDir(dir, id)
		fi, err := v.opts.FS.Lstat(gdir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the listing
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			v.rep.add(ProblemNotRegularFile, gdir, -1,
				"%s named like a consumer group's checkpoint dir: not read (as if missing); the channel refuses to open while it is there; move it away",
				vfs.TypeName(fi.Mode()))
			continue
		}
		if err := v.mem.MkdirAll(gdir, vfs.DirMode(v.mem)); err != nil {
			return err
		}
		for _, f := range []string{checkpoint.CheckpointName, checkpoint.MetaName, checkpoint.InflightPutsName, checkpoint.InflightTakesName} {
			if err := v.copyFile(filepath.Join(gdir, f)); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyChunk is the unit of copyFile.
const copyChunk = 1 << 20

// copyFile copies src of the real FS to the same path of the MemFS,
// without its tail of zeros (copiesFS); a missing src is not copied, nor is one that is not a regular file (a
// not-a-regular-file problem: the channel refuses it).
func (v *verifier) copyFile(src string) (err error) {
	in, err := v.opts.FS.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, vfs.ErrNotRegular) {
		kind := "not a regular file"
		if fi, lerr := v.opts.FS.Lstat(src); lerr == nil {
			kind = vfs.TypeName(fi.Mode())
		}
		v.rep.add(ProblemNotRegularFile, src, -1,
			"%s named like a checkpoint file: not read (as if missing); the channel refuses to open while it is there; move it away", kind)
		return nil
	}
	if err != nil {
		return err
	}
	defer func() {
		if cerr := in.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", src, cerr)
		}
	}()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := v.mem.Create(src, vfs.FileMode(v.mem))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	kept, length, err := copyInto(out, in, src, fi.Size(), make([]byte, copyChunk))
	if err != nil {
		return err
	}
	if kept < length {
		v.mem.setLength(src, length)
	}
	return nil
}

// checkRefs compares the log states of a checkpoint of the set (the top
// level's, or named group g's in its group dir) with its ring and in-flight
// pointers (check 5). meta is its checkpoint.meta.
func (v *verifier) checkRefs(meta string, g *GroupRef, st *checkpoint.State, ring []eventqueue.Pointer, inflight []rolePointer) {
	file := meta
	counts := map[uint32]int{}
	for _, p := range ring {
		if p != 0 {
			counts[p.FileID()]++
		}
	}
	states := make(map[uint32]bool, len(st.Logs))
	for _, l := range st.Logs {
		states[l.FileID] = true
		if n := counts[l.FileID]; n != l.Refs {
			v.rep.addGroup(g, ProblemRefcountMismatch, file, -1, "log file %d has refs %d, the ring holds %d pointers into it", l.FileID, l.Refs, n)
		}
	}
	ids := make([]uint32, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	for _, rp := range inflight {
		if _, ok := counts[rp.p.FileID()]; !ok {
			ids = append(ids, rp.p.FileID())
			counts[rp.p.FileID()] = 0
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !states[id] {
			v.rep.addGroup(g, ProblemMissingLogState, file, -1, "the checkpoint points into log file %d (%d queued) but has no state for it", id, counts[id])
		}
	}
}
