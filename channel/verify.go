package channel

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/replay"
)

// Verify checks the files of the channel cfg describes and reports every
// inconsistency it finds, each with its file and offset: damaged or
// incomplete checkpoints, corrupt records, torn tails, a checkpoint that
// disagrees with a full replay of the logs, queued events that do not read
// back (see replay.Verify for the list). It changes nothing on disk except
// for taking each directory's lock, so it fails with ErrLocked while the
// channel is open; the directories must exist. Damage is reported in the
// Report, never as an error; errors are bad config, locks and I/O failures.
func Verify(cfg Config) (*replay.Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dirs := append([]string{cfg.CheckpointDir}, cfg.DataDirs...)
	if cfg.BackupCheckpointDir != "" {
		dirs = append(dirs, cfg.BackupCheckpointDir)
	}
	var locks []io.Closer
	defer func() {
		for _, l := range locks {
			l.Close()
		}
	}()
	for _, d := range dirs {
		if st, err := cfg.FS.Stat(d); err != nil {
			return nil, fmt.Errorf("filechannel: verify: %w", err)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("filechannel: verify: %s is not a directory", d)
		}
		l, err := cfg.FS.Lock(filepath.Join(d, LockFileName))
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%w: %s (verify a channel only while it is closed)", ErrLocked, d)
		}
		if err != nil {
			return nil, fmt.Errorf("filechannel: verify: lock %s: %w", d, err)
		}
		locks = append(locks, l)
	}
	return replay.Verify(replay.VerifyOptions{
		FS:                  cfg.FS,
		CheckpointDir:       cfg.CheckpointDir,
		BackupCheckpointDir: cfg.BackupCheckpointDir,
		DataDirs:            cfg.DataDirs,
		Logger:              cfg.Logger,
	})
}
