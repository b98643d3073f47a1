package eventqueue

import "strconv"

// Pointer locates one event: the id of its log file in the high 32 bits and
// the byte offset of its put record in the low 32 bits. 0 is never a valid
// pointer (file ids start at 1).
type Pointer uint64

// NewPointer builds the pointer of the record at offset in log file fileID.
func NewPointer(fileID, offset uint32) Pointer {
	return Pointer(uint64(fileID)<<pointerFileShift | uint64(offset))
}

// FileID is the id of the log file the pointer points into.
func (p Pointer) FileID() uint32 { return uint32(p >> pointerFileShift) }

// Offset is the byte offset of the record within its log file.
func (p Pointer) Offset() uint32 { return uint32(p) }

// String formats the pointer as "fileID:offset", e.g. "3:1024".
func (p Pointer) String() string {
	var buf [21]byte
	b := strconv.AppendUint(buf[:0], uint64(p.FileID()), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(p.Offset()), 10)
	return string(b)
}
