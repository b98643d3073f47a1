package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
)

// The checkpoint file's header as stored, for inspect: replay.Verify
// reports the fields of a complete checkpoint only, and a person
// recovering a channel wants to see what an incomplete or damaged one says
// too. The layout is checkpoint/format.go's (slots of 8 bytes,
// big-endian); these are copies of its constants, for reading only.
const (
	hdrSlots        = 7          // slots 0..6: magic+version, W, size, head, marker, capacity, time
	hdrMagic uint32 = 0x46434350 // "FCCP", the high 32 bits of slot 0 (the low 32 are the version)

	hdrMarkerComplete   uint64 = 0x434F4D504C455445 // "COMPLETE"
	hdrMarkerIncomplete uint64 = 0x494E434F4D504C54 // "INCOMPLT"
)

// rawHeader is the checkpoint file's header, unverified.
type rawHeader struct {
	MagicOK      bool   `json:"magic_ok"`
	Version      uint32 `json:"version"`
	WriteOrderID uint64 `json:"write_order_id"`
	Size         uint64 `json:"size"`
	Head         uint64 `json:"head"`
	Marker       string `json:"marker"` // COMPLETE, INCOMPLETE or the value in hex
	Capacity     uint64 `json:"capacity"`
	Time         string `json:"time,omitempty"` // RFC 3339, UTC; "" when not recorded
}

// readHeader reads the header of dir's checkpoint file. It returns nil and
// no error when the file does not exist or is shorter than the header.
func readHeader(fsys vfs.FS, dir string) (*rawHeader, error) {
	name := filepath.Join(dir, checkpoint.CheckpointName)
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close() // read-only: a close error loses nothing
	var b [hdrSlots * 8]byte
	if _, err := f.ReadAt(b[:], 0); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	slot := func(i int) uint64 { return binary.BigEndian.Uint64(b[i*8:]) }
	h := &rawHeader{
		MagicOK:      uint32(slot(0)>>32) == hdrMagic,
		Version:      uint32(slot(0)),
		WriteOrderID: slot(1),
		Size:         slot(2),
		Head:         slot(3),
		Capacity:     slot(5),
	}
	switch m := slot(4); m {
	case hdrMarkerComplete:
		h.Marker = "COMPLETE"
	case hdrMarkerIncomplete:
		h.Marker = "INCOMPLETE"
	default:
		h.Marker = fmt.Sprintf("%#016x (incomplete)", m)
	}
	if ns := int64(slot(6)); ns != 0 {
		h.Time = formatTime(time.Unix(0, ns))
	}
	return h, nil
}

// formatTime is how times are printed: RFC 3339 in UTC, milliseconds.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
