package channel

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// Position is where a group's queue starts: a new group's
// (GroupConfig.StartAt) or a reset one's (ResetGroup). The zero Position
// is Latest. A position names a place in commit order: the queue is every
// retained event from the first one it matches on, whatever the times of
// those after it (a wall clock set back leaves no hole).
type Position struct {
	kind  positionKind
	at    time.Time
	after EventID
}

type positionKind uint8

const (
	posLatest positionKind = iota
	posEarliest
	posAtTime
	posAfterEvent
)

// Earliest is the oldest event the logs retain: with Config.Retention,
// events every group had taken may still be there.
func Earliest() Position { return Position{kind: posEarliest} }

// Latest is "now": only the events committed from now on.
func Latest() Position { return Position{} }

// AtTime is the first retained event (in commit order) whose put committed
// at or after t (Event.Time), and every event after it. Events of log
// files older than format version 7 have no time: they are older than any
// t.
func AtTime(t time.Time) Position { return Position{kind: posAtTime, at: t} }

// AfterEvent is the events committed after the one id names (Event.ID),
// whether or not that one is still retained.
func AfterEvent(id EventID) Position { return Position{kind: posAfterEvent, after: id} }

// latest reports whether p is Latest.
func (p Position) latest() bool { return p.kind == posLatest }

// What a position is, for another backend to map it (channel/kafka):
// exactly one of IsEarliest, IsLatest, Time's ok and Event's ok holds.

// IsEarliest reports whether p is Earliest (or AfterEvent of the zero
// EventID, the same events).
func (p Position) IsEarliest() bool {
	return p.kind == posEarliest || p.kind == posAfterEvent && p.after.IsZero()
}

// IsLatest reports whether p is Latest (the zero Position).
func (p Position) IsLatest() bool { return p.kind == posLatest }

// Time returns AtTime's t; ok is false for another position.
func (p Position) Time() (t time.Time, ok bool) { return p.at, p.kind == posAtTime }

// Event returns AfterEvent's id; ok is false for another position (and
// for the zero EventID: IsEarliest).
func (p Position) Event() (id EventID, ok bool) {
	return p.after, p.kind == posAfterEvent && !p.after.IsZero()
}

// String names the position as ParsePosition reads it: "earliest",
// "latest", a time in RFC 3339 (UTC, nanoseconds), or "after:" and an event
// id (AfterEvent of the zero EventID, every event, is "earliest").
func (p Position) String() string {
	switch {
	case p.IsEarliest():
		return "earliest"
	case p.kind == posAtTime:
		return p.at.UTC().Format(time.RFC3339Nano)
	case p.kind == posAfterEvent:
		return "after:" + p.after.String()
	default:
		return "latest"
	}
}

// ParsePosition parses a position as String writes it: "earliest",
// "latest", a time in RFC 3339 ("2026-12-04T10:00:00Z": AtTime), or
// "after:" followed by an event id (AfterEvent; a bare event id is read
// the same).
func ParsePosition(s string) (Position, error) {
	switch s {
	case "earliest":
		return Earliest(), nil
	case "latest":
		return Latest(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return AtTime(t), nil
	}
	if id, err := ParseEventID(strings.TrimPrefix(s, "after:")); err == nil {
		return AfterEvent(id), nil
	}
	return Position{}, fmt.Errorf("filechannel: position %q: want earliest, latest, an RFC 3339 time (2026-12-04T10:00:00Z) or after:EVENT-ID", s)
}

// starts reports whether ev is the first event of p's queue, the history
// read in commit order up to it.
func (p Position) starts(ev replay.HistoryEvent) bool {
	switch p.kind {
	case posAtTime:
		return ev.Time != 0 && !time.Unix(0, ev.Time).Before(p.at)
	case posAfterEvent:
		return historyID(ev).Compare(p.after) > 0
	}
	return true
}

// from is the least commit write-order id an event of p's queue can have:
// a file whose last commit is below it holds none of them. AtTime needs
// the files' indexes to tell; 0 when they cannot (an index not known: a
// file an older release's checkpoint listed). A file without an index
// (index's ok false) stores no event (logfile.Set.FileIndex).
func (p Position) from(files []logfile.File, index func(uint32) (logfile.FileIndex, bool)) uint64 {
	switch p.kind {
	case posAfterEvent:
		// An event after it has an order at least its own, and a commit
		// at least its order.
		return p.after.order
	case posAtTime:
		least := uint64(math.MaxUint64)
		for _, f := range files {
			x, ok := index(f.ID)
			switch {
			case !ok:
			case !x.Known:
				return 0
			case x.FirstCommit != 0 && x.MaxTime != 0 && !time.Unix(0, x.MaxTime).Before(p.at):
				least = min(least, x.FirstCommit)
			}
		}
		return least
	}
	return 0
}

// skipTo drops, from each data dir's files (by id), the leading ones whose
// index says every commit of their events is below from: none of those
// events is in the queue, and neither is any event a commit record in them
// completes (its puts are in them or before them). A dir's first file that
// may hold more, and every file after it, stay.
func skipTo(files []logfile.File, from uint64, index func(uint32) (logfile.FileIndex, bool)) []logfile.File {
	if from == 0 {
		return files
	}
	scanning := map[string]bool{}
	var out []logfile.File
	for _, f := range files {
		if !scanning[f.Dir] {
			if x, ok := index(f.ID); !ok || x.Known && x.LastCommit < from {
				continue // no event, or all of them before from
			}
			scanning[f.Dir] = true
		}
		out = append(out, f)
	}
	return out
}
