package main

import (
	"fmt"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
)

// rawHeader is the checkpoint file's header as stored, unverified, as
// inspect prints it: replay.Verify reports the fields of a complete
// checkpoint only, and a person recovering a channel wants to see what an
// incomplete or damaged one says too. The fields come from
// checkpoint.ReadRawHeader.
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
	h, err := checkpoint.ReadRawHeader(fsys, dir)
	if err != nil || h == nil {
		return nil, err
	}
	r := &rawHeader{
		MagicOK:      h.MagicOK(),
		Version:      h.Version,
		WriteOrderID: h.WriteOrderID,
		Size:         h.Size,
		Head:         h.Head,
		Marker:       h.MarkerName(),
		Capacity:     h.Capacity,
		Time:         formatTime(h.Time),
	}
	if r.Marker == "" {
		r.Marker = fmt.Sprintf("%#016x (incomplete)", h.Marker)
	}
	return r, nil
}

// formatTime is how times are printed: RFC 3339 in UTC, milliseconds.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
