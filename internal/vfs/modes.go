package vfs

import "io/fs"

// The permission bits of the files and directories filechannel creates,
// unless WithModes gives others: private to the owner, as etcd's. The
// process's umask applies on top, as it does to any creat(2) and mkdir(2).
const (
	DefaultFileMode fs.FileMode = 0o600
	DefaultDirMode  fs.FileMode = 0o700
)

// WithModes returns fsys carrying file and dir as the permission bits that
// FileMode and DirMode report for it (0 = DefaultFileMode, DefaultDirMode).
// It changes no operation: whoever creates a file or directory through the
// returned FS passes FileMode(fsys) or DirMode(fsys) to Create, Lock or
// MkdirAll, so that one value chosen where the FS is set up (the channel's
// Config) reaches every file every package creates. Wrapping an FS that
// WithModes returned replaces its modes.
func WithModes(fsys FS, file, dir fs.FileMode) FS {
	if m, ok := fsys.(modesFS); ok {
		fsys = m.FS
	}
	if file == 0 {
		file = DefaultFileMode
	}
	if dir == 0 {
		dir = DefaultDirMode
	}
	return modesFS{FS: fsys, file: file, dir: dir}
}

// FileMode returns the permission bits for a file created through fsys: the
// ones WithModes gave it, else DefaultFileMode.
func FileMode(fsys FS) fs.FileMode {
	if m, ok := fsys.(modesFS); ok {
		return m.file
	}
	return DefaultFileMode
}

// DirMode returns the permission bits for a directory created through fsys:
// the ones WithModes gave it, else DefaultDirMode.
func DirMode(fsys FS) fs.FileMode {
	if m, ok := fsys.(modesFS); ok {
		return m.dir
	}
	return DefaultDirMode
}

// modesFS is an FS with the modes WithModes gave it; every operation is
// the wrapped FS's. A comparable value: two wrappings of the same FS with
// the same modes are equal.
type modesFS struct {
	FS
	file, dir fs.FileMode
}
