package logfile

import (
	"fmt"
	"slices"

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

// ListLogs returns the ids of the log files in dir, ascending. Other entries
// are ignored.
func ListLogs(fsys vfs.FS, dir string) ([]uint32, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("list logs in %s: %w", dir, err)
	}
	var ids []uint32
	for _, name := range names {
		if id, ok := ParseLogName(name); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// CorruptName returns the name of the file that keeps the bytes cut from log
// file id at offset off: "log-0000000007.4096.corrupt". It never parses as a
// log name, so the channel ignores it; operators may delete it.
func CorruptName(id uint32, off int64) string {
	return fmt.Sprintf("%s.%d.corrupt", LogName(id), off)
}
