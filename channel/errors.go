package channel

import (
	"errors"
	"strings"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

var (
	// ErrChannelFull is returned by Put when the channel stayed at capacity
	// for the whole KeepAlive wait. Sinks are slower than sources, or their
	// batches are too small.
	ErrChannelFull = errors.New("filechannel: channel is full")
	// ErrTransactionFull is returned by Put or Take when the transaction
	// already holds TransactionCapacity events: commit more often.
	ErrTransactionFull = errors.New("filechannel: transaction is full")
	// ErrMixedTransaction is returned when a transaction that has put events
	// takes one, or the other way round.
	ErrMixedTransaction = errors.New("filechannel: puts and takes in one transaction")
	// ErrTransactionDone is returned by any use of a transaction after
	// Commit or Rollback.
	ErrTransactionDone = errors.New("filechannel: transaction already committed or rolled back")
	// ErrConcurrentUse is returned by a Transaction method called while
	// another call on the same transaction is in progress, from another
	// goroutine: a Transaction belongs to one goroutine. The call in
	// progress goes on unaffected.
	ErrConcurrentUse = errors.New("filechannel: transaction used by two goroutines at once")

	// ErrTransactionFailed is returned by Put and Commit of a transaction
	// that can no longer commit: a write of its buffered puts failed in a
	// way that left them unusable. Its Commit rolls it back; Rollback ends
	// it. (A failed spill normally leaves the transaction as it was: only
	// the Put that returned the error is not in it.)
	ErrTransactionFailed = errors.New("filechannel: transaction failed")
	// ErrGroupReset is returned by Take and Commit of a take transaction
	// whose group ResetGroup reset while the transaction held events of
	// it: the commit changes nothing (the reset decided the group's
	// queue); roll the transaction back.
	ErrGroupReset = errors.New("filechannel: the consumer group was reset")
	// ErrLeaseExpired is returned by Take and Commit of a take transaction
	// still open GroupConfig.LeaseTimeout after its first Take of an
	// event: its events went back to the group as after a rollback, and
	// its commit changes nothing. Rollback ends it (and returns nil).
	ErrLeaseExpired = errors.New("filechannel: the take transaction's lease expired")
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("filechannel: channel is closed")
	// ErrInsufficientSpace is returned by Put when the put would leave its
	// data dir less free space than MinimumRequiredSpace (counting its
	// record and those the transaction holds), or the dir is full (its
	// space reserve in use).
	ErrInsufficientSpace = errors.New("filechannel: insufficient disk space")
	// ErrLocked is returned by Open when a directory is in use by another
	// FileChannel, in this process or another.
	ErrLocked = errors.New("filechannel: directory is in use by another channel")
	// ErrCorrupt is matched (errors.Is) by every corruption error; the
	// concrete *CorruptError names the file and offset.
	ErrCorrupt = corrupt.ErrCorrupt
	// ErrEventTooLarge is returned by Put for an event whose record would
	// exceed the largest record the log format allows (64 MiB).
	ErrEventTooLarge = errors.New("filechannel: event too large")
	// ErrUnsupportedFormat is matched (errors.Is) by the error of Open,
	// Verify, Repair and Rebuild (and of a Take) when a newer release of
	// filechannel wrote a file: a log file, checkpoint file,
	// checkpoint.meta or inflight file of a newer format version, or a log
	// record of a type this release does not know. It is not damage
	// (errors.Is(err, ErrCorrupt) is false) and the file was not changed:
	// use the release that wrote it; do not repair or delete it. The
	// concrete *FormatError names the file and the version.
	ErrUnsupportedFormat = corrupt.ErrUnsupportedFormat
	// ErrKey is returned by Open (wrapped, naming the file and the key id)
	// when a log file is encrypted with a key Config.Keys does not supply,
	// or supplies wrong (its check value differs from the file's), when
	// Config.Keys is nil and a log file is encrypted, or when a log file is
	// encrypted for another channel (its keys are bound to another channel
	// id: a file copied from a channel with the same key; the error names
	// both ids). Nothing is changed: a wrong key is never damage.
	ErrKey = logfile.ErrKey
	// ErrNotRegular is matched (errors.Is) by the error of Open, Verify,
	// Repair and Rebuild when a file the channel opens by its name (a
	// checkpoint file, in_use.lock) is a symbolic link, a directory, a named
	// pipe or another file that is not a regular file. The channel never
	// follows a link in its directories (the directories themselves may be
	// links) and changes nothing: move the entry away. An entry named like a
	// log file that is not a regular file is left alone (Verify reports it
	// as not-a-regular-file), unless it stands where the recovery needs a
	// log file: one the checkpoint lists (a log file moved away and left as
	// a link, say), one newer than the checkpoint, or any in a full replay.
	// Then they fail with a *logfile.NotRegularError naming the entry and
	// what to do (move the file back in place of the link).
	ErrNotRegular = vfs.ErrNotRegular
	// ErrForeignDir is matched (errors.Is) by the error of Open, Repair
	// and Rebuild when a data dir or the backup checkpoint dir belongs to
	// another channel: its channel.id names another channel than the
	// checkpoint dir's (or, when the checkpoint dir records none, another
	// checkpoint dir). Nothing was changed. The concrete *ForeignDirError
	// names the directory, both channels and the file to delete to hand the
	// directory over on purpose (docs/operations.md, "Directories belong to
	// one channel").
	ErrForeignDir = owner.ErrForeignDir
	// ErrNoGroup is returned for a consumer group that does not exist (or was
	// removed), and by a take on c.Begin() when the channel has no unnamed
	// group. It is one value for every backend and tool: replay.ListEvents
	// (fcreplay) returns it for a group the recovered channel lacks, and
	// package channel/kafka for a name that cannot be a consumer group, so
	// errors.Is(err, ErrNoGroup) holds for all of them.
	ErrNoGroup = replay.ErrNoGroup
	// ErrNotTaken is returned by Transaction.Reject for an event the
	// transaction did not take (or rejected already).
	ErrNotTaken = errors.New("filechannel: event not taken by this transaction")
)

// ForeignDirError names a directory of another channel: its Config field,
// the channel it belongs to and that channel's checkpoint dir, this
// channel's id and checkpoint dir, and its channel.id file. It unwraps to
// ErrForeignDir.
type ForeignDirError = owner.ForeignDirError

// CorruptError names the file and byte offset of damaged data. It unwraps to
// ErrCorrupt.
type CorruptError = corrupt.Error

// FormatError names a file a newer release wrote, the format version it
// declares and the newest this release reads (or the unknown record type and
// its offset). It unwraps to ErrUnsupportedFormat.
type FormatError = corrupt.FormatError

// MaxEventSize is the largest event a Put accepts, in encoded bytes:
// 67,108,864 (64 MiB) for the body, the headers' keys and values, and a few
// dozen bytes of record fields (16 more with Config.Keys: the seal's tag).
// A larger event gets ErrEventTooLarge.
const MaxEventSize = logfile.MaxPayloadSize // 64 << 20

// opError is the error of an operation (open, rebuild, commit, ...) that
// failed with err. Its message is "filechannel: <op>: " and err's message
// without a "filechannel: " of its own, so that an error passed up through
// two of the package's functions, or a sentinel, does not say
// "filechannel:" twice. It unwraps to err.
type opError struct {
	op   string
	err  error
	note string // appended to the message, e.g. " (nothing was changed)"
}

func (e *opError) Error() string {
	return "filechannel: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "filechannel: ") + e.note
}

func (e *opError) Unwrap() error { return e.err }

// opErr wraps err as the error of op.
func opErr(op string, err error) error { return &opError{op: op, err: err} }

// opErrNote wraps err as the error of op, with note after its message.
func opErrNote(op string, err error, note string) error {
	return &opError{op: op, err: err, note: note}
}
