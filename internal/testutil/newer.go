package testutil

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Files a newer release would write, for the compatibility tests
// (docs/format.md, "Compatibility"). Each helper takes a real file a channel
// wrote and changes only what a newer release would: the version field (at
// offset 4 in every file) or an appended record, with every checksum
// recomputed, so that only the version or the record type is new. The byte
// offsets are spelled out here from docs/format.md on purpose, independently
// of the packages under test.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// edit rewrites the file at path with f applied to its bytes.
func edit(t testing.TB, path string, f func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f(b)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// SetLogVersion makes the log file at path declare format version v
// (uint16 at offset 4), with the header CRC (bytes 12..15, over 0..11)
// recomputed.
func SetLogVersion(t testing.TB, path string, v uint16) {
	t.Helper()
	edit(t, path, func(b []byte) {
		binary.BigEndian.PutUint16(b[4:], v)
		binary.BigEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	})
}

// SetCheckpointVersion makes the checkpoint file at path declare version v
// (the low half of slot 0, bytes 4..7), with the header CRC (slot 7, over
// slots 0..6) recomputed.
func SetCheckpointVersion(t testing.TB, path string, v uint32) {
	t.Helper()
	edit(t, path, func(b []byte) {
		binary.BigEndian.PutUint32(b[4:], v)
		binary.BigEndian.PutUint64(b[56:], uint64(crc32.Checksum(b[:56], castagnoli)))
	})
}

// SetFileVersion makes checkpoint.meta or an inflight file at path declare
// format version v (uint16 at offset 4), with its trailing CRC recomputed.
func SetFileVersion(t testing.TB, path string, v uint16) {
	t.Helper()
	edit(t, path, func(b []byte) {
		binary.BigEndian.PutUint16(b[4:], v)
		end := len(b) - 4
		binary.BigEndian.PutUint32(b[end:], crc32.Checksum(b[:end], castagnoli))
	})
}

// AppendRecord appends to the log file at path a frame with a valid CRC
// whose payload is record type typ, transaction id 1, write-order id woid
// and body. It returns the frame's offset.
func AppendRecord(t testing.TB, path string, typ byte, woid uint64, body []byte) int64 {
	t.Helper()
	payload := append([]byte{typ}, binary.BigEndian.AppendUint64(nil, 1)...)
	payload = binary.BigEndian.AppendUint64(payload, woid)
	payload = append(payload, body...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	frame = binary.BigEndian.AppendUint32(frame, crc32.Update(crc32.Checksum(frame, castagnoli), castagnoli, payload))
	frame = append(frame, payload...)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(frame); err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// SetRecordType makes the record whose frame starts at off in the log file
// at path a record of type typ, with the frame CRC (over the length field
// and the payload) recomputed.
func SetRecordType(t testing.TB, path string, off int64, typ byte) {
	t.Helper()
	edit(t, path, func(b []byte) {
		frame := b[off:]
		n := binary.BigEndian.Uint32(frame)
		payload := frame[8 : 8+n]
		payload[0] = typ
		binary.BigEndian.PutUint32(frame[4:], crc32.Update(crc32.Checksum(frame[:4], castagnoli), castagnoli, payload))
	})
}

// Snapshot returns every file in dirs (not below them) by path, with its
// bytes.
func Snapshot(t testing.TB, dirs ...string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			p := filepath.Join(d, e.Name())
			if out[p], err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// RequireUnchanged fails t unless the files in dirs are exactly before (a
// Snapshot): the same names, byte for byte.
func RequireUnchanged(t testing.TB, before map[string][]byte, dirs ...string) {
	t.Helper()
	after := Snapshot(t, dirs...)
	if maps.EqualFunc(before, after, bytes.Equal) {
		return
	}
	for _, p := range slices.Sorted(maps.Keys(before)) {
		if b, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
		} else if !bytes.Equal(b, before[p]) {
			t.Errorf("%s changed (%d bytes, was %d)", p, len(b), len(before[p]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
		}
	}
}
