package corrupt

import (
	"errors"
	"fmt"
)

// ErrUnsupportedFormat is the sentinel every *FormatError unwraps to: a file
// holds a format version newer than this build reads, or a record type this
// build does not know in a file of a version it reads. A newer release of
// filechannel wrote it. It is not damage, and it does not unwrap to
// ErrCorrupt: nothing may salvage, skip, repair, replace or delete such a
// file, or the newer release's data would be lost.
var ErrUnsupportedFormat = errors.New("filechannel: unsupported format")

// FormatError names a file this build must not read because a newer release
// wrote it, and what in it is too new. It unwraps to ErrUnsupportedFormat.
type FormatError struct {
	File string // path of the file ("" until the decoder's caller fills it in)
	// Offset is the byte offset of what is too new: the version field, or
	// the frame of the record of an unknown type; -1 when unknown.
	Offset int64
	// Version is the format version the file declares; Supported is the
	// newest version this build reads. Version > Supported unless
	// RecordType is set.
	Version, Supported uint64
	// RecordType is the record type this build does not know, found in a
	// frame whose checksum matches in a file of a version it reads; 0 when
	// the version itself is too new.
	RecordType uint8
}

// Error names the file, what in it is too new, and what to do about it.
func (e *FormatError) Error() string {
	const advice = "written by a newer release of filechannel: use that release; do not repair or delete the file"
	if e.RecordType != 0 {
		return fmt.Sprintf("unsupported format: %s at offset %d: record type %d is unknown to this build (format version %d; %s)",
			e.File, e.Offset, e.RecordType, e.Version, advice)
	}
	return fmt.Sprintf("unsupported format: %s: format version %d, newer than the %d this build reads (%s)",
		e.File, e.Version, e.Supported, advice)
}

// Unwrap lets errors.Is match ErrUnsupportedFormat.
func (e *FormatError) Unwrap() error { return ErrUnsupportedFormat }
