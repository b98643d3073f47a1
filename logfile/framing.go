package logfile

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/seal"
)

// Framing is how the frames of one log file are laid out and checksummed:
// the file's format version and, from version 2 on, the file's salt. Every
// file has its own, read from its header (Writer.Framing, Reader.Framing,
// Scanner.Framing); frames encoded for one file are not valid in another.
//
// Version 1 frames (8-byte frame header) carry one CRC32C over the length
// and the payload; anybody who knows the format can compute it, so bytes
// that a producer put into an event body can form valid version-1 frames.
// Version 2 frames (12-byte frame header; version 3's are the same) carry
// two checksums, each XORed
// with one half of a 64-bit salt drawn from crypto/rand when the file is
// created and stored only in the file's header: a frame-header checksum, so
// that a scan rejects a candidate frame in O(1), and a payload checksum.
// Without the salt, bytes form a valid salted frame with probability
// 2^-64 (docs/format.md §3.2).
//
// A Framing never reveals its salt: it has no accessor, and it formats (with
// any verb) as its version only.
type Framing struct {
	version uint16
	salt    uint64 // versions 2 to 8: high half masks the header checksum, low half the payload checksum
	// lost: a salted file (version 2 to 8) whose header is damaged beyond
	// recovering its salt (both copies gone and its first two records
	// unusable): no frame of it can be verified.
	lost bool
	// recycled: the file is a recycled one (RecycledVersion or
	// RecycledBoundVersion on disk); version is then the layout's, 7 or 8.
	recycled bool

	// Encrypted files (EncryptedVersion): the id of the key their put
	// bodies are sealed with, its check value and (ChannelBoundVersion)
	// the channel the file's keys are bound to, from the file's key record
	// (zero when that is unknown), and the file's keys once derived from
	// that key (nil: the bodies stay sealed, Record.Sealed).
	keyID    string
	keyCheck [seal.CheckSize]byte
	channel  [seal.ChannelIDSize]byte
	keys     *seal.FileKeys
}

// framingV1 is the framing of every version-1 file: no salt.
var framingV1 = Framing{version: 1}

// newFraming returns the framing of a new file: the current format version
// and a fresh random salt.
func newFraming() Framing {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return Framing{version: FormatVersion, salt: binary.BigEndian.Uint64(b[:])}
}

// Version returns the format version of the file the framing belongs to,
// as its header says it (RecycledVersion or RecycledBoundVersion for a
// recycled file).
func (f Framing) Version() uint16 {
	if f.recycled {
		return f.version + RecycledVersion - TimedVersion
	}
	return f.version
}

// Recycled reports whether the file is a recycled one (RecycledVersion,
// RecycledBoundVersion): after its last record may lie another file's
// leftover bytes (Scanner, TailLeftover).
func (f Framing) Recycled() bool { return f.recycled }

// versionFraming returns the framing, without a salt, of header version v:
// a recycled version is the layout of 7 or 8, recycled.
func versionFraming(v uint16) Framing {
	if v == RecycledVersion || v == RecycledBoundVersion {
		return Framing{version: v - (RecycledVersion - TimedVersion), recycled: true}
	}
	return Framing{version: v}
}

// Encrypted reports whether the file's put bodies are sealed
// (EncryptedVersion).
func (f Framing) Encrypted() bool { return encryptedVersion(f.version) }

// Timed reports whether the file records commit times (versions 7 and 8):
// Record.Time of its puts and put commits.
func (f Framing) Timed() bool { return timedVersion(f.version) }

// KeyID returns the id of the key an encrypted file's put bodies are
// sealed with, from its key record ("" if unknown).
func (f Framing) KeyID() string { return f.keyID }

// ChannelID returns the id of the channel a version-6 file's keys are bound
// to, from its key record: zero if unknown, and in a version-5 file, which
// is bound to none. It is authenticated only once the file's keys are
// derived with it and match its check value (Set.Reader, Set.CheckKeys).
func (f Framing) ChannelID() [seal.ChannelIDSize]byte { return f.channel }

// sealFrame gives the frame at the start of frame (AppendUnsealed's, or
// AppendUnsealedEncrypted's for an encrypted file) its write-order id, seals
// a put's body for its place (the frame's file offset off) when the file is
// encrypted, and computes its checksums.
func (f Framing) sealFrame(frame []byte, off int64, woid uint64) error {
	fhs := f.FrameHeaderSize()
	binary.BigEndian.PutUint64(frame[fhs+9:fhs+17], woid)
	if f.Encrypted() && RecordType(frame[fhs]) == RecordPut {
		if f.keys == nil {
			return fmt.Errorf("seal a put in an encrypted log file: no key")
		}
		l := int(binary.BigEndian.Uint32(frame[0:4]))
		body := frame[fhs+f.putBodyOffset() : fhs+l-seal.Overhead]
		f.keys.Seal(body[:0], body, f.sealFields(frame, off))
	}
	f.seal(frame)
	return nil
}

