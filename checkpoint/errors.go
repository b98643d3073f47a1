package checkpoint

import "errors"

// ErrNoCheckpoint is returned by Open when the directory holds neither a
// checkpoint file nor a checkpoint.meta: there has never been a checkpoint
// there (or Remove deleted it). Recovery replays every log from the start.
var ErrNoCheckpoint = errors.New("checkpoint: no checkpoint")

// ErrBadCheckpoint is returned (wrapped with the reason) by Open when a
// checkpoint is present but unusable: a file is missing, a write was
// interrupted (ErrIncomplete), or bytes are bad (the chain then also holds a
// *corrupt.Error naming the file and offset). Recovery falls back to the
// backup checkpoint or to a full replay. A checkpoint a newer release wrote
// is not bad: Open returns a *corrupt.FormatError for it instead, so that
// recovery stops rather than replace it.
var ErrBadCheckpoint = errors.New("checkpoint: bad checkpoint")

// ErrIncomplete is wrapped, together with ErrBadCheckpoint, when the
// checkpoint file's marker is not COMPLETE: Create was not followed by a
// successful Write, or the process stopped during a Write. It is the expected
// result of a crash mid-checkpoint, not corruption.
var ErrIncomplete = errors.New("checkpoint: incomplete")

// ErrNoBackup is returned by RestoreBackup when the backup directory has no
// backupComplete marker: there is no complete backup to restore.
var ErrNoBackup = errors.New("checkpoint: no complete backup")
