package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Every file of a checkpoint directory starts with its magic (bytes 0..3)
// and its version (bytes 4..5 of checkpoint.meta and the inflight files, the
// low half of slot 0, bytes 4..7, of the checkpoint file). They keep these
// places in every format version, and a reader checks them before anything
// a newer version may change (lengths, checksums, fields), so that a file a
// newer release wrote is refused with a *corrupt.FormatError instead of
// being taken for damage and thrown away. Part of the on-disk format; never
// move.
const (
	versionOffset = 4
	versionEnd    = 6 // bytes a reader needs to see the magic and a uint16 version
)

// ckptVersion is the checkpoint file's version, the low half of slot 0.
const ckptVersion = uint32(magicVersion &^ magicMask)

// The format versions of the checkpoint directory's files that this build
// writes, for a tool that reports them (fcreplay version). It reads each
// file's versions from MinFormatVersion up to these and refuses a newer one
// (CheckFormat).
const (
	MinFormatVersion  = 1              // the oldest version read, of every file here
	CheckpointVersion = ckptVersion    // the checkpoint file
	MetaVersion       = metaVersion    // checkpoint.meta
	InflightVersion   = formatVersion  // inflightputs and inflighttakes
	CatalogVersion    = catalogVersion // the groups catalog (CatalogName)
	JournalVersion    = journalVersion // the delivery journal (JournalName)
)

// CheckFormat reports whether a newer release of filechannel wrote one of
// the files of the checkpoint set in dir: the checkpoint files at its top
// level (the checkpoint file, checkpoint.meta, inflightputs,
// inflighttakes), its groups catalog, and the checkpoint files of every
// group dir present (ListGroupDirs: all of them, listed in the catalog or
// not). It reads the magic and version of each file that exists and
// returns a *corrupt.FormatError, which unwraps to
// corrupt.ErrUnsupportedFormat, for the first with the right magic and a
// version newer than this build reads. Nothing else is judged here: a
// missing or short file, another magic or an older version is for Open
// (and ReadCatalog) to report as damage. Its only other errors are I/O
// errors, and those matching vfs.ErrNotRegular: a checkpoint file or the
// catalog that is not a regular file, a group-N entry that is not a
// directory. A dir that does not exist holds no newer file. Open runs it
// first, RestoreBackup on both directories; callers that are about to
// delete or overwrite a checkpoint directory run it too.
func CheckFormat(fsys vfs.FS, dir string) error {
	if err := checkFiles(fsys, dir); err != nil {
		return err
	}
	name := path(dir, CatalogName)
	b, err := readPrefix(fsys, name, versionEnd)
	if err != nil {
		return err
	}
	if len(b) >= versionEnd {
		if err := newerFile(name, b, catalogMagic); err != nil {
			return err
		}
	}
	name = path(dir, JournalName)
	if b, err = readPrefix(fsys, name, versionEnd); err != nil {
		return err
	}
	if len(b) >= versionEnd {
		if err := newerFileThan(name, b, journalMagic, journalVersion); err != nil {
			return err
		}
	}
	ids, err := listGroupDirs(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := checkFiles(fsys, GroupDir(dir, id)); err != nil {
			return err
		}
	}
	return nil
}

// checkFiles is CheckFormat for the four checkpoint files of one ring in
// dir.
func checkFiles(fsys vfs.FS, dir string) error {
	for _, f := range [...]struct{ name, magic string }{
		{CheckpointName, ""}, {MetaName, metaMagic}, {InflightPutsName, putsMagic}, {InflightTakesName, takesMagic},
	} {
		name := path(dir, f.name)
		b, err := readPrefix(fsys, name, 8)
		if err != nil {
			return err
		}
		switch {
		case f.magic == "" && len(b) == 8:
			err = newerCheckpointFile(name, binary.BigEndian.Uint64(b))
		case f.magic != "" && len(b) >= versionEnd:
			err = newerFile(name, b, f.magic)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readPrefix returns up to the first n bytes of the file name; nil for a
// file that does not exist.
func readPrefix(fsys vfs.FS, name string, n int) ([]byte, error) {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close() // read-only: a close error loses nothing
	b := make([]byte, n)
	n, err = f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b[:n], nil
}

// newerCheckpointFile returns the *corrupt.FormatError of the checkpoint
// file name if slot 0 holds its magic and a version newer than this build's;
// nil otherwise (another magic or version is damage, for checkHeader).
func newerCheckpointFile(name string, slot0 uint64) error {
	if slot0&magicMask != magicVersion&magicMask || uint32(slot0) <= ckptVersion {
		return nil
	}
	return &corrupt.FormatError{File: name, Offset: versionOffset, Version: uint64(uint32(slot0)), Supported: uint64(ckptVersion)}
}

// newerFile returns the *corrupt.FormatError of file (checkpoint.meta, an
// inflight file or the groups catalog, whose magic is magic) if b, its
// first versionEnd or more bytes, holds that magic and a version newer than
// this build's; nil otherwise.
func newerFile(file string, b []byte, magic string) error {
	newest := uint16(formatVersion)
	switch magic {
	case catalogMagic:
		newest = catalogVersion
	case metaMagic:
		newest = metaVersion
	}
	return newerFileThan(file, b, magic, newest)
}

// newerFileThan is newerFile for a file whose newest version is newest.
func newerFileThan(file string, b []byte, magic string, newest uint16) error {
	if string(b[:4]) != magic {
		return nil
	}
	if v := binary.BigEndian.Uint16(b[versionOffset:versionEnd]); v > newest {
		return &corrupt.FormatError{File: file, Offset: versionOffset, Version: uint64(v), Supported: uint64(newest)}
	}
	return nil
}