// unsealFrames undoes sealFrame for the first n frames of b, sealed at
// base in a file of framing f whose write failed: each put's body in
// clear again and its tag's room zero, so that b can be sealed anew for
// another place (with new write-order ids: never the same nonce twice).
// The other frames need nothing: sealing them again rewrites their ids
// and checksums. An error means a body could not be restored (which the
// sealing just done rules out): b must not be written.
func (f Framing) unsealFrames(b *Batch, n int, base int64) error {
	if !f.Encrypted() || f.keys == nil {
		return nil
	}
	fhs := f.FrameHeaderSize()
	for _, off := range b.frames[:n] {
		frame := b.buf[off:]
		if RecordType(frame[fhs]) != RecordPut {
			continue
		}
		l := int(binary.BigEndian.Uint32(frame[0:4]))
		sealed := frame[fhs+f.putBodyOffset() : fhs+l]
		plain, err := f.keys.Open(sealed[:0], sealed, f.sealFields(frame, base+int64(off)))
		if err != nil {
			return fmt.Errorf("%w: the put at %d: %w", ErrBatchLost, off, err)
		}
		clear(sealed[len(plain):])
	}
	return nil
}

// putBodyOffset is the offset in a put's payload of its body (what an
// encrypted file seals): after the fixed fields and, in versions 7 and 8,
// the commit time, which stays in clear (the commit record holds it in
// clear too).
func (f Framing) putBodyOffset() int {
	if f.Timed() {
		return payloadHeaderSize + timeSize
	}
	return payloadHeaderSize
}

// sealFields are what a put's seal binds: the frame's place, its length,
// its fixed fields and, in version 8, its commit time.
func (f Framing) sealFields(frame []byte, off int64) seal.Fields {
	fhs := f.FrameHeaderSize()
	p := frame[fhs:]
	sf := seal.Fields{Offset: uint32(off), PayloadLen: binary.BigEndian.Uint32(frame[0:4]), Type: p[0],
		TxID: binary.BigEndian.Uint64(p[1:9]), WriteOrderID: binary.BigEndian.Uint64(p[9:17])}
	if f.Timed() {
		sf.Timed, sf.Time = true, int64(binary.BigEndian.Uint64(p[payloadHeaderSize:]))
	}
	return sf
}

// openPut opens rec, a sealed put decoded from frame (at file offset off):
// its headers and body are decoded from the opened bytes, a fresh buffer.
// A body that does not authenticate is a *corrupt.Error.
func (f Framing) openPut(rec *Record, frame []byte, off int64) error {
	plain, err := f.keys.Open(nil, rec.Sealed, f.sealFields(frame, off))
	if err != nil {
		return corrupt.New("", -1, "%v (damaged or changed bytes, a record moved, or another key)", err)
	}
	rec.Sealed = nil
	return DecodePutBody(plain, rec)
}

// HeaderSize returns the size of the file header, the offset of the first
// record: 16 in version 1, 36 (HeaderSize) in versions 2 to 8.
func (f Framing) HeaderSize() int64 {
	if f.version == 1 {
		return headerSizeV1
	}
	return HeaderSize
}

// FrameHeaderSize returns the size of a frame before its payload: 8 in
// version 1, 12 (FrameHeaderSize) in versions 2 to 8.
func (f Framing) FrameHeaderSize() int {
	if f.version == 1 {
		return frameHeaderSizeV1
	}
	return FrameHeaderSize
}

// MinPaddingSize returns the size of the smallest padding frame (and of the
// smallest frame of any type): 25 in version 1, 29 (MinPaddingSize) in
// versions 2 to 8. A damaged region shorter than it cannot be padded.
func (f Framing) MinPaddingSize() int { return f.FrameHeaderSize() + payloadHeaderSize }

// MaxFrameSize returns the size of the longest frame: the frame header and
// MaxPayloadSize.
func (f Framing) MaxFrameSize() int { return f.FrameHeaderSize() + MaxPayloadSize }

// Format prints the framing as its version, never its salt, whatever the
// verb.
func (f Framing) Format(s fmt.State, _ rune) {
	if f.lost {
		fmt.Fprintf(s, "log format v%d (salt lost)", f.Version())
		return
	}
	fmt.Fprintf(s, "log format v%d", f.Version())
}

