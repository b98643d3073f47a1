package logfile

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flumego/filechannel/internal/vfs"
)

const (
	logPrefix    = "log-"
	logIDDigits  = 10 // enough for any uint32; part of the file naming scheme
	logNameWidth = len(logPrefix) + logIDDigits
)

// LogName returns the file name of log file id: "log-" and the id as ten
// zero-padded decimal digits, e.g. "log-0000000007". Lexical order of the
// names is numeric order of the ids.
func LogName(id uint32) string {
	var b [logNameWidth]byte
	copy(b[:], logPrefix)
	for i, v := logNameWidth-1, id; i >= len(logPrefix); i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[:])
}

// ParseLogName returns the id of a log file name built by LogName. It is
// strict: exactly "log-" followed by ten decimal digits naming a uint32, so
// "log-0000000007.corrupt", "log-0000000007.tmp" and "log-7" are rejected.
func ParseLogName(name string) (uint32, bool) {
	if len(name) != logNameWidth || name[:len(logPrefix)] != logPrefix {
		return 0, false
	}
	var v uint64
	for i := len(logPrefix); i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > 1<<32-1 {
		return 0, false
	}
	return uint32(v), true
}

// ListLogs returns the ids of the log files in dir, ascending: its regular
// files named by LogName. Other entries are ignored, and so is an entry
// named like a log file that is not a regular file (a NotRegular, which
// OpenSet lists apart).
func ListLogs(fsys vfs.FS, dir string) ([]uint32, error) {
	l, err := listDir(fsys, dir)
	return l.ids, err
}

// NotRegular is an entry of a data dir named like a log file (LogName) that
// is not a regular file: a symbolic link, a directory, a named pipe, a
// socket or a device. It is not the channel's: the package never opens,
// changes or removes it (the FS refuses to open it anyway, vfs.ErrNotRegular),
// and no new log file gets its id.
type NotRegular struct {
	ID   uint32
	Dir  string // the data dir holding it
	Path string
	Mode fs.FileMode // as Lstat reports it; Mode.Type() says what it is
}

// NotRegularError is the error of a NotRegular entry that takes the name of
// a log file the channel needs (replay.NeededNotRegular has the rule): it
// names the entry and says what to do. It matches vfs.ErrNotRegular.
type NotRegularError struct {
	NotRegular
	// Need says why the file is needed, such as "log file log-0000000001
	// holds 3 queued events according to the checkpoint".
	Need string
	// Ours: the id is known to be one of the channel's log files (a
	// checkpoint lists it), so the entry took that file's place.
	Ours bool
}

func (e *NotRegularError) Error() string {
	kind := vfs.TypeName(e.Mode)
	link := e.Mode.Type()&fs.ModeSymlink != 0
	var what string
	switch {
	case e.Ours && link:
		what = "the channel does not follow symbolic links; move the file back into the data dir in place of the link"
	case e.Ours:
		what = "the channel reads only regular files; move the " + noArticle(kind) + " out of the data dir and put the log file back in its place"
	case link:
		what = "the channel does not follow symbolic links; if the link stands for a log file moved elsewhere, " +
			"move the file back into the data dir in place of the link, else move the link out of the data dir"
	default:
		what = "the channel reads only regular files; move it out of the data dir (and put back the log file of that name, if there was one)"
	}
	return fmt.Sprintf("%s, but %s is %s, not a regular file: %s", e.Need, e.Path, kind, what)
}

// Unwrap lets errors.Is match vfs.ErrNotRegular.
func (e *NotRegularError) Unwrap() error { return vfs.ErrNotRegular }

// noArticle is a vfs.TypeName without its article: "directory".
func noArticle(kind string) string {
	_, rest, _ := strings.Cut(kind, " ")
	return rest
}

// recyclePrefix begins the name of a consumed log file kept for reuse.
const recyclePrefix = "recycle-"

// RecycleName returns the name a consumed log file id takes while it waits
// in its data dir's pool to be reused (SetOptions.RecycleLogFiles):
// "recycle-0000000007". It never parses as a log name.
func RecycleName(id uint32) string { return recyclePrefix + LogName(id)[len(logPrefix):] }

// ParseRecycleName returns the id in a name built by RecycleName, as
// strictly as ParseLogName.
func ParseRecycleName(name string) (uint32, bool) {
	rest, ok := strings.CutPrefix(name, recyclePrefix)
	if !ok {
		return 0, false
	}
	return ParseLogName(logPrefix + rest)
}

// listing is what listDir found in one data dir.
type listing struct {
	ids        []uint32 // regular log files, ascending
	notRegular []NotRegular
	recycled   []uint32 // regular files named by RecycleName, ascending
}

// listDir lists the entries of dir named like log files, and Lstats each
// to set apart those that are not regular files (a link is not followed).
func listDir(fsys vfs.FS, dir string) (listing, error) {
	var l listing
	names, err := fsys.List(dir)
	if err != nil {
		return l, fmt.Errorf("list logs in %s: %w", dir, err)
	}
	for _, name := range names {
		id, ok := ParseLogName(name)
		rid, recycled := ParseRecycleName(name)
		if !ok && !recycled {
			continue
		}
		path := filepath.Join(dir, name)
		fi, err := fsys.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // gone since List
		case err != nil:
			return l, fmt.Errorf("list logs in %s: %w", dir, err)
		case recycled:
			if fi.Mode().IsRegular() { // anything else is not ours: left alone
				l.recycled = append(l.recycled, rid)
			}
			continue
		case !fi.Mode().IsRegular():
			l.notRegular = append(l.notRegular, NotRegular{ID: id, Dir: dir, Path: path, Mode: fi.Mode()})
			continue
		}
		l.ids = append(l.ids, id)
	}
	slices.Sort(l.ids)
	return l, nil
}

// CorruptName returns the name of the file that keeps the bytes cut from log
// file id at offset off: "log-0000000007.4096.corrupt". It never parses as a
// log name, so the channel ignores it; operators may delete it.
func CorruptName(id uint32, off int64) string {
	return fmt.Sprintf("%s.%d.corrupt", LogName(id), off)
}
