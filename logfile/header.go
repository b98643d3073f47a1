package logfile

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"

	"github.com/flumego/filechannel/internal/corrupt"
)

// The file header, in the versions this build reads (format.go has the
// diagrams; versions 3 to 6 have version 2's but for the version field). From
// version 2 on it stores the file's salt twice, each copy with its own
// checksum, so that a damaged header rarely loses it: every frame of the
// file is checksummed with it.

// AppendFileHeader appends the header of a new log file fileID: the
// current format version (HeaderSize bytes) with a fresh random salt.
func AppendFileHeader(dst []byte, fileID uint32) []byte {
	return appendFileHeader(dst, fileID, newFraming())
}

// appendFileHeader appends the header of log file fileID for framing f.
func appendFileHeader(dst []byte, fileID uint32, f Framing) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, f.Version())
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, fileID)
	if f.version == 1 {
		return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	}
	dst = binary.BigEndian.AppendUint64(dst, f.salt)
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	dst = binary.BigEndian.AppendUint64(dst, f.salt)
	return binary.BigEndian.AppendUint32(dst, saltCopyCRC(fileID, dst[len(dst)-8:]))
}

// saltCopyCRC is the checksum of the second copy of the salt (bytes 24..31
// of a version 2 to 8 header): CRC32C of the file id, uint32 BE, then the copy.
func saltCopyCRC(fileID uint32, salt []byte) uint32 {
	var id [4]byte
	binary.BigEndian.PutUint32(id[:], fileID)
	return crc32.Update(crc32.Checksum(id[:], castagnoli), castagnoli, salt)
}

// DecodeFileHeader checks the file header at the start of b and returns the
// file id. It reads the magic and the version first: a version above
// MaxFormatVersion is a *corrupt.FormatError (File "", Offset 4), whatever
// follows. Other errors are *corrupt.Error with File "" and Offset 0
// (callers fill in the file): short header, bad magic, version 0, checksum
// mismatch, non-zero reserved bytes, and in versions 2 to 8 salt copies
// that disagree or fail their checksum.
func DecodeFileHeader(b []byte) (fileID uint32, err error) {
	id, _, err := decodeFileHeader(b)
	return id, err
}

// decodeFileHeader is DecodeFileHeader, with the framing the header gives
// the file's frames.
func decodeFileHeader(b []byte) (uint32, Framing, error) {
	if len(b) < versionEnd {
		return 0, Framing{}, corrupt.New("", 0, "file header is %d bytes, want %d", len(b), HeaderSize)
	}
	if string(b[0:4]) != magic {
		return 0, Framing{}, corrupt.New("", 0, "bad magic %q, not a log file", b[0:4])
	}
	v := binary.BigEndian.Uint16(b[versionOffset:versionEnd])
	switch {
	case v > MaxFormatVersion:
		return 0, Framing{}, &corrupt.FormatError{Offset: versionOffset, Version: uint64(v), Supported: MaxFormatVersion}
	case v < MinFormatVersion:
		return 0, Framing{}, corrupt.New("", 0, "unsupported format version %d", v)
	}
	f := versionFraming(v)
	size := int(f.HeaderSize())
	if len(b) < size {
		return 0, Framing{}, corrupt.New("", 0, "file header is %d bytes, want %d", len(b), size)
	}
	crcAt := size - 4 // version 1: bytes 12..15 over 0..11
	if v != 1 {
		crcAt = 20 // versions 2 to 8: bytes 20..23 over 0..19
	}
	if got, want := crc32.Checksum(b[:crcAt], castagnoli), binary.BigEndian.Uint32(b[crcAt:]); got != want {
		return 0, Framing{}, corrupt.New("", 0, "file header checksum mismatch: stored %#08x, computed %#08x", want, got)
	}
	if binary.BigEndian.Uint16(b[6:8]) != 0 {
		return 0, Framing{}, corrupt.New("", 0, "reserved header bytes not zero")
	}
	id := binary.BigEndian.Uint32(b[8:12])
	if v == 1 {
		return id, f, nil
	}
	f.salt = binary.BigEndian.Uint64(b[12:20])
	if binary.BigEndian.Uint64(b[24:32]) != f.salt {
		return 0, Framing{}, corrupt.New("", 0, "the two copies of the salt differ")
	}
	if got, want := saltCopyCRC(id, b[24:32]), binary.BigEndian.Uint32(b[32:36]); got != want {
		return 0, Framing{}, corrupt.New("", 0, "salt copy checksum mismatch: stored %#08x, computed %#08x", want, got)
	}
	return id, f, nil
}

