// Package owner owns channel.id, the file that ties a directory to one
// channel: the channel's random id and the directory that channel keeps its
// checkpoint in. Every directory of a channel holds one, the checkpoint dir,
// the backup checkpoint dir and each data dir; package checkpoint writes and
// reads it in the checkpoint dirs (checkpoint.WriteOwner), package logfile in
// the data dirs (logfile.WriteOwner), both through this codec. The file is
// published with vfs.WriteFileAtomic (write name.tmp, fsync, rename, fsync
// the directory), so a crash leaves the old file or the new one.
//
// Files: owner.go is the codec (Encode, Decode, Read, Write, ID, NewID) and
// opens with the format's diagram; rules.go is ReadOwners, which reads the
// file in every directory of a channel and judges what they say: which
// channel the directories belong to, which belong to another
// (*ForeignDirError, ErrForeignDir, in errors.go) and which Open is to
// write.
//
// Users: the channel's Open (step 4b, claimDirs), Repair and Rebuild refuse
// with ReadOwners' verdict (package channel re-exports ErrForeignDir and
// ForeignDirError), and replay.Verify reports it. It reads every file with
// Read: checkpoint's and logfile's ReadOwner are this codec too.
//
// The package creates no file but channel.id (and its name.tmp while it is
// published) and keeps no state: its functions may be called from several
// goroutines at once on different directories.
package owner
