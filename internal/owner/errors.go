package owner

import (
	"errors"
	"fmt"
)

// ErrForeignDir is matched (errors.Is) by the error of Open, Repair and
// Rebuild when one of the configured directories belongs to another channel
// (its channel.id names another channel): a data dir, or the backup
// checkpoint dir. The concrete *ForeignDirError names the directory and both
// channels. Nothing was changed.
var ErrForeignDir = errors.New("filechannel: directory belongs to another channel")

// ForeignDirError says that a directory of the config belongs to another
// channel than the one the config describes. It unwraps to ErrForeignDir.
type ForeignDirError struct {
	Role string // the Config field naming the directory: "DataDirs[1]", "BackupCheckpointDir"
	Dir  string // the directory, as configured
	// File is the directory's channel.id. Deleting it hands the directory,
	// with every log file (or checkpoint backup) in it, over to the
	// channel that opens it next: do that only to move it on purpose.
	File string
	// Owner is the id the directory records (32 hex digits), and
	// OwnerCheckpointDir the checkpoint dir of that channel.
	Owner, OwnerCheckpointDir string
	// Channel is this channel's id: its checkpoint dir's, or that of the
	// directories that record its checkpoint dir when that one holds none
	// (a lost checkpoint); "" when there is none (a new channel).
	Channel string
	// CheckpointDir is this channel's checkpoint dir (absolute, symlinks
	// resolved).
	CheckpointDir string
}

func (e *ForeignDirError) Error() string { return ErrForeignDir.Error() + ": " + e.Detail() }

// Detail is the error's message without the sentinel's.
func (e *ForeignDirError) Detail() string {
	this := "this channel " + e.Channel + " (checkpoint dir " + e.CheckpointDir + ")"
	if e.Channel == "" {
		this = "this channel (checkpoint dir " + e.CheckpointDir + ", which records no channel id)"
	}
	return fmt.Sprintf("%s %s belongs to channel %s (checkpoint dir %s), not to %s; to hand it over to this channel on purpose, delete %s",
		e.Role, e.Dir, e.Owner, e.OwnerCheckpointDir, this, e.File)
}

// Unwrap lets errors.Is match ErrForeignDir.
func (e *ForeignDirError) Unwrap() error { return ErrForeignDir }
