package checkpoint

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
)

// InflightKind says which inflight file: the put or the take transactions
// that were open at the checkpoint.
type InflightKind int

const (
	InflightPuts InflightKind = iota
	InflightTakes
)

// String is the file name of the kind.
func (k InflightKind) String() string {
	switch k {
	case InflightPuts:
		return InflightPutsName
	case InflightTakes:
		return InflightTakesName
	}
	return fmt.Sprintf("InflightKind(%d)", int(k))
}

func (k InflightKind) magic() string {
	if k == InflightTakes {
		return takesMagic
	}
	return putsMagic
}

// EncodeInflight returns the bytes of an inflight file of kind recording txs
// (oldest first) at write-order id w. Pointers must be non-zero and tx ids
// distinct (validateInflight); DecodeInflight rejects the bytes otherwise.
func EncodeInflight(kind InflightKind, w uint64, txs []eventqueue.InflightTx) []byte {
	return appendInflight(nil, kind, w, txs)
}

func appendInflight(dst []byte, kind InflightKind, w uint64, txs []eventqueue.InflightTx) []byte {
	start := len(dst)
	dst = append(dst, kind.magic()...)
	dst = binary.BigEndian.AppendUint16(dst, formatVersion)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, w)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(txs)))
	for i := range txs {
		dst = binary.BigEndian.AppendUint64(dst, txs[i].Tx)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(txs[i].Pointers)))
		for _, p := range txs[i].Pointers {
			dst = binary.BigEndian.AppendUint64(dst, uint64(p))
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// DecodeInflight parses an inflight file of kind. Bad bytes give a
// *corrupt.Error naming the file (inflightputs or inflighttakes) and offset;
// a newer format version gives a *corrupt.FormatError.
// A transaction with no pointers decodes with nil Pointers.
func DecodeInflight(kind InflightKind, b []byte) (w uint64, txs []eventqueue.InflightTx, err error) {
	return decodeInflight(kind.String(), kind, b)
}

func decodeInflight(file string, kind InflightKind, b []byte) (uint64, []eventqueue.InflightTx, error) {
	body, err := checkFrame(file, b, kind.magic(), inflightFixedLen)
	if err != nil {
		return 0, nil, err
	}
	be := binary.BigEndian
	w := be.Uint64(body[inflightOffWriteID:])
	m := be.Uint32(body[16:])
	off := inflightFixedLen
	if uint64(m) > uint64(len(body)-off)/inflightTxLen {
		return 0, nil, corrupt.New(file, 16, "transaction count %d exceeds the %d bytes left", m, len(body)-off)
	}
	if m == 0 {
		if off != len(body) {
			return 0, nil, corrupt.New(file, int64(off), "%d trailing bytes", len(body)-off)
		}
		return w, nil, nil
	}
	txs := make([]eventqueue.InflightTx, m)
	seen := make(map[uint64]struct{}, m)
	for i := range txs {
		if len(body)-off < inflightTxLen {
			return 0, nil, corrupt.New(file, int64(off), "transaction entry %d truncated", i)
		}
		tx := be.Uint64(body[off:])
		if _, dup := seen[tx]; dup {
			return 0, nil, corrupt.New(file, int64(off), "transaction %d listed twice", tx)
		}
		seen[tx] = struct{}{}
		c := be.Uint32(body[off+8:])
		off += inflightTxLen
		if uint64(c) > uint64(len(body)-off)/8 {
			return 0, nil, corrupt.New(file, int64(off-4), "transaction %d pointer count %d exceeds the %d bytes left", tx, c, len(body)-off)
		}
		txs[i].Tx = tx
		if c == 0 {
			continue
		}
		ptrs := make([]eventqueue.Pointer, c)
		for j := range ptrs {
			p := be.Uint64(body[off:])
			if p == 0 {
				return 0, nil, corrupt.New(file, int64(off), "transaction %d: zero pointer", tx)
			}
			ptrs[j] = eventqueue.Pointer(p)
			off += 8
		}
		txs[i].Pointers = ptrs
	}
	if off != len(body) {
		return 0, nil, corrupt.New(file, int64(off), "%d trailing bytes", len(body)-off)
	}
	return w, txs, nil
}

// validateInflight reports why txs cannot be encoded into an inflight file
// that DecodeInflight accepts, or nil.
func validateInflight(kind InflightKind, txs []eventqueue.InflightTx) error {
	if uint64(len(txs)) > math.MaxUint32 {
		return fmt.Errorf("%s: %d transactions", kind, len(txs))
	}
	seen := make(map[uint64]struct{}, len(txs))
	for i := range txs {
		t := &txs[i]
		if _, dup := seen[t.Tx]; dup {
			return fmt.Errorf("%s: transaction %d listed twice", kind, t.Tx)
		}
		seen[t.Tx] = struct{}{}
		if uint64(len(t.Pointers)) > math.MaxUint32 {
			return fmt.Errorf("%s: transaction %d has %d pointers", kind, t.Tx, len(t.Pointers))
		}
		for _, p := range t.Pointers {
			if p == 0 {
				return fmt.Errorf("%s: transaction %d has a zero pointer", kind, t.Tx)
			}
		}
	}
	return nil
}
