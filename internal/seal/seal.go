package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Part of the on-disk format; never change.
const (
	// KeySize is the size of a master key.
	KeySize = 32
	// CheckSize is the size of a key-check value.
	CheckSize = 16
	// Overhead is what sealing adds to a body: the GCM tag.
	Overhead = 16

	saltLabel  = "filechannel log keys v1"
	boundLabel = "filechannel log keys v2" // DeriveBound's: a channel id follows the salt
	infoRecord = "record encryption"
	infoCheck  = "key check"
	adMagic    = "FCRE"
	adSize     = 33
)

// ErrOpen is returned by Open for a sealed body that does not authenticate:
// damaged or changed bytes, a record moved to another offset or file, or
// the wrong key.
var ErrOpen = errors.New("record does not authenticate")

// FileKeys are the keys of one encrypted log file. They are safe for
// concurrent use.
type FileKeys struct {
	fileID uint32
	aead   cipher.AEAD
	check  [CheckSize]byte
}

// ChannelIDSize is the size of a channel's id (channel.id), which
// DeriveBound binds.
const ChannelIDSize = 16

// Derive returns the keys of log file fileID with header salt salt, from
// master (KeySize bytes): those of a version-5 file, bound to no channel.
func Derive(master []byte, fileID uint32, salt uint64) (*FileKeys, error) {
	return derive(master, fileID, hkdfSalt(saltLabel, fileID, salt))
}

// DeriveBound is Derive for a file of the channel whose id is channel
// (version 6): the keys differ for every channel, so a file (or a record)
// copied from another channel that has the same master key neither
// matches its check value nor opens.
func DeriveBound(master []byte, fileID uint32, salt uint64, channel [ChannelIDSize]byte) (*FileKeys, error) {
	return derive(master, fileID, append(hkdfSalt(boundLabel, fileID, salt), channel[:]...))
}

// derive returns the keys HKDF gives master with HKDF salt hsalt.
func derive(master []byte, fileID uint32, hsalt []byte) (*FileKeys, error) {
	if len(master) != KeySize {
		return nil, fmt.Errorf("seal: a key is %d bytes, not %d", len(master), KeySize)
	}
	prk, err := hkdf.Extract(sha256.New, master, hsalt)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	key, err := hkdf.Expand(sha256.New, prk, infoRecord, 32)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	check, err := hkdf.Expand(sha256.New, prk, infoCheck, CheckSize)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	k := &FileKeys{fileID: fileID, aead: aead}
	copy(k.check[:], check)
	return k, nil
}

// hkdfSalt is the HKDF salt of a file's keys: label, the file id and the
// header's salt (DeriveBound appends the channel id).
func hkdfSalt(label string, fileID uint32, salt uint64) []byte {
	b := make([]byte, len(label)+12, len(label)+12+ChannelIDSize)
	n := copy(b, label)
	binary.BigEndian.PutUint32(b[n:], fileID)
	binary.BigEndian.PutUint64(b[n+4:], salt)
	return b
}

// Check returns the file's key-check value.
func (k *FileKeys) Check() [CheckSize]byte { return k.check }

// Fields are a record's fixed fields that sealing binds: where the frame
// is, how long its payload is, and the record's type and ids.
type Fields struct {
	Offset       uint32 // the frame's offset in the file
	PayloadLen   uint32 // the frame's payload length, the sealed body and its tag included
	Type         uint8
	TxID         uint64
	WriteOrderID uint64
	// Timed: the record holds a commit time (a put of log format
	// version 8), Time, which the additional data then binds too.
	Timed bool
	Time  int64
}

// Seal appends body, sealed for the record described by f, to dst and
// returns the extended slice: len(body) + Overhead bytes. dst may be
// body[:0] to seal in place if body has Overhead bytes of capacity to
// spare.
func (k *FileKeys) Seal(dst, body []byte, f Fields) []byte {
	s := k.nonceAD(f)
	defer scratchPool.Put(s)
	return k.aead.Seal(dst, s.nonce[:], body, s.ad[:s.n])
}

// Open appends the body sealed in sealed (ciphertext and tag) for the
// record described by f to dst and returns the extended slice, or ErrOpen.
// dst may be sealed[:0] to open in place.
func (k *FileKeys) Open(dst, sealed []byte, f Fields) ([]byte, error) {
	s := k.nonceAD(f)
	defer scratchPool.Put(s)
	out, err := k.aead.Open(dst, s.nonce[:], sealed, s.ad[:s.n])
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// scratch is a record's nonce and additional data, pooled: handed to the
// AEAD through an interface, they would escape to the heap at every call.
type scratch struct {
	nonce [12]byte
	ad    [adSize + 8]byte
	n     int // the length of ad: adSize, or adSize+8 with a time
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// nonceAD returns the nonce and additional data of a record (doc.go), in
// a scratch of scratchPool the caller puts back.
func (k *FileKeys) nonceAD(f Fields) *scratch {
	s := scratchPool.Get().(*scratch)
	binary.BigEndian.PutUint32(s.nonce[0:4], f.Offset)
	binary.BigEndian.PutUint64(s.nonce[4:12], f.WriteOrderID)
	copy(s.ad[0:4], adMagic)
	binary.BigEndian.PutUint32(s.ad[4:8], k.fileID)
	binary.BigEndian.PutUint32(s.ad[8:12], f.Offset)
	binary.BigEndian.PutUint32(s.ad[12:16], f.PayloadLen)
	s.ad[16] = f.Type
	binary.BigEndian.PutUint64(s.ad[17:25], f.TxID)
	binary.BigEndian.PutUint64(s.ad[25:33], f.WriteOrderID)
	s.n = adSize
	if f.Timed {
		binary.BigEndian.PutUint64(s.ad[33:41], uint64(f.Time))
		s.n += 8
	}
	return s
}
