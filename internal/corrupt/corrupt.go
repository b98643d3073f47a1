// Package corrupt holds the errors every on-disk decoder in filechannel
// shares: the one corruption error (Error, ErrCorrupt), for bytes that are
// damaged, and the one unsupported-format error (FormatError,
// ErrUnsupportedFormat), for bytes a newer release wrote, which are not
// damage. The channel package re-exports all four names (channel.ErrCorrupt,
// channel.CorruptError, channel.ErrUnsupportedFormat, channel.FormatError),
// so callers match them with errors.Is and read the file and offset with
// errors.As.
package corrupt

import (
	"errors"
	"fmt"
)

// ErrCorrupt is the sentinel every corruption error unwraps to: bytes read
// from disk failed a checksum, a length bound, a magic number or a version
// check.
var ErrCorrupt = errors.New("filechannel: corrupt data")

// Error names the file and byte offset of a corruption and why it was
// judged corrupt. It unwraps to ErrCorrupt (and to Err, when set).
type Error struct {
	File   string // path of the damaged file
	Offset int64  // byte offset of the damaged record or field; -1 when unknown
	Reason string // short lowercase description, e.g. "checksum mismatch"
	Err    error  // optional underlying cause
}

// New returns a corruption error for file at offset.
func New(file string, offset int64, format string, args ...any) *Error {
	return &Error{File: file, Offset: offset, Reason: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	s := "corrupt " + e.File
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", e.Offset)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap lets errors.Is match both ErrCorrupt and the underlying cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}
