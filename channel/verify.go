package channel

import (
	"github.com/flumego/filechannel/replay"
)

// Verify checks the files of the channel cfg describes and reports every
// inconsistency it finds, each with its file and offset: damaged or
// incomplete checkpoints, corrupt records, torn tails, a checkpoint that
// disagrees with a full replay of the logs, queued events that do not read
// back (see replay.Verify for the list). It checks every consumer group:
// each group's checkpoint (a damaged or missing one spoils the whole
// checkpoint, as for Open), its recovered queue against a full replay's,
// its pointers; a problem about one group names it (replay.Problem.Group),
// and Report.Groups has each group's queue. cfg.Groups plays no part: the
// groups are those of the files. It changes nothing on disk except
// for taking each directory's lock, so it fails with ErrLocked while the
// channel is open; the directories must exist. Damage is reported in the
// Report, never as an error; errors are bad config, locks and I/O failures,
// and files a newer release wrote (ErrUnsupportedFormat): they are not
// damage, and this release cannot check them.
func Verify(cfg Config) (*replay.Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	locks, err := lockDirs(cfg, "verify", missingFail)
	if err != nil {
		return nil, err
	}
	defer locks.Close()
	return replay.Verify(verifyOptions(cfg))
}

// verifyOptions are the options of replay.Verify and replay.ListEvents for
// the channel cfg describes (defaults applied).
func verifyOptions(cfg Config) replay.VerifyOptions {
	return replay.VerifyOptions{
		FS:                  cfg.fs,
		CheckpointDir:       cfg.CheckpointDir,
		BackupCheckpointDir: cfg.BackupCheckpointDir,
		DataDirs:            cfg.DataDirs,
		Logger:              cfg.Logger,
	}
}
