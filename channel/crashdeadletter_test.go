package channel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The crash-state enumeration with dead letters. Group a counts deliveries
// (MaxDeliveries dlMax) and moves its dead letters to a.dlq; group b counts
// nothing and nothing takes from it: it holds every event whose put
// happened. A serial workload, after a prologue that does each kind of step
// once, mixes puts; takes of a rolled back (which dead-letters the events
// at their limit), committed (with or without a Reject), rejected and
// rolled back; a take of a held open across steps; a poison event taken
// and rolled back until it moves, then a.dlq emptied by a committed take
// or a Redrive; takes of a.dlq; Redrive back to a; transactions that write
// nothing (transaction ids alternate between the data dirs: the next
// commits go to the other one); checkpoints, clean restarts and process
// crashes (the kernel keeps every write, the open take's events come back
// with their counts).
//
// The model (dlModel) follows the live channel exactly: the workload
// predicts the event each Take returns and its Deliveries, and each dead
// letter OnDeadLetter reports (a move only of an event whose count reached
// dlMax, or one rejected by that commit), and fails at once if the channel
// does otherwise. For the crash images the model keeps each event's history
// of places (dlLoc) — not put, in a (with the deliveries counted during
// that stay), in a.dlq, taken from a, taken from a.dlq — and the last of
// them known durable: where a synced commit that returned (a put, a take of
// either group, a Reject's commit, a Redrive), a checkpoint that returned
// or a clean Close left it. The places after it — moves by a Rollback or a
// Take (the model asks of those only that no durable write building on
// them outlives them), a commit in progress — may or may not have reached
// the disk, and so may the deliver records. Each recovered image must hold:
//
//   - each event at most once in a group, and never in both a and a.dlq;
//   - each event in a place of its history from the durable one on: a
//     committed event is never lost (it is in a, in a.dlq, or a take of it
//     that may have happened committed); an event whose take commit
//     returned, from a or from a.dlq, does not come back, in either; an
//     event is in a.dlq only after a move that may have happened (the
//     model made it only when its count had reached dlMax, or a commit
//     rejected it), and not after a Redrive of it that returned;
//   - a's delivery count of each of its events no more than the deliveries
//     the model counted during that stay in a: a power loss may lose
//     counts, never add any (no event is dead-lettered early). It may lose
//     more than the unsynced deliver records: a full replay (after a crash
//     during a checkpoint without a backup) has only the deliver records
//     of the log files still there, not the counts the checkpoint held.
//     That counts survive a process crash the live workload checks: after
//     each one it predicts the Deliveries of the next Takes;
//   - in b every event whose put happened (as a and a.dlq say), in put
//     order, each put transaction whole or not at all.
//
// On the states that check reopens, the probe takes a's head: the events
// before it whose recovered count reached dlMax move to a.dlq, and the Take
// returns the first other one, its Deliveries its recovered count plus one
// (so at most the model's count plus one).

// dlMax is MaxDeliveries of group a.
const dlMax = 2

// dlLoc is where an event is, in the model.
type dlLoc uint8

const (
	dlAbsent  dlLoc = iota // its put did not happen
	dlInA                  // queued for a, or in flight in one of a's takes
	dlInDLQ                // queued for a.dlq, or in flight there
	dlGoneA                // taken from a by a committed take
	dlGoneDLQ              // taken from a.dlq by a committed take
)

func (l dlLoc) String() string {
	switch l {
	case dlAbsent:
		return "not put"
	case dlInA:
		return "a"
	case dlInDLQ:
		return "a.dlq"
	case dlGoneA:
		return "taken from a"
	case dlGoneDLQ:
		return "taken from a.dlq"
	}
	return fmt.Sprintf("dlLoc(%d)", uint8(l))
}

// dlStep is one place in an event's history.
type dlStep struct {
	loc dlLoc
	// In a: the deliveries counted during this stay (deliver records
	// written, or being written).
	deliv int
}

// dlEvent is an event's history in the model.
type dlEvent struct {
	tx      int      // its put transaction
	steps   []dlStep // the last is where the live channel has it
	durable int      // the index in steps of the last place known durable
}

// possible returns the places a recovery may find e in.
func (e dlEvent) possible() []dlStep { return e.steps[e.durable:] }

