package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// copyChunk is the unit in which files are copied. Backup skips all-zero
// chunks, so its copy of the checkpoint file is sparse (it is never mapped);
// RestoreBackup writes every chunk, so the restored file, which Open maps, has
// all its blocks allocated.
const copyChunk = 1 << 20

// Backup copies the checkpoint in srcDir to backupDir, which must exist. It is
// called right after a successful Write, while the checkpoint file is stable
// (SetSlot never touches it). Order: remove backupComplete and fsync the dir;
// copy the four checkpoint files, each to name.tmp, fsync, rename (all-zero
// chunks are skipped: the copy is sparse); fsync the dir; validate the copy as
// Open does (header, metadata, inflight files and the ring CRC, read without
// mapping the file); publish backupComplete. A crash or error midway, or a copy
// that fails validation (an error wrapping ErrBadCheckpoint), leaves no
// backupComplete, so HasBackup is false until a Backup finishes.
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
	for _, name := range checkpointFiles {
		if err := copyFile(fsys, path(srcDir, name), path(backupDir, name), true); err != nil {
			return err
		}
	}
	if err := fsys.SyncDir(backupDir); err != nil {
		return err
	}
	// A checkpoint damaged since its Write must not become the backup. The
	// copy is sparse, so it is validated without mapping it.
	if err := validate(fsys, backupDir); err != nil {
		return fmt.Errorf("validate copy: %w", err)
	}
	return vfs.WriteFileAtomic(fsys, path(backupDir, BackupCompleteName), nil)
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

// RestoreBackup replaces the checkpoint in dir with the complete backup in
// backupDir: it removes dir's checkpoint files (see Remove), copies the
// metadata and inflight files and then the checkpoint file (each to name.tmp,
// fsync, rename; every byte written, zeros included, so that the checkpoint
// file has all its blocks allocated as after Create), and fsyncs dir. A full
// disk is an error wrapping syscall.ENOSPC. Without backupComplete it returns
// ErrNoBackup and changes nothing, and if a newer release wrote a file of
// either directory (CheckFormat) it returns that *corrupt.FormatError and
// changes nothing. A crash midway leaves an incomplete set
// that Open rejects, and the backup intact for another try. The copies are
// byte for byte, so the ring CRC travels in checkpoint.meta and Open of dir
// validates the restored ring as it would the original.
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
	if err := Remove(fsys, dir); err != nil {
		return err
	}
	for i := len(checkpointFiles) - 1; i >= 0; i-- {
		name := checkpointFiles[i]
		if err := copyFile(fsys, path(backupDir, name), path(dir, name), false); err != nil {
			return err
		}
	}
	return fsys.SyncDir(dir)
}

// Remove deletes the checkpoint files in dir (backupComplete first, then the
// checkpoint, metadata and inflight files and their leftover .tmp files) and
// fsyncs dir. Missing files are not an error; the channel's lock and unknown
// files are left alone.
func Remove(fsys vfs.FS, dir string) error {
	if err := removeFiles(fsys, dir); err != nil {
		return fmt.Errorf("remove checkpoint in %s: %w", dir, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("remove checkpoint in %s: %w", dir, err)
	}
	return nil
}

// removeFiles is Remove without the directory fsync.
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