// newerHeaderCRCAt is where every header from version 2 on has the
// checksum of its first bytes (CRC-32C of bytes 0..19 at 20..23).
const newerHeaderCRCAt = 20

// tornNewer reports whether hdr, a whole header (HeaderSize bytes), says
// a version newer than this build's without the checksum at bytes 20..23
// that every version from 2 on has: the magic of a new file's header made
// it to the disk and the rest did not (a power loss while Create wrote it:
// a directory fsync of another file made the new name durable first).
// A newer release's header has the checksum (format.md, "Compatibility").
func tornNewer(hdr []byte) bool {
	var fe *corrupt.FormatError
	if _, err := DecodeFileHeader(hdr); !errors.As(err, &fe) || len(hdr) < newerHeaderCRCAt+4 {
		return false
	}
	return crc32.Checksum(hdr[:newerHeaderCRCAt], castagnoli) != binary.BigEndian.Uint32(hdr[newerHeaderCRCAt:])
}

// declaredHeaderSize is the size of the header that b, the first bytes of
// a log file, begins: 16 when they say version 1, HeaderSize otherwise (the
// header this build writes, and what a damaged header is taken for).
func declaredHeaderSize(b []byte) int {
	if len(b) >= versionEnd && string(b[0:4]) == magic && binary.BigEndian.Uint16(b[versionOffset:versionEnd]) == 1 {
		return headerSizeV1
	}
	return HeaderSize
}

// recoverFraming works out the framing of log file id, whose header hdr
// (its first bytes, up to HeaderSize) is damaged, so that its records can
// still be read: each is checksummed on its own, but from version 2 on with
// the file's salt. It tries, in order:
//
//  1. the first copy of the salt, if the checksum over bytes 0..19
//     matches and the version field says 2 to 8;
//  2. the second copy, if its own checksum (over the id in the file name
//     and the copy) matches;
//  3. version 1, if a valid version-1 frame follows the 16 header bytes;
//  4. a salt derived from the frame at offset 36 (each checksum XOR the
//     unmasked checksum of what it covers), if with it the frame right after
//     that one is valid too (2^-64 by chance): a frame the channel wrote
//     right after the header, not bytes a producer chose;
//  5. version 1, if the version field says 1;
//  6. else a salted version with the salt lost: no frame of the file
//     verifies.
//
// A salt found in steps 2, 4 or 6 comes with the version the version field
// says if it is 2 to 8, else FormatVersion (saltedVersion): the frames of
// both are the same, and a rewritten header keeps a version-2 file at 2.
// In step 4, a first record that is a key record makes it version 5, 6 or
// 8 (the one whose key record it is): only an encrypted file has one. When
// the version field is lost, settleTimed then tells a file with commit
// times (7, 8) from one without (4, 6) by its first commit of puts.
//
// Only I/O errors are returned.
func recoverFraming(r io.ReaderAt, id uint32, hdr []byte) (Framing, error) {
	v := saltedVersion(hdr)
	if len(hdr) >= 24 && declaresSalted(hdr) &&
		crc32.Checksum(hdr[:20], castagnoli) == binary.BigEndian.Uint32(hdr[20:24]) {
		f := versionFraming(v)
		f.salt = binary.BigEndian.Uint64(hdr[12:20])
		return f, nil
	}
	if len(hdr) >= HeaderSize && saltCopyCRC(id, hdr[24:32]) == binary.BigEndian.Uint32(hdr[32:36]) {
		f := versionFraming(v)
		f.salt = binary.BigEndian.Uint64(hdr[24:32])
		return settleTimed(r, hdr, f)
	}
	if b, err := readFrame(r, headerSizeV1, framingV1); err != nil {
		return Framing{}, err
	} else if b != nil && framingV1.check(b) == nil {
		return framingV1, nil
	}
	declared := versionFraming(v)
	f, err := deriveSalt(r, declared.version)
	if err != nil || f.version != 0 {
		if err == nil {
			f.recycled = declared.recycled
			return settleTimed(r, hdr, f)
		}
		return f, err
	}
	if len(hdr) >= versionEnd && binary.BigEndian.Uint16(hdr[versionOffset:versionEnd]) == 1 {
		return framingV1, nil
	}
	declared.lost = true
	return declared, nil
}

// maxTimedProbe bounds the frames settleTimed reads.
const maxTimedProbe = 64

