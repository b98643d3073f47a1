package checkpoint

import "path/filepath"

// Names of the files in a checkpoint directory. The channel's in_use.lock
// also lives there but belongs to the channel; this package never touches it.
// Any other file is unknown and left alone.
const (
	// CheckpointName is the slot file: header plus ring of event pointers.
	CheckpointName = "checkpoint"
	// MetaName is the checkpoint metadata (write-order id, log states).
	MetaName = "checkpoint.meta"
	// InflightPutsName holds the put transactions in flight at the checkpoint.
	InflightPutsName = "inflightputs"
	// InflightTakesName holds the take transactions in flight at the checkpoint.
	InflightTakesName = "inflighttakes"
	// BackupCompleteName exists in a backup directory only while it holds a
	// complete copy of a checkpoint.
	BackupCompleteName = "backupComplete"
	// CatalogName is the catalog of consumer groups (Catalog), at the top
	// level of a checkpoint directory that has groups other than the
	// unnamed one. A directory without it holds one unnamed group.
	CatalogName = "groups"

	// tmpSuffix marks a file being written; a leftover is garbage.
	tmpSuffix = ".tmp"
)

// checkpointFiles are the files that make up one checkpoint, in the order
// backups copy them: the slot file first, so that a restore, which copies in
// reverse order, writes it last.
var checkpointFiles = [...]string{CheckpointName, MetaName, InflightPutsName, InflightTakesName}

// path joins dir and a file name.
func path(dir, name string) string { return filepath.Join(dir, name) }
