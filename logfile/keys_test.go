package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/seal"
	"github.com/flumego/filechannel/internal/vfs"
)

// testKeys is a Keys of fixed master keys.
type testKeys struct {
	active string
	keys   map[string][]byte
}

func (k testKeys) ActiveKeyID() string { return k.active }

func (k testKeys) Key(id string) ([]byte, error) {
	m, ok := k.keys[id]
	if !ok {
		return nil, fmt.Errorf("no key %q", id)
	}
	return m, nil
}

// goldenKeys holds the master key of the encrypted golden files: key
// "golden", 32 bytes 0x6b.
var goldenKeys = testKeys{active: "golden", keys: map[string][]byte{"golden": bytes.Repeat([]byte{0x6b}, seal.KeySize)}}

// testChannel and otherChannel are two channels' ids.
var (
	testChannel  = ChannelID{0xc0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xcf}
	otherChannel = ChannelID{0xd0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xdf}
)

// encryptedTestFraming is the framing of encrypted log file id of version
// v (EncryptedVersion, or ChannelBoundVersion bound to channel) with
// testFraming's salt and keys' active key.
func encryptedTestFraming(t testing.TB, keys Keys, v uint16, id uint32, channel ChannelID) Framing {
	t.Helper()
	fr := Framing{version: v, salt: testFraming.salt, keyID: keys.ActiveKeyID()}
	if boundVersion(v) {
		fr.channel = channel
	}
	if err := fr.attach(keys, id, ChannelID{}); err != nil {
		t.Fatal(err)
	}
	fr.keyCheck = fr.keys.Check()
	return fr
}

// keyRecord is the key record an encrypted file of framing fr starts with.
func keyRecord(fr Framing) Record {
	return Record{Type: RecordKey, WriteOrderID: 1, KeyID: fr.keyID, KeyCheck: fr.keyCheck, ChannelID: fr.channel}
}

