package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/flumego/filechannel/internal/vfs"
)

// A consumer group N >= 1 keeps its ring in GroupDir(dir, N), a subdirectory
// of the checkpoint directory dir that is a checkpoint directory of its own
// (Create, Open, Write). This file makes, lists and removes those
// subdirectories; Remove, CheckFormat, Backup and RestoreBackup cover them
// through the same helpers. An entry named group-N that is not a directory
// (a symbolic link, never followed, or a file) is refused wherever it is met
// with an error matching vfs.ErrNotRegular, the error of a checkpoint file
// of the wrong type, and nothing is changed.

// CreateGroupDir makes GroupDir(dir, id) in dir, which must exist, with the
// permission bits vfs.DirMode(fsys), and fsyncs dir, so that the new entry
// is durable when it returns. If the group dir exists as a directory it
// makes nothing, but fsyncs dir all the same (the entry an interrupted call
// made may not be durable yet). Id 0 is an error: the unnamed group's ring
// is dir's top-level checkpoint.
func CreateGroupDir(fsys vfs.FS, dir string, id uint32) error {
	if err := createGroupDir(fsys, dir, id); err != nil {
		return fmt.Errorf("create group dir %d in %s: %w", id, dir, err)
	}
	return nil
}

func createGroupDir(fsys vfs.FS, dir string, id uint32) error {
	if id == 0 {
		return errors.New("group 0 has no group dir")
	}
	fi, err := fsys.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is %s, not a directory", dir, vfs.TypeName(fi.Mode()))
	}
	if err := ensureGroupDir(fsys, dir, id); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// ensureGroupDir makes group id's dir in dir unless it exists as a
// directory. The caller fsyncs dir.
func ensureGroupDir(fsys vfs.FS, dir string, id uint32) error {
	p := GroupDir(dir, id)
	if ok, err := isGroupDir(fsys, p); err != nil || ok {
		return err
	}
	if err := fsys.MkdirAll(p, vfs.DirMode(fsys)); err != nil {
		return err
	}
	// MkdirAll follows a link someone made at p since the Lstat.
	if ok, err := isGroupDir(fsys, p); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("mkdir %s: gone right after it was made", p)
	}
	return nil
}

// isGroupDir reports whether the entry p exists as a directory; one that
// is not a directory is a notDirError.
func isGroupDir(fsys vfs.FS, p string) (bool, error) {
	fi, err := fsys.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !fi.IsDir():
		return false, &notDirError{path: p, mode: fi.Mode()}
	}
	return true, nil
}

// RemoveGroupDir removes GroupDir(dir, id): the checkpoint files in it and
// their leftover .tmp files, then the directory, then fsyncs dir, so that
// the removal is durable when it returns. A group dir that does not exist is
// no error (dir is fsynced all the same). One that holds a file of another
// name is an error naming it, and nothing is removed; so is id 0.
func RemoveGroupDir(fsys vfs.FS, dir string, id uint32) error {
	if err := removeGroupDirSynced(fsys, dir, id); err != nil {
		return fmt.Errorf("remove group dir %d in %s: %w", id, dir, err)
	}
	return nil
}

func removeGroupDirSynced(fsys vfs.FS, dir string, id uint32) error {
	if id == 0 {
		return errors.New("group 0 has no group dir")
	}
	if err := removeGroupDir(fsys, dir, id); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// removeGroupDir is RemoveGroupDir without the fsync of dir.
func removeGroupDir(fsys vfs.FS, dir string, id uint32) error {
	p := GroupDir(dir, id)
	if ok, err := isGroupDir(fsys, p); err != nil || !ok {
		return err
	}
	if err := checkGroupDirContents(fsys, p); err != nil {
		return err
	}
	if err := removeFiles(fsys, p); err != nil {
		return err
	}
	return fsys.Remove(p)
}

// checkGroupDirContents returns an error naming the entries of group dir p
// that are not checkpoint files (or their .tmp files), if there are any:
// they are not this package's to delete, and the directory cannot be
// removed while they are there.
func checkGroupDirContents(fsys vfs.FS, p string) error {
	names, err := fsys.List(p)
	if err != nil {
		return err
	}
	var unknown []string
	for _, n := range names {
		base := strings.TrimSuffix(n, tmpSuffix)
		if base != BackupCompleteName && !slices.Contains(checkpointFiles[:], base) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%s holds files this package did not write (%s); move them away", p, strings.Join(unknown, ", "))
	}
	return nil
}

// ListGroupDirs returns, ascending, the ids of the group dirs present in
// the checkpoint directory dir: the entries named group-N (GroupDir) for an
// id N >= 1. Entries of other names are ignored (group-0 and group-007
// included); a group-N entry that is not a directory is an error matching
// vfs.ErrNotRegular. It says what is on disk, not which groups the catalog
// lists.
func ListGroupDirs(fsys vfs.FS, dir string) ([]uint32, error) {
	ids, err := listGroupDirs(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("list group dirs in %s: %w", dir, err)
	}
	return ids, nil
}

func listGroupDirs(fsys vfs.FS, dir string) ([]uint32, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, n := range names {
		id, ok := ParseGroupDirName(n)
		if !ok {
			continue
		}
		if ok, err := isGroupDir(fsys, path(dir, n)); err != nil {
			return nil, err
		} else if ok { // else it went away since List
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// notDirError is the error for an entry named like a group dir that is not
// a directory. It matches vfs.ErrNotRegular, as a checkpoint file of the
// wrong type does, so that a caller that refuses one refuses both.
type notDirError struct {
	path string
	mode fs.FileMode
}

func (e *notDirError) Error() string {
	return fmt.Sprintf("group dir %s is %s, not a directory", e.path, vfs.TypeName(e.mode))
}

func (e *notDirError) Unwrap() error { return vfs.ErrNotRegular }
