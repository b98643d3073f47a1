package logfile

import (
	"encoding/hex"
	"fmt"

	"github.com/flumego/filechannel/internal/seal"
	"github.com/flumego/filechannel/internal/vfs"
)

// Encrypted log files (EncryptedVersion, ChannelBoundVersion). A set with
// SetOptions.Keys makes every new file encrypted with the active key: the
// file's header says version 6, its first record (a key record, written
// with the FileStart records) names the key and the channel
// (SetOptions.ChannelID) and holds the key's check value, and every put's
// body is sealed (internal/seal) when Append seals the frame, bound to its
// offset and fixed fields. The file's keys are derived from the master key
// with the channel's id (seal.DeriveBound): a file copied from another
// channel that has the same key is refused (attach), and its records do
// not open. A version-5 file, written before, names no channel, and its
// keys are derived without one (seal.Derive). The frames' checksums cover
// the stored bytes, so scans, Verify and repairs need no key; readers open
// the bodies with the file's keys (Set.Reader), or return them sealed
// (Record.Sealed) without.

// Keys supplies master keys by id (the channel's KeyProvider).
type Keys interface {
	ActiveKeyID() string
	Key(id string) ([]byte, error)
}

// KeySize is the size of a key that encrypts log files (Keys): AES-256.
const KeySize = seal.KeySize

// ChannelID is a channel's id (its channel.id), which a version-6 file's
// keys are bound to.
type ChannelID = [seal.ChannelIDSize]byte

// encryptedFraming returns the framing of a new encrypted file id of the
// channel channel: version 6, a fresh salt, and the keys derived from
// keys' active key and channel.
func encryptedFraming(keys Keys, id uint32, channel ChannelID) (Framing, error) {
	if channel == (ChannelID{}) {
		return Framing{}, fmt.Errorf("%w: no channel id to bind encrypted log %d to (SetOptions.ChannelID)", ErrKey, id)
	}
	fr := newFraming()
	fr.version = TimedBoundVersion
	fr.keyID = keys.ActiveKeyID()
	fr.channel = channel
	if len(fr.keyID) == 0 || len(fr.keyID) > MaxKeyIDLen {
		return Framing{}, fmt.Errorf("%w: active key id %q is not 1 to %d bytes", ErrKey, fr.keyID, MaxKeyIDLen)
	}
	if err := fr.attach(keys, id, channel); err != nil {
		return Framing{}, err
	}
	fr.keyCheck = fr.keys.Check()
	return fr, nil
}

// attach derives the file's keys from keys' key fr.keyID (and, in a
// version-6 file, the channel its key record names), and checks them
// against the file's check value (when it has one). A version-6 file
// bound to a channel other than channel (when that is not zero: a reader
// that knows which channel it reads) is refused first: a file of another
// channel. Both are ErrKey.
func (fr *Framing) attach(keys Keys, id uint32, channel ChannelID) error {
	bound := boundVersion(fr.version)
	if bound && channel != (ChannelID{}) && fr.channel != channel {
		return fmt.Errorf("%w: log %d belongs to channel %s, not to this channel %s: a log file of another channel, copied here (move it out of the data dir), or this channel's id changed (its channel.id files were lost: give it back its id)",
			ErrKey, id, hex.EncodeToString(fr.channel[:]), hex.EncodeToString(channel[:]))
	}
	if keys == nil {
		return fmt.Errorf("%w: log %d is encrypted with key %q, and no keys are configured", ErrKey, id, fr.keyID)
	}
	master, err := keys.Key(fr.keyID)
	if err != nil {
		return fmt.Errorf("%w: log %d is encrypted with key %q: %v", ErrKey, id, fr.keyID, err)
	}
	var k *seal.FileKeys
	if bound {
		k, err = seal.DeriveBound(master, id, fr.salt, fr.channel)
	} else {
		k, err = seal.Derive(master, id, fr.salt)
	}
	if err != nil {
		return fmt.Errorf("%w: key %q: %v", ErrKey, fr.keyID, err)
	}
	if fr.keyCheck != ([seal.CheckSize]byte{}) && k.Check() != fr.keyCheck {
		if bound {
			return fmt.Errorf("%w: log %d: key %q is not the key it was written with, or the channel id %s in its key record was changed (key check values differ)",
				ErrKey, id, fr.keyID, hex.EncodeToString(fr.channel[:]))
		}
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
	fr.keyID, fr.keyCheck, fr.channel = rec.KeyID, rec.KeyCheck, rec.ChannelID
	return nil
}

// CheckKeys checks that keys has the right key for every encrypted log file
// of the set, and that every version-6 file is bound to the set's channel
// (SetOptions.ChannelID, unless zero): ErrKey (wrapped, naming the file and
// key id) at the first that is not. A file whose key record is damaged is
// not checked: its puts are damage, reported as such.
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
			if err := fr.attach(keys, f.ID, s.opts.ChannelID); err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
		}
	}
	return nil
}
