package checkpoint

import (
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/vfs"
)

// OwnerName is the file in the checkpoint dir and in the backup dir that
// names the channel they belong to (its id and checkpoint dir);
// internal/owner has its format and, in ReadOwners, the rules Open and the
// offline tools apply to it. Remove, Create, Backup and RestoreBackup never
// touch it: a checkpoint lost or replaced is still this channel's.
const OwnerName = owner.FileName

// ReadOwner reads checkpoint (or backup) dir dir's channel.id; ok is false
// when there is none (or no dir). A damaged file is a *corrupt.Error, one a
// newer release wrote a *corrupt.FormatError.
func ReadOwner(fsys vfs.FS, dir string) (o owner.Owner, ok bool, err error) {
	return owner.Read(fsys, dir)
}

// WriteOwner records in checkpoint (or backup) dir dir that it belongs to
// the channel o (write channel.id.tmp, fsync, rename, fsync the dir). The
// channel's Open calls it, through owner.ReadOwners' rules, when the dir
// has no channel.id yet or records another checkpoint dir.
func WriteOwner(fsys vfs.FS, dir string, o owner.Owner) error {
	return owner.Write(fsys, dir, o)
}
