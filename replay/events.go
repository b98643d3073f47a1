package replay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/logfile"
)

// firstGuess is the capacity of the queue a full replay in ListEvents starts
// with; a replay that recovers more is run again at the size it reports.
const firstGuess = 1 << 16

// ErrNoGroup is returned (wrapped, in a *NoGroupError) by ListEvents for
// a consumer group the recovered channel does not have.
var ErrNoGroup = errors.New("filechannel: no such consumer group")

// ErrEncrypted is an event's error in ListEvents (wrapped, naming the
// event, its file and key id) when the event is in an encrypted log file
// and VerifyOptions.Keys is nil or lacks its key.
var ErrEncrypted = errors.New("filechannel: the event is encrypted: its key is needed to read it")

// NoGroupError is the error of ListEvents for a consumer group the
// recovered channel does not have. It unwraps to ErrNoGroup.
type NoGroupError struct {
	Name   string     // the group asked for; "" is the unnamed group
	Groups []GroupRef // the groups the channel has, by id
}

func (e *NoGroupError) Error() string {
	want := "unnamed group"
	if e.Name != "" {
		want = "consumer group " + strconv.Quote(e.Name)
	}
	names := make([]string, 0, len(e.Groups))
	for _, g := range e.Groups {
		names = append(names, g.String())
	}
	has := "none"
	if len(names) > 0 {
		has = strings.Join(names, ", ")
	}
	return fmt.Sprintf("%v: the channel has no %s (its consumer groups: %s)", ErrNoGroup, want, has)
}

// Unwrap returns ErrNoGroup.
func (e *NoGroupError) Unwrap() error { return ErrNoGroup }

// Event is one queued event as ListEvents lists it.
type Event struct {
	Index   int                // its position in the group's queue
	Pointer eventqueue.Pointer // its put record
	// Headers and Body are nil when Err is set: the event does not read
	// back (see ListEvents).
	Headers map[string]string
	Body    []byte
	Err     error
	// Deliveries is how many times the group delivered the event without
	// a committed take of it, as the recovery ends the count
	// (GroupResult.Deliveries): 0 for none, always 0 in a group that does
	// not count deliveries (no MaxDeliveries).
	Deliveries uint32
	// Due is when the event, waiting for its retry delay
	// (GroupResult.Waiting), is due, in Unix nanoseconds; 0 when it does
	// not wait.
	Due int64
	// Group is the group listed, as Listing.Group (the same for every
	// event): its MaxDeliveries says whether it counts deliveries.
	Group logfile.GroupInfo
	// ID and Time are what a Take gives the event as Event.ID (its text:
	// channel.ParseEventID reads it) and Event.Time: "" and zero when its
	// record does not read; Time is zero in a file older than format
	// version 7.
	ID   string
	Time time.Time
}

// Listing is what ListEvents recovered besides the events.
type Listing struct {
	// Group is the group listed, as the recovery ends it: its
	// MaxDeliveries says whether it counts deliveries, DeadLetterGroup
	// whether it is a dead-letter group.
	Group logfile.GroupInfo
	// Queued is the number of events queued for it (0 when the recovery
	// fails or has no such group).
	Queued int
	// Groups is every consumer group the recovery ends with, by id (nil
	// when it fails).
	Groups []logfile.GroupInfo
}

// ListEvents recovers the queue read-only, as the channel would on Open
// (checkpoint, else backup, else full replay; nothing is written: checkpoint
// files are copied into memory as Verify does), and calls fn for the events
// of the consumer group of that name ("" is the unnamed group) at positions
// skip, skip+1, ... (at most limit of them; limit < 0 means all), in queue
// order, each with its delivery count. It returns what the recovery found
// of the group (Listing.Queued: the number of events queued for it) and of
// the others. limit 0 lists nothing: a look at the groups at the cost of
// the recovery alone. A group the recovered channel does not have is a
// *NoGroupError (matching ErrNoGroup), naming the groups it has.
//
// Like Verify it takes no lock and must not run while the channel is open.
// Event.Err is non-nil for an event that does not read back (fn decides
// whether to go on by its return value): a *corrupt.Error (a record that is
// damaged, is not a put, or lies in a log file no data dir holds), an I/O
// error, or ErrEncrypted; Headers and Body are then nil. ListEvents stops
// at the first error fn returns and returns it, and at a record a newer
// release wrote (an error wrapping corrupt.ErrUnsupportedFormat), which it
// returns without calling fn; a channel.id a newer release wrote is refused
// before anything is read. A directory of another channel does not stop it
// (Verify reports it). It returns an error, and calls fn for nothing, when
// the recovery fails: the channel would not open either.
//
// Cost: as Open's recovery (a copy of the checkpoint in memory, a replay of
// the logs after it; a full replay runs twice when it recovers more than
// 65 536 events for a group), then one ReadRecord per event listed.
func ListEvents(opts VerifyOptions, group string, skip, limit int, fn func(Event) error) (Listing, error) {
	if err := opts.check(); err != nil {
		return Listing{}, fmt.Errorf("events: %w", err)
	}
	v := newVerifier(opts)
	var l Listing
	err := v.events(&l, group, max(skip, 0), limit, fn)
	if cerr := v.closeAll(); err == nil && cerr != nil {
		err = fmt.Errorf("events: %w", cerr)
	}
	return l, err
}