// AppendRecord appends r's frame, sealed for this framing's file, to dst
// and returns the extended slice. It returns ErrTooLarge if the payload
// would exceed MaxPayloadSize, and ErrInvalidRecord for an unknown Type, a
// commit of a type other than put or take, padding with a transaction id,
// a write-order id or a negative Filler, a groups record with a
// transaction id or a Catalog that breaks the rules of format.go (ids
// strictly increasing and below NextGroupID, names of at most
// MaxGroupNameLen bytes, Policy 0..2), or a skip record whose Skip is empty
// or not strictly increasing, or a key record whose ChannelID is zero in a
// version-6 framing or set in an older one; dst is returned unchanged with
// an error. A take with a Group other than 0 is written as a group take
// (type 6). With a dst of enough capacity it does not allocate (unless a
// put has more than 16 headers).
func (f Framing) AppendRecord(dst []byte, r *Record) ([]byte, error) {
	if r.Type == RecordKey && (r.ChannelID != [seal.ChannelIDSize]byte{}) != boundVersion(f.version) {
		return dst, fmt.Errorf("%w: a key record names a channel in versions 6 and 8 and only there (version %d)", ErrInvalidRecord, f.version)
	}
	start := len(dst)
	dst, err := appendUnsealed(dst, r, f.FrameHeaderSize(), f.Timed())
	if err != nil {
		return dst, err
	}
	f.seal(dst[start:])
	return dst, nil
}

// EncodedSize returns the size of the whole frame r takes in this
// framing's file: FrameHeaderSize() + payload.
func (f Framing) EncodedSize(r *Record) int { return f.FrameHeaderSize() + r.payloadSize(f.Timed()) }

// AppendPadding appends a padding frame (type RecordPadding) of exactly size
// bytes to dst: MinPaddingSize() <= size <= MaxFrameSize(), else
// ErrInvalidRecord and dst unchanged. Use PaddingSizes to cover a longer
// region.
func (f Framing) AppendPadding(dst []byte, size int) ([]byte, error) {
	if size < f.MinPaddingSize() || size > f.MaxFrameSize() {
		return dst, fmt.Errorf("%w: padding frame of %d bytes, want %d to %d", ErrInvalidRecord, size, f.MinPaddingSize(), f.MaxFrameSize())
	}
	return f.AppendRecord(dst, &Record{Type: RecordPadding, Filler: size - f.MinPaddingSize()})
}

// PaddingSizes splits a region of n bytes into the sizes of the padding
// frames that cover it exactly, in order: one frame up to MaxFrameSize(),
// else frames of MaxFrameSize() and a last one of at least
// MinPaddingSize(). It returns nil for n < MinPaddingSize(), which no
// padding can cover.
func (f Framing) PaddingSizes(n int64) []int {
	lo, hi := int64(f.MinPaddingSize()), int64(f.MaxFrameSize())
	if n < lo {
		return nil
	}
	var sizes []int
	for n > hi {
		s := hi
		if n-hi < lo {
			s = hi - lo // leaves between lo and 2*lo bytes
		}
		sizes = append(sizes, int(s))
		n -= s
	}
	return append(sizes, int(n))
}

// DecodeRecord decodes one frame of this framing's file at the start of b
// and returns the record and the frame length. The record's Body aliases b.
// It returns io.ErrUnexpectedEOF if b is shorter than the frame claims, a
// *corrupt.FormatError for a frame whose checksums match but whose record
// type a newer release added, and a *corrupt.Error for a bad length,
// checksum or payload; both with File "" and Offset -1 (callers fill them
// in). It never panics.
func (f Framing) DecodeRecord(b []byte) (Record, int, error) {
	var r Record
	n, err := decodeFrame(b, &r, nil, 0, f)
	if err != nil {
		return Record{}, 0, err
	}
	return r, n, nil
}

// masks returns the values XORed into the stored header and payload
// checksums: the salt's halves (versions 2 to 8), zero for version 1.
func (f Framing) masks() (header, payload uint32) {
	return uint32(f.salt >> 32), uint32(f.salt)
}

// seal computes and stores the checksums of frame, a whole frame in f's
// layout whose length and payload are final.
func (f Framing) seal(frame []byte) {
	n := int(binary.BigEndian.Uint32(frame[0:4]))
	if f.version == 1 {
		binary.BigEndian.PutUint32(frame[4:8], crcV1(frame[0:4], frame[frameHeaderSizeV1:frameHeaderSizeV1+n]))
		return
	}
	hm, pm := f.masks()
	binary.BigEndian.PutUint32(frame[8:12], crc32.Checksum(frame[FrameHeaderSize:FrameHeaderSize+n], castagnoli)^pm)
	binary.BigEndian.PutUint32(frame[4:8], headerCRC(frame)^hm)
}

// setWriteOrderID rewrites the write-order id of the frame at the start of
// frame (a whole frame in f's layout, of AppendRecord or AppendUnsealed)
// and seals it. The channel encodes records when they are put and assigns
// write-order ids only when it appends them to a file, so the ids follow
// the order of the file and the checksums that file's salt.
func (f Framing) setWriteOrderID(frame []byte, woid uint64) {
	fhs := f.FrameHeaderSize()
	binary.BigEndian.PutUint64(frame[fhs+9:fhs+17], woid)
	f.seal(frame)
}

