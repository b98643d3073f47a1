package channel

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/logfile"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

// encryptedConfig is testConfig with keys: "k1" active (and "k0" known).
func encryptedConfig(t *testing.T, dirs int) Config {
	cfg := testConfig(t, dirs)
	cfg.Keys = StaticKeys("k1", map[string][]byte{"k0": testKey(0xa0), "k1": testKey(0xa1)})
	return cfg
}

// dataDirFiles returns every file of cfg's data dirs.
func dataDirFiles(t *testing.T, cfg Config) []string {
	var out []string
	for _, d := range cfg.DataDirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				out = append(out, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEncryptionRoundTrip: events put with keys come back exact, across a
// reopen, and every log file the channel wrote is an encrypted one.
func TestEncryptionRoundTrip(t *testing.T) {
	cfg := encryptedConfig(t, 2)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 50, 10)
	wantEvents(t, takeN(t, c, 20, 7), bodies(0, 20))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	putN(t, c, 50, 10, 10)
	wantEvents(t, drain(t, c), bodies(20, 40))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range dataDirFiles(t, cfg) {
		if _, ok := logfile.ParseLogName(filepath.Base(p)); !ok {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if v := uint16(b[4])<<8 | uint16(b[5]); v != logfile.TimedBoundVersion {
			t.Errorf("%s: format version %d, want %d", p, v, logfile.TimedBoundVersion)
		}
	}
}

// TestNoPlaintextInTheDataDirs: with keys, no byte string of an event's
// body or headers is found in any file of the data dirs.
func TestNoPlaintextInTheDataDirs(t *testing.T) {
	cfg := encryptedConfig(t, 1)
	c := mustOpen(t, cfg)
	secret := []byte("4111-1111-1111-1111 card number of Mallory")
	for range 3 {
		tx, _ := c.Begin()
		for range 20 {
			if err := tx.Put(Event{Headers: map[string]string{"x-token": "tok_live_SECRETHEADER"}, Body: secret}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	takeN(t, c, 10, 10) // take records too
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range dataDirFiles(t, cfg) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range [][]byte{secret[:12], []byte("Mallory"), []byte("tok_live"), []byte("SECRETHEADER"), []byte("x-token")} {
			if bytes.Contains(b, s) {
				t.Errorf("%s holds %q in clear", p, s)
			}
		}
	}
}

// TestWrongOrMissingKeyIsRefused: Open fails with ErrKey, naming the file
// and the key, and changes no file, when a log file's key is missing,
// wrong, or Keys is nil.
func TestWrongOrMissingKeyIsRefused(t *testing.T) {
	cfg := encryptedConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 10)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	before := hashDirs(t, cfg)
	for _, tc := range []struct {
		name string
		keys KeyProvider
		want string
	}{
		{"no_keys", nil, "no keys are configured"},
		{"key_missing", StaticKeys("k2", map[string][]byte{"k2": testKey(0xa2)}), `no key "k1"`},
		{"wrong_key", StaticKeys("k1", map[string][]byte{"k1": testKey(0xee)}), "not the key it was written with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := cfg
			bad.Keys = tc.keys
			c, err := Open(bad)
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrKey) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "log-") {
				t.Fatalf("Open: %v; want ErrKey naming the file and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), string(testKey(0xa1))) {
				t.Fatal("the error holds key bytes")
			}
			requireUnchanged(t, before, hashDirs(t, cfg))
		})
	}
}

// TestKeyRotation: a new active key applies to new files; files written
// with the old key stay readable while it is supplied, and Open refuses
// without it while one of them remains.
func TestKeyRotation(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Keys = StaticKeys("k0", map[string][]byte{"k0": testKey(0xa0)})
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 10)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Keys = StaticKeys("k1", map[string][]byte{"k0": testKey(0xa0), "k1": testKey(0xa1)})
	c = mustOpen(t, cfg)
	putN(t, c, 10, 10, 10)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	only := cfg
	only.Keys = StaticKeys("k1", map[string][]byte{"k1": testKey(0xa1)})
	if c, err := Open(only); !errors.Is(err, ErrKey) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Open without the old key while its file remains: %v, want ErrKey", err)
	}
	c = mustOpen(t, cfg)
	wantEvents(t, drain(t, c), bodies(0, 20))
}

