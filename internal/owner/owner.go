package owner

// This file is the codec of channel.id. Format, version 1 (docs/format.md
// §1.1). Integers are big-endian; the CRC is CRC32C (Castagnoli).
//
//	off    len  field
//	0      4    magic "FCID"
//	4      2    version 1
//	6      2    reserved, zero
//	8      16   channel id: 16 random bytes (crypto/rand), never all zero
//	24     2    n, the length of the path that follows (1..65535)
//	26     n    the channel's checkpoint dir: absolute, clean, symlinks
//	            resolved (vfs.Resolve), UTF-8
//	26+n   4    CRC32C of every byte before it
//
// The magic and version keep their places in every version (format.md §14):
// Decode checks them first and refuses a newer version with a
// *corrupt.FormatError, whatever follows. It rejects (with a *corrupt.Error)
// a bad magic, version 0, a short file, a bad CRC, non-zero reserved bytes,
// an all-zero id, a path that is empty, relative or not clean, and trailing
// bytes, so that decoding then encoding gives the input byte for byte.

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"path/filepath"
	"unicode/utf8"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// FileName is the name of the file in every directory of a channel.
const FileName = "channel.id"

// The format's constants. Part of the on-disk format; never renumber.
const (
	magic         = "FCID"
	FormatVersion = 1

	versionOffset = 4
	versionEnd    = 6
	offReserved   = 6
	offID         = 8
	offPathLen    = 24
	fixedLen      = 26 // through the path length
	crcLen        = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ID is a channel's identity: 16 random bytes, written as 32 hex digits.
type ID [16]byte

// NewID returns a random id (crypto/rand; never all zero).
func NewID() ID {
	for {
		var id ID
		_, _ = rand.Read(id[:]) // never fails (crypto/rand.Read's contract)
		if !id.IsZero() {
			return id
		}
	}
}

// IsZero reports whether id is the zero ID (no id).
func (id ID) IsZero() bool { return id == ID{} }

// String returns id as 32 lowercase hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Owner is what a channel.id file says: the directory belongs to the channel
// ID, whose checkpoint dir is CheckpointDir (absolute, symlinks resolved).
type Owner struct {
	ID            ID
	CheckpointDir string
}

// Encode returns o's file contents. The path must be absolute and clean and
// at most 65535 bytes, the id not zero.
func Encode(o Owner) ([]byte, error) {
	switch p := o.CheckpointDir; {
	case o.ID.IsZero():
		return nil, fmt.Errorf("encode %s: zero channel id", FileName)
	case !filepath.IsAbs(p) || filepath.Clean(p) != p || !utf8.ValidString(p):
		return nil, fmt.Errorf("encode %s: checkpoint dir %q is not an absolute, clean UTF-8 path", FileName, p)
	case len(p) > math.MaxUint16:
		return nil, fmt.Errorf("encode %s: checkpoint dir path of %d bytes, more than %d", FileName, len(p), math.MaxUint16)
	}
	b := make([]byte, 0, fixedLen+len(o.CheckpointDir)+crcLen)
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, FormatVersion)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = append(b, o.ID[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(o.CheckpointDir)))
	b = append(b, o.CheckpointDir...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable)), nil
}

// Decode decodes the contents b of the channel.id file named file (used in
// errors).
func Decode(file string, b []byte) (Owner, error) {
	var o Owner
	if len(b) < versionEnd {
		return o, corrupt.New(file, int64(len(b)), "file too short: %d bytes", len(b))
	}
	if string(b[:4]) != magic {
		return o, corrupt.New(file, 0, "bad magic %q, want %q", b[:4], magic)
	}
	switch v := binary.BigEndian.Uint16(b[versionOffset:]); {
	case v > FormatVersion:
		return o, &corrupt.FormatError{File: file, Offset: versionOffset, Version: uint64(v), Supported: FormatVersion}
	case v != FormatVersion:
		return o, corrupt.New(file, versionOffset, "unsupported version %d", v)
	}
	if len(b) < fixedLen+crcLen {
		return o, corrupt.New(file, int64(len(b)), "file too short: %d bytes, want at least %d", len(b), fixedLen+crcLen)
	}
	body := b[:len(b)-crcLen]
	if want, got := binary.BigEndian.Uint32(b[len(body):]), crc32.Checksum(body, crcTable); want != got {
		return o, corrupt.New(file, int64(len(body)), "checksum mismatch: stored %#08x, computed %#08x", want, got)
	}
	if r := binary.BigEndian.Uint16(body[offReserved:]); r != 0 {
		return o, corrupt.New(file, offReserved, "reserved bytes %#04x not zero", r)
	}
	copy(o.ID[:], body[offID:offPathLen])
	if zeros.All(o.ID[:]) {
		return o, corrupt.New(file, offID, "zero channel id")
	}
	n := int(binary.BigEndian.Uint16(body[offPathLen:]))
	if rest := len(body) - fixedLen; n != rest {
		return o, corrupt.New(file, offPathLen, "path length %d, but %d bytes follow", n, rest)
	}
	p := string(body[fixedLen:])
	if n == 0 || !filepath.IsAbs(p) || filepath.Clean(p) != p || !utf8.ValidString(p) {
		return o, corrupt.New(file, fixedLen, "checkpoint dir %q is not an absolute, clean UTF-8 path", p)
	}
	o.CheckpointDir = p
	return o, nil
}

// Read reads dir's channel.id; ok is false when there is none (or no dir).
// A file that does not decode is a *corrupt.Error (or, from a newer
// release, a *corrupt.FormatError); other errors are I/O errors.
func Read(fsys vfs.FS, dir string) (o Owner, ok bool, err error) {
	name := filepath.Join(dir, FileName)
	b, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("read %s: %w", name, err)
	}
	o, err = Decode(name, b)
	return o, err == nil, err
}

// Write publishes o as dir's channel.id (vfs.WriteFileAtomic), replacing
// the file there.
func Write(fsys vfs.FS, dir string, o Owner) error {
	name := filepath.Join(dir, FileName)
	b, err := Encode(o)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(fsys, name, b); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
