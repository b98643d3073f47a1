package channel

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flumego/filechannel/logfile"
)

// KeyProvider supplies the keys that encrypt event data at rest
// (Config.Keys; nil = no encryption). Every new log file is encrypted with
// the active key, and names it in its first record; a file keeps the key
// it was written with, so earlier keys must stay available (Key) until
// their last file is deleted. Key bytes are never logged. A key from a KMS
// plugs in as a KeyProvider whose Key fetches (and caches) the key by id.
type KeyProvider interface {
	ActiveKeyID() string           // the key that new log files are written with
	Key(id string) ([]byte, error) // a 32-byte key; an error if this provider does not have it
}

// KeySize is the size of a key: AES-256.
const KeySize = logfile.KeySize

// MaxKeyIDLen is the longest key id: 64 bytes.
const MaxKeyIDLen = logfile.MaxKeyIDLen

// StaticKeys returns a KeyProvider of keys held in memory: active names the
// key new files are written with, keys maps every id to its 32 bytes. The
// map is copied. Open reports a provider whose active key is missing or not
// KeySize bytes.
func StaticKeys(active string, keys map[string][]byte) KeyProvider {
	c := make(map[string][]byte, len(keys))
	for id, k := range keys {
		c[id] = bytes.Clone(k)
	}
	return staticKeys{active: active, keys: c}
}

type staticKeys struct {
	active string
	keys   map[string][]byte
}

func (s staticKeys) ActiveKeyID() string { return s.active }

func (s staticKeys) Key(id string) ([]byte, error) {
	k, ok := s.keys[id]
	if !ok {
		return nil, fmt.Errorf("no key %q (the provider has %d keys)", id, len(s.keys))
	}
	return k, nil
}

// KeysFromFile reads keys from the file at path, which must be a regular
// file readable and writable by its owner only (mode 0600 or narrower) and
// at most 1 MiB: one key per line, "id hex", with the 64 hex digits of the
// key's 32 bytes; the line "active id" names the active key. Blank lines
// and lines starting with '#' are ignored. A file that cannot be read whole
// is an error. Errors name the line and what is wrong with it, never a
// field of it (a key's bytes may be where the id was expected).
//
//	# filechannel keys
//	active 2026-12
//	2026-11 8f1c...(64 hex digits)
//	2026-12 03ab...(64 hex digits)
func KeysFromFile(path string) (KeyProvider, error) {
	b, err := readKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("filechannel: key file: %w", err)
	}
	k, err := parseKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("filechannel: key file %s: %w", path, err)
	}
	return k, nil
}

// maxKeyFileSize is the largest key file KeysFromFile reads: some ten
// thousand keys.
const maxKeyFileSize = 1 << 20

// readKeyFile returns the whole of the key file at path, after checking
// that it is a regular file private to its owner (before opening it, so
// that a FIFO is not waited on, and again on what was opened).
func readKeyFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkKeyFileMode(path, fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkKeyFileMode(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, err // an *fs.PathError: "read PATH: ..."
	}
	if len(b) > maxKeyFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxKeyFileSize)
	}
	return b, nil
}

// checkKeyFileMode reports a key file that is not a regular file private to
// its owner.
func checkKeyFileMode(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s has mode %#o: it must be readable by its owner only (chmod 600)", path, fi.Mode().Perm())
	}
	return nil
}

// KeysFromEnv reads keys from the environment variable name, in the key
// file's format (KeysFromFile) with ';' or newlines between the entries:
// "active 2026-12; 2026-12 03ab...". The variable is read once.
func KeysFromEnv(name string) (KeyProvider, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return nil, fmt.Errorf("filechannel: keys: environment variable %s is not set", name)
	}
	k, err := parseKeys(strings.ReplaceAll(v, ";", "\n"))
	if err != nil {
		return nil, fmt.Errorf("filechannel: keys in $%s: %w", name, err)
	}
	return k, nil
}

// parseKeys parses the key file format. Its errors name lines, never a
// field: whatever field is wrong may hold a key's bytes (an id and a key
// swapped, a key on the "active" line).
func parseKeys(s string) (KeyProvider, error) {
	keys := map[string][]byte{}
	lineOf := map[string]int{} // the line of each key id
	active, activeLine := "", 0
	for i, line := range strings.Split(s, "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want \"id hex\" or \"active id\", got %d fields", n, len(f))
		}
		if f[0] == "active" {
			if activeLine != 0 {
				return nil, fmt.Errorf("line %d: a second \"active\" line (the first is line %d)", n, activeLine)
			}
			active, activeLine = f[1], n
			continue
		}
		id, hexKey := f[0], f[1]
		if len(id) > MaxKeyIDLen {
			return nil, fmt.Errorf("line %d: the key id is %d bytes, more than %d", n, len(id), MaxKeyIDLen)
		}
		if first, dup := lineOf[id]; dup {
			return nil, fmt.Errorf("line %d: the key id of line %d again", n, first)
		}
		k, err := hex.DecodeString(hexKey)
		if err != nil || len(k) != KeySize {
			if _, err := hex.DecodeString(id); err == nil && len(id) == 2*KeySize {
				return nil, fmt.Errorf("line %d: the key is not %d hex digits (are the id and the key swapped?)", n, 2*KeySize)
			}
			return nil, fmt.Errorf("line %d: the key is not %d hex digits", n, 2*KeySize)
		}
		keys[id], lineOf[id] = k, n
	}
	if activeLine == 0 {
		return nil, fmt.Errorf("no \"active id\" line")
	}
	if _, ok := keys[active]; !ok {
		return nil, fmt.Errorf("line %d: the active key is not among the %d keys", activeLine, len(keys))
	}
	return staticKeys{active: active, keys: keys}, nil
}

// checkKeyID reports a key id the log format cannot hold.
func checkKeyID(id string) error {
	if len(id) == 0 || len(id) > MaxKeyIDLen {
		return fmt.Errorf("key id %q is not 1 to %d bytes", id, MaxKeyIDLen)
	}
	return nil
}

// checkActiveKey reports a provider whose active key cannot encrypt.
func checkActiveKey(p KeyProvider) error {
	id := p.ActiveKeyID()
	if err := checkKeyID(id); err != nil {
		return fmt.Errorf("active %w", err)
	}
	k, err := p.Key(id)
	if err != nil {
		return fmt.Errorf("active key %q: %w", id, err)
	}
	if len(k) != KeySize {
		return fmt.Errorf("active key %q is %d bytes, not %d", id, len(k), KeySize)
	}
	return nil
}

// logKeys is p as the log set's Keys: nil stays nil (an interface holding
// a nil KeyProvider would not).
func logKeys(p KeyProvider) logfile.Keys {
	if p == nil {
		return nil
	}
	return p
}
