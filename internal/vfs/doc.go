// Package vfs is the small filesystem seam every file filechannel writes or
// reads goes through: data logs, the checkpoint, its metadata and inflight
// files, lock files. Production code uses OS(); tests substitute
//
//   - NewMem(), an in-memory FS whose CrashClone forgets what was not synced
//     (optionally tearing unsynced writes) and whose SetHook lets a crash test
//     take a crash image at every mutating operation;
//   - NewFaultFS(fsys), a wrapper around any FS that fails chosen operations
//     (EIO, ENOSPC, short writes, failing reads, a process that dies at its
//     N-th write) and logs the mutating ones.
//
// The contract mirrors POSIX: data written to a File is durable only after
// File.Sync returns nil; a created, renamed or removed directory entry is
// durable only after SyncDir on its parent directory returns nil. Errors for a
// missing file wrap fs.ErrNotExist.
//
// No open follows a symbolic link in the last component of its path, and
// only regular files are opened (ErrNotRegular); WithModes lets the FS
// carry the permission bits (FileMode, DirMode) every package creates files
// and directories with, private by default.
//
// The package creates no files of its own except WriteFileAtomic's name.tmp.
// OS(), MemFS and FaultFS, and the files they open, are safe for concurrent
// use; a MemFS hook runs with the MemFS locked (see MemFS.SetHook).
package vfs
