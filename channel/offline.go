package channel

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/replay"
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
	c, err := openExisting(cfg, "redrive")
	if err != nil {
		return 0, err
	}
	k, err := c.Redrive(from, to, n)
	return k, errors.Join(err, c.Close())
}

// ResetGroup is FileChannel.ResetGroup on the closed channel cfg describes
// (the "fcreplay reset" command): it opens the channel with the groups it
// has (cfg.Groups is ignored), resets the group and closes it. While the
// channel is open, in this process or another, it fails with ErrLocked. A
// checkpoint dir that does not exist is an error: there is no channel.
func ResetGroup(cfg Config, name string, p Position) (int, error) {
	c, err := openExisting(cfg, "reset")
	if err != nil {
		return 0, err
	}
	n, err := c.ResetGroup(name, p)
	return n, errors.Join(err, c.Close())
}

// openExisting opens the channel cfg describes with the groups its files
// have, for the offline form of a FileChannel method (what names it).
func openExisting(cfg Config, what string) (*FileChannel, error) {
	fsys := cfg.fs
	if fsys == nil {
		fsys = vfs.OS()
	}
	if _, err := fsys.Stat(cfg.CheckpointDir); err != nil {
		return nil, fmt.Errorf("filechannel: %s: no channel at %s: %w", what, cfg.CheckpointDir, err)
	}
	cfg.Groups, cfg.keepGroups = nil, true
	return Open(cfg)
}

// ResetPreview is what ResetGroup would do to a group of a closed channel
// (PreviewReset; "fcreplay reset --dry-run").
type ResetPreview struct {
	Held     int        // events the group holds now (queued, or in flight at the last checkpoint)
	Found    int        // events committed from the position on that the logs retain and the group would get
	Queued   int        // events the group would hold after the reset (Found, less what its full policy drops)
	Capacity int        // the group's capacity
	Policy   FullPolicy // its full policy: what happens to what exceeds Capacity
	// Refused: the group's policy is Block and Found exceeds Capacity, so
	// the reset would fail (ErrChannelFull) and change nothing.
	Refused bool
	// DamagedRegions counts the damaged regions of the logs the history
	// stepped over (their events are not in Found).
	DamagedRegions int
}

// PreviewReset says what ResetGroup(cfg, name, p) would do, reading the
// files only (it takes the directories' locks, so it fails with ErrLocked
// while the channel is open, and writes nothing).
func PreviewReset(cfg Config, name string, p Position) (ResetPreview, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return ResetPreview{}, err
	}
	locks, err := lockDirs(cfg, "preview reset", missingFail)
	if err != nil {
		return ResetPreview{}, err
	}
	defer locks.Close()
	opts := verifyOptions(cfg)
	opts.Keys = logKeys(cfg.Keys) // a filter reads encrypted events' headers
	l, err := replay.ListEvents(opts, name, 0, 0, func(replay.Event) error { return nil })
	if err != nil {
		return ResetPreview{}, fmt.Errorf("filechannel: preview reset: %w", err)
	}
	if l.Group.DeadLetterGroup {
		return ResetPreview{}, fmt.Errorf("filechannel: preview reset: %s is a dead-letter group: no put feeds it", groupLabel(name))
	}
	pv := ResetPreview{Held: l.Queued, Capacity: int(l.Group.Capacity), Policy: FullPolicy(l.Group.Policy)}
	plan := &resetPlan{room: pv.Capacity}
	if dlq := l.Group.DeadLetter; dlq != "" {
		plan.exclude = map[eventqueue.Pointer]bool{}
		_, err := replay.ListEvents(opts, dlq, 0, -1, func(e replay.Event) error { plan.exclude[e.Pointer] = true; return nil })
		if err != nil && !errors.Is(err, replay.ErrNoGroup) {
			return ResetPreview{}, fmt.Errorf("filechannel: preview reset: %w", err)
		}
	}
	keep, err := filterKeep(l.Group.Filter)
	if err != nil {
		return ResetPreview{}, fmt.Errorf("filechannel: preview reset: %s: %w", groupLabel(name), err)
	}
	scan := func(emit func(replay.HistoryEvent) bool) (int, error) { return replay.ScanHistory(opts, keep, emit) }
	err = plan.collect(scan, p, pv.Policy, pv.Capacity, false)
	pv.Found, pv.DamagedRegions = plan.found, plan.skipped
	pv.Queued = min(pv.Found, pv.Capacity)
	if errors.Is(err, ErrChannelFull) {
		pv.Refused, pv.Queued, err = true, 0, nil
	}
	if err != nil {
		return pv, fmt.Errorf("filechannel: preview reset: %w", err)
	}
	return pv, nil
}
