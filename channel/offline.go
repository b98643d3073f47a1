package channel

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/vfs"
)

// The offline tools (Verify, Repair, Rebuild) work on a closed channel's
// files. Each takes every directory's lock first, so that it fails with
// ErrLocked while the channel is open in this process or another, and holds
// the locks until it is done.

// missingDirs says what lockDirs does with a directory that does not exist.
type missingDirs int

const (
	missingFail   missingDirs = iota // an error (Verify)
	missingSkip                      // not locked (a dry run: nothing may be created)
	missingCreate                    // created as Open creates it, then locked
)

// dirLocks are the locks lockDirs took.
type dirLocks []io.Closer

// Close releases the locks.
func (l dirLocks) Close() error {
	var errs []error
	for _, c := range l {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// lockDirs takes the lock of every directory of cfg (defaults applied): the
// checkpoint dir, the backup dir if any and the data dirs. what names the
// tool in errors ("verify"). A lock another holder has is ErrLocked, wrapped
// with the directory; the locks taken so far are then released.
func lockDirs(cfg Config, what string, missing missingDirs) (dirLocks, error) {
	dirs := append([]string{cfg.CheckpointDir}, cfg.DataDirs...)
	if cfg.BackupCheckpointDir != "" {
		dirs = append(dirs, cfg.BackupCheckpointDir)
	}
	if missing == missingCreate {
		for _, d := range dirs {
			if err := prepareDir(cfg.fs, d, "directory"); err != nil {
				return nil, err
			}
		}
		if err := syncParents(cfg.fs, dirs); err != nil {
			return nil, err
		}
	}
	var locks dirLocks
	for _, d := range dirs {
		st, err := cfg.fs.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist) && missing == missingSkip:
			continue
		case err != nil:
			return nil, errors.Join(fmt.Errorf("filechannel: %s: %w", what, err), locks.Close())
		case !st.IsDir():
			return nil, errors.Join(fmt.Errorf("filechannel: %s: %s is not a directory", what, d), locks.Close())
		}
		l, err := cfg.fs.Lock(filepath.Join(d, LockFileName), vfs.FileMode(cfg.fs))
		if errors.Is(err, vfs.ErrLocked) {
			return nil, errors.Join(fmt.Errorf("%w: %s (%s a channel only while it is closed)", ErrLocked, d, what), locks.Close())
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("filechannel: %s: lock %s: %w", what, d, err), locks.Close())
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// ownerOptions names cfg's directories for owner.ReadOwners.
func ownerOptions(cfg Config) owner.Options {
	return owner.Options{FS: cfg.fs, CheckpointDir: cfg.CheckpointDir,
		BackupCheckpointDir: cfg.BackupCheckpointDir, DataDirs: cfg.DataDirs}
}

// refuseForeign returns the error of op (what names it: "repair") when a
// directory of cfg belongs to another channel or has a damaged channel.id,
// as Open refuses it (claimDirs); nil otherwise. It only reads.
func refuseForeign(cfg Config, what string) error {
	own, err := owner.ReadOwners(ownerOptions(cfg))
	if err != nil {
		return opErr(what, err)
	}
	if err := own.Err(); err != nil {
		return opErrNote(what, err, " (nothing was changed)")
	}
	return nil
}

// Redrive is FileChannel.Redrive on the closed channel cfg describes (the
// "fcreplay redrive" command): it opens the channel with the groups it has
// (cfg.Groups is ignored), moves up to n events from the dead-letter group
// from to the group to, and closes it. While the channel is open, in this
// process or another, it fails with ErrLocked. A checkpoint dir that does
// not exist is an error: there is no channel to redrive.
func Redrive(cfg Config, from, to string, n int) (int, error) {
	fsys := cfg.fs
	if fsys == nil {
		fsys = vfs.OS()
	}
	if _, err := fsys.Stat(cfg.CheckpointDir); err != nil {
		return 0, fmt.Errorf("filechannel: redrive: no channel at %s: %w", cfg.CheckpointDir, err)
	}
	cfg.Groups, cfg.keepGroups = nil, true
	c, err := Open(cfg)
	if err != nil {
		return 0, err
	}
	k, err := c.Redrive(from, to, n)
	return k, errors.Join(err, c.Close())
}
