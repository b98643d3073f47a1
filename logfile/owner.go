package logfile

import (
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/vfs"
)

// OwnerName is the file in every data dir that names the channel the dir
// belongs to (its id and checkpoint dir); internal/owner has its format,
// owner.ReadOwners the rules Open and the offline tools apply to it.
const OwnerName = owner.FileName

// ReadOwner reads data dir dir's channel.id; ok is false when there is none
// (or no dir). A damaged file is a *corrupt.Error, one a newer release
// wrote a *corrupt.FormatError.
func ReadOwner(fsys vfs.FS, dir string) (o owner.Owner, ok bool, err error) {
	return owner.Read(fsys, dir)
}

// WriteOwner records in data dir dir that it belongs to the channel o
// (write channel.id.tmp, fsync, rename, fsync the dir). The channel's Open
// calls it, through owner.ReadOwners' rules, for a data dir that has no
// channel.id yet or records another checkpoint dir.
func WriteOwner(fsys vfs.FS, dir string, o owner.Owner) error {
	return owner.Write(fsys, dir, o)
}
