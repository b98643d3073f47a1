package logfile

import (
	"errors"

	"github.com/flumego/filechannel/internal/seal"
)

// Batch is records to append to one data dir's log in one write. A set
// hands batches out (Set.NewBatch) and a batch encodes its records as the
// set's files need them (Add): unsealed, and with room for the seal of a
// put's body when the set encrypts, so that its caller never knows which.
// Set.Append seals them for the file they go to (write-order id,
// checksums with that file's salt, the body's seal) and refuses a batch
// of another set. The zero Batch holds nothing and can be given nothing.
//
// A batch is reusable: Reset empties it and keeps its memory. It belongs
// to one goroutine.
type Batch struct {
	set *Set // the set that made it, whose files its records are encoded for
	// buf holds the records' frames, encoded by AppendUnsealed (or
	// AppendUnsealedEncrypted when set encrypts); frames the offset in
	// buf of each.
	buf    []byte
	frames []int
	// written: Append wrote the batch (its records are sealed for their
	// place): it is not appended again until Reset.
	written bool

	// After lists earlier writes (a transaction's spilled puts) that this
	// batch's records count: each must be durable before the batch is
	// written. Those in the file the batch goes to are covered by the
	// batch's own sync.
	After []Mark
	// Completes lists the log files holding puts that this batch's
	// records complete (the events its take records take, the spilled
	// puts its commit commits). See Complete.
	Completes []uint32
	// Drain marks a batch that consumes events (take records and their
	// commit): it may use the room of a full dir's space reserve, and is
	// written again at once if it is the batch that found the disk full
	// (setreserve.go).
	Drain bool

	// merged is what Append did with the batch while it waited for the
	// dir (setmerge.go), set under the dir's mu by whoever wrote it.
	merged mergeResult
}

// Why Append refuses a batch: errForeignBatch, one the set did not make;
// errBatchWritten, one already written (its records sealed for where they
// went: written again, an encrypted put's body would be sealed twice).
var (
	errForeignBatch = errors.New("logfile: a batch not made by this log set (Set.NewBatch): its records are not encoded for its files")
	errBatchWritten = errors.New("logfile: a batch already appended (Reset it before adding records again)")
)

// NewBatch returns an empty batch whose records are encoded for s's files.
func (s *Set) NewBatch() *Batch { return &Batch{set: s} }

// EncodedSize returns the bytes r takes in s's files: its frame, with the
// seal's tag of a put when s encrypts.
func (s *Set) EncodedSize(r *Record) int {
	n := r.EncodedSize()
	if s.Encrypted() && r.Type == RecordPut {
		n += seal.Overhead
	}
	return n
}

// Add encodes r at the end of b, as b's set needs it. On an error
// (ErrInvalidRecord, ErrTooLarge for a frame over the limits, or a b that
// no set made) b is unchanged.
func (b *Batch) Add(r *Record) error {
	if b.set == nil {
		return errForeignBatch
	}
	off := len(b.buf)
	var err error
	if b.set.Encrypted() {
		b.buf, err = AppendUnsealedEncrypted(b.buf, r) // with room for the body's seal
	} else {
		b.buf, err = AppendUnsealed(b.buf, r)
	}
	if err != nil {
		return err // the encoders leave b.buf as it was
	}
	b.frames = append(b.frames, off)
	return nil
}

// Len returns the number of records in b.
func (b *Batch) Len() int { return len(b.frames) }

// Size returns the bytes b's records take in the file (Set.EncodedSize of
// each).
func (b *Batch) Size() int { return len(b.buf) }

// Cap returns the bytes b can hold without growing its memory.
func (b *Batch) Cap() int { return cap(b.buf) }

// Offset returns where record i starts in b: Appended.Base + Offset(i) is
// its file offset once appended.
func (b *Batch) Offset(i int) int { return b.frames[i] }

// SetPutTimes sets the commit time ns (Unix nanoseconds, >= 1) of b's first
// n records, puts that a put commit appends with it (SetPutTime). A set
// whose files record no time (format versions before 7) never has any:
// ns is only in the put's frame while b is unsealed.
func (b *Batch) SetPutTimes(n int, ns int64) {
	for _, off := range b.frames[:n] {
		SetPutTime(b.buf[off:], ns)
	}
}

// Truncate keeps b's first n records (0 <= n <= Len()) and drops the rest.
func (b *Batch) Truncate(n int) {
	if n < len(b.frames) {
		b.buf, b.frames = b.buf[:b.frames[n]], b.frames[:n]
	}
}

// Reset empties b (its records, After, Completes and Drain) and keeps its
// memory for the next records.
func (b *Batch) Reset() {
	b.buf, b.frames, b.written = b.buf[:0], b.frames[:0], false
	b.After, b.Completes, b.Drain = nil, nil, false
}