func (e dlEvent) String() string {
	var b strings.Builder
	for i, s := range e.steps {
		if i > 0 {
			b.WriteString(" > ")
		}
		b.WriteString(s.loc.String())
		if s.loc == dlInA {
			fmt.Fprintf(&b, "(%d delivered)", s.deliv)
		}
		if i == e.durable {
			b.WriteString(" [durable]")
		}
	}
	return b.String()
}

// dlModel is the events' histories, by id. The workload changes it from
// its goroutine; the crash hook snapshots it.
type dlModel struct {
	mu     sync.Mutex
	events []dlEvent
}

func (m *dlModel) snapshot() any {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]dlEvent, len(m.events))
	for i, e := range m.events {
		out[i] = e
		out[i].steps = slices.Clone(e.steps)
	}
	return out
}

// add registers an event of put transaction tx, not put yet.
func (m *dlModel) add(tx int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, dlEvent{tx: tx, steps: []dlStep{{loc: dlAbsent}}})
	return len(m.events) - 1
}

// step moves ids to loc (not durable yet).
func (m *dlModel) step(loc dlLoc, ids ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.events[id].steps = append(m.events[id].steps, dlStep{loc: loc})
	}
}

// settle marks where ids are now as durable.
func (m *dlModel) settle(ids ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.events[id].durable = len(m.events[id].steps) - 1
	}
}

// settleAll marks every event's place as durable (a checkpoint returned,
// or Close).
func (m *dlModel) settleAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.events {
		m.events[i].durable = len(m.events[i].steps) - 1
	}
}

// deliver counts a delivery of id, in a, and returns its count.
func (m *dlModel) deliver(id int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := &m.events[id].steps[len(m.events[id].steps)-1]
	last.deliv++
	return last.deliv
}

// count returns the deliveries of id in its current stay in a.
func (m *dlModel) count(id int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events[id].steps[len(m.events[id].steps)-1].deliv
}

// dlWorkload drives the dead-letter configuration. a and dlq are the
// queues of the live channel as the model predicts them (events in flight
// are in neither).
type dlWorkload struct {
	r      *crashRun
	m      *dlModel
	rng    *rand.Rand
	c      *FileChannel
	a, dlq []int
	nextTx int

	// The take of a held across steps (nil for none), its events.
	open    *Transaction
	openIDs []int
	openEvs []Event

	notesMu sync.Mutex
	notes   []string // what OnDeadLetter said since the last wantNotes

	did dlCounts
}

// dlCounts is what a run of the workload did, for its log line.
type dlCounts struct {
	movedByTake, movedByRollback, rejected, redriven, takenFromDLQ int
	checkpoints, restarts, kills                                   int
}

func dlNote(id, deliveries int, rejected bool) string {
	return fmt.Sprintf("event %d (%d deliveries, rejected %v)", id, deliveries, rejected)
}

// eventID is the id in an event body of the crash workloads, or -1.
func eventID(ev Event) int {
	id, _, _, ok := parseEventID(ev.Body)
	if !ok {
		return -1
	}
	return id
}

func (w *dlWorkload) onDeadLetter(d DeadLetter) {
	w.notesMu.Lock()
	defer w.notesMu.Unlock()
	if d.Group != "a" || d.DeadLetter != "a.dlq" {
		w.notes = append(w.notes, fmt.Sprintf("a dead letter from %q to %q", d.Group, d.DeadLetter))
	}
	w.notes = append(w.notes, dlNote(eventID(d.Event), d.Deliveries, d.Rejected))
}

// wantNotes checks the dead letters OnDeadLetter reported during op.
func (w *dlWorkload) wantNotes(op string, want []string) error {
	w.notesMu.Lock()
	defer w.notesMu.Unlock()
	got := w.notes
	w.notes = nil
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: dead letters %q, the model expected %q", op, got, want)
	}
	return nil
}

// config is the workload's channel config: the run's, with OnDeadLetter
// (the checks open the images without it).
func (w *dlWorkload) config() Config {
	cfg := w.r.cfg
	cfg.OnDeadLetter = w.onDeadLetter
	return cfg
}

func (w *dlWorkload) group(name string) (*Group, error) { return w.c.Group(name) }