// settleTimed chooses, for the framing f found for a file whose header no
// longer says its version, between the layouts with commit times (7, or 8
// encrypted) and without (4, or 6): the first commit of puts among the
// file's first maxTimedProbe frames decodes in one of them only (its time
// is 8 bytes more). Without one, f stays: the version this build writes.
// A header that still says its version keeps it.
func settleTimed(r io.ReaderAt, hdr []byte, f Framing) (Framing, error) {
	if declaresSalted(hdr) {
		return f, nil
	}
	off := int64(HeaderSize)
	for range maxTimedProbe {
		b, err := readFrame(r, off, f)
		if err != nil || b == nil || f.check(b) != nil {
			return f, err
		}
		p := b[FrameHeaderSize:]
		if RecordType(p[0]) == RecordCommit && len(p) > payloadHeaderSize && RecordType(p[payloadHeaderSize]) == RecordPut {
			if decodePayloadOf(p, new(Record), nil, f.version) != "" {
				f.version = untimedVersion(f.version)
			}
			return f, nil
		}
		off += int64(len(b))
	}
	return f, nil
}

// untimedVersion is the version without commit times that timed version v
// adds them to: 4 for 7, 6 for 8.
func untimedVersion(v uint16) uint16 {
	switch v {
	case TimedVersion:
		return 4
	case TimedBoundVersion:
		return ChannelBoundVersion
	}
	return v
}

// declaresSalted reports whether the header bytes hdr declare a version
// with a salt this build reads: 2 to 8.
func declaresSalted(hdr []byte) bool {
	if len(hdr) < versionEnd {
		return false
	}
	v := binary.BigEndian.Uint16(hdr[versionOffset:versionEnd])
	return v >= 2 && v <= MaxFormatVersion
}

// saltedVersion is the version recoverFraming gives a damaged header whose
// salt it finds (or loses): the one its version field says if that is 2 to
// 8, else FormatVersion.
func saltedVersion(hdr []byte) uint16 {
	if declaresSalted(hdr) {
		return binary.BigEndian.Uint16(hdr[versionOffset:versionEnd])
	}
	return FormatVersion
}

// deriveSalt is step 4 of recoverFraming: the salt that makes the frame at
// HeaderSize valid, if the frame after it is valid with it too, with
// version v. It returns the zero Framing if there is none.
func deriveSalt(r io.ReaderAt, v uint16) (Framing, error) {
	probe := Framing{version: v}
	first, err := readFrame(r, HeaderSize, probe)
	if err != nil || first == nil {
		return Framing{}, err
	}
	hi := headerCRC(first) ^ binary.BigEndian.Uint32(first[4:8])
	lo := crc32.Checksum(first[FrameHeaderSize:], castagnoli) ^ binary.BigEndian.Uint32(first[8:12])
	p := first[FrameHeaderSize:]
	if !encryptedVersion(v) && RecordType(p[0]) == RecordKey {
		// Only an encrypted file starts with a key record, whose layout
		// tells a bound version (6, or 8 when the version field says 7,
		// or is lost) from 5: its puts are sealed, whatever the
		// damaged version field says.
		if timedVersion(v) {
			v = TimedBoundVersion
		} else {
			v = ChannelBoundVersion
		}
		if decodePayloadOf(p, new(Record), nil, v) != "" {
			v = EncryptedVersion
		}
	}
	if decodePayloadOf(p, new(Record), nil, v) != "" {
		// A file without commit times (version 4 or 6) whose version
		// field is lost, if its first record is a put.
		if v = untimedVersion(v); decodePayloadOf(p, new(Record), nil, v) != "" {
			return Framing{}, nil
		}
	}
	f := Framing{version: v, salt: uint64(hi)<<32 | uint64(lo)}
	second, err := readFrame(r, HeaderSize+int64(len(first)), f)
	if err != nil || second == nil || f.check(second) != nil {
		return Framing{}, err
	}
	return f, nil
}

// readFrame reads the whole frame of framing f at off, as far as its length
// field is plausible; nil if it is not, or if the file ends first.
func readFrame(r io.ReaderAt, off int64, f Framing) ([]byte, error) {
	var l [4]byte
	if err := readFull(r, l[:], off); err != nil {
		return nil, ignoreEOF(err)
	}
	n, err := f.frameLen(l[:])
	if err != nil {
		return nil, nil
	}
	b := make([]byte, n)
	if err := readFull(r, b, off); err != nil {
		return nil, ignoreEOF(err)
	}
	return b, nil
}

// ignoreEOF maps the end of the file to no error.
func ignoreEOF(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}
