package replay

import (
	"errors"
	"fmt"
	"io"
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
func (v *verifier) pickCheckpoint() (*loadedCheckpoint, error) {
	primary, err := v.loadCheckpoint()
	if err != nil {
		return nil, err
	}
	var backup *loadedCheckpoint
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

// loadedCheckpoint is a checkpoint opened in the MemFS.
type loadedCheckpoint struct {
	ck *checkpoint.Checkpoint
	st *checkpoint.State
}

// loadCheckpoint copies the checkpoint into the MemFS, at the same path,
// and opens it there. It returns nil when the checkpoint is not complete.
func (v *verifier) loadCheckpoint() (*loadedCheckpoint, error) {
	dir := v.opts.CheckpointDir
	info := &v.rep.Checkpoint
	info.Dir = dir
	if err := v.copyDir(dir, false); err != nil {
		return nil, err
	}
	ck, st, err := checkpoint.Open(v.mem, dir)
	return v.opened(info, ck, st, err, ProblemCheckpointMissing, ProblemCheckpointIncomplete, ProblemCheckpointCorrupt)
}

// loadBackup copies the backup into the MemFS, at the same path, and opens
// it there. It returns nil when the backup is not complete. The channel
// restores a backup (checkpoint.RestoreBackup) into the checkpoint dir
// before opening it; the restore copies the files byte for byte, so opening
// the copy in place gives the same result, with errors naming the backup's
// files.
func (v *verifier) loadBackup() (*loadedCheckpoint, error) {
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
	ck, st, err := checkpoint.Open(v.mem, dir)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		// backupComplete without the files: RestoreBackup would fail.
		err = fmt.Errorf("%w: %w", checkpoint.ErrBadCheckpoint, err)
	}
	return v.opened(info, ck, st, err, ProblemBackupMissing, ProblemBackupIncomplete, ProblemBackupCorrupt)
}

// opened classifies the result of checkpoint.Open in the MemFS. The real
// files were already read without an I/O error, so every failure here is
// about their contents: files a newer release wrote are returned as the
// error, anything else is a problem.
func (v *verifier) opened(info *CheckpointInfo, ck *checkpoint.Checkpoint, st *checkpoint.State, err error,
	missing, incomplete, bad ProblemKind) (*loadedCheckpoint, error) {
	switch {
	case errors.Is(err, corrupt.ErrUnsupportedFormat):
		return nil, err // not damage: this build cannot check them
	case err == nil:
		v.closers = append(v.closers, ck)
		info.State = StateComplete
		info.WriteOrderID, info.Capacity, info.Head, info.Size = st.WriteOrderID, st.Capacity, st.Head, st.Size
		info.Time, info.LogStates = st.Time, len(st.Logs)
		return &loadedCheckpoint{ck: ck, st: st}, nil
	case errors.Is(err, checkpoint.ErrIncomplete):
		info.State, info.Err = StateIncomplete, err
		v.rep.add(incomplete, filepath.Join(info.Dir, checkpoint.CheckpointName), -1, "%v", err)
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		info.State, info.Err = StateMissing, err
		v.rep.add(missing, info.Dir, -1, "no checkpoint")
	default:
		info.State, info.Err = StateCorrupt, err
		file, off := info.Dir, int64(-1)
		var ce *corrupt.Error
		if errors.As(err, &ce) {
			file, off = ce.File, ce.Offset
		}
		v.rep.add(bad, file, off, "%v", err)
	}
	return nil, nil
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
	for _, name := range names {
		if err := v.copyFile(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// copyChunk is the unit of copyFile.
const copyChunk = 1 << 20

// copyFile copies src of the real FS to the same path of the MemFS; a
// missing src is not copied, nor is one that is not a regular file (a
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
	if err := out.Truncate(fi.Size()); err != nil { // one allocation
		return err
	}
	buf := make([]byte, copyChunk)
	for off := int64(0); ; {
		n, rerr := in.ReadAt(buf, off)
		if n > 0 {
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				return err
			}
			off += int64(n)
		}
		if errors.Is(rerr, io.EOF) || (rerr == nil && n == 0) {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("read %s: %w", src, rerr)
		}
	}
}

// loadQueue builds the queue the channel builds over a checkpoint (with the
// per-file counts of its log states) and returns a copy of its ring.
func (v *verifier) loadQueue(c *loadedCheckpoint) ([]eventqueue.Pointer, *eventqueue.Queue, error) {
	st := c.st
	refs := map[uint32]int{}
	for _, l := range st.Logs {
		if l.Refs > 0 {
			refs[l.FileID] = l.Refs
		}
	}
	q, err := eventqueue.New(c.ck, c.ck.Capacity(), st.Head, st.Size, refs)
	if err != nil {
		return nil, nil, err // Open checked head and size
	}
	return q.Pointers(), q, nil
}

// checkRefs compares the checkpoint's log states with its ring and
// in-flight pointers (check 5).
func (v *verifier) checkRefs(c *loadedCheckpoint, ring []eventqueue.Pointer, inflight []rolePointer) {
	st := c.st
	file := filepath.Join(v.checkpointDirUsed(), checkpoint.MetaName)
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
			v.rep.add(ProblemRefcountMismatch, file, -1, "log file %d has refs %d, the ring holds %d pointers into it", l.FileID, l.Refs, n)
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
			v.rep.add(ProblemMissingLogState, file, -1, "the checkpoint points into log file %d (%d queued) but has no state for it", id, counts[id])
		}
	}
}

// checkpointDirUsed is the real directory of the checkpoint recovery uses.
func (v *verifier) checkpointDirUsed() string {
	if v.rep.RecoveredFrom == FromBackup {
		return v.opts.BackupCheckpointDir
	}
	return v.opts.CheckpointDir
}
