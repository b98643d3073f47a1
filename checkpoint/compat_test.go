package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"path/filepath"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// The compatibility rule (docs/format.md, "Compatibility"): a checkpoint
// directory file of a newer format version is refused with a
// *corrupt.FormatError, never treated as damage, and nothing is changed.

// withVersion returns a copy of b, the bytes of the checkpoint directory
// file name, with format version v and its checksum recomputed, so that
// only the version is "wrong".
func withVersion(name string, b []byte, v uint32) []byte {
	b = bytes.Clone(b)
	if name != CheckpointName {
		binary.BigEndian.PutUint16(b[versionOffset:], uint16(v))
		return reCRC(b)
	}
	var h [headerUsed]uint64
	for i := range h {
		h[i] = binary.BigEndian.Uint64(b[i*8:])
	}
	h[slotMagic] = magicVersion&magicMask | uint64(v)
	h[slotHeaderCRC] = uint64(headerCRC(&h))
	for i := range h {
		binary.BigEndian.PutUint64(b[i*8:], h[i])
	}
	return b
}

// requireNewer checks err is a *corrupt.FormatError for file declaring
// version, and neither corruption nor a bad checkpoint, with formatVersion
// the newest supported.
func requireNewer(t *testing.T, err error, file string, version uint64) {
	t.Helper()
	requireNewerThan(t, err, file, version, uint64(newerVersion(filepath.Base(file))-1))
}

// requireNewerThan is requireNewer for a file (the groups catalog) whose
// newest supported version is supported.
func requireNewerThan(t *testing.T, err error, file string, version, supported uint64) {
	t.Helper()
	var fe *corrupt.FormatError
	if !errors.As(err, &fe) || !errors.Is(err, corrupt.ErrUnsupportedFormat) {
		t.Fatalf("got %v (%T), want a *corrupt.FormatError", err, err)
	}
	if errors.Is(err, corrupt.ErrCorrupt) || errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("%v matches ErrCorrupt or ErrBadCheckpoint: a newer file is not damage", err)
	}
	want := corrupt.FormatError{File: file, Offset: versionOffset, Version: version, Supported: supported}
	if *fe != want {
		t.Fatalf("got %+v, want %+v", *fe, want)
	}
}

// decodeFile decodes the bytes of the checkpoint directory file name as
// Open does.
func decodeFile(name string, b []byte) error {
	switch name {
	case CheckpointName:
		_, err := decodeHeader(name, b[:min(len(b), headerUsed*8)], int64(len(b)))
		return err
	case MetaName:
		_, err := DecodeMeta(b)
		return err
	case InflightPutsName:
		_, _, err := DecodeInflight(InflightPuts, b)
		return err
	default:
		_, _, err := DecodeInflight(InflightTakes, b)
		return err
	}
}

// newerVersion is the first version of checkpoint file name this build
// does not read: 3 for checkpoint.meta, 2 for the others.
func newerVersion(name string) uint32 {
	if name == MetaName {
		return metaVersion + 1
	}
	return formatVersion + 1
}

func TestDecodeNewerVersion(t *testing.T) {
	files := goldenFiles(t)
	for _, name := range checkpointFiles {
		nv := newerVersion(name)
		crcAt := len(files[name]) - 1 // the trailing CRC
		if name == CheckpointName {
			crcAt = slotHeaderCRC*8 + 7
		}
		for _, tc := range []struct {
			what    string
			edit    func([]byte) []byte
			version uint64
		}{
			{"version_2", func(b []byte) []byte { return withVersion(name, b, nv) }, uint64(nv)},
			{"version_65535", func(b []byte) []byte { return withVersion(name, b, 0xFFFF) }, 0xFFFF},
			// The version is read before what a newer version may
			// change: the checksum, the marker, the length.
			{"version_2_other_checksum", func(b []byte) []byte { b = withVersion(name, b, nv); b[crcAt] ^= 1; return b }, uint64(nv)},
			{"version_2_incomplete_marker", func(b []byte) []byte {
				b = withVersion(name, b, nv)
				if name == CheckpointName {
					binary.BigEndian.PutUint64(b[slotMarker*8:], markerIncomplete)
				}
				return b
			}, uint64(nv)},
			{"version_2_other_length", func(b []byte) []byte {
				b = withVersion(name, b, nv)
				if name == CheckpointName {
					return append(b, make([]byte, 8)...) // a file length that does not match the capacity
				}
				return b[:versionEnd]
			}, uint64(nv)},
		} {
			t.Run(name+"/"+tc.what, func(t *testing.T) {
				requireNewer(t, decodeFile(name, tc.edit(files[name])), name, tc.version)
			})
		}
		t.Run(name+"/bad_magic_is_damage", func(t *testing.T) {
			b := withVersion(name, files[name], nv)
			b[0] ^= 0x20
			if err := decodeFile(name, b); !errors.Is(err, corrupt.ErrCorrupt) || errors.Is(err, corrupt.ErrUnsupportedFormat) {
				t.Fatalf("got %v, want corruption", err)
			}
		})
	}
}