// events lists the events of group, filling in l as it learns it.
func (v *verifier) events(l *Listing, group string, skip, limit int, fn func(Event) error) error {
	// A channel.id a newer release wrote is refused as every file is; a
	// foreign or damaged one is Verify's to report: the events are listed.
	if _, err := v.readOwners(); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	groups, spilled, err := v.recoverGroups()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for _, g := range groups {
		l.Groups = append(l.Groups, g.Info)
	}
	g, err := pickGroup(groups, group)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	l.Group = g.Info
	if err := v.listLogs(); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	q := g.Queue
	n := q.Size()
	l.Queued = n
	end := n
	if limit >= 0 && skip+limit < n {
		end = skip + limit
	}
	for i := skip; i < end; i++ {
		p := q.Get(i)
		rec, timed, err := v.readEvent(p)
		if errors.Is(err, corrupt.ErrUnsupportedFormat) {
			return fmt.Errorf("events: %w", err) // a record a newer release wrote: not a damaged event
		}
		e := Event{Index: i, Pointer: p, Headers: rec.Headers, Body: rec.Body, Err: err, Deliveries: g.Deliveries[p], Due: g.Waiting[p], Group: g.Info}
		if rec.WriteOrderID != 0 {
			e.ID, e.Time = stamp(p.FileID(), timed, &rec, spilled)
		}
		if ferr := fn(e); ferr != nil {
			return ferr
		}
	}
	return nil
}

// pickGroup returns the group named name among groups, or a
// *NoGroupError.
func pickGroup(groups []GroupResult, name string) (*GroupResult, error) {
	e := &NoGroupError{Name: name}
	for i := range groups {
		g := &groups[i]
		if g.Info.Name == name {
			return g, nil
		}
		e.Groups = append(e.Groups, GroupRef{ID: g.Info.ID, Name: g.Info.Name})
	}
	return nil, e
}

// recoverGroups returns the consumer groups the channel would recover,
// each with its queue: from the checkpoint's (or the backup's) rings with
// the logs after it replayed, or from a full replay into in-memory queues.
func (v *verifier) recoverGroups() ([]GroupResult, map[uint32]map[uint64]logfile.SpilledCommit, error) {
	used, err := v.pickCheckpoint()
	if err != nil {
		return nil, nil, err
	}
	from := v.rep.RecoveredFrom
	if used != nil {
		_, opts, err := v.checkpointGroups(used)
		if err != nil {
			return nil, nil, err
		}
		res, err := v.runReplay(from, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("recovery from the %s: %w", from, err)
		}
		return res.Groups, res.Spilled, nil
	}
	for capacity := firstGuess; ; {
		q, err := emptyQueue(capacity)
		if err != nil {
			return nil, nil, err
		}
		res, err := v.runReplay(from, Options{Queue: q,
			NewQueue: func(logfile.GroupInfo) (*eventqueue.Queue, error) { return emptyQueue(capacity) }})
		var ce *CapacityError
		if errors.As(err, &ce) && ce.Needed > capacity {
			capacity = ce.Needed
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", from, err)
		}
		return res.Groups, res.Spilled, nil
	}
}

// listLogs fills in v.logs with the log files of the data dirs (the first
// dir holding an id wins, as in scanLogs), without scanning them.
func (v *verifier) listLogs() error {
	if err := v.openSet(); err != nil {
		return err
	}
	for _, f := range v.set.Files() {
		v.rep.Logs = append(v.rep.Logs, LogInfo{ID: f.ID, Dir: f.Dir, Path: f.Path})
	}
	v.indexLogs()
	return nil
}

// readEvent reads the put record p points to, as a take does.
func (v *verifier) readEvent(p eventqueue.Pointer) (rec logfile.Record, timed bool, err error) {
	l := v.logs[p.FileID()]
	if l == nil {
		return logfile.Record{}, false, corrupt.New(logfile.LogName(p.FileID()), -1, "event %v is in log file %d, which no data dir holds", p, p.FileID())
	}
	r, err := v.reader(l)
	if err != nil {
		return logfile.Record{}, false, err
	}
	defer r.Release()
	rec, err = r.ReadRecord(int64(p.Offset()))
	if err != nil {
		return logfile.Record{}, false, err
	}
	if rec.Type != logfile.RecordPut {
		return logfile.Record{}, false, corrupt.New(l.Path, int64(p.Offset()), "event %v refers to a %v record, not a put", p, rec.Type)
	}
	timed = r.Framing().Timed()
	if rec.Sealed != nil {
		// Its id and time are in clear: only its headers and body are not.
		id := logfile.Record{Type: rec.Type, TxID: rec.TxID, WriteOrderID: rec.WriteOrderID, Time: rec.Time}
		return id, timed, fmt.Errorf("event %v in %s is encrypted with key %q: %w", p, l.Path, r.Framing().KeyID(), ErrEncrypted)
	}
	return rec, timed, nil
}