// writeEncryptedLog writes fr's key record and recs to a new log file id in
// dir as Set.Append does (puts sealed for their place), one Write each,
// and returns the path and the frame offset of every record of recs.
func writeEncryptedLog(t testing.TB, dir string, id uint32, recs []Record, fr Framing) (string, []int64) {
	t.Helper()
	w, err := create(vfs.OS(), dir, id, fr)
	if err != nil {
		t.Fatal(err)
	}
	write := func(r *Record) int64 {
		frame, err := appendUnsealedEncrypted(nil, r, fr.Timed())
		if err != nil {
			t.Fatal(err)
		}
		if err := fr.sealFrame(frame, w.Size(), r.WriteOrderID); err != nil {
			t.Fatal(err)
		}
		off, err := w.Write(frame)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	key := keyRecord(fr)
	write(&key)
	offs := make([]int64, len(recs))
	for i := range recs {
		offs[i] = write(&recs[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path(), offs
}

// TestGoldenEncrypted pins the encrypted versions as TestGolden pins the
// others: testdata/v5/log-0000000001 (a file the previous release wrote:
// no channel) and testdata/v6/log-0000000001 (bound to testChannel), each
// goldenKeys' key record then allRecordsV4 with every put sealed. The
// writer must produce exactly those bytes, a scanner must read them back
// (puts sealed), and a reader with the key must open every put.
// Regenerate only for a deliberate format change:
// go test ./logfile -run TestGoldenEncrypted -update
func TestGoldenEncrypted(t *testing.T) {
	for _, v := range []uint16{EncryptedVersion, ChannelBoundVersion, TimedBoundVersion} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			fr := encryptedTestFraming(t, goldenKeys, v, 1, testChannel)
			recs := allRecordsV4()
			if fr.Timed() {
				recs = withTimes(recs)
			}
			path, offs := writeEncryptedLog(t, t.TempDir(), 1, recs, fr)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", fmt.Sprintf("v%d", v), LogName(1))
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && i < len(want) && got[i] == want[i] {
					i++
				}
				t.Fatalf("writer output differs from %s at byte %d (got %d bytes, want %d): the v%d format changed", golden, i, len(got), len(want), v)
			}
			for _, b := range [][]byte{[]byte("hello, channel"), []byte("a.example"), []byte("not for every group")} {
				if bytes.Contains(want, b) {
					t.Fatalf("%s holds %q in clear", golden, b)
				}
			}

			s, err := NewScanner(vfs.OS(), golden, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !s.Next() {
				t.Fatalf("no key record: %v", s.Err())
			}
			requireSameRecord(t, *s.Record(), keyRecord(fr))
			for i := 0; s.Next(); i++ {
				r := *s.Record()
				if recs[i].Type == RecordPut {
					if r.Sealed == nil || r.Headers != nil || r.Body != nil {
						t.Fatalf("put %d scanned without its key: %+v", i, r)
					}
					r.Sealed = nil
					r.Headers, r.Body = recs[i].Headers, recs[i].Body
				}
				requireSameRecord(t, r, recs[i])
			}
			if s.Err() != nil || s.Tail() != TailClean || s.End() != int64(len(want)) {
				t.Fatalf("scan: end %d, tail %v, err %v", s.End(), s.Tail(), s.Err())
			}

			channel := testChannel
			if v == EncryptedVersion {
				channel = otherChannel // a version-5 file is bound to no channel: any reads it
			}
			r, err := openReader(vfs.OS(), golden, goldenKeys, channel)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Framing().Version() != v || r.Framing().ChannelID() != fr.channel || r.Framing().KeyID() != "golden" {
				t.Fatalf("reader framing %v, channel %x, key %q", r.Framing(), r.Framing().ChannelID(), r.Framing().KeyID())
			}
			for i, off := range offs {
				got, err := r.ReadRecord(off)
				if err != nil {
					t.Fatalf("record %d at %d: %v", i, off, err)
				}
				requireSameRecord(t, got, recs[i])
			}
		})
	}
}

// TestFileOfAnotherChannelIsRefused: a version-6 file opens only for the
// channel it is bound to (or for a reader that names no channel, which
// takes the key record's); another channel's reader and CheckKeys refuse
// it with ErrKey, naming both channels, and so does every reader when its
// key record's channel id was changed (the check value no longer matches).
// A version-5 file, bound to none, opens for any.
func TestFileOfAnotherChannelIsRefused(t *testing.T) {
	recs := []Record{{Type: RecordPut, TxID: 1, WriteOrderID: 10, Body: []byte("mine")}, {Type: RecordCommit, TxID: 1, WriteOrderID: 11, CommitType: RecordPut, Count: 1}}
	dir := t.TempDir()
	path, offs := writeEncryptedLog(t, dir, 1, recs, encryptedTestFraming(t, goldenKeys, ChannelBoundVersion, 1, testChannel))
	hexOf := func(c ChannelID) string { return fmt.Sprintf("%x", c[:]) }
	for _, tc := range []struct {
		name    string
		channel ChannelID
		want    string // "" = opens
	}{
		{"its_channel", testChannel, ""},
		{"no_channel_named", ChannelID{}, ""},
		{"another_channel", otherChannel, "belongs to channel " + hexOf(testChannel) + ", not to this channel " + hexOf(otherChannel)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := openReader(vfs.OS(), path, goldenKeys, tc.channel)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if got, err := r.ReadRecord(offs[0]); err != nil || string(got.Body) != "mine" {
					t.Fatalf("read %q, %v", got.Body, err)
				}
			} else if !errors.Is(err, ErrKey) || errors.Is(err, corrupt.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("openReader: %v; want ErrKey with %q", err, tc.want)
			}
			set, err := OpenSet(SetOptions{FS: vfs.OS(), Dirs: []string{dir}, ChannelID: tc.channel})
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			if err := set.CheckKeys(goldenKeys); (err == nil) != (tc.want == "") || (err != nil && !errors.Is(err, ErrKey)) {
				t.Fatalf("CheckKeys: %v", err)
			}
		})
	}

	// The key record's channel id changed to the reader's, its checksums
	// recomputed (the salt is in the header): the check value no longer
	// matches.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fr := encryptedTestFraming(t, goldenKeys, ChannelBoundVersion, 1, testChannel)
	forged := keyRecord(fr)
	forged.ChannelID = otherChannel
	frame, err := fr.AppendRecord(nil, &forged)
	if err != nil {
		t.Fatal(err)
	}
	copy(b[HeaderSize:], frame)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, channel := range []ChannelID{otherChannel, {}} {
		if _, err := openReader(vfs.OS(), path, goldenKeys, channel); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "not the key it was written with") {
			t.Fatalf("a key record naming another channel, read as %x: %v", channel, err)
		}
	}

	// A record of another channel's file, at the same place in a file of
	// the same id and salt, does not open.
	other := encryptedTestFraming(t, goldenKeys, ChannelBoundVersion, 1, otherChannel)
	opath, _ := writeEncryptedLog(t, t.TempDir(), 1, recs, other)
	ob, err := os.ReadFile(opath)
	if err != nil {
		t.Fatal(err)
	}
	mine := encryptedTestFraming(t, goldenKeys, ChannelBoundVersion, 1, testChannel)
	mpath, _ := writeEncryptedLog(t, t.TempDir(), 1, recs, mine)
	mb, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	copy(mb[offs[0]:], ob[offs[0]:offs[1]]) // the same salt: the checksums hold
	if err := os.WriteFile(mpath, mb, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := openReader(vfs.OS(), mpath, goldenKeys, testChannel)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := r.ReadRecord(offs[0]); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("a put of another channel's file read back: %q, %v", got.Body, err)
	}
}

