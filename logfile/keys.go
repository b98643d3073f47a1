package logfile

import (
	"fmt"

	"github.com/flumego/filechannel/internal/seal"
	"github.com/flumego/filechannel/internal/vfs"
)

// Encrypted log files (EncryptedVersion). A set with SetOptions.Keys makes
// every new file encrypted with the active key: the file's header says
// version 5, its first record (a key record, written with the FileStart
// records) names the key and holds its check value, and every put's body
// is sealed (internal/seal) when Append seals the frame, bound to its
// offset and fixed fields. The frames' checksums cover the stored bytes, so
// scans, Verify and repairs need no key; readers open the bodies with the
// file's keys (Set.Reader), or return them sealed (Record.Sealed) without.

// Keys supplies master keys by id (the channel's KeyProvider).
type Keys interface {
	ActiveKeyID() string
	Key(id string) ([]byte, error)
}

// encryptedFraming returns the framing of a new encrypted file id: a fresh
// salt, and the keys derived from keys' active key.
func encryptedFraming(keys Keys, id uint32) (Framing, error) {
	fr := newFraming()
	fr.version = EncryptedVersion
	fr.keyID = keys.ActiveKeyID()
	if len(fr.keyID) == 0 || len(fr.keyID) > MaxKeyIDLen {
		return Framing{}, fmt.Errorf("%w: active key id %q is not 1 to %d bytes", ErrKey, fr.keyID, MaxKeyIDLen)
	}
	if err := fr.attach(keys, id); err != nil {
		return Framing{}, err
	}
	fr.keyCheck = fr.keys.Check()
	return fr, nil
}

// attach derives the file's keys from keys' key fr.keyID, and checks them
// against the file's check value (when it has one).
func (fr *Framing) attach(keys Keys, id uint32) error {
	if keys == nil {
		return fmt.Errorf("%w: log %d is encrypted with key %q, and no keys are configured", ErrKey, id, fr.keyID)
	}
	master, err := keys.Key(fr.keyID)
	if err != nil {
		return fmt.Errorf("%w: log %d is encrypted with key %q: %v", ErrKey, id, fr.keyID, err)
	}
	k, err := seal.Derive(master, id, fr.salt)
	if err != nil {
		return fmt.Errorf("%w: key %q: %v", ErrKey, fr.keyID, err)
	}
	if fr.keyCheck != ([seal.CheckSize]byte{}) && k.Check() != fr.keyCheck {
		return fmt.Errorf("%w: log %d: key %q is not the key it was written with (key check values differ)", ErrKey, id, fr.keyID)
	}
	fr.keys = k
	return nil
}

// readKeyRecord fills in fr's key id and check value from the key record
// at the start of an encrypted file's records, if it is there and valid
// (else they stay unknown: the file's puts cannot be opened).
func readKeyRecord(f vfs.File, fr *Framing) error {
	if !fr.Encrypted() || fr.lost {
		return nil
	}
	b, err := readFrame(f, fr.HeaderSize(), *fr)
	if err != nil || b == nil {
		return err
	}
	var rec Record
	if _, err := decodeFrame(b, &rec, nil, 0, *fr); err != nil || rec.Type != RecordKey {
		return nil
	}
	fr.keyID, fr.keyCheck = rec.KeyID, rec.KeyCheck
	return nil
}

// CheckKeys checks that keys has the right key for every encrypted log file
// of the set: ErrKey (wrapped, naming the file and key id) at the first that
// it has not. A file whose key record is damaged is not checked: its
// puts are damage, reported as such.
func (s *Set) CheckKeys(keys Keys) error {
	for _, f := range s.Files() {
		file, err := s.fs.Open(f.Path)
		if err != nil {
			return fmt.Errorf("open %s: %w", f.Path, err)
		}
		_, fr, err := readFileHeader(file, f.Path)
		if err == nil {
			err = readKeyRecord(file, &fr)
		} else {
			err = nil // a damaged header is damage, not a key problem
		}
		file.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Path, err)
		}
		if fr.Encrypted() && fr.keyID != "" {
			if err := fr.attach(keys, f.ID); err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
		}
	}
	return nil
}
