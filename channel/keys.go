package channel

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/flumego/filechannel/internal/seal"
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
const KeySize = seal.KeySize

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
// file readable and writable by its owner only (mode 0600 or narrower):
// one key per line, "id hex", with the 64 hex digits of the key's 32
// bytes; the line "active id" names the active key. Blank lines and lines
// starting with '#' are ignored. Errors name the line, never a key's bytes.
//
//	# filechannel keys
//	active 2026-12
//	2026-11 8f1c...(64 hex digits)
//	2026-12 03ab...(64 hex digits)
func KeysFromFile(path string) (KeyProvider, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("filechannel: key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("filechannel: key file %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("filechannel: key file %s has mode %#o: it must be readable by its owner only (chmod 600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("filechannel: key file: %w", err)
	}
	k, err := parseKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("filechannel: key file %s: %w", path, err)
	}
	return k, nil
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

// parseKeys parses the key file format.
func parseKeys(s string) (KeyProvider, error) {
	keys := map[string][]byte{}
	active := ""
	sc := bufio.NewScanner(strings.NewReader(s))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want \"id hex\" or \"active id\", got %d fields", n, len(f))
		}
		if f[0] == "active" {
			if active != "" {
				return nil, fmt.Errorf("line %d: a second active key", n)
			}
			active = f[1]
			continue
		}
		if err := checkKeyID(f[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if _, dup := keys[f[0]]; dup {
			return nil, fmt.Errorf("line %d: key %q again", n, f[0])
		}
		k, err := hex.DecodeString(f[1])
		if err != nil || len(k) != KeySize {
			return nil, fmt.Errorf("line %d: key %q is not %d hex digits", n, f[0], 2*KeySize)
		}
		keys[f[0]] = k
	}
	if active == "" {
		return nil, fmt.Errorf("no \"active id\" line")
	}
	if _, ok := keys[active]; !ok {
		return nil, fmt.Errorf("the active key %q is not among the %d keys", active, len(keys))
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
