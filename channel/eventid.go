package channel

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// EventID names a committed event in its channel: unique, stable across
// restarts, full replays, Repair and Rebuild, and increasing in commit
// order (a later put commit's events have larger ids; one commit's events
// increase in Put order). The zero EventID names no event.
//
// It is made of write-order ids from the log (docs/format.md, "Event ids
// and commit times"): the order of the event's put commit and the event's
// own write-order id. An event written with its commit, as almost every
// event is, has the two equal. An event of a transaction that spilled its
// puts to the log before its commit (more than 4 MiB of them) has the
// commit's order and its own id. Events of files older than format
// version 7 have their own id for both, so ids of such spilled
// transactions do not follow commit order.
type EventID struct {
	order, seq uint64
}

// ErrBadEventID is returned by ParseEventID for a string that String did
// not produce.
var ErrBadEventID = errors.New("filechannel: bad event id")

// String returns the id's text form: "ORDER", or "ORDER.SEQ" for an event
// of a transaction that spilled; "" for the zero EventID.
// ParseEventID reads it back.
func (id EventID) String() string {
	if id.IsZero() {
		return ""
	}
	return replay.FormatEventID(id.order, id.seq)
}

// ParseEventID reads an id from its String form. Anything else (a sign,
// leading zeros, spaces, a zero, a second part equal to the first) is
// ErrBadEventID.
func ParseEventID(s string) (EventID, error) {
	o, q, dotted := strings.Cut(s, ".")
	order, ok := parseWOID(o)
	seq := order
	if ok && dotted {
		seq, ok = parseWOID(q)
		ok = ok && seq != order
	}
	if !ok {
		return EventID{}, fmt.Errorf("%w: %q (want ORDER or ORDER.SEQ, decimal)", ErrBadEventID, s)
	}
	return EventID{order: order, seq: seq}, nil
}

// parseWOID parses a write-order id as String writes it: decimal, >= 1,
// no sign and no leading zero.
func parseWOID(s string) (uint64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// Compare returns -1, 0 or +1 as id comes before, is, or comes after o in
// commit order. The zero EventID comes before every other.
func (id EventID) Compare(o EventID) int {
	if c := cmp.Compare(id.order, o.order); c != 0 {
		return c
	}
	return cmp.Compare(id.seq, o.seq)
}

// IsZero reports whether id is the zero EventID, which names no event.
func (id EventID) IsZero() bool { return id == EventID{} }

// eventStamp gives the id and the commit time of put rec, read from log
// file file: from the record itself when its commit time is in it (or it
// is of a file older than version 7: no time), else (a put of a
// transaction that spilled) from the commit noted in the log set.
func (c *FileChannel) eventStamp(file uint32, timed bool, rec *logfile.Record) (EventID, time.Time) {
	order, ns := logfile.PutStamp(timed, rec, func(tx uint64) (logfile.SpilledCommit, bool) { return c.logs.SpilledCommit(file, tx) })
	return EventID{order: order, seq: rec.WriteOrderID}, nanosTime(ns)
}

// historyID is the id of an event of the history (eventStamp's rule: a
// put of a transaction that spilled takes its commit's order).
func historyID(ev replay.HistoryEvent) EventID {
	if ev.Spilled {
		return EventID{order: ev.Commit, seq: ev.Put}
	}
	return EventID{order: ev.Put, seq: ev.Put}
}

// nanosTime is the time of ns Unix nanoseconds; 0 is the zero Time.
func nanosTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