// TestEncryptionTurnedOnLater: a channel written without keys, then opened
// with them, holds both kinds of files and reads both.
func TestEncryptionTurnedOnLater(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 10)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Keys = StaticKeys("k1", map[string][]byte{"k1": testKey(0xa1)})
	c = mustOpen(t, cfg)
	putN(t, c, 10, 10, 10)
	versions := map[uint16]bool{}
	for _, p := range dataDirFiles(t, cfg) {
		if _, ok := logfile.ParseLogName(filepath.Base(p)); ok {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			versions[uint16(b[4])<<8|uint16(b[5])] = true
		}
	}
	if !versions[logfile.FormatVersion] || !versions[logfile.TimedBoundVersion] {
		t.Fatalf("log file versions %v: want both %d and %d", versions, logfile.FormatVersion, logfile.TimedBoundVersion)
	}
	wantEvents(t, drain(t, c), bodies(0, 20))
}

func TestKeysConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys KeyProvider
		want string
	}{
		{"active_missing", StaticKeys("k9", map[string][]byte{"k1": testKey(1)}), `no key "k9"`},
		{"active_short", StaticKeys("k1", map[string][]byte{"k1": testKey(1)[:16]}), "16 bytes, not 32"},
		{"empty_id", StaticKeys("", map[string][]byte{"": testKey(1)}), "not 1 to 64 bytes"},
		{"long_id", StaticKeys(strings.Repeat("k", 65), map[string][]byte{strings.Repeat("k", 65): testKey(1)}), "not 1 to 64 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			cfg.Keys = tc.keys
			c, err := Open(cfg)
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v; want a config error with %q", err, tc.want)
			}
		})
	}
}

// putOffsets returns the offsets and frame lengths of the put records of
// log file p.
func putOffsets(t *testing.T, p string) (offs []int64, lens []int) {
	t.Helper()
	s, err := logfile.NewScanner(vfsOS(), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Next() {
		if r := s.Record(); r.Type == logfile.RecordPut {
			offs = append(offs, s.Offset())
			lens = append(lens, r.EncodedSize()+16)
		}
	}
	return offs, lens
}

// TestTamperedOrMovedRecordIsDamage: an encrypted put whose sealed body was
// changed, or that was moved to another offset, with its checksums made
// valid again (as whoever can read the file can), does not authenticate:
// the take skips it as damage and delivers the others.
func TestTamperedOrMovedRecordIsDamage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		patch func(t *testing.T, p string, offs []int64, lens []int)
		lost  []int // events that do not come back
	}{
		{"flipped_ciphertext", func(t *testing.T, p string, offs []int64, _ []int) {
			testutil.FlipPayloadByte(t, p, offs[3], 30) // after the fixed fields and the commit time
		}, []int{3}},
		// The commit time is in clear, but bound into the seal: a changed
		// time is a changed record.
		{"flipped_commit_time", func(t *testing.T, p string, offs []int64, _ []int) {
			testutil.FlipPayloadByte(t, p, offs[3], 20)
		}, []int{3}},
		{"flipped_tag", func(t *testing.T, p string, offs []int64, lens []int) {
			testutil.FlipPayloadByte(t, p, offs[3], lens[3]-12-1)
		}, []int{3}},
		{"two_records_swapped", func(t *testing.T, p string, offs []int64, lens []int) {
			if lens[1] != lens[2] {
				t.Fatalf("records 1 and 2 are %d and %d bytes", lens[1], lens[2])
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			r1 := bytes.Clone(b[offs[1] : offs[1]+int64(lens[1])])
			copy(b[offs[1]:], b[offs[2]:offs[2]+int64(lens[2])])
			copy(b[offs[2]:], r1)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectProblems(t, "bad-pointer")
			cfg := encryptedConfig(t, 1)
			c := mustOpen(t, cfg)
			putN(t, c, 0, 6, 6)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			p := logPaths(t, cfg)[0]
			offs, lens := putOffsets(t, p)
			tc.patch(t, p, offs, lens)
			c = mustOpen(t, cfg)
			got := drain(t, c)
			var want []string
			for i, b := range bodies(0, 6) {
				if !slices.Contains(tc.lost, i) {
					want = append(want, b)
				}
			}
			wantEvents(t, got, want)
			if n := c.Stats().CorruptSkipped; n != int64(len(tc.lost)) {
				t.Fatalf("CorruptSkipped = %d, want %d", n, len(tc.lost))
			}
		})
	}
}

