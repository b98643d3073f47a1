package eventqueue

import "errors"

// ErrFull is returned by AddTail and AddHead when the ring already holds
// capacity pointers.
var ErrFull = errors.New("eventqueue: queue is full")

// ErrZeroPointer is returned when the zero pointer, which never names a
// record, is added to a queue, and (wrapped) by New when it finds one inside
// the ring while counting references: the slot store is corrupt. Callers that
// know the file behind the store wrap it in a *corrupt.Error.
var ErrZeroPointer = errors.New("eventqueue: zero pointer")

// ErrInconsistent is wrapped by every problem Check reports.
var ErrInconsistent = errors.New("eventqueue: inconsistent queue")
