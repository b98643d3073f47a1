package checkpoint

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Reading the small files of a checkpoint dir with bounded memory. Their
// lengths are not to be trusted: damage, or a careless copy, can leave a
// file of a few kilobytes gigabytes long (a sparse tail of zeros). So no
// reader holds more of a file than its header allows:
//
//   - the checkpoint file's length must be what its capacity says
//     (checkHeader) before its ring is read, in pieces or through a
//     mapping;
//   - the delivery journal's must not exceed what its entry count says
//     (ReadJournal), and its entries are read in pieces;
//   - checkpoint.meta, the inflight files and the catalog carry no length:
//     a file longer than bigFile is checked first (magic, version, then its
//     CRC over pieces of readChunk bytes) and held only if its CRC matches,
//     so that a damaged one costs a read, never its length in memory.
//
// A file of an impossible length is damage: a *corrupt.Error, which the
// callers treat as any other damage of that file.

// bigFile is the length above which readFramed checks a file's CRC before
// holding it.
const bigFile = 1 << 20

// readChunk is the unit of the reads that stream through a file.
const readChunk = 1 << 20

// readFramed returns the bytes of name, a framed file (checkpoint.meta, an
// inflight file, the catalog: magic, version, ..., CRC32C of everything
// before it) whose versions 1 to newest this build reads, for its decoder.
// A file longer than bigFile is read whole only once checkFrameStreamed
// found its CRC right; then into a buffer of exactly its length.
func readFramed(fsys vfs.FS, name, magic string, newest uint16) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close() // read-only: a close error loses nothing
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size > math.MaxInt {
		return nil, corrupt.New(name, math.MaxInt, "file length %d exceeds what this platform can hold", size)
	}
	if size > bigFile {
		if err := checkFrameStreamed(f, name, size, magic, newest); err != nil {
			return nil, err
		}
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil // shorter if it shrank since: the decoder says so
}

// checkFrameStreamed checks the magic, the version and the CRC of the framed
// file f (name, size bytes long) the way the decoders do, holding readChunk
// bytes at a time. It returns nil, leaving the rest to the decoder, if the
// file turns out shorter than size.
func checkFrameStreamed(f vfs.File, name string, size int64, magic string, newest uint16) error {
	var stored [crcLen]byte
	if _, err := f.ReadAt(stored[:], size-crcLen); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	buf := make([]byte, readChunk)
	var crc uint32
	for off := int64(0); off < size-crcLen; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-crcLen-off)], off)
		if off == 0 && n >= versionEnd {
			if _, perr := checkFramePrefix(name, buf[:n], magic, newest); perr != nil {
				return perr
			}
		}
		crc = crc32.Update(crc, crcTable, buf[:n])
		off += int64(n)
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	if want := binary.BigEndian.Uint32(stored[:]); want != crc {
		return checksumMismatch(name, size-crcLen, want, crc)
	}
	return nil
}