// crcV1 is the version-1 frame checksum: CRC32C of the length field, then
// the payload.
func crcV1(length, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(length, castagnoli), castagnoli, payload)
}

// headerCRC is the unmasked frame-header checksum (versions 2 to 8) of
// the frame at the start of b (len(b) >= MinPaddingSize): CRC32C of the length field
// (bytes 0..3), then the payload checksum and the payload's fixed fields
// (bytes 8..28).
func headerCRC(b []byte) uint32 {
	return crc32.Update(crc32.Checksum(b[0:4], castagnoli), castagnoli, b[8:MinPaddingSize])
}

// headerOK reports whether the salted frame at the start of b (len(b) >=
// MinPaddingSize) has a matching frame-header checksum: O(1) work, whatever
// length the frame claims. For version 1, which has no such checksum, it is
// always true.
func (f Framing) headerOK(b []byte) bool {
	if f.version == 1 {
		return true
	}
	if f.lost {
		return false
	}
	hm, _ := f.masks()
	return headerCRC(b)^hm == binary.BigEndian.Uint32(b[4:8])
}

// frameLen reads the length field at the start of b (len(b) >= 4) and
// returns the whole frame length, or a corruption error for a zero or too
// large length (or, from version 2 on, one shorter than the fixed payload
// fields the header checksum covers).
func (f Framing) frameLen(b []byte) (int, error) {
	l := binary.BigEndian.Uint32(b)
	switch {
	case l == 0:
		return 0, corrupt.New("", -1, "zero payload length")
	case l > MaxPayloadSize:
		return 0, corrupt.New("", -1, "payload length %d exceeds limit %d", l, MaxPayloadSize)
	case f.version != 1 && l < payloadHeaderSize:
		return 0, corrupt.New("", -1, "payload length %d shorter than its %d fixed bytes", l, payloadHeaderSize)
	}
	return f.FrameHeaderSize() + int(l), nil
}

// check verifies the checksums of frame, exactly one whole frame in f's
// layout (its length already checked by frameLen). The computed values in
// the error include the salt, so that the message tells nothing about it.
func (f Framing) check(frame []byte) error {
	if f.version == 1 {
		got, want := crcV1(frame[0:4], frame[frameHeaderSizeV1:]), binary.BigEndian.Uint32(frame[4:8])
		if got != want {
			return corrupt.New("", -1, "checksum mismatch: stored %#08x, computed %#08x", want, got)
		}
		return nil
	}
	if f.lost {
		return corrupt.New("", -1, "the file's salt was lost with its header: no record of it can be verified")
	}
	hm, pm := f.masks()
	if got, want := headerCRC(frame)^hm, binary.BigEndian.Uint32(frame[4:8]); got != want {
		return corrupt.New("", -1, "frame header checksum mismatch: stored %#08x, computed %#08x", want, got)
	}
	if got, want := crc32.Checksum(frame[FrameHeaderSize:], castagnoli)^pm, binary.BigEndian.Uint32(frame[8:12]); got != want {
		return corrupt.New("", -1, "payload checksum mismatch: stored %#08x, computed %#08x", want, got)
	}
	return nil
}

// decodeFrame validates the frame of framing f at the start of b and
// decodes it into r (using s's allocations when s is not nil). It returns
// the frame length. Errors are io.ErrUnexpectedEOF when b is too short, a
// *corrupt.FormatError for a checksummed frame of a newer record type
// (newerType), and corruption errors otherwise, with File "" and Offset -1:
// a fresh value callers may fill in.
//
// A frame no longer than checked is taken to have valid checksums (a
// Scanner's CheckAhead verified them); pass 0 to check every frame.
func decodeFrame(b []byte, r *Record, s *scratch, checked int64, f Framing) (int, error) {
	if len(b) < f.FrameHeaderSize() {
		if len(b) >= 4 {
			if _, err := f.frameLen(b); err != nil {
				return 0, err
			}
		}
		return 0, io.ErrUnexpectedEOF
	}
	n, err := f.frameLen(b)
	if err != nil {
		return 0, err
	}
	if len(b) < n {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(n) > checked {
		if err := f.check(b[:n]); err != nil {
			return 0, err
		}
	}
	payload := b[f.FrameHeaderSize():n]
	if t := newerType(payload); t != 0 {
		return 0, &corrupt.FormatError{Offset: -1, Version: uint64(f.version), Supported: MaxFormatVersion, RecordType: uint8(t)}
	}
	if reason := decodePayloadOf(payload, r, s, f.version); reason != "" {
		return 0, &corrupt.Error{Offset: -1, Reason: reason}
	}
	return n, nil
}