// put commits (or rolls back) a put transaction of k events.
func (w *dlWorkload) put(k int, rollback bool) error {
	tx, err := w.c.Begin()
	if err != nil {
		return err
	}
	w.nextTx++
	ids := make([]int, 0, k)
	for range k {
		id := w.m.add(w.nextTx)
		ids = append(ids, id)
		if err := tx.Put(Event{Headers: crashHeaders(id), Body: eventBody(id, 0, id)}); err != nil {
			tx.Rollback()
			return err
		}
	}
	if rollback {
		return tx.Rollback()
	}
	w.m.step(dlInA, ids...)
	if err := tx.Commit(); err != nil {
		return err
	}
	w.m.settle(ids...)
	w.a = append(w.a, ids...)
	return nil
}

// takeA takes up to k events of a into tx. Before each Take it predicts
// what it does: the heads that reached dlMax move to a.dlq, the next is
// delivered once more; then it checks the channel did just that.
func (w *dlWorkload) takeA(tx *Transaction, k int) ([]int, []Event, error) {
	var ids []int
	var evs []Event
	for range k {
		var want []string
		for len(w.a) > 0 && w.m.count(w.a[0]) >= dlMax {
			id := w.a[0]
			w.a = w.a[1:]
			want = append(want, dlNote(id, w.m.count(id), false))
			w.m.step(dlInDLQ, id)
			w.dlq = append(w.dlq, id)
			w.did.movedByTake++
		}
		head, deliv := -1, 0
		if len(w.a) > 0 {
			head = w.a[0]
			w.a = w.a[1:]
			deliv = w.m.deliver(head)
		}
		ev, ok, err := tx.Take()
		if err != nil {
			return ids, evs, fmt.Errorf("take from a: %w", err)
		}
		if err := w.wantNotes("take from a", want); err != nil {
			return ids, evs, err
		}
		if head < 0 {
			if ok {
				return ids, evs, fmt.Errorf("took event %d from a, which the model has empty", eventID(ev))
			}
			break
		}
		if !ok || eventID(ev) != head || ev.Deliveries != deliv {
			return ids, evs, fmt.Errorf("took from a: ok %v, event %d with Deliveries %d; the model expected event %d with %d",
				ok, eventID(ev), ev.Deliveries, head, deliv)
		}
		ids, evs = append(ids, head), append(evs, ev)
	}
	return ids, evs, nil
}

// rollbackA rolls back tx, holding ids of a: those that reached dlMax move
// to a.dlq, the others return to a's head.
func (w *dlWorkload) rollbackA(tx *Transaction, ids []int) error {
	var back []int
	var want []string
	for _, id := range ids {
		if n := w.m.count(id); n >= dlMax {
			want = append(want, dlNote(id, n, false))
			w.m.step(dlInDLQ, id)
			w.dlq = append(w.dlq, id)
			w.did.movedByRollback++
		} else {
			back = append(back, id)
		}
	}
	w.a = slices.Concat(back, w.a)
	if err := tx.Rollback(); err != nil {
		return fmt.Errorf("rollback of a take of a: %w", err)
	}
	return w.wantNotes("rollback of a take of a", want)
}