func TestKeysFromFileAndEnv(t *testing.T) {
	k1, k2 := strings.Repeat("ab", KeySize), strings.Repeat("0c", KeySize)
	good := "# keys\nactive 2026-12\n2026-11 " + k1 + "\n\n2026-12 " + k2 + "\n"
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := KeysFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := p.Key("2026-11"); p.ActiveKeyID() != "2026-12" || err != nil || !bytes.Equal(k, bytes.Repeat([]byte{0xab}, KeySize)) {
		t.Fatalf("active %q, key 2026-11 %x, %v", p.ActiveKeyID(), k, err)
	}
	if _, err := p.Key("2026-10"); err == nil {
		t.Fatal("a key the file does not have")
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := KeysFromFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key file readable by its group: %v", err)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"no_active", "2026-11 " + k1, `no "active id" line`},
		{"active_unknown", "active x\n2026-11 " + k1, `line 1: the active key is not among`},
		{"short_key", "active a\na " + k1[:62], "is not 64 hex digits"},
		{"not_hex", "active a\na " + strings.Repeat("zz", KeySize), "is not 64 hex digits"},
		{"duplicate", "active a\na " + k1 + "\na " + k2, `line 3: the key id of line 2 again`},
		{"three_fields", "active a\na " + k1 + " extra", "got 3 fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FC_TEST_KEYS", strings.ReplaceAll(tc.text, "\n", ";"))
			_, err := KeysFromEnv("FC_TEST_KEYS")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("KeysFromEnv: %v; want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), k1[:16]) || strings.Contains(err.Error(), k2[:16]) {
				t.Fatalf("the error holds key bytes: %v", err)
			}
		})
	}
	t.Setenv("FC_TEST_KEYS", strings.ReplaceAll(good, "\n", ";"))
	if p, err := KeysFromEnv("FC_TEST_KEYS"); err != nil || p.ActiveKeyID() != "2026-12" {
		t.Fatalf("KeysFromEnv: %v", err)
	}
	if _, err := KeysFromEnv("FC_TEST_NO_SUCH_VAR"); err == nil {
		t.Fatal("an unset variable")
	}
}

// TestRepairWithoutTheKey: a damaged sealed body (its checksum no longer
// matches) is found by Verify and padded by Repair, both without the key;
// the channel, opened with it, delivers every other event.
func TestRepairWithoutTheKey(t *testing.T) {
	cfg := encryptedConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 1) // one event per transaction
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	p := logPaths(t, cfg)[0]
	offs, _ := putOffsets(t, p)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xee}, offs[5]+35); err != nil {
		t.Fatal(err)
	}
	f.Close()
	keyless := cfg
	keyless.Keys = nil
	if vr, err := Verify(keyless); err != nil || vr.OK() {
		t.Fatalf("Verify without the key: %v, %v; want the damage", vr, err)
	}
	rep := mustRepair(t, keyless, RepairOptions{})
	if len(rep.Actions) != 1 || rep.Actions[0].Kind != RepairPadDamagedRegion {
		t.Fatalf("actions %+v", rep.Actions)
	}
	requireRepaired(t, cfg, rep, append(bodies(0, 5), bodies(6, 4)...))
}

// TestDamagedKeyRecordIsDamage: an encrypted file whose key record is
// damaged names no key: Open goes on, and its events are damage (skipped,
// counted), never delivered empty.
func TestDamagedKeyRecordIsDamage(t *testing.T) {
	expectProblems(t, "corrupt-record", "bad-pointer")
	cfg := encryptedConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 4, 4)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	p := logPaths(t, cfg)[0]
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, logfile.HeaderSize+20); err != nil { // inside the key record
		t.Fatal(err)
	}
	f.Close()
	c = mustOpen(t, cfg)
	if got := drain(t, c); len(got) != 0 {
		t.Fatalf("took %q from a file whose key is unknown", got)
	}
	if n := c.Stats().CorruptSkipped; n != 4 {
		t.Fatalf("CorruptSkipped = %d, want 4", n)
	}
}

// TestEncryptedEventTooLarge: with keys, an event that fits a payload only
// without the seal's 16-byte tag is ErrEventTooLarge at Put.
func TestEncryptedEventTooLarge(t *testing.T) {
	cfg := encryptedConfig(t, 1)
	c := mustOpen(t, cfg)
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// 17 fixed bytes, a header count (1) and a body length (4): the
	// largest body a plain put takes.
	body := make([]byte, logfile.MaxPayloadSize-22)
	if err := tx.Put(Event{Body: body}); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("Put of a body of %d bytes with keys: %v, want ErrEventTooLarge", len(body), err)
	}
}
