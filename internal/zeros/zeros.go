// Package zeros answers one question fast: is a byte slice all zeros? The
// log scanner asks it of a file's tail (zero fill after a crash is a clean
// end), the log set of a header a crash left unfinished, and the checkpoint
// of sparse regions it need not copy.
package zeros

import "encoding/binary"

// All reports whether every byte of b is zero (true for an empty b). It
// compares eight bytes at a time.
func All(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
