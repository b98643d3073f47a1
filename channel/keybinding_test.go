package channel

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/logfile"
)

// twoEncryptedChannels returns the configs of two channels with the same
// keys, each opened twice (log files 1 and 2 in its one data dir), with
// events 100..105 put in channel a and 200..205 in b: the same sizes, so
// the records of both files lie at the same offsets.
func twoEncryptedChannels(t *testing.T) (a, b Config) {
	t.Helper()
	a, b = encryptedConfig(t, 1), encryptedConfig(t, 1)
	for i, cfg := range []Config{a, b} {
		c := mustOpen(t, cfg)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = mustOpen(t, cfg)
		putN(t, c, 100*(i+1), 6, 3)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// channelIDOf returns the id cfg's checkpoint dir records.
func channelIDOf(t *testing.T, cfg Config) logfile.ChannelID {
	t.Helper()
	o, ok, err := logfile.ReadOwner(vfsOS(), cfg.CheckpointDir)
	if err != nil || !ok {
		t.Fatalf("read the channel id of %s: %v %v", cfg.CheckpointDir, ok, err)
	}
	return logfile.ChannelID(o.ID)
}

// copyFile copies the file at from to to, replacing it.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestEncryptedFileOfAnotherChannelIsRefused: two channels share a key; a
// log file copied from one into the other's data dir under the same file
// id (replacing the victim's file, or as a file the victim does not have)
// makes the victim's Open fail with ErrKey, naming the file and both
// channels, and change nothing: no event of the other channel is ever
// delivered as the victim's. So does the copy with the channel id in its
// key record changed to the victim's (its checksums recomputed, as anyone
// who reads the file can). Once the file is moved out, the victim opens and
// delivers its own events.
func TestEncryptedFileOfAnotherChannelIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     uint32 // the file copied from a to b, replacing b's
		fix    bool   // make the key record name b's channel
		want   string
		remove bool // to undo: remove the file (b had none of that id)
	}{
		{"replaces_a_file", 2, false, "belongs to channel", false},
		{"a_file_it_has_not", 3, false, "belongs to channel", true},
		{"channel_id_changed", 2, true, "not the key it was written with", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := twoEncryptedChannels(t)
			if tc.id == 3 { // events in a file of a that b has not
				c := mustOpen(t, a)
				putN(t, c, 106, 3, 3)
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
			from, to := logPath(a, tc.id), logPath(b, tc.id)
			own, err := os.ReadFile(to)
			if err != nil && !tc.remove {
				t.Fatal(err)
			}
			copyFile(t, from, to)
			if tc.fix {
				setKeyRecordChannel(t, to, channelIDOf(t, b))
			}
			before := hashDirs(t, b)
			c, err := Open(b)
			if err == nil {
				got := drain(t, c)
				c.Close()
				t.Fatalf("Open took a log file of another channel and delivered %s", short(got))
			}
			aID, bID := channelIDOf(t, a), channelIDOf(t, b)
			msg := err.Error()
			if !errors.Is(err, ErrKey) || errors.Is(err, ErrCorrupt) || !strings.Contains(msg, tc.want) ||
				!strings.Contains(msg, filepath.Base(to)) {
				t.Fatalf("Open: %v; want ErrKey naming %s and %q", err, filepath.Base(to), tc.want)
			}
			if !tc.fix && (!strings.Contains(msg, hex.EncodeToString(aID[:])) || !strings.Contains(msg, hex.EncodeToString(bID[:]))) {
				t.Fatalf("Open: %v; want both channel ids", err)
			}
			requireUnchanged(t, before, hashDirs(t, b))
			if tc.remove {
				if err := os.Remove(to); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(to, own, 0o600); err != nil {
				t.Fatal(err)
			}
			c = mustOpen(t, b)
			wantEvents(t, drain(t, c), bodies(200, 6))
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEncryptedRecordOfAnotherChannelIsDamage: a sealed put copied from
// another channel's file with the same id to the same offset of the
// victim's file, its checksums made valid for the victim's file, does not
// open: the take skips it as damage (counted) and delivers the others.
func TestEncryptedRecordOfAnotherChannelIsDamage(t *testing.T) {
	expectProblems(t, "bad-pointer")
	a, b := twoEncryptedChannels(t)
	from, to := logPath(a, 2), logPath(b, 2)
	offsA, lensA := putOffsets(t, from)
	offsB, lensB := putOffsets(t, to)
	if offsA[1] != offsB[1] || lensA[1] != lensB[1] {
		t.Fatalf("put 1 at %d (%d bytes) in a, %d (%d bytes) in b", offsA[1], lensA[1], offsB[1], lensB[1])
	}
	src, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.ReadFile(to)
	if err != nil {
		t.Fatal(err)
	}
	salt, ok := testutil.LogSalt(dst)
	if !ok {
		t.Fatal("not a salted log file")
	}
	off, n := offsA[1], int64(lensA[1])
	copy(dst[off:], testutil.LogFrame(salt, src[off+logfile.FrameHeaderSize:off+n]))
	if err := os.WriteFile(to, dst, 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, b)
	got := drain(t, c)
	want := append(bodies(200, 1), bodies(202, 4)...)
	wantEvents(t, got, want)
	if n := c.Stats().CorruptSkipped; n != 1 {
		t.Fatalf("CorruptSkipped = %d, want 1", n)
	}
}

// setKeyRecordChannel rewrites the channel id in the key record (the first
// record) of the version-6 log file at path, and recomputes the frame's
// checksums with the file's salt.
func setKeyRecordChannel(t *testing.T, path string, id logfile.ChannelID) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	salt, ok := testutil.LogSalt(b)
	if !ok {
		t.Fatal("not a salted log file")
	}
	off := logfile.HeaderSize
	n := int(binary.BigEndian.Uint32(b[off:]))
	payload := bytes.Clone(b[off+logfile.FrameHeaderSize : off+logfile.FrameHeaderSize+n])
	if logfile.RecordType(payload[0]) != logfile.RecordKey {
		t.Fatalf("the first record of %s is a %v", path, logfile.RecordType(payload[0]))
	}
	copy(payload[len(payload)-len(id):], id[:])
	copy(b[off:], testutil.LogFrame(salt, payload))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestEncryptedFilesNeedTheirChannelID: a channel whose channel.id files
// are all lost gets a new id, under which its own version-6 files are
// refused (ErrKey) without any file changed (no channel.id written either);
// a copy of its channel.id put back into the checkpoint dir alone gives it
// its id back: Open adopts it, records it in the data dir, and delivers.
func TestEncryptedFilesNeedTheirChannelID(t *testing.T) {
	cfg := encryptedConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 6, 3)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(filepath.Join(cfg.CheckpointDir, logfile.OwnerName))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range append([]string{cfg.CheckpointDir}, cfg.DataDirs...) {
		if err := os.Remove(filepath.Join(d, logfile.OwnerName)); err != nil {
			t.Fatal(err)
		}
	}
	before := hashDirs(t, cfg)
	if c, err := Open(cfg); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "belongs to channel") {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Open with the channel's id lost: %v, want ErrKey", err)
	}
	requireUnchanged(t, before, hashDirs(t, cfg))
	if err := os.WriteFile(filepath.Join(cfg.CheckpointDir, logfile.OwnerName), saved, 0o600); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	wantEvents(t, drain(t, c), bodies(0, 6))
	if _, ok, err := logfile.ReadOwner(vfsOS(), cfg.DataDirs[0]); !ok || err != nil {
		t.Fatalf("the data dir's channel.id is not written again: %v %v", ok, err)
	}
}
