package channel

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// randomKeyHex returns the 64 hex digits of a random key: no substring of
// it turns up in an error by chance, as one of a repeated byte could.
func randomKeyHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// holdsKeyBytes reports whether s holds any 16 or more characters in a row
// of key (in either case of hex digit).
func holdsKeyBytes(s, key string) bool {
	low := strings.ToLower(s)
	for i := 0; i+16 <= len(key); i++ {
		if strings.Contains(low, strings.ToLower(key[i:i+16])) {
			return true
		}
	}
	return false
}

// writeKeyFile writes text to a key file of mode 0600 and returns its path.
func writeKeyFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKeyErrorsHoldNoKeyBytes: every error of KeysFromFile and KeysFromEnv
// on a text that holds a real key, wherever the key is put, names the line
// and never holds the key's bytes.
func TestKeyErrorsHoldNoKeyBytes(t *testing.T) {
	k, k2 := randomKeyHex(t), randomKeyHex(t)
	for _, tc := range []struct{ name, text, want string }{
		{"id_and_key_swapped", "active a\n" + k + " a", "line 2: the key is not 64 hex digits (are the id and the key swapped?)"},
		{"key_on_the_active_line", "active " + k + "\na " + k2, "line 1: the active key is not among the 1 keys"},
		{"key_as_id_twice", "active a\n" + k + " a\n" + k + " b", "line 2: the key is not 64 hex digits"},
		{"key_in_two_fields", "active a\n" + k + " " + k2 + "\n" + k + " " + k2, "line 3: the key id of line 2 again"},
		{"key_and_more_as_id", "active a\n" + k + "00 " + k2, "line 2: the key id is 66 bytes, more than 64"},
		{"key_then_a_digit", "active a\na " + k + "0", "line 2: the key is not 64 hex digits"},
		{"key_without_its_last_digit", "active a\na " + k[:63], "line 2: the key is not 64 hex digits"},
		{"key_upper_case_and_swapped", "active a\n" + strings.ToUpper(k) + " zz", "line 2: the key is not 64 hex digits (are the id and the key swapped?)"},
		{"three_fields", "active a\na " + k + " " + k2, "line 2: want \"id hex\" or \"active id\", got 3 fields"},
		{"one_field", "active a\n" + k, "line 2: want \"id hex\" or \"active id\", got 1 fields"},
		{"second_active_line", "active a\na " + k2 + "\nactive " + k, "line 3: a second \"active\" line (the first is line 1)"},
		{"active_alone", "active " + k, "line 1: the active key is not among the 0 keys"},
		{"no_active_line", k + " " + k2, "no \"active id\" line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ferr := KeysFromFile(writeKeyFile(t, tc.text))
			t.Setenv("FC_TEST_KEYS", strings.ReplaceAll(tc.text, "\n", ";"))
			_, eerr := KeysFromEnv("FC_TEST_KEYS")
			for _, err := range []error{ferr, eerr} {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v; want %q", err, tc.want)
				}
				if holdsKeyBytes(err.Error(), k) || holdsKeyBytes(err.Error(), k2) {
					t.Fatalf("the error holds key bytes: %v", err)
				}
			}
		})
	}
}

// TestKeysFromFileReadsTheWholeFile: a line of any length does not end the
// reading (a long comment is skipped, the keys after it are read); a long
// line that is not a comment, and a file too large, are errors.
func TestKeysFromFileReadsTheWholeFile(t *testing.T) {
	k1, k2 := randomKeyHex(t), randomKeyHex(t)
	long := strings.Repeat("x", 100<<10)
	p, err := KeysFromFile(writeKeyFile(t, "active k1\nk1 "+k1+"\n# "+long+"\nk2 "+k2+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Key("k2"); err != nil || hex.EncodeToString(got) != k2 {
		t.Fatalf("the key after a 100 KiB comment line: %v", err)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"long_line", "active k1\nk1 " + k1 + "\n" + long + " " + k2 + "\nk2 " + k2, "line 3: the key id is 102400 bytes"},
		{"long_key", "active k1\nk1 " + k1 + "\nk2 " + k2 + long, "line 3: the key is not 64 hex digits"},
		{"too_large", "active k1\nk1 " + k1 + "\n# " + strings.Repeat(long, 11), "is larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := KeysFromFile(writeKeyFile(t, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want %q", err, tc.want)
			}
			if holdsKeyBytes(err.Error(), k1) || holdsKeyBytes(err.Error(), k2) || len(err.Error()) > 200 {
				t.Fatalf("the error holds key bytes or the line: %v", err)
			}
		})
	}
}

// TestKeysFromFileNotARegularFile: a directory, a FIFO and a missing path
// are errors (a FIFO is refused before it is opened, so nothing waits).
func TestKeysFromFileNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	for _, path := range []string{dir, fifo, filepath.Join(dir, "none")} {
		if _, err := KeysFromFile(path); err == nil || !strings.HasPrefix(err.Error(), "filechannel: key file: ") || !strings.Contains(err.Error(), path) {
			t.Fatalf("KeysFromFile(%s): %v", path, err)
		}
	}
}
