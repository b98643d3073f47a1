package logfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// The functions here change a log file in place after copying the bytes they
// remove or overwrite to a .corrupt file next to it (keepBytes). Each one
// publishes the copy before it touches the log, so a crash at any point leaves
// the bytes in one of the two places, and running it again finishes the job.

// CutTail removes the bytes of the log file at path from offset end on (a
// torn tail), keeping them in CorruptName(id, end) next to it. The copy is
// published (written, fsynced, renamed, directory fsynced) before the log is
// truncated and fsynced, so a crash at any point leaves the bytes in one of
// the two places; running CutTail again finishes the job. It returns the
// path of the copy. A file no longer than end is left alone ("" and nil).
// Zeros at the end of the tail (space laid out ahead of the writes) are
// not copied: the copy ends at the tail's last non-zero byte, and a tail of
// zeros only is truncated without one ("").
func CutTail(fsys vfs.FS, path string, end int64) (string, error) {
	id, ok := ParseLogName(filepath.Base(path))
	if !ok {
		return "", fmt.Errorf("cut tail of %s: not a log file name", path)
	}
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return "", fmt.Errorf("cut tail: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		return "", errors.Join(fmt.Errorf("cut tail: stat %s: %w", path, err), f.Close())
	}
	if fi.Size() <= end {
		return "", f.Close()
	}
	last, err := lastNonZero(f, end, fi.Size())
	if err != nil {
		return "", errors.Join(fmt.Errorf("cut tail: read %s: %w", path, err), f.Close())
	}
	keep := ""
	if last > end {
		if keep, err = keepBytes(fsys, filepath.Dir(path), id, end, f, last-end); err != nil {
			return "", errors.Join(fmt.Errorf("cut tail: keep the bytes of %s: %w", path, err), f.Close())
		}
	}
	if err := f.Truncate(end); err != nil {
		return "", errors.Join(fmt.Errorf("cut tail: truncate %s: %w", path, err), f.Close())
	}
	if err := f.Sync(); err != nil {
		return "", errors.Join(fmt.Errorf("cut tail: sync %s: %w", path, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("cut tail: close %s: %w", path, err)
	}
	return keep, nil
}

// PadRegion overwrites the length bytes of the log file at path from offset
// off (a damaged region in the middle of the file) with padding frames
// (Framing.PaddingSizes, in the framing of the file: its version and salt,
// from its header or, if that is damaged, from recoverFraming), after
// keeping the bytes in CorruptName(id, off) next to it.
// No other byte of the file moves, so pointers to the records after the
// region stay valid. The copy is published before the overwrite, and the
// log is fsynced after it; running PadRegion again after a crash finishes the
// job (a region overwritten in part still starts at off: a scan steps over
// padding after damage). It returns the path of the copy. The region must lie
// after the file header, inside the file, and be at least
// Framing.MinPaddingSize bytes long; a salted file whose salt is lost
// cannot be padded.
func PadRegion(fsys vfs.FS, path string, off, length int64) (string, error) {
	id, ok := ParseLogName(filepath.Base(path))
	if !ok {
		return "", fmt.Errorf("pad region of %s: not a log file name", path)
	}
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return "", fmt.Errorf("pad region: %w", err)
	}
	fail := func(format string, args ...any) (string, error) {
		return "", errors.Join(fmt.Errorf("pad region of %s: "+format, append([]any{path}, args...)...), f.Close())
	}
	fr, err := fileFraming(f, id, path)
	switch {
	case err != nil:
		return fail("%w", err)
	case fr.lost:
		return fail("the salt of the file is lost with its header: padding would not verify")
	case off < fr.HeaderSize() || length < int64(fr.MinPaddingSize()):
		return fail("%d bytes at offset %d cannot be padded (at least %d bytes after the %d-byte header)",
			length, off, fr.MinPaddingSize(), fr.HeaderSize())
	}
	fi, err := f.Stat()
	if err != nil {
		return fail("stat: %w", err)
	}
	if off+length > fi.Size() {
		return fail("%d bytes at offset %d run past the end of the %d-byte file", length, off, fi.Size())
	}
	keep, err := keepBytes(fsys, filepath.Dir(path), id, off, f, length)
	if err != nil {
		return fail("keep the bytes: %w", err)
	}
	if err := writePadding(f, off, length, fr); err != nil {
		return fail("%w", err)
	}
	if err := f.Sync(); err != nil {
		return fail("sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("pad region of %s: close: %w", path, err)
	}
	return keep, nil
}

// padChunk is the unit in which writePadding writes a frame's zero filler.
const padChunk = 1 << 20

var zeroChunk [padChunk]byte

// writePadding writes the padding frames of framing fr covering [off,
// off+length): each frame's length, checksums and fixed fields, then its
// zero filler, a chunk at a time (a frame may be 64 MiB long).
func writePadding(f vfs.File, off, length int64, fr Framing) error {
	fhs, minSize := fr.FrameHeaderSize(), fr.MinPaddingSize()
	for _, size := range fr.PaddingSizes(length) {
		// The frame of AppendPadding, without building the filler.
		var buf [MinPaddingSize]byte
		head := buf[:minSize]
		binary.BigEndian.PutUint32(head[0:4], uint32(size-fhs))
		head[fhs] = byte(RecordPadding) // ids zero
		// The checksum over the payload: version 1 starts it with the
		// length field.
		var crc uint32
		if fr.version == 1 {
			crc = crc32.Checksum(head[0:4], castagnoli)
		}
		crc = crc32.Update(crc, castagnoli, head[fhs:])
		for n := size - minSize; n > 0; n -= min(n, padChunk) {
			crc = crc32.Update(crc, castagnoli, zeroChunk[:min(n, padChunk)])
		}
		if fr.version == 1 {
			binary.BigEndian.PutUint32(head[4:8], crc)
		} else {
			hm, pm := fr.masks()
			binary.BigEndian.PutUint32(head[8:12], crc^pm)
			binary.BigEndian.PutUint32(head[4:8], headerCRC(head)^hm)
		}
		if _, err := f.WriteAt(head, off); err != nil {
			return fmt.Errorf("write padding at offset %d: %w", off, err)
		}
		for pos := off + int64(minSize); pos < off+int64(size); {
			n := min(off+int64(size)-pos, padChunk)
			if _, err := f.WriteAt(zeroChunk[:n], pos); err != nil {
				return fmt.Errorf("write padding at offset %d: %w", pos, err)
			}
			pos += n
		}
		off += int64(size)
	}
	return nil
}

// RewriteHeader replaces a damaged file header of the log file at path with
// a valid one for the id in the file's name, after keeping the old header
// bytes in CorruptName(id, 0) next to it, and fsyncs the file. It returns
// the path of the copy, or "" and nil if the header is valid. A valid
// header naming another file id is an error (the file was renamed, not
// damaged), as are a file shorter than a header (an unfinished create,
// which holds no record) and a header of a newer version.
//
// The new header keeps the file's framing, which its records need: its
// version, and from version 2 on the salt recoverFraming finds (a copy whose
// checksum holds, or the salt the first records were sealed with). When
// the salt is lost no record of the file verifies whatever the header says,
// and the header gets a fresh salt: a scan then finds no record after it
// (a torn tail, which a repair cuts, keeping the bytes).
func RewriteHeader(fsys vfs.FS, path string) (string, error) {
	id, ok := ParseLogName(filepath.Base(path))
	if !ok {
		return "", fmt.Errorf("rewrite header of %s: not a log file name", path)
	}
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return "", fmt.Errorf("rewrite header: %w", err)
	}
	fail := func(format string, args ...any) (string, error) {
		return "", errors.Join(fmt.Errorf("rewrite header of %s: "+format, append([]any{path}, args...)...), f.Close())
	}
	hdr, err := readHeaderBytes(f, path)
	if err != nil {
		return fail("%w", err)
	}
	hid, _, derr := decodeFileHeader(hdr)
	switch {
	case derr == nil && hid == id:
		return "", f.Close()
	case derr == nil:
		return fail("the header is valid and names file id %d", hid)
	case errors.Is(derr, corrupt.ErrUnsupportedFormat):
		return fail("%w", inFile(derr, path))
	}
	fr, err := recoverFraming(f, id, hdr)
	if err != nil {
		return fail("read: %w", err)
	}
	if fr.lost {
		fr = newFraming()
	}
	if n := int64(len(hdr)); n < fr.HeaderSize() {
		return fail("the file is %d bytes long, shorter than a header", n)
	}
	keep, err := keepBytes(fsys, filepath.Dir(path), id, 0, f, fr.HeaderSize())
	if err != nil {
		return fail("keep the bytes: %w", err)
	}
	if _, err := f.WriteAt(appendFileHeader(nil, id, fr), 0); err != nil {
		return fail("write: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fail("sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("rewrite header of %s: close: %w", path, err)
	}
	return keep, nil
}

// maxCorruptVariants bounds the names keepBytes tries for one offset.
const maxCorruptVariants = 1000

// keepBytes makes the n bytes of src from off durable in a .corrupt file of
// dir and returns its path: CorruptName(id, off), or, if a file of that name
// holds other bytes, the first of corruptVariant(id, off, 1), (…, 2), … that
// is free or holds the same bytes. A .corrupt file is never replaced: one
// left by an earlier attempt whose overwrite then tore holds the original
// bytes. A file that already holds exactly these bytes (an earlier attempt
// that crashed before changing the log) is fsynced with its directory and
// reused. A name taken by something that is not a regular file (a link,
// followed by nothing here) is left alone too. New copies are published with
// vfs.WriteFileAtomicFrom, so they get the permission bits vfs.FileMode(fsys).
func keepBytes(fsys vfs.FS, dir string, id uint32, off int64, src io.ReaderAt, n int64) (string, error) {
	for v := 0; v < maxCorruptVariants; v++ {
		path := filepath.Join(dir, corruptVariant(id, off, v))
		same, err := holds(fsys, path, src, off, n)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := vfs.WriteFileAtomicFrom(fsys, path, io.NewSectionReader(src, off, n)); err != nil {
				return "", err
			}
			return path, nil
		case errors.Is(err, vfs.ErrNotRegular):
			continue
		case err != nil:
			return "", err
		case same:
			if err := vfs.SyncFile(fsys, path); err != nil {
				return "", err
			}
			if err := fsys.SyncDir(dir); err != nil {
				return "", err
			}
			return path, nil
		}
	}
	return "", fmt.Errorf("%d .corrupt files for offset %d of log %d already hold other bytes", maxCorruptVariants, off, id)
}

// corruptVariant is CorruptName(id, off) for v == 0, and
// "log-0000000007.4096.v.corrupt" otherwise.
func corruptVariant(id uint32, off int64, v int) string {
	if v == 0 {
		return CorruptName(id, off)
	}
	return fmt.Sprintf("%s.%d.%d.corrupt", LogName(id), off, v)
}

// holds reports whether the file at path holds exactly the n bytes of src
// from off. A missing file is an error wrapping fs.ErrNotExist.
func holds(fsys vfs.FS, path string, src io.ReaderAt, off, n int64) (same bool, err error) {
	f, err := fsys.Open(path)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() != n {
		return false, nil
	}
	a, b := make([]byte, min(n, padChunk)), make([]byte, min(n, padChunk))
	for pos := int64(0); pos < n; {
		k := int(min(n-pos, int64(len(a))))
		if err := readFull(src, a[:k], off+pos); err != nil {
			return false, fmt.Errorf("read at offset %d: %w", off+pos, err)
		}
		if err := readFull(f, b[:k], pos); err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		if !bytes.Equal(a[:k], b[:k]) {
			return false, nil
		}
		pos += int64(k)
	}
	return true, nil
}

// readFull fills b from r at off; an io.EOF with b full is no error.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// fileFraming returns the framing of the open log file f (id from its
// name): its header's, or recoverFraming's if the header is damaged. A
// header of a newer version, or naming another id, is an error.
func fileFraming(f io.ReaderAt, id uint32, path string) (Framing, error) {
	hdr, err := readHeaderBytes(f, path)
	if err != nil {
		return Framing{}, err
	}
	hid, fr, derr := decodeFileHeader(hdr)
	switch {
	case derr == nil && hid != id:
		return Framing{}, corrupt.New(path, 0, "header names file id %d, file name says %d", hid, id)
	case derr == nil:
		return fr, nil
	case errors.Is(derr, corrupt.ErrUnsupportedFormat):
		return Framing{}, inFile(derr, path)
	}
	return recoverFraming(f, id, hdr)
}

// NonZeroEnd returns the offset just past the last non-zero byte of the
// file at path from offset from on, or from if only zeros follow it: where
// a torn tail's bytes end, before the zeros laid out ahead of the writes.
func NonZeroEnd(fsys vfs.FS, path string, from int64) (int64, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() <= from {
		return from, nil
	}
	return lastNonZero(f, from, fi.Size())
}

// lastNonZero returns the offset just past the last non-zero byte of f in
// [from, to), or from if there is none, reading backwards a MiB at a time.
func lastNonZero(f io.ReaderAt, from, to int64) (int64, error) {
	buf := make([]byte, min(to-from, 1<<20))
	for to > from {
		n := min(int64(len(buf)), to-from)
		b := buf[:n]
		if _, err := f.ReadAt(b, to-n); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if zeros.All(b) {
			to -= n
			continue
		}
		for i := n - 1; i >= 0; i-- {
			if b[i] != 0 {
				return to - n + i + 1, nil
			}
		}
		to -= n
	}
	return from, nil
}
