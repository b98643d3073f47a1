// Package checkpoint stores snapshots of the event queue so that a restart
// replays only the log records written after the last snapshot.
//
// A checkpoint records the ring of event pointers (package eventqueue) as of
// one write-order id W, together with the channel's log-file states and the
// transactions in flight at W. Recovery opens it with Open, rebuilds the
// queue from its slots and replays only log records with write-order id > W.
//
// # Files
//
// A checkpoint directory holds:
//
//	checkpoint      the slot file: a header of HeaderSlots (1029) slots,
//	                then the ring; every block allocated; read through a
//	                read-only memory mapping on real files, written with
//	                WriteAt
//	checkpoint.meta W, queue geometry, the CRC of the live ring slots, ids
//	                and per-log-file states
//	inflightputs    put transactions open at W
//	inflighttakes   take transactions open at W
//	channel.id      the channel the directory belongs to (WriteOwner,
//	                ReadOwner; the format is internal/owner's); never
//	                removed, copied or restored with a checkpoint
//	groups          the catalog of consumer groups (Catalog, WriteCatalog,
//	                ReadCatalog): W, the next group id, each group's id,
//	                name and settings; absent when the channel has only
//	                the unnamed group (an older release's directory)
//	group-N/        the checkpoint directory of consumer group N >= 1
//	                (GroupDir, CreateGroupDir, RemoveGroupDir,
//	                ListGroupDirs): exactly the four files above, made and
//	                read with Create, Open and Write
//	deliveries      the delivery journal (Journal, CreateJournal,
//	                ReadJournal; journal.go, journalcreate.go): recent
//	                delivery counts, mapped read-write and never synced,
//	                rewritten in place by the next CreateJournal; not
//	                part of a checkpoint set (Remove, Backup and
//	                RestoreBackup leave it alone); a header that does not
//	                check is no journal, a newer version is refused
//	*.tmp           a file being published; a leftover is garbage
//
// The top-level four files hold the ring of the unnamed group 0 (a 1-slot
// empty ring when there is none) and the channel's global state. One
// checkpoint of the channel is a set (set.go): WriteSet writes every group
// dir's checkpoint, then the catalog, then the top level, all with the same
// write-order id W; OpenSet accepts the set only if the top level opens,
// the catalog (if any) has W, and every group it lists opens with W, and
// opens all of it or nothing. StaleGroupDirs names the group dirs the set
// no longer lists. Remove, CheckFormat, Backup and RestoreBackup work on
// the whole set.
//
// A backup directory (Backup, RestoreBackup) holds copies of the same
// files in the same layout (the catalog and the group dirs it lists), its
// own channel.id, plus backupComplete, which exists only while the copy is
// complete.
// The channel's in_use.lock lives in the same directories and is never
// touched here; unknown files are left alone. The byte layouts are in
// format.go.
//
// Every file is created with the permission bits vfs.FileMode of the FS it
// is given (0600 unless vfs.WithModes set others), the umask applying; the
// delivery journal is the exception (CreateJournal creates it 0600). No
// file is opened through a symbolic link: a checkpoint file that is a link
// (or not a regular file) is refused with an error wrapping
// vfs.ErrNotRegular, which Open returns as ErrBadCheckpoint; a link named
// backupComplete is no marker.
//
// A file's length is never trusted (readsmall.go): the checkpoint file must
// be as long as its capacity says, the delivery journal no longer than its
// entry count says, and checkpoint.meta, the inflight files and the catalog
// are held in memory only once their CRC, streamed in pieces, matched when
// they are longer than a megabyte; a file of an impossible length is damage
// (a *corrupt.Error), and reading one costs a bounded amount of memory.
//
// # Format versions
//
// Every file starts with its magic and version at the same offsets in every
// format version (format.go, compat.go). A file a newer release wrote is not
// damage: Open, RestoreBackup and the decoders refuse it with a
// *corrupt.FormatError (corrupt.ErrUnsupportedFormat, not ErrBadCheckpoint),
// so that recovery stops instead of falling back and replacing it;
// CheckFormat tells it before anything is deleted or overwritten.
//
// # Full disks
//
// A full disk is an error (wrapping syscall.ENOSPC) from a call that can
// report it, never a SIGBUS. Touching a page of the mapping whose block the
// filesystem must still allocate faults when it cannot, so Create writes every
// byte of the checkpoint file (zeros, 1 MiB at a time) and RestoreBackup
// copies every byte: the file has no holes. Open fills the holes of a file
// made otherwise (copied sparse by another tool) before mapping it. Writes go
// through WriteAt and flushes through File.Sync, never through the mapping, so
// a block that needs allocating at write time (copy-on-write filesystems) is
// an error from Write. The delivery journal is the one file written through
// its mapping: CreateJournal writes it in full before mapping it, and a store
// that faults anyway (a copy-on-write filesystem out of space) is recovered
// (debug.SetPanicOnFault) and the journal goes on with WriteAt. The backup copy is sparse; it is never mapped (Backup
// validates it with ReadAt). Create costs one write of the whole file: about
// 10 ms for a 1M-slot ring (8 MB) on ext4 (0.5 ms when it was sparse).
//
// # Copy-on-write
//
// The checkpoint file changes only inside Write, so on disk it always holds
// the last complete checkpoint, or is marked incomplete while a Write runs
// (or after one failed). Slot changes made by the queue through SetSlot are
// buffered in dirty pages of 512 slots. Freeze turns the current pages into
// the frozen generation at the instant the checkpoint's state is captured;
// Write copies the frozen pages into the file while the queue keeps running on
// a new current generation; Thaw drops the frozen pages (success) or merges
// them back (failure) so the next checkpoint writes them again. Memory is
// proportional to the pages dirtied since the last successful checkpoint.
//
// # Crash safety
//
// Write first marks the file INCOMPLETE and flushes, then writes the slots,
// computes the CRC32C of the live ring slots [head, head+size) from the file,
// writes the header and flushes, then publishes the inflight files and the
// metadata carrying that ring CRC (each write-tmp, fsync, rename, fsync-dir),
// and only then marks the file COMPLETE with a header CRC and flushes. Open
// accepts a checkpoint only if the marker is COMPLETE, every checksum matches
// (the ring CRC included: Open reads the live ring once) and all four files
// agree on W, so a crash at any point yields either the previous checkpoint
// (before the first flush) or ErrBadCheckpoint, never a mix, and a garbled
// live slot is ErrBadCheckpoint (corrupt) rather than a lost event. The CRC
// costs one read of the live ring per Write and per Open; Slot and SetSlot
// never touch it.
//
// # Concurrency
//
// A Checkpoint is not safe for arbitrary concurrent use. The caller (the
// channel, under its queue lock) serialises Slot, SetSlot, Freeze, Thaw and
// DirtyPages among themselves. Write, one at a time, runs without that lock,
// concurrently with Slot and SetSlot, between a Freeze and the matching Thaw.
// Close must not run concurrently with anything. Backup reads the files and
// may run concurrently with Slot and SetSlot but not with Write.
package checkpoint
