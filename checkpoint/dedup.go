package checkpoint

// The deduplication snapshot (DedupName): the ids of the events a channel
// with Config.Dedup committed within its window, so that the window
// survives the deletion of the log files that held them. The channel writes
// it (WriteDedup: the one publishing recipe) at every checkpoint, before
// the checkpoint files, and before any log file is deleted; Open reads it
// (ReadDedup) and adds the ids of the puts it replays.
//
//	offset  size  field
//	0       8     magic "FCDEDUP1"
//	8       2     version (1), big endian
//	10      2     header name length H
//	12      H     header name (Config.Dedup.Header)
//	12+H    8     entry count N
//	20+H    24*N  entries, in commit order: id (16 bytes: two big-endian
//	              uint64, the header value's SHA-256 truncated), commit
//	              time (int64 Unix nanoseconds, big endian)
//	20+H+24N 4    CRC-32C (Castagnoli) of every byte before it
//
// Part of the on-disk format; never renumber.

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Deduplication snapshot constants; part of the on-disk format.
const (
	// DedupName is the deduplication snapshot in the checkpoint dir.
	DedupName    = "dedup"
	DedupVersion = 1
	dedupMagic   = "FCDEDUP1"
	dedupEntry   = 24
	dedupFixed   = 8 + 2 + 2 + 8 + 4
)

// DedupID is the deduplication id of header value v: its SHA-256
// truncated to 128 bits (the first 16 bytes, as two big-endian uint64).
// Stable across processes and releases: part of the on-disk format.
func DedupID(v string) [2]uint64 {
	sum := sha256.Sum256([]byte(v))
	return [2]uint64{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])}
}

// DedupEntry is an id the deduplication window remembers: the id of an
// event's header value and its put commit's time (Unix nanoseconds).
type DedupEntry struct {
	ID   [2]uint64
	Time int64
}

// AppendDedup appends the snapshot of header's entries to dst.
func AppendDedup(dst []byte, header string, entries []DedupEntry) []byte {
	start := len(dst)
	dst = slices.Grow(dst, dedupFixed+len(header)+dedupEntry*len(entries))
	dst = append(dst, dedupMagic...)
	dst = binary.BigEndian.AppendUint16(dst, DedupVersion)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(header)))
	dst = append(dst, header...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, e.ID[0])
		dst = binary.BigEndian.AppendUint64(dst, e.ID[1])
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Time))
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// WriteDedup publishes the snapshot of header's entries as dir's DedupName
// (write .tmp, fsync, rename, fsync dir). buf is scratch space for the
// encoding; it returns it, grown.
func WriteDedup(fsys vfs.FS, dir, header string, entries []DedupEntry, buf []byte) ([]byte, error) {
	if len(header) > 0xffff {
		return buf, fmt.Errorf("dedup snapshot: header name of %d bytes", len(header))
	}
	buf = AppendDedup(buf[:0], header, entries)
	name := filepath.Join(dir, DedupName)
	if err := vfs.WriteFileAtomic(fsys, name, buf); err != nil {
		return buf, fmt.Errorf("write %s: %w", name, err)
	}
	return buf, nil
}

// ReadDedup reads dir's deduplication snapshot: the header name it is of
// and its entries, in commit order. A missing file is an error wrapping
// fs.ErrNotExist; a damaged one a *corrupt.Error; a newer version a
// *corrupt.FormatError.
func ReadDedup(fsys vfs.FS, dir string) (string, []DedupEntry, error) {
	name := filepath.Join(dir, DedupName)
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", name, err)
	}
	return DecodeDedup(name, b)
}

// DecodeDedup decodes snapshot b (of file name, for errors).
func DecodeDedup(name string, b []byte) (string, []DedupEntry, error) {
	if len(b) < dedupFixed || string(b[:8]) != dedupMagic {
		return "", nil, corrupt.New(name, 0, "not a deduplication snapshot (%d bytes, bad magic or too short)", len(b))
	}
	if v := binary.BigEndian.Uint16(b[8:]); v != DedupVersion {
		if v > DedupVersion {
			return "", nil, &corrupt.FormatError{File: name, Offset: 8, Version: uint64(v), Supported: DedupVersion}
		}
		return "", nil, corrupt.New(name, 8, "deduplication snapshot version %d", v)
	}
	if got, want := crc32.Checksum(b[:len(b)-4], crcTable), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return "", nil, corrupt.New(name, int64(len(b)-4), "deduplication snapshot checksum %08x, want %08x", got, want)
	}
	h := int(binary.BigEndian.Uint16(b[10:]))
	if 12+h+8 > len(b)-4 {
		return "", nil, corrupt.New(name, 10, "header name of %d bytes overruns the file", h)
	}
	header := string(b[12 : 12+h])
	p := b[12+h : len(b)-4]
	n := binary.BigEndian.Uint64(p)
	p = p[8:]
	if n != uint64(len(p))/dedupEntry || len(p)%dedupEntry != 0 {
		return "", nil, corrupt.New(name, int64(12+h), "%d entries in %d bytes", n, len(p))
	}
	entries := make([]DedupEntry, n)
	for i := range entries {
		e := p[i*dedupEntry:]
		entries[i] = DedupEntry{ID: [2]uint64{binary.BigEndian.Uint64(e), binary.BigEndian.Uint64(e[8:])},
			Time: int64(binary.BigEndian.Uint64(e[16:]))}
	}
	return header, entries, nil
}
