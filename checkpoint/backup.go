package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// copyChunk is the unit in which files are copied. Backup skips all-zero
// chunks, so its copy of the checkpoint file is sparse (it is never mapped);
// RestoreBackup writes every chunk, so the restored file, which Open maps, has
// all its blocks allocated.
const copyChunk = 1 << 20

// Backup copies the checkpoint set in srcDir to backupDir, which must exist:
// the top-level checkpoint and, if srcDir has a groups catalog, the catalog
// and the group dir of every group it lists, into the same layout. It is
// called right after a successful write of the set, while the files are
// stable (SetSlot never touches them). Order:
//
//  1. remove backupComplete; fsync backupDir;
//  2. read srcDir's catalog, if there is one, and check that every group
//     it lists (id >= 1) has a group dir;
//  3. copy the four top-level checkpoint files, each to name.tmp, fsync,
//     rename (all-zero chunks are skipped: the copy is sparse);
//  4. remove backupDir's group dirs that the catalog does not list (every
//     one when srcDir has no catalog), their checkpoint files first;
//  5. for each listed group, ascending: make backupDir/group-N if needed
//     (vfs.DirMode), copy its four files as in step 3, fsync the group dir;
//  6. copy the catalog as in step 3 (without one in srcDir: remove
//     backupDir's groups and groups.tmp);
//  7. fsync backupDir, which makes the copies, the new group dirs and the
//     removals durable;
//  8. validate the copied set as Open does, reading without mapping: the
//     top-level checkpoint (header, metadata, inflight files and the ring
//     CRC) and, with a catalog, that it decodes and has the same
//     write-order id W, and that every group dir it lists validates with W;
//  9. publish backupComplete (write-tmp, fsync, rename, fsync backupDir).
//
// Without a catalog in srcDir, and no group dirs or catalog in backupDir,
// steps 4 to 6 do nothing. A crash or error midway, or a copy that fails
// validation (an error wrapping ErrBadCheckpoint), leaves no backupComplete,
// so HasBackup is false until a Backup finishes. A damaged catalog in srcDir
// is an error wrapping ErrBadCheckpoint at step 2; a group-N entry that is
// not a directory, in either dir, an error matching vfs.ErrNotRegular.
func Backup(fsys vfs.FS, srcDir, backupDir string) error {
	if err := backup(fsys, srcDir, backupDir); err != nil {
		return fmt.Errorf("backup checkpoint %s to %s: %w", srcDir, backupDir, err)
	}
	return nil
}

func backup(fsys vfs.FS, srcDir, backupDir string) error {
	if filepath.Clean(srcDir) == filepath.Clean(backupDir) {
		return errors.New("backup dir is the checkpoint dir")
	}
	if err := removeIfExists(fsys, path(backupDir, BackupCompleteName)); err != nil {
		return err
	}
	if err := fsys.SyncDir(backupDir); err != nil {
		return err
	}
	groups, hasCatalog, err := listedGroups(fsys, srcDir)
	if err != nil {
		return err
	}
	if err := copyFiles(fsys, srcDir, backupDir, true); err != nil {
		return err
	}
	if err := removeGroupDirsBut(fsys, backupDir, groups); err != nil {
		return err
	}
	for _, id := range groups {
		if err := copyGroup(fsys, srcDir, backupDir, id, true); err != nil {
			return err
		}
	}
	if hasCatalog {
		err = copyFile(fsys, path(srcDir, CatalogName), path(backupDir, CatalogName), false)
	} else {
		_, err = removeCatalog(fsys, backupDir)
	}
	if err != nil {
		return err
	}
	if err := fsys.SyncDir(backupDir); err != nil {
		return err
	}
	// A checkpoint damaged since its Write must not become the backup. The
	// copy is sparse, so it is validated without mapping it.
	if err := validateSet(fsys, backupDir); err != nil {
		return fmt.Errorf("validate copy: %w", err)
	}
	return vfs.WriteFileAtomic(fsys, path(backupDir, BackupCompleteName), nil)
}

// listedGroups reads dir's catalog and returns the ids (>= 1, ascending) of
// the groups it lists, each checked to have a group dir, and whether dir has
// a catalog at all. A damaged catalog is an error wrapping ErrBadCheckpoint.
func listedGroups(fsys vfs.FS, dir string) (ids []uint32, hasCatalog bool, err error) {
	cat, err := readCatalogIfAny(fsys, dir)
	if err != nil || cat == nil {
		return nil, false, err
	}
	present, err := listGroupDirs(fsys, dir)
	if err != nil {
		return nil, false, err
	}
	for _, g := range cat.Groups {
		if g.ID == 0 {
			continue
		}
		if _, found := slices.BinarySearch(present, g.ID); !found {
			return nil, false, fmt.Errorf("%w: %s lists group %d, which has no group dir %s",
				ErrBadCheckpoint, path(dir, CatalogName), g.ID, GroupDir(dir, g.ID))
		}
		ids = append(ids, g.ID)
	}
	return ids, true, nil
}

