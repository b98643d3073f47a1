package checkpoint

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

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
	// level of a checkpoint directory; the channel writes it with every
	// checkpoint. A directory without it was written by a release before
	// consumer groups: one unnamed group.
	CatalogName = "groups"

	// tmpSuffix marks a file being written; a leftover is garbage.
	tmpSuffix = ".tmp"

	// groupDirPrefix starts the name of a group's subdirectory, group-N
	// with N the group id in decimal, without leading zeros (GroupDir,
	// ParseGroupDirName).
	groupDirPrefix = "group-"
)

// checkpointFiles are the files that make up one checkpoint, in the order
// backups copy them: the slot file first, so that a restore, which copies in
// reverse order, writes it last.
var checkpointFiles = [...]string{CheckpointName, MetaName, InflightPutsName, InflightTakesName}

// path joins dir and a file name.
func path(dir, name string) string { return filepath.Join(dir, name) }

// GroupDir is the checkpoint directory of consumer group id (id >= 1) in
// the checkpoint directory dir: dir/group-N, N the id in decimal. It holds
// a complete checkpoint of its own (the four files of one ring), made and
// read with Create, Open and Write like dir itself; the unnamed group 0 has
// no GroupDir (its ring is dir's top-level checkpoint), and GroupDir(dir, 0)
// names no group (CreateGroupDir and RemoveGroupDir refuse id 0, and
// ListGroupDirs ignores a group-0 entry).
func GroupDir(dir string, id uint32) string { return filepath.Join(dir, groupDirName(id)) }

// groupDirName is the name of group id's subdirectory; ParseGroupDirName is
// its inverse.
func groupDirName(id uint32) string { return fmt.Sprintf("%s%d", groupDirPrefix, id) }

// ParseGroupDirName returns the group id a directory entry's name in a
// checkpoint directory stands for: exactly groupDirName(id) for an id >= 1. Other names (group-0,
// group-01, group-+1, group-4294967296, group-7.tmp) are not group dirs.
func ParseGroupDirName(name string) (uint32, bool) {
	s, ok := strings.CutPrefix(name, groupDirPrefix)
	if !ok || s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(id), true
}
