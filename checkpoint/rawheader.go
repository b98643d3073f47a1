package checkpoint

import (
	"encoding/binary"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// RawHeader is the checkpoint file's header as stored, not verified: the
// fields of slots 0..6 (format.go) whatever they hold. Open says only
// whether a checkpoint is usable; a person recovering a channel wants to see
// what an incomplete or damaged one says too (fcreplay inspect prints it).
type RawHeader struct {
	Magic        uint32    // high 32 bits of slot 0: "FCCP" (0x46434350) in a checkpoint file
	Version      uint32    // low 32 bits of slot 0: the format version
	WriteOrderID uint64    // slot 1: W
	Size         uint64    // slot 2: queue size
	Head         uint64    // slot 3: queue head
	Marker       uint64    // slot 4: COMPLETE, INCOMPLETE, or any other value (incomplete)
	Capacity     uint64    // slot 5: ring capacity
	Time         time.Time // slot 6: time of the checkpoint; the zero Time when not recorded
}

// rawHeaderLen is the number of bytes a RawHeader is read from: slots 0..6.
const rawHeaderLen = slotHeaderCRC * 8

// MagicOK reports whether the magic is a checkpoint file's.
func (h *RawHeader) MagicOK() bool { return uint64(h.Magic)<<32 == magicVersion&magicMask }

// MarkerName is "COMPLETE" or "INCOMPLETE" for the two markers Write
// stores, "" for any other value (which Open also reads as incomplete).
func (h *RawHeader) MarkerName() string {
	switch h.Marker {
	case markerComplete:
		return "COMPLETE"
	case markerIncomplete:
		return "INCOMPLETE"
	}
	return ""
}

// ReadRawHeader reads the header of the checkpoint file in dir without
// validating anything. It returns nil and no error when the file does not
// exist or is too short to hold slots 0..6.
func ReadRawHeader(fsys vfs.FS, dir string) (*RawHeader, error) {
	b, err := readPrefix(fsys, path(dir, CheckpointName), rawHeaderLen)
	if err != nil || len(b) < rawHeaderLen {
		return nil, err
	}
	h := decodeRawHeader((*[rawHeaderLen]byte)(b))
	return &h, nil
}

// decodeRawHeader splits slots 0..6 into their fields.
func decodeRawHeader(b *[rawHeaderLen]byte) RawHeader {
	slot := func(i int) uint64 { return binary.BigEndian.Uint64(b[i*8:]) }
	return RawHeader{
		Magic:        uint32(slot(slotMagic) >> 32),
		Version:      uint32(slot(slotMagic)),
		WriteOrderID: slot(slotWriteID),
		Size:         slot(slotSize),
		Head:         slot(slotHead),
		Marker:       slot(slotMarker),
		Capacity:     slot(slotCapacity),
		Time:         nanosToTime(int64(slot(slotTime))),
	}
}