// TestEncryptedSetBindsItsFiles: a set with Keys creates version-6 files
// bound to its ChannelID, and refuses to create one without a ChannelID.
func TestEncryptedSetBindsItsFiles(t *testing.T) {
	dir := t.TempDir()
	set, err := OpenSet(SetOptions{FS: vfs.OS(), Dirs: []string{dir}, Keys: goldenKeys})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Start(Recovered{}); err != nil {
		t.Fatal(err)
	}
	if err := set.Roll(0); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "no channel id") {
		t.Fatalf("Roll without a ChannelID: %v", err)
	}
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
	set = startSet(t, SetOptions{FS: vfs.OS(), Dirs: []string{dir}, Keys: goldenKeys, ChannelID: testChannel}, Recovered{})
	r, err := openReader(vfs.OS(), filepath.Join(dir, LogName(set.NextFileID()-1)), goldenKeys, testChannel)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if fr := r.Framing(); fr.Version() != TimedBoundVersion || fr.ChannelID() != testChannel || fr.KeyID() != "golden" {
		t.Fatalf("a new file of %v, channel %x, key %q", fr, fr.ChannelID(), fr.KeyID())
	}
}

// TestKeyRecordLayouts: a key record names a channel in version 6 and only
// there; AppendRecord refuses the other way round, and the decoder of each
// version refuses the other's layout, and a zero channel id in version 6.
func TestKeyRecordLayouts(t *testing.T) {
	v5 := encryptedTestFraming(t, goldenKeys, EncryptedVersion, 1, ChannelID{})
	v6 := encryptedTestFraming(t, goldenKeys, ChannelBoundVersion, 1, testChannel)
	bound, unbound := keyRecord(v6), keyRecord(v5)
	for _, tc := range []struct {
		fr  Framing
		rec Record
	}{{v5, bound}, {v6, unbound}, {testFraming, bound}} {
		if _, err := tc.fr.AppendRecord(nil, &tc.rec); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("%v: key record with channel %x: %v", tc.fr, tc.rec.ChannelID, err)
		}
	}
	f5, err := v5.AppendRecord(nil, &unbound)
	if err != nil {
		t.Fatal(err)
	}
	f6, err := v6.AppendRecord(nil, &bound)
	if err != nil {
		t.Fatal(err)
	}
	if len(f6) != len(f5)+seal.ChannelIDSize {
		t.Fatalf("key records of %d and %d bytes", len(f5), len(f6))
	}
	if _, _, err := v6.DecodeRecord(frameFor(v6, f5[FrameHeaderSize:])); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("a version-5 key record in a version-6 file: %v", err)
	}
	if _, _, err := v5.DecodeRecord(frameFor(v5, f6[FrameHeaderSize:])); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("a version-6 key record in a version-5 file: %v", err)
	}
	zero := bytes.Clone(f6[FrameHeaderSize:])
	clear(zero[len(zero)-seal.ChannelIDSize:])
	if _, _, err := v6.DecodeRecord(frameFor(v6, zero)); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Fatalf("a version-6 key record with a zero channel: %v", err)
	}
	for _, tc := range []struct {
		fr    Framing
		frame []byte
		want  Record
	}{{v5, f5, unbound}, {v6, f6, bound}} {
		got, n, err := tc.fr.DecodeRecord(tc.frame)
		if err != nil || n != len(tc.frame) {
			t.Fatalf("%v: %v", tc.fr, err)
		}
		requireSameRecord(t, got, tc.want)
	}
}