// commitA commits tx, holding ids of a, whose events rejected (indexes in
// ids) Reject has marked: those move to a.dlq, the others are gone.
func (w *dlWorkload) commitA(tx *Transaction, ids []int, rejected []int) error {
	var want []string
	for i, id := range ids {
		if slices.Contains(rejected, i) {
			want = append(want, dlNote(id, w.m.count(id), true))
			w.m.step(dlInDLQ, id)
			w.dlq = append(w.dlq, id)
			w.did.rejected++
		} else {
			w.m.step(dlGoneA, id)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit of a take of a: %w", err)
	}
	if !w.r.lazyTakes || len(rejected) > 0 { // a move is synced at once
		w.m.settle(ids...)
	}
	return w.wantNotes("commit of a take of a", want)
}

// reject rejects up to n random events of evs in tx and returns their
// indexes, in take order.
func (w *dlWorkload) reject(tx *Transaction, evs []Event, n int) ([]int, error) {
	var idx []int
	for _, i := range w.rng.Perm(len(evs))[:min(n, len(evs))] {
		if err := tx.Reject(evs[i]); err != nil {
			return nil, fmt.Errorf("reject event %d: %w", eventID(evs[i]), err)
		}
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx, nil
}

// takeA1 runs one take transaction of a: up to k events, then a commit
// (rejecting up to rejects of them) or a rollback (after rejecting some
// too: a rollback dead-letters none for it).
func (w *dlWorkload) takeA1(k int, commit bool, rejects int) error {
	a, err := w.group("a")
	if err != nil {
		return err
	}
	tx, err := a.Begin()
	if err != nil {
		return err
	}
	ids, evs, err := w.takeA(tx, k)
	if err != nil {
		tx.Rollback()
		return err
	}
	rej, err := w.reject(tx, evs, rejects)
	if err != nil {
		tx.Rollback()
		return err
	}
	if !commit {
		return w.rollbackA(tx, ids)
	}
	return w.commitA(tx, ids, rej)
}

// takeDLQ runs one take transaction of a.dlq: up to k events, committed
// (gone) or rolled back (back at its head).
func (w *dlWorkload) takeDLQ(k int, commit bool) error {
	g, err := w.group("a.dlq")
	if err != nil {
		return err
	}
	tx, err := g.Begin()
	if err != nil {
		return err
	}
	var ids []int
	for range k {
		ev, ok, err := tx.Take()
		if err != nil {
			tx.Rollback()
			return fmt.Errorf("take from a.dlq: %w", err)
		}
		if len(w.dlq) == 0 {
			if ok {
				tx.Rollback()
				return fmt.Errorf("took event %d from a.dlq, which the model has empty", eventID(ev))
			}
			break
		}
		head := w.dlq[0]
		if !ok || eventID(ev) != head || ev.Deliveries != 0 {
			tx.Rollback()
			return fmt.Errorf("took from a.dlq: ok %v, event %d with Deliveries %d; the model expected event %d with 0",
				ok, eventID(ev), ev.Deliveries, head)
		}
		w.dlq = w.dlq[1:]
		ids = append(ids, head)
	}
	if !commit {
		w.dlq = slices.Concat(ids, w.dlq)
		return tx.Rollback()
	}
	w.m.step(dlGoneDLQ, ids...)
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit of a take of a.dlq: %w", err)
	}
	if !w.r.lazyTakes {
		w.m.settle(ids...)
	}
	w.did.takenFromDLQ += len(ids)
	return nil
}

// idle begins and ends a transaction that writes nothing.
func (w *dlWorkload) idle() error {
	tx, err := w.c.Begin()
	if err != nil {
		return err
	}
	return tx.Rollback()
}

// poison dead-letters a's head as a consumer that cannot handle it does,
// by takes rolled back until it moves; then it empties a.dlq: by a take it
// commits, or by a Redrive back to a. The moves were not synced when this
// was written; the commit and the Redrive are. Half the time the commit or
// the Redrive goes to the other data dir than the last move (transaction
// ids alternate between the dirs: a transaction that writes nothing shifts
// them), whose fsync does not cover the move's file.
func (w *dlWorkload) poison() error { return w.poisonTo(w.rng.IntN(2) == 0) }

// poisonTo is poison; with otherDir, the commit or the Redrive goes to the
// other data dir than the last move if there are two.
func (w *dlWorkload) poisonTo(otherDir bool) error {
	a, err := w.group("a")
	if err != nil {
		return err
	}
	moveDir := -1
	for range dlMax {
		tx, err := a.Begin()
		if err != nil {
			return err
		}
		before := len(w.dlq)
		ids, _, err := w.takeA(tx, 1)
		if err == nil {
			err = w.rollbackA(tx, ids)
		}
		if err != nil {
			return err
		}
		if len(w.dlq) > before {
			moveDir = tx.dir
		}
	}
	dirs := uint64(w.c.logs.NumDirs())
	if otherDir && dirs > 1 && moveDir >= 0 && int(w.c.nextTxID.Load()%dirs) == moveDir {
		if err := w.idle(); err != nil {
			return err
		}
	}
	if w.rng.IntN(2) == 0 {
		return w.takeDLQ(min(len(w.dlq), 20), true)
	}
	return w.redrive(len(w.dlq))
}

// redrive moves up to n events of a.dlq back to a's tail, their counts
// starting again.
func (w *dlWorkload) redrive(n int) error {
	k := min(n, len(w.dlq))
	moved := slices.Clone(w.dlq[:k])
	w.dlq = w.dlq[k:]
	w.m.step(dlInA, moved...)
	w.a = append(w.a, moved...)
	got, err := w.c.Redrive("a.dlq", "a", n)
	if err != nil || got != k {
		return fmt.Errorf("Redrive(a.dlq, a, %d) = %d, %v; the model expected %d", n, got, err, k)
	}
	w.m.settle(moved...)
	w.did.redriven += k
	return nil
}

// openTake begins the take of a held across steps, with up to k events.
func (w *dlWorkload) openTake(k int) error {
	a, err := w.group("a")
	if err != nil {
		return err
	}
	if w.open, err = a.Begin(); err != nil {
		return err
	}
	w.openIDs, w.openEvs, err = w.takeA(w.open, k)
	return err
}

// endOpen rolls back or commits the open take (rejecting up to rejects of
// its events).
func (w *dlWorkload) endOpen(commit bool, rejects int) error {
	tx, ids, evs := w.open, w.openIDs, w.openEvs
	w.open, w.openIDs, w.openEvs = nil, nil, nil
	if !commit {
		return w.rollbackA(tx, ids)
	}
	rej, err := w.reject(tx, evs, rejects)
	if err != nil {
		return err
	}
	return w.commitA(tx, ids, rej)
}

// abandonOpen forgets the open take across a restart or a process crash:
// its events come back at a's head, their counts kept.
func (w *dlWorkload) abandonOpen() {
	w.a = slices.Concat(w.openIDs, w.a)
	w.open, w.openIDs, w.openEvs = nil, nil, nil
}

func (w *dlWorkload) checkpoint() error {
	if err := w.c.Checkpoint(); err != nil {
		return err
	}
	w.m.settleAll()
	w.did.checkpoints++
	return nil
}

// kill: the process dies (no checkpoint, no close); the kernel keeps what
// was written: nothing is lost, and nothing more is durable. The open
// take's events come back with the counts their deliver records kept.
func (w *dlWorkload) kill() error {
	crash(w.r.t, w.c)
	w.did.kills++
	w.abandonOpen()
	var err error
	if w.c, err = Open(w.config()); err != nil {
		w.c = nil
	}
	return err
}

// restart closes the channel (its checkpoint makes everything durable)
// and opens it again.
func (w *dlWorkload) restart() error {
	err := w.c.Close()
	w.c = nil
	if err != nil {
		return err
	}
	w.m.settleAll()
	w.did.restarts++
	w.abandonOpen()
	w.c, err = Open(w.config())
	return err
}

// prologue does each kind of step once, so that a short run covers them
// all whatever its random steps.
func (w *dlWorkload) prologue() error {
	for _, step := range []func() error{
		func() error { return w.put(6, false) },
		func() error { return w.takeA1(1, false, 0) }, // event 0, delivered once
		func() error { return w.takeA1(1, false, 0) }, // event 0 again: the rollback dead-letters it
		func() error { return w.takeA1(1, false, 0) }, // event 1, once
		func() error { return w.openTake(1) },         // event 1 again, held
		w.kill,                                        // event 1 back at a's head, at its limit
		func() error { return w.takeA1(2, true, 1) },  // the take moves event 1, takes 2 and 3, rejects one
		func() error { return w.takeA1(2, false, 1) }, // 4 and 5, one rejected, rolled back
		func() error { return w.takeDLQ(1, true) },    // event 0 taken from a.dlq
		func() error { return w.redrive(1) },          // event 1 back to a
		w.checkpoint,
		func() error { return w.poisonTo(true) },
		w.idle,
		w.restart,
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// run runs the prologue, then steps random operations (see the top of the
// file).
func (w *dlWorkload) run(steps int) (err error) {
	if w.c, err = Open(w.config()); err != nil {
		return err
	}
	defer func() {
		if w.c == nil {
			return
		}
		if cerr := w.c.Close(); err == nil {
			err = cerr
		}
	}()
	if err := w.prologue(); err != nil {
		return fmt.Errorf("prologue: %w", err)
	}
	for range steps {
		switch x := w.rng.IntN(100); {
		case x < 25:
			if len(w.a)+len(w.openIDs) > 200 {
				continue
			}
			err = w.put(1+w.rng.IntN(5), w.rng.IntN(6) == 0)
		case x < 36:
			// Rolled back, after a Reject one time in three.
			err = w.takeA1(1+w.rng.IntN(3), false, w.rng.IntN(3)/2)
		case x < 47:
			// Committed, with a Reject one time in two.
			err = w.takeA1(1+w.rng.IntN(4), true, w.rng.IntN(2)*(1+w.rng.IntN(2)))
		case x < 54:
			if w.open == nil {
				err = w.openTake(1 + w.rng.IntN(3))
			} else {
				err = w.endOpen(w.rng.IntN(2) == 0, w.rng.IntN(2))
			}
		case x < 62:
			err = w.takeDLQ(1+w.rng.IntN(3), w.rng.IntN(3) != 0)
		case x < 69:
			err = w.redrive(1 + w.rng.IntN(3))
		case x < 78:
			err = w.poison()
		case x < 83:
			// A transaction that writes nothing (a consumer that found
			// nothing to do): the transactions after it go to the other
			// data dir than they would have.
			err = w.idle()
		case x < 91:
			err = w.checkpoint()
		case x < 96:
			err = w.kill()
		default:
			err = w.restart()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dlRecovered checks a recovered channel against the dead-letter model
// (crashRun.recover) and returns the events of a, a.dlq and b.
func dlRecovered(c *FileChannel, s crashSnap) ([][]int, error) {
	model := s.ext.([]dlEvent)
	names := []string{"a", "a.dlq", "b"}
	out := make([][]int, len(names))
	var counts []int // a's delivery counts, by position
	for i, name := range names {
		g, err := c.Group(name)
		if err != nil {
			return nil, err
		}
		ids, ptrs, err := recoveredPointers(c, g.g)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", name, err)
		}
		if name == "a" {
			c.queueMu.Lock()
			for _, p := range ptrs {
				counts = append(counts, int(g.g.deliveries[p]))
			}
			c.queueMu.Unlock()
		}
		seen := map[int]bool{}
		for _, id := range ids {
			switch {
			case id >= len(model):
				return nil, fmt.Errorf("group %s: event %d did not exist at the crash", name, id)
			case seen[id]:
				return nil, fmt.Errorf("group %s: event %d recovered twice (%v)", name, id, model[id])
			}
			seen[id] = true
		}
		out[i] = ids
	}
	where := make([]dlLoc, len(model)) // dlAbsent: in neither a nor a.dlq
	count := make([]int, len(model))
	for k, id := range out[0] {
		where[id], count[id] = dlInA, counts[k]
	}
	for _, id := range out[1] {
		if where[id] == dlInA {
			return nil, fmt.Errorf("event %d is in both a and a.dlq (%v)", id, model[id])
		}
		where[id] = dlInDLQ
	}
	inB := make([]bool, len(model))
	last := -1
	for _, id := range out[2] {
		if id < last {
			return nil, fmt.Errorf("group b: event %d after %d, out of put order", id, last)
		}
		last, inB[id] = id, true
	}
	txIn, txSize := map[int]int{}, map[int]int{}
	for id, e := range model {
		if len(e.steps) > 1 { // its put commit was called
			txSize[e.tx]++
			if inB[id] {
				txIn[e.tx]++
			}
		}
		if err := dlCheckEvent(id, e, where[id], count[id], inB[id]); err != nil {
			return nil, err
		}
	}
	for tx, n := range txIn {
		if n != txSize[tx] {
			return nil, fmt.Errorf("group b has %d of the %d events of put transaction %d", n, txSize[tx], tx)
		}
	}
	return out, nil
}

// dlCheckEvent checks that event id of history e may be where the
// recovery found it: at loc (dlAbsent: in neither a nor a.dlq), with
// count deliveries if in a, in b or not.
func dlCheckEvent(id int, e dlEvent, loc dlLoc, count int, inB bool) error {
	if loc != dlAbsent && !inB {
		return fmt.Errorf("event %d is in %v but not in b: its put did not happen (%v)", id, loc, e)
	}
	want := []dlLoc{loc}
	what := fmt.Sprintf("in %v", loc)
	switch {
	case loc == dlAbsent && inB:
		want = []dlLoc{dlGoneA, dlGoneDLQ}
		what = "put but in neither a nor a.dlq"
	case loc == dlAbsent:
		what = "not put"
	}
	for _, st := range e.possible() {
		if slices.Contains(want, st.loc) && (loc != dlInA || count <= st.deliv) {
			return nil
		}
	}
	switch {
	case loc == dlInA && slices.ContainsFunc(e.possible(), func(st dlStep) bool { return st.loc == dlInA }):
		return fmt.Errorf("event %d is in a with %d deliveries counted, more than happened: it would be dead-lettered early (%v)", id, count, e)
	case loc == dlAbsent && inB && e.possible()[0].loc == dlInA:
		return fmt.Errorf("event %d is lost: its put committed, it is in neither a nor a.dlq and no take of it committed (%v)", id, e)
	case loc == dlAbsent && inB:
		return fmt.Errorf("event %d is lost from a.dlq: it is in neither a nor a.dlq and no take of it committed (%v)", id, e)
	}
	return fmt.Errorf("event %d is %s, which no place of its history since the last durable one allows (%v)", id, what, e)
}

// dlProbe takes a's head on a recovered channel (crashRun.probe): the
// events before it whose recovered count reached dlMax move to a.dlq, and
// the Take returns the first other one, with one delivery more than its
// recovered count and at most one more than the model counted.
func dlProbe(c *FileChannel, s crashSnap) error {
	model := s.ext.([]dlEvent)
	a, err := c.Group("a")
	if err != nil {
		return err
	}
	dlq, err := c.Group("a.dlq")
	if err != nil {
		return err
	}
	ids, ptrs, err := recoveredPointers(c, a.g)
	if err != nil {
		return err
	}
	c.queueMu.Lock()
	i := 0
	for i < len(ptrs) && int(a.g.deliveries[ptrs[i]]) >= dlMax {
		i++
	}
	want := 0
	if i < len(ptrs) {
		want = int(a.g.deliveries[ptrs[i]]) + 1
	}
	c.queueMu.Unlock()
	before := dlq.Len()
	tx, err := a.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ev, ok, err := tx.Take()
	switch {
	case err != nil:
		return fmt.Errorf("probe: take from a: %w", err)
	case i == len(ids) && ok:
		return fmt.Errorf("probe: took event %d from a, whose events had all reached MaxDeliveries", eventID(ev))
	case i == len(ids):
	case !ok || eventID(ev) != ids[i] || ev.Deliveries != want:
		return fmt.Errorf("probe: took from a: ok %v, event %d with Deliveries %d; want event %d with %d",
			ok, eventID(ev), ev.Deliveries, ids[i], want)
	default:
		most := 0
		for _, st := range model[ids[i]].possible() {
			if st.loc == dlInA {
				most = max(most, st.deliv)
			}
		}
		if ev.Deliveries > most+1 {
			return fmt.Errorf("probe: event %d delivered with Deliveries %d, the model counted %d deliveries before (%v)",
				ids[i], ev.Deliveries, most, model[ids[i]])
		}
	}
	if n := dlq.Len(); n != before+i {
		return fmt.Errorf("probe: a.dlq holds %d events after the take, %d before; %d of a's head had reached MaxDeliveries", n, before, i)
	}
	return nil
}

// crashDeadLetters is the dead-letter workload (dlWorkload.run): it sets r
// up for it (its groups, and its own model to check the images against:
// dlRecovered, dlProbe).
func crashDeadLetters(r *crashRun, seed uint64, steps int) (string, error) {
	r.cfg.Groups = []GroupConfig{{Name: "a", MaxDeliveries: dlMax}, {Name: "b", Capacity: 600}}
	w := &dlWorkload{r: r, m: &dlModel{}, rng: rand.New(rand.NewPCG(seed, 13))}
	r.ext, r.recover, r.probe = w.m.snapshot, dlRecovered, dlProbe
	err := w.run(steps)
	return fmt.Sprintf("; %d events; %+v", len(w.m.events), w.did), err
}

func TestCrashStateEnumerationDeadLetters(t *testing.T) {
	t.Parallel() // the long crash tests run side by side, after the package's other tests
	runCrashEnumeration(t, []crashCase{
		{name: "deadletters/2dirs", dirs: 2, steps: 12, every: 8, longSteps: 120, seeds: 2, run: crashDeadLetters},
		{name: "deadletters/1dir", dirs: 1, steps: 6, every: 16, longSteps: 120, seeds: 2, run: crashDeadLetters},
		// For the long mode only.
		{name: "deadletters/2dirs+backup", dirs: 2, backup: true, longSteps: 40, seeds: 1, run: crashDeadLetters},
	})
}