// HasBackup reports whether backupDir holds a complete backup (its
// backupComplete marker exists, a regular file: a link of that name is not
// followed, and is no marker).
func HasBackup(fsys vfs.FS, backupDir string) bool {
	ok, _ := hasMarker(fsys, backupDir)
	return ok
}

// hasMarker reports whether backupDir's backupComplete exists as a regular
// file; the error is Lstat's, other than fs.ErrNotExist.
func hasMarker(fsys vfs.FS, backupDir string) (bool, error) {
	fi, err := fsys.Lstat(path(backupDir, BackupCompleteName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil && fi.Mode().IsRegular(), err
}

// RestoreBackup replaces the checkpoint set in dir with the complete backup
// in backupDir. Order:
//
//  1. check, changing nothing if any check fails: backupDir has
//     backupComplete (else ErrNoBackup); no file of either directory was
//     written by a newer release (CheckFormat, else its
//     *corrupt.FormatError); backupDir's catalog, if any, decodes and every
//     group it lists has a group dir;
//  2. remove dir's checkpoint set (Remove: the top-level files, fsync, then
//     the catalog and every group dir, fsync);
//  3. for each group the catalog lists, ascending: make dir/group-N, copy
//     its metadata and inflight files and then its checkpoint file (each
//     to name.tmp, fsync, rename), fsync dir/group-N;
//  4. copy the catalog the same way; fsync dir;
//  5. copy the top-level metadata and inflight files and then the
//     checkpoint file; fsync dir.
//
// Steps 3 and 4 happen only when backupDir has a catalog. Every byte is
// written, zeros included, so that each checkpoint file has all its blocks
// allocated as after Create; a full disk is an error wrapping
// syscall.ENOSPC. The top-level checkpoint file appears last: a crash midway
// leaves an incomplete set without it (ErrNoCheckpoint or ErrBadCheckpoint
// from Open of dir), never a top-level checkpoint without the catalog and
// group dirs that go with it, and the backup intact for another try. The
// copies are byte for byte, so the ring CRCs travel in checkpoint.meta and
// Open validates each restored ring as it would the original.
func RestoreBackup(fsys vfs.FS, backupDir, dir string) error {
	if err := restoreBackup(fsys, backupDir, dir); err != nil {
		return fmt.Errorf("restore checkpoint backup %s to %s: %w", backupDir, dir, err)
	}
	return nil
}

func restoreBackup(fsys vfs.FS, backupDir, dir string) error {
	if filepath.Clean(backupDir) == filepath.Clean(dir) {
		return errors.New("backup dir is the checkpoint dir")
	}
	if ok, err := hasMarker(fsys, backupDir); err != nil {
		return err
	} else if !ok {
		return ErrNoBackup
	}
	for _, d := range []string{backupDir, dir} {
		if err := CheckFormat(fsys, d); err != nil {
			return err
		}
	}
	groups, hasCatalog, err := listedGroups(fsys, backupDir)
	if err != nil {
		return err
	}
	if err := Remove(fsys, dir); err != nil {
		return err
	}
	if hasCatalog {
		for _, id := range groups {
			if err := copyGroup(fsys, backupDir, dir, id, false); err != nil {
				return err
			}
		}
		if err := copyFile(fsys, path(backupDir, CatalogName), path(dir, CatalogName), false); err != nil {
			return err
		}
		// The group dirs and the catalog are durable before the top-level
		// checkpoint that needs them appears.
		if err := fsys.SyncDir(dir); err != nil {
			return err
		}
	}
	if err := copyFiles(fsys, backupDir, dir, false); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// copyFiles copies the four checkpoint files from srcDir to dstDir (see
// copyFile). With skipZeros (a backup) in checkpointFiles order, the slot
// file first; without (a restore) in reverse order, so that the slot file,
// without which the copy is no checkpoint, appears last. The caller fsyncs
// dstDir.
func copyFiles(fsys vfs.FS, srcDir, dstDir string, skipZeros bool) error {
	for i := range checkpointFiles {
		name := checkpointFiles[i]
		if !skipZeros {
			name = checkpointFiles[len(checkpointFiles)-1-i]
		}
		if err := copyFile(fsys, path(srcDir, name), path(dstDir, name), skipZeros); err != nil {
			return err
		}
	}
	return nil
}

// copyGroup copies group id's dir from srcDir to dstDir: it makes the
// destination group dir if needed, copies the four files into it
// (copyFiles) and fsyncs it. The caller fsyncs dstDir.
func copyGroup(fsys vfs.FS, srcDir, dstDir string, id uint32, skipZeros bool) error {
	if err := ensureGroupDir(fsys, dstDir, id); err != nil {
		return err
	}
	dst := GroupDir(dstDir, id)
	if err := copyFiles(fsys, GroupDir(srcDir, id), dst, skipZeros); err != nil {
		return err
	}
	return fsys.SyncDir(dst)
}

// removeGroupDirsBut removes dir's group dirs other than those of keep
// (ascending). The caller fsyncs dir.
func removeGroupDirsBut(fsys vfs.FS, dir string, keep []uint32) error {
	ids, err := listGroupDirs(fsys, dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, found := slices.BinarySearch(keep, id); found {
			continue
		}
		if err := removeGroupDir(fsys, dir, id); err != nil {
			return err
		}
	}
	return nil
}

// Remove deletes the checkpoint set in dir. First backupComplete and the
// top-level checkpoint, metadata and inflight files with their leftover .tmp
// files, and fsyncs dir; then, if there are any, the groups catalog (and
// groups.tmp) and every group dir (its checkpoint files, then the
// directory), and fsyncs dir again. The top level goes first, durably, so
// that no crash leaves a top-level checkpoint without its catalog: it would
// pass for an older release's channel with one unnamed group. Missing files
// are not an error; the channel's lock and unknown files at the top level
// are left alone. A group dir holding a file of another name is an error
// naming it, as is a group-N entry that is not a directory (matching
// vfs.ErrNotRegular); both are found before anything is removed.
func Remove(fsys vfs.FS, dir string) error {
	if err := remove(fsys, dir); err != nil {
		return fmt.Errorf("remove checkpoint in %s: %w", dir, err)
	}
	return nil
}

func remove(fsys vfs.FS, dir string) error {
	ids, err := listGroupDirs(fsys, dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := checkGroupDirContents(fsys, GroupDir(dir, id)); err != nil {
			return err
		}
	}
	if err := removeFiles(fsys, dir); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	hadCatalog, err := removeCatalog(fsys, dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := removeGroupDir(fsys, dir, id); err != nil {
			return err
		}
	}
	if !hadCatalog && len(ids) == 0 {
		return nil
	}
	return fsys.SyncDir(dir)
}

// removeFiles removes backupComplete and the four checkpoint files of dir,
// with their .tmp files, without the directory fsync.
func removeFiles(fsys vfs.FS, dir string) error {
	var errs []error
	for _, name := range append([]string{BackupCompleteName}, checkpointFiles[:]...) {
		for _, n := range [...]string{name, name + tmpSuffix} {
			if err := removeIfExists(fsys, path(dir, n)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeCatalog removes dir's groups file and groups.tmp, without the
// directory fsync, and reports whether there was either.
func removeCatalog(fsys vfs.FS, dir string) (bool, error) {
	var found bool
	var errs []error
	for _, n := range [...]string{CatalogName, CatalogName + tmpSuffix} {
		err := fsys.Remove(path(dir, n))
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	return found, errors.Join(errs...)
}

func removeIfExists(fsys vfs.FS, name string) error {
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// copyFile copies src to dst through dst.tmp: write, fsync, close, rename.
// The caller fsyncs dst's directory. With skipZeros, all-zero chunks are not
// written, so the copy has holes there; without, every byte is written.
func copyFile(fsys vfs.FS, src, dst string, skipZeros bool) error {
	in, err := fsys.Open(src)
	if err != nil {
		return err
	}
	err = copyInto(fsys, in, dst, skipZeros)
	if cerr := in.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close %s: %w", src, cerr)
	}
	return err
}

func copyInto(fsys vfs.FS, in vfs.File, dst string, skipZeros bool) error {
	tmp := dst + tmpSuffix
	if err := removeIfExists(fsys, tmp); err != nil {
		return err
	}
	out, err := fsys.Create(tmp, vfs.FileMode(fsys))
	if err != nil {
		return err
	}
	if err := writeCopy(in, out, skipZeros); err != nil {
		return errors.Join(fmt.Errorf("copy %s to %s: %w", in.Name(), tmp, err), out.Close())
	}
	if err := out.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync %s: %w", tmp, err), out.Close())
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	return fsys.Rename(tmp, dst)
}

func writeCopy(in, out vfs.File, skipZeros bool) error {
	buf := make([]byte, copyChunk)
	var off int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 && !(skipZeros && zeros.All(buf[:n])) {
			if _, werr := out.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	// Sets the length when the copy ends in skipped zeros.
	return out.Truncate(off)
}
