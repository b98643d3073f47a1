package channel

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		if v := uint16(b[4])<<8 | uint16(b[5]); v != logfile.EncryptedVersion {
			t.Errorf("%s: format version %d, want %d", p, v, logfile.EncryptedVersion)
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
	if !versions[logfile.FormatVersion] || !versions[logfile.EncryptedVersion] {
		t.Fatalf("log file versions %v: want both %d and %d", versions, logfile.FormatVersion, logfile.EncryptedVersion)
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
