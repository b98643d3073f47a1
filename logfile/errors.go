package logfile

import "errors"

var (
	// ErrTooLarge is returned by AppendRecord for a record whose payload
	// would exceed MaxPayloadSize.
	ErrTooLarge = errors.New("logfile: record too large")

	// ErrInvalidRecord is returned by AppendRecord for a record it cannot
	// encode, one the decoder would not read back: an unknown Type, a
	// commit whose CommitType is neither put nor take, bad padding, a groups
	// record or a skip record that breaks the rules of its layout
	// (Framing.AppendRecord lists them).
	ErrInvalidRecord = errors.New("logfile: invalid record")

	// ErrFileFull is returned by Writer.Write when the write would carry the
	// file past MaxFileSize, where offsets no longer fit in a pointer.
	// Nothing is written and the writer stays usable; the caller rolls to a
	// new file.
	ErrFileFull = errors.New("logfile: log file full")

	// ErrClosed is returned by the methods of a closed Writer, Reader or
	// Scanner.
	ErrClosed = errors.New("logfile: closed")

	// ErrKey is returned (wrapped, naming the file and the key id) when an
	// encrypted log file's key is missing (no Keys, or Keys does not have
	// it) or wrong (its check value differs from the file's): never damage.
	ErrKey = errors.New("logfile: the key of an encrypted log file is missing or wrong")

	// ErrBatchLost is joined to a Set.Append error when the batch could
	// not be restored after its write failed (an encrypted put's body
	// would not open again): the batch must not be appended again.
	ErrBatchLost = errors.New("logfile: a batch whose write failed could not be restored")
)
