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
// (uint16 at offset 4), with the header CRC recomputed where the file's own
// version keeps it: bytes 20..23 over 0..19 in versions 2 and 3, bytes
// 12..15 over 0..11 in version 1.
func SetLogVersion(t testing.TB, path string, v uint16) {
	t.Helper()
	edit(t, path, func(b []byte) {
		crcAt := 12
		if binary.BigEndian.Uint16(b[4:]) >= 2 {
			crcAt = 20
		}
		binary.BigEndian.PutUint16(b[4:], v)
		binary.BigEndian.PutUint32(b[crcAt:], crc32.Checksum(b[:crcAt], castagnoli))
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

// AppendRecord appends to the log file at path a frame with valid
// checksums (for the file's version and, from version 2 on, its salt) whose
// payload is record type typ, transaction id 1, write-order id woid and
// body. It returns the frame's offset.
func AppendRecord(t testing.TB, path string, typ byte, woid uint64, body []byte) int64 {
	t.Helper()
	payload := append([]byte{typ}, binary.BigEndian.AppendUint64(nil, 1)...)
	payload = binary.BigEndian.AppendUint64(payload, woid)
	payload = append(payload, body...)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	salt, v2 := LogSalt(b)
	var frame []byte
	if v2 {
		frame = LogFrame(salt, payload)
	} else {
		frame = LogFrameV1(payload)
	}
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
// at path a record of type typ, with the frame's checksums recomputed.
func SetRecordType(t testing.TB, path string, off int64, typ byte) {
	t.Helper()
	edit(t, path, func(b []byte) {
		salt, v2 := LogSalt(b)
		frame := b[off:]
		n := binary.BigEndian.Uint32(frame)
		if !v2 {
			payload := frame[8 : 8+n]
			payload[0] = typ
			copy(frame, LogFrameV1(payload))
			return
		}
		payload := frame[12 : 12+n]
		payload[0] = typ
		copy(frame, LogFrame(salt, payload))
	})
}

// LogSalt returns the salt of the log file whose bytes start with b, and
// whether it is a salted file (magic "FCLG", version 2 to 6 at offset 4,
// the salt at 12..19; versions 3 to 6 have version 2's header and frames).
func LogSalt(b []byte) (salt uint64, v2 bool) {
	if len(b) < 20 || string(b[:4]) != "FCLG" {
		return 0, false
	}
	if v := binary.BigEndian.Uint16(b[4:]); v < 2 || v > 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[12:]), true
}

// LogFrame returns a version-2 (3, 4) frame around payload (at least 17
// bytes) sealed with salt, the way a producer who guessed salt (or read it
// from a file) could build one: length (4), frame header checksum (4: CRC32C of
// the length then of bytes 8..28, XOR the salt's high half), payload
// checksum (4: CRC32C of the payload, XOR its low half), payload.
func LogFrame(salt uint64, payload []byte) []byte {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	frame = append(frame, 0, 0, 0, 0)
	frame = binary.BigEndian.AppendUint32(frame, crc32.Checksum(payload, castagnoli)^uint32(salt))
	frame = append(frame, payload...)
	hc := crc32.Update(crc32.Checksum(frame[:4], castagnoli), castagnoli, frame[8:29])
	binary.BigEndian.PutUint32(frame[4:], hc^uint32(salt>>32))
	return frame
}

// LogFrameV1 returns a version-1 frame around payload: length (4), CRC32C
// of the length then the payload (4), payload.
func LogFrameV1(payload []byte) []byte {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	frame = binary.BigEndian.AppendUint32(frame, crc32.Update(crc32.Checksum(frame, castagnoli), castagnoli, payload))
	return append(frame, payload...)
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

// DowngradeLogToV1 rewrites the version-2, 3, 4 or 7 log file at path as the
// version-1 file an older release would have written with the same records:
// a 16-byte header (magic, version 1, reserved, file id, CRC32C of bytes 0..11) and
// every frame with an 8-byte frame header (length, CRC32C of the length then
// the payload; a version-7 record without its commit time). Records move (the header is 20 bytes shorter, every frame 4 or more),
// so pointers to them (take records, a checkpoint) no longer hold: use it on
// files of puts and commits, with no checkpoint. It stops at the first
// frame that does not parse.
func DowngradeLogToV1(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, v2 := LogSalt(b); !v2 || len(b) < 36 || b[5] == 5 || b[5] == 6 || b[5] == 8 {
		t.Fatalf("%s is not a version-2, 3, 4 or 7 log file", path)
	}
	timed := b[5] == 7
	out := append([]byte("FCLG"), 0, 1, 0, 0)
	out = append(out, b[8:12]...)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	for off := 36; off+12 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[off:]))
		if n == 0 || off+12+n > len(b) {
			break
		}
		p := b[off+12 : off+12+n]
		if timed {
			p = withoutTime(p)
		}
		out = append(out, LogFrameV1(p)...)
		off += 12 + n
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// withoutTime returns the payload p of a version-7 record without its
// commit time: a put's 8 bytes after the fixed 17, a put commit's last 8.
func withoutTime(p []byte) []byte {
	switch {
	case p[0] == 1 && len(p) >= 25: // put
		return append(append([]byte(nil), p[:17]...), p[25:]...)
	case p[0] == 4 && len(p) > 17 && p[17] == 1 && len(p) >= 27: // commit of puts
		return p[:len(p)-8]
	}
	return p
}

// FlipPayloadByte flips byte i of the payload of the frame at off in the
// salted log file at path and recomputes the frame's checksums: a change
// only something that knows the file's salt (anyone who can read it)
// makes, which the checksums no longer catch.
func FlipPayloadByte(t testing.TB, path string, off int64, i int) {
	t.Helper()
	edit(t, path, func(b []byte) {
		salt, v2 := LogSalt(b)
		if !v2 {
			t.Fatalf("%s: not a salted log file", path)
		}
		frame := b[off:]
		n := binary.BigEndian.Uint32(frame)
		payload := frame[12 : 12+n]
		payload[i] ^= 0x20
		copy(frame, LogFrame(salt, payload))
	})
}
