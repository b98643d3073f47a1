// Package logfile reads and writes filechannel's data log files. Every put,
// take, rollback and commit of the channel is one record appended to a log
// file, and so is what the consumer groups write (groups, skip, deliver and
// move records), an encrypted file's key record, padding and sync marks:
// record types 1 to 12 (format.go). A put's 64-bit pointer
// (fileID<<32 | offset) names the frame of its record, and takes read
// events back through that pointer.
//
// # Files
//
// A log file is named LogName(id), "log-" followed by the file id as ten
// zero-padded decimal digits (log-0000000007), so lexical order is numeric
// order. Create makes it, writes its header (format version 7, 36 bytes,
// with a salt of 8 random bytes that every frame of the file is checksummed
// with) and fsyncs both the file and its directory; a Set with Keys writes
// version 8, encrypted and bound to the channel's id (keys.go). Versions 7
// and 8 hold each put commit's time (format.go); the Set keeps each file's
// FileIndex and the commits of spilled put transactions (setindex.go,
// setspill.go). With SetOptions.RecycleLogFiles, the live Set renames a
// file Reclaim would delete to RecycleName ("recycle-0000000007") and the
// next roll of its dir overwrites it as a new file of version 9 (10 with
// Keys): versions 7 and 8 whose bytes after the last record may be the old
// file's (recycle.go). Every version from 1 to 10 is read: versions 2 to 6 (the
// layout of 4 and 6, without commit times)
// and version 1 (16-byte header, unsalted frames) from older releases; a
// newer one is refused (Errors, below). CutTail, PadRegion and
// RewriteHeader keep the bytes they remove or overwrite in CorruptName(id, off) ("log-0000000007.4096.corrupt",
// or "log-0000000007.4096.1.corrupt" when that name holds other bytes),
// published through a ".tmp" file. The live Set also keeps a space reserve,
// ReserveName ("space.reserve", zeros), in each data dir (setreserve.go).
// WriteOwner publishes a data dir's channel.id (OwnerName; the format is
// internal/owner's), which names the channel the dir belongs to; the
// package creates no other files.
// ParseLogName rejects every other name (log-0000000007.corrupt, .tmp, ...),
// and ListLogs skips them, as it skips an entry named like a log file that
// is not a regular file (a NotRegular: a symbolic link is never followed).
// Every file is created with the permission bits vfs.FileMode of the FS.
// The byte layout is in format.go.
//
// # Pieces
//
//   - Framing is a file's version and salt: Framing.AppendRecord and
//     DecodeRecord encode and decode one framed record of that file
//     (Writer.Framing, Reader.Framing, Scanner.Framing give it).
//     A Batch (Set.NewBatch) encodes records before their file is known,
//     as the set's files need them (with room for a put body's seal when
//     the set encrypts: Set.EncodedSize counts it); Set.Append seals them
//     for the file they go to.
//   - Writer appends encoded frames to one file and makes them durable with
//     group commit (SyncTo, groupcommit.go): concurrent committers share
//     fsyncs, each woken by the fsync that covers it. Set.Sync is SyncTo
//     followed by a sync mark (RecordSynced; written in front of the next
//     put batch when one waits): a record saying how far the file was
//     durable, which lets a later scan tell damage to acknowledged records
//     from a torn write (Scanner).
//   - Reader reads single records by offset, for takes. Set.Reader hands
//     them out from a bounded LRU cache (readercache.go) as ReaderRefs,
//     which keep the reader open until Release.
//   - Scanner reads a file sequentially, for replay, steps over damaged
//     regions in the middle (Skipped) and reports whether what follows the
//     valid end is a clean end (EOF or zero fill) or a torn tail. In a
//     dir's last file a frame torn the way a power loss tears an overwrite
//     ends the scan, unless a sync mark after it vouches for it.
//   - CutTail, PadRegion and RewriteHeader repair a file in place (a torn
//     tail, a damaged region, a damaged header), keeping what they remove in
//     a .corrupt file first. A padding record (RecordPadding,
//     Framing.AppendPadding) takes the place of a damaged region so that no
//     record moves. A damaged header does not lose the salt: it is stored
//     twice, and recoverFraming finds it again (header.go).
//
// # Concurrency
//
// Writer.Write must not be called concurrently with itself (the channel
// serialises writers per data directory); Writer.Size, SyncTo, Sync and
// Syncs are safe concurrently with Write and with each other, and SyncTo may
// even race with Close (it then returns nil if its bytes were already made
// durable, an error wrapping ErrClosed otherwise). Reader is safe for
// concurrent use (it only uses ReadAt); a ReaderRef is released exactly
// once, after its last use. A Scanner belongs to one goroutine.
//
// # Errors
//
// Damaged bytes are always reported as a *corrupt.Error carrying the file and
// the offset of the damaged frame; it unwraps to corrupt.ErrCorrupt. Bytes a
// newer release wrote are not damage: a header of a newer format version, or
// a checksummed frame of a record type this build does not know, is a
// *corrupt.FormatError (unwrapping to corrupt.ErrUnsupportedFormat, not
// ErrCorrupt), which no reader salvages or steps over. A
// Writer's write or fsync failure is sticky: every later Write and SyncTo
// returns it (wrapped), and the channel rolls to a new file.
package logfile