// writeDir writes files into dir of fsys.
func writeDir(t *testing.T, fsys vfs.FS, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		replace(t, fsys, path(dir, name), b)
	}
}

// readDir returns every file of dir with its bytes.
func readDir(t *testing.T, fsys vfs.FS, dir string) map[string][]byte {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		if out[n], err = vfs.ReadFile(fsys, path(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestOpenNewerVersion: Open, CheckFormat and RestoreBackup refuse a
// checkpoint directory with one file of a newer version, and change nothing.
func TestOpenNewerVersion(t *testing.T) {
	golden := goldenFiles(t)
	for _, name := range checkpointFiles {
		nv := newerVersion(name)
		for _, tc := range []struct {
			what string
			b    []byte
		}{
			{"version_2", withVersion(name, golden[name], nv)},
			{"version_2_magic_and_version_only", withVersion(name, golden[name], nv)[:8]},
		} {
			t.Run(name+"/"+tc.what, func(t *testing.T) {
				const dir, other = "/cp", "/other"
				mem := newMem(t, dir, other)
				files := maps.Clone(golden)
				files[name] = tc.b
				writeDir(t, mem, dir, files)
				writeDir(t, mem, other, golden)
				replace(t, mem, path(other, BackupCompleteName), nil)
				before, beforeOther := readDir(t, mem, dir), readDir(t, mem, other)

				file := path(dir, name)
				_, _, err := Open(mem, dir)
				requireNewer(t, err, file, uint64(nv))
				requireNewer(t, CheckFormat(mem, dir), file, uint64(nv))
				// Restoring over it, or restoring it, would lose it.
				requireNewer(t, RestoreBackup(mem, other, dir), file, uint64(nv))
				replace(t, mem, path(dir, BackupCompleteName), nil)
				before[BackupCompleteName] = nil
				requireNewer(t, RestoreBackup(mem, dir, other), file, uint64(nv))

				if after := readDir(t, mem, dir); !maps.EqualFunc(before, after, bytes.Equal) {
					t.Errorf("%s changed", dir)
				}
				if after := readDir(t, mem, other); !maps.EqualFunc(beforeOther, after, bytes.Equal) {
					t.Errorf("%s changed", other)
				}
			})
		}
	}
}

// TestCheckFormatLeavesDamageToOpen: CheckFormat judges versions only.
func TestCheckFormatLeavesDamageToOpen(t *testing.T) {
	golden := goldenFiles(t)
	for _, name := range checkpointFiles {
		for what, b := range map[string][]byte{
			"version_0": withVersion(name, golden[name], 0),
			"bad_magic": func() []byte { b := withVersion(name, golden[name], 2); b[1] ^= 0x20; return b }(),
			"short":     golden[name][:3],
			"empty":     nil,
		} {
			t.Run(name+"/"+what, func(t *testing.T) {
				mem := newMem(t, "/cp")
				files := maps.Clone(golden)
				files[name] = b
				writeDir(t, mem, "/cp", files)
				if err := CheckFormat(mem, "/cp"); err != nil {
					t.Fatalf("CheckFormat = %v, want nil", err)
				}
				if _, _, err := Open(mem, "/cp"); !errors.Is(err, ErrBadCheckpoint) {
					t.Fatalf("Open = %v, want ErrBadCheckpoint", err)
				}
			})
		}
	}
	if err := CheckFormat(newMem(t, "/empty"), "/empty"); err != nil {
		t.Fatalf("CheckFormat of an empty dir = %v", err)
	}
}
