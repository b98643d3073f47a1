package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"
)

// hkdfByHand is RFC 5869 written out with crypto/hmac, to check Derive
// against the spec in doc.go by another path than crypto/hkdf.
func hkdfByHand(ikm, salt []byte, info string, n int) []byte {
	ext := hmac.New(sha256.New, salt)
	ext.Write(ikm)
	prk := ext.Sum(nil)
	var okm, t []byte
	for i := byte(1); len(okm) < n; i++ {
		m := hmac.New(sha256.New, prk)
		m.Write(t)
		m.Write([]byte(info))
		m.Write([]byte{i})
		t = m.Sum(nil)
		okm = append(okm, t...)
	}
	return okm[:n]
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHKDFByHandIsRFC5869: the hand-written HKDF gives RFC 5869's test
// case 1, so the known-answer test below checks Derive against the RFC.
func TestHKDFByHandIsRFC5869(t *testing.T) {
	ikm := bytes.Repeat([]byte{0x0b}, 22)
	salt := mustHex(t, "000102030405060708090a0b0c")
	info := string(mustHex(t, "f0f1f2f3f4f5f6f7f8f9"))
	want := mustHex(t, "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
	if got := hkdfByHand(ikm, salt, info, 42); !bytes.Equal(got, want) {
		t.Fatalf("okm %x, want %x", got, want)
	}
}

var (
	katMaster = func() []byte {
		b := make([]byte, KeySize)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}()
	katFields = Fields{Offset: 36, PayloadLen: 17 + 11 + Overhead, Type: 1, TxID: 9, WriteOrderID: 5}
	katBody   = []byte("hello world")
)

const (
	katFileID = 7
	katSalt   = 0x0102030405060708
	// The pinned outputs: a change here is a change of the on-disk format.
	katCheck  = "907a98b1f0b098ec8a91f69ba9a8006a"
	katSealed = "b753a8eb43b44a1c2310cc9f2473426acab1334aa480e43a8c842d"
)

// TestKnownAnswer derives the keys of a fixed file from a fixed master key
// and seals a fixed record two ways: with Derive and Seal, and by hand
// from doc.go's spec (hkdfByHand, crypto/aes GCM, the nonce and additional
// data written out here). Both must give the pinned bytes.
func TestKnownAnswer(t *testing.T) {
	k, err := Derive(katMaster, katFileID, katSalt)
	if err != nil {
		t.Fatal(err)
	}
	sealed := k.Seal(nil, katBody, katFields)
	check := k.Check()

	salt := append([]byte("filechannel log keys v1"), 0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8)
	key := hkdfByHand(katMaster, salt, "record encryption", 32)
	wantCheck := hkdfByHand(katMaster, salt, "key check", 16)
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	nonce := []byte{0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0, 5}
	ad := []byte("FCRE")
	ad = binary.BigEndian.AppendUint32(ad, katFileID)
	ad = binary.BigEndian.AppendUint32(ad, 36)
	ad = binary.BigEndian.AppendUint32(ad, katFields.PayloadLen)
	ad = append(ad, 1)
	ad = binary.BigEndian.AppendUint64(ad, 9)
	ad = binary.BigEndian.AppendUint64(ad, 5)
	wantSealed := gcm.Seal(nil, nonce, katBody, ad)

	if !bytes.Equal(check[:], wantCheck) {
		t.Errorf("check %x, by hand %x", check, wantCheck)
	}
	if !bytes.Equal(sealed, wantSealed) {
		t.Errorf("sealed %x, by hand %x", sealed, wantSealed)
	}
	if hex.EncodeToString(check[:]) != katCheck || hex.EncodeToString(sealed) != katSealed {
		t.Errorf("pinned: check %x sealed %x; want %s %s", check, sealed, katCheck, katSealed)
	}
}

// katChannel is the channel id of TestKnownAnswerBound.
var katChannel = [ChannelIDSize]byte{0xc0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xcf}

// The pinned outputs of DeriveBound: a change here is a change of the
// on-disk format (version 6).
const (
	katBoundCheck  = "db1102d67be3358f0ab1cb1cd7e6164b"
	katBoundSealed = "7db999cc05b9f4ed9a70fc838716aad86a694e8391281d9196a4d5"
)

// TestKnownAnswerBound is TestKnownAnswer for DeriveBound: the HKDF salt
// has its own label and the channel id after the file's salt.
func TestKnownAnswerBound(t *testing.T) {
	k, err := DeriveBound(katMaster, katFileID, katSalt, katChannel)
	if err != nil {
		t.Fatal(err)
	}
	sealed := k.Seal(nil, katBody, katFields)
	check := k.Check()

	salt := append([]byte("filechannel log keys v2"), 0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8)
	salt = append(salt, katChannel[:]...)
	key := hkdfByHand(katMaster, salt, "record encryption", 32)
	wantCheck := hkdfByHand(katMaster, salt, "key check", 16)
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	nonce := []byte{0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0, 5}
	ad := []byte("FCRE")
	ad = binary.BigEndian.AppendUint32(ad, katFileID)
	ad = binary.BigEndian.AppendUint32(ad, 36)
	ad = binary.BigEndian.AppendUint32(ad, katFields.PayloadLen)
	ad = append(ad, 1)
	ad = binary.BigEndian.AppendUint64(ad, 9)
	ad = binary.BigEndian.AppendUint64(ad, 5)
	wantSealed := gcm.Seal(nil, nonce, katBody, ad)

	if !bytes.Equal(check[:], wantCheck) {
		t.Errorf("check %x, by hand %x", check, wantCheck)
	}
	if !bytes.Equal(sealed, wantSealed) {
		t.Errorf("sealed %x, by hand %x", sealed, wantSealed)
	}
	if hex.EncodeToString(check[:]) != katBoundCheck || hex.EncodeToString(sealed) != katBoundSealed {
		t.Errorf("pinned: check %x sealed %x; want %s %s", check, sealed, katBoundCheck, katBoundSealed)
	}
}

// TestOpenRefusesWhatWasChanged: a sealed body opens only as the record it
// was sealed for, in its file, under its key; any changed byte, field,
// offset, file or key is ErrOpen. In place works both ways.
func TestOpenRefusesWhatWasChanged(t *testing.T) {
	k, err := Derive(katMaster, katFileID, katSalt)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(katBody), len(katBody)+Overhead)
	copy(buf, katBody)
	sealed := k.Seal(buf[:0], buf, katFields) // in place
	if bytes.Contains(sealed, []byte("hello")) {
		t.Fatal("the sealed body holds the plaintext")
	}
	if got, err := k.Open(nil, sealed, katFields); err != nil || !bytes.Equal(got, katBody) {
		t.Fatalf("open: %q, %v", got, err)
	}
	other := func(master []byte, id uint32, salt uint64) *FileKeys {
		k, err := Derive(master, id, salt)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	bound := func(channel [ChannelIDSize]byte) *FileKeys {
		k, err := DeriveBound(katMaster, katFileID, katSalt, channel)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	wrongMaster := bytes.Clone(katMaster)
	wrongMaster[0] ^= 1
	for _, tc := range []struct {
		name string
		k    *FileKeys
		f    Fields
		flip int // byte of the sealed body to flip, -1 none
	}{
		{"flipped_ciphertext_byte", k, katFields, 3},
		{"flipped_tag_byte", k, katFields, len(sealed) - 1},
		{"moved_to_another_offset", k, Fields{Offset: 1036, PayloadLen: katFields.PayloadLen, Type: 1, TxID: 9, WriteOrderID: 5}, -1},
		{"other_length", k, Fields{Offset: 36, PayloadLen: katFields.PayloadLen + 1, Type: 1, TxID: 9, WriteOrderID: 5}, -1},
		{"other_type", k, Fields{Offset: 36, PayloadLen: katFields.PayloadLen, Type: 2, TxID: 9, WriteOrderID: 5}, -1},
		{"other_transaction", k, Fields{Offset: 36, PayloadLen: katFields.PayloadLen, Type: 1, TxID: 10, WriteOrderID: 5}, -1},
		{"other_write_order_id", k, Fields{Offset: 36, PayloadLen: katFields.PayloadLen, Type: 1, TxID: 9, WriteOrderID: 6}, -1},
		{"copied_to_another_file", other(katMaster, katFileID+1, katSalt), katFields, -1},
		{"another_salt", other(katMaster, katFileID, katSalt+1), katFields, -1},
		{"wrong_key", other(wrongMaster, katFileID, katSalt), katFields, -1},
		{"bound_to_a_channel", bound(katChannel), katFields, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(sealed)
			if tc.flip >= 0 {
				b[tc.flip] ^= 0x40
			}
			if got, err := tc.k.Open(nil, b, tc.f); !errors.Is(err, ErrOpen) {
				t.Fatalf("opened %q, %v; want ErrOpen", got, err)
			}
		})
	}
	if k.Check() == other(wrongMaster, katFileID, katSalt).Check() {
		t.Error("a wrong key has the same check value")
	}
	if k.Check() == other(katMaster, katFileID, katSalt+1).Check() {
		t.Error("two salts give the same check value")
	}
	// A file bound to one channel: neither its check value nor its records
	// are another channel's, nor an unbound file's.
	otherChannel := katChannel
	otherChannel[15] ^= 1
	kc := bound(katChannel)
	boundSealed := kc.Seal(nil, katBody, katFields)
	if kc.Check() == bound(otherChannel).Check() || kc.Check() == k.Check() {
		t.Error("two channels, or a channel and none, give the same check value")
	}
	if _, err := bound(otherChannel).Open(nil, boundSealed, katFields); !errors.Is(err, ErrOpen) {
		t.Errorf("a record of another channel opened: %v", err)
	}
	if got, err := kc.Open(nil, boundSealed, katFields); err != nil || !bytes.Equal(got, katBody) {
		t.Fatalf("open bound: %q, %v", got, err)
	}
	if got, err := k.Open(sealed[:0], sealed, katFields); err != nil || !bytes.Equal(got, katBody) { // in place
		t.Fatalf("open in place: %q, %v", got, err)
	}
}

func TestDeriveRefusesAKeyOfTheWrongSize(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := Derive(make([]byte, n), 1, 1); err == nil {
			t.Errorf("a %d-byte key was taken", n)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	k, err := Derive(katMaster, katFileID, katSalt)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024, 1024+Overhead)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		k.Seal(body[:0], body[:1024], katFields)
	}
}
