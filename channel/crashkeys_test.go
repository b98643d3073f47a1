package channel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The crash-state enumeration on a group with OrderKey (the cases keys/...
// of TestCrashStateEnumeration): the unnamed group is keyed by the
// crash events' header "key" (5 keys, and 1 event in 6 without one), and
// up to three take transactions are open at once, taking in turn, so that
// events are parked behind keys another one holds; they commit or roll
// back at random, checkpoints come between, and a test clock makes events
// expire (GroupConfig.ExpireAfter), dropped or moved to a dead-letter
// group. Each crash image must hold, besides the base model's loss,
// duplicate and committed-take checks (compareWithModel):
//
//   - each key's events in put-commit order (the workload puts from one
//     goroutine, so that is id order): the ring's, and, with RetryDelays,
//     a key's waiting and parked events ahead of its events in the ring;
//   - an event missing from the group only if its take committed (or was
//     committing) or, expired at the crash point's clock, it was dropped
//     or is in the dead-letter group; never in both, and nothing there
//     that had not expired.
//
// keys/concurrent/2dirs runs a producer, two takers and a checkpointer at
// once (crashOrderKeyedConcurrent) against the same checks. keys/retry/2dirs
// gives the keyed group RetryDelays (0, then 1 ms; the clock moves 2 ms at
// a time): a key waits with its first returned event, so the order checked
// per key is its waiting event, those parked behind it (Open parks a
// second waiting event of a key), then the ring's.
//
// On a sample of the images (check's reopen) a probe takes everything
// with three interleaved transactions and checks that each key's events
// are delivered in that order, expired ones never, and, without
// RetryDelays, every other one.

// keyedOpts configures a keyed case.
type keyedOpts struct {
	expire time.Duration // GroupConfig.ExpireAfter; 0: none
	dlq    bool          // expired events move to group "dead" (else dropped)
	retry  bool          // RetryDelays 0, 1 ms on the keyed group too
}

// keyedOpenTakes is how many take transactions the keyed workload holds
// open at once.
const keyedOpenTakes = 3

// keyedDeadLetter is the keyed group's dead-letter group (keyedOpts.dlq).
const keyedDeadLetter = "dead"

// keyedWorkload is the workload of the keyed cases (run: serial;
// concurrent) and their model of time: the clock (Unix nanoseconds, moved
// only between puts, by the goroutine that puts) and each event's put
// time.
type keyedWorkload struct {
	*crashWorkload
	opts  keyedOpts
	clock atomic.Int64
	mu    sync.Mutex
	times []int64 // by event id, once its put returned; later ids: the clock
}

// keyedSnap is the keyed workload's model at a crash point (crashSnap.ext).
type keyedSnap struct {
	now   int64
	times []int64
}

// crashOrderKeyed is a keyed case: the keyed workload with opts.
func crashOrderKeyed(opts keyedOpts) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		w := newKeyedWorkload(r, seed, opts)
		parked, expired, err := w.run(steps)
		return fmt.Sprintf(" (%d events parked, %d expired, over the sessions)", parked, expired), err
	}
}

// newKeyedWorkload sets r up for a keyed case with opts (its group, its
// clock, its model) and returns its workload.
func newKeyedWorkload(r *crashRun, seed uint64, opts keyedOpts) *keyedWorkload {
	w := &keyedWorkload{crashWorkload: newCrashWorkload(r, seed, 42), opts: opts}
	w.clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	g := GroupConfig{OrderKey: crashKeyHeader, ExpireAfter: opts.expire}
	if opts.dlq {
		g.DeadLetter = keyedDeadLetter
	}
	if opts.retry {
		g.RetryDelays = []time.Duration{0, time.Millisecond}
	}
	r.cfg.Groups = []GroupConfig{g}
	if opts.dlq {
		// Room for every dead letter of the longest run: a full Block
		// dead-letter group refuses a move, and the expired event is
		// delivered (by design; the model does not follow that).
		r.cfg.Groups = append(r.cfg.Groups, GroupConfig{Name: keyedDeadLetter, Capacity: 4000})
	}
	r.cfg.now = func() time.Time { return time.Unix(0, w.clock.Load()) }
	r.cfg.clock = w.clock.Load
	r.ext, r.recover, r.probe = w.snapshot, w.recover, w.probe
	r.clockAt = func(s crashSnap) int64 { return s.ext.(keyedSnap).now }
	return w
}

func (w *keyedWorkload) snapshot() any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return keyedSnap{now: w.clock.Load(), times: slices.Clone(w.times)}
}

// put is crashWorkload.put, noting the put time of its events.
func (w *keyedWorkload) put(c *FileChannel, k int, rollback bool) error {
	err := w.crashWorkload.put(c, 0, k, rollback)
	n := len(w.r.model.snapshot().states)
	w.mu.Lock()
	for len(w.times) < n {
		w.times = append(w.times, w.clock.Load())
	}
	w.mu.Unlock()
	return err
}

// run runs steps random operations: puts, takes into one of the open
// transactions (begun as needed), their commits and rollbacks, one-shot
// take transactions, checkpoints, the clock moved on (with ExpireAfter)
// and clean restarts. It returns how many events were parked and how
// many expired, over every session.
func (w *keyedWorkload) run(steps int) (parked, expired int64, err error) {
	s, err := w.session(false)
	if err != nil {
		return 0, 0, err
	}
	var open [keyedOpenTakes]*Transaction
	var ids [keyedOpenTakes][]int
	skipped := func() int64 {
		if s.c == nil || s.c.main == nil {
			return 0
		}
		s.c.queueMu.Lock()
		defer s.c.queueMu.Unlock()
		expired += s.c.main.counts.deadExpired.Load() + s.c.main.counts.expiredDropped.Load()
		return s.c.main.order.skips
	}
	defer func() {
		parked += skipped()
		s.close(&err)
	}()
	for range steps {
		i := w.rng.IntN(keyedOpenTakes)
		var err error
		switch x := w.rng.IntN(100); {
		case x < 35 && s.c.Len() < s.cfg.Capacity-40:
			err = w.put(s.c, 1+w.rng.IntN(6), w.rng.IntN(6) == 0)
		case x < 60:
			if open[i] == nil {
				if open[i], err = s.c.Begin(); err != nil {
					break
				}
			}
			var got []int
			got, err = w.takeIDs(open[i], 1+w.rng.IntN(3))
			ids[i] = append(ids[i], got...)
		case x < 75:
			if open[i] != nil {
				err = w.endTake(open[i], ids[i], w.rng.IntN(3) != 0)
				open[i], ids[i] = nil, nil
			}
		case x < 82:
			err = w.oneTake(s.c)
		case x < 89:
			err = s.c.Checkpoint()
		case x < 96 && w.tick() > 0:
			w.clock.Add(int64(w.tick()))
		default:
			parked += skipped()
			for i := range open {
				w.r.model.setTake(ids[i], takeNone) // abandoned: back at the head
				open[i], ids[i] = nil, nil
			}
			if s.restart() {
				return parked, expired, s.err
			}
		}
		if err != nil {
			return parked, expired, err
		}
	}
	return parked, expired, nil
}

// tick is how far the workload moves the clock on at a time: a third of
// ExpireAfter, else, with RetryDelays, 2 ms (events waiting 1 ms become
// due); 0: it never moves.
func (w *keyedWorkload) tick() time.Duration {
	switch {
	case w.opts.expire > 0:
		return w.opts.expire / 3
	case w.opts.retry:
		return 2 * time.Millisecond
	}
	return 0
}

// oneTake runs a take transaction of up to 5 events, committed (4 times
// in 5) or rolled back.
func (w *keyedWorkload) oneTake(c *FileChannel) error {
	tx, err := c.Begin()
	if err != nil {
		return err
	}
	ids, err := w.takeIDs(tx, 1+w.rng.IntN(5))
	if err != nil {
		return err
	}
	return w.endTake(tx, ids, w.rng.IntN(5) != 0)
}

// expired reports whether event id had expired at the snapshot's clock.
func (w *keyedWorkload) expired(s keyedSnap, id int) bool {
	at := s.now // put after the last time noted: at the clock of the crash
	if id < len(s.times) {
		at = s.times[id]
	}
	return w.opts.expire > 0 && s.now-at >= int64(w.opts.expire)
}

// keyedRecovered returns the ids of the events of c's keyed group right
// after Open: the ring's, in order, the waiting ones (sorted by id), and
// the parked ones, lane by lane (with RetryDelays, Open parks a waiting
// event behind another of its key that holds it).
func keyedRecovered(c *FileChannel) (ring, waiting, parked []int, err error) {
	ids, _, err := recoveredPointers(c, c.main)
	if err != nil {
		return nil, nil, nil, err
	}
	c.queueMu.Lock()
	n := c.main.queue.Size()
	pp := c.main.parkedPointers()
	c.queueMu.Unlock()
	if parked, err = crashEventIDs(c, pp); err != nil {
		return nil, nil, nil, fmt.Errorf("parked: %w", err)
	}
	return ids[:n], slices.Sorted(slices.Values(ids[n:])), parked, nil
}

// recover checks the recovered channel c against the snapshot s: the
// keyed group's events and its dead letters (their ids, returned in that
// order: the ring's, then the waiting ones and the parked ones, each
// sorted).
func (w *keyedWorkload) recover(c *FileChannel, s crashSnap) ([][]int, error) {
	ks := s.ext.(keyedSnap)
	ring, waiting, parked, err := keyedRecovered(c)
	if err != nil {
		return nil, err
	}
	ids := slices.Concat(ring, waiting, slices.Sorted(slices.Values(parked)))
	var dead []int
	if w.opts.dlq {
		g, err := c.Group(keyedDeadLetter)
		if err != nil {
			return nil, err
		}
		if dead, _, err = recoveredPointers(c, g.g); err != nil {
			return nil, fmt.Errorf("dead-letter group: %w", err)
		}
	}
	if err := w.checkExpired(ids, dead, s, ks); err != nil {
		return nil, err
	}
	// Per key: the waiting event, those parked behind it, then the ring's.
	if err := keyOrderErr(slices.Concat(waiting, parked, ring)); err != nil {
		return nil, fmt.Errorf("recovered ring %v, waiting %v, parked %v: %w", ring, waiting, parked, err)
	}
	return [][]int{ids, dead}, nil
}

// checkExpired checks the group's events ids and its dead letters dead
// against the model: the base model's checks, where an event that had
// expired at the crash may be missing from the group if it is in dead
// (with a dead-letter group: it must then be there) or was dropped.
func (w *keyedWorkload) checkExpired(ids, dead []int, s crashSnap, ks keyedSnap) error {
	in := map[int]bool{}
	for _, id := range ids {
		in[id] = true
	}
	s.states = slices.Clone(s.states)
	for _, id := range dead {
		switch {
		case id >= len(s.states) || in[id]:
			return fmt.Errorf("dead letter %d: in the group too, or unknown", id)
		case !w.expired(ks, id):
			return fmt.Errorf("dead letter %d had not expired (put at %d, clock %d)", id, ks.times[id], ks.now)
		case s.states[id]&0x0f == putPending || s.states[id]&0x0f == putAborted:
			return fmt.Errorf("dead letter %d: its put never committed", id)
		}
		in[id] = true // in the group's place, for the count of duplicates
		s.states[id] = s.states[id]&^takeMask | takeCommitted
	}
	for id := range s.states {
		if !in[id] && !w.opts.dlq && w.expired(ks, id) {
			s.states[id] = s.states[id]&^takeMask | takeCommitted // dropped
		}
	}
	return compareWithModel(slices.Sorted(slices.Values(ids)), s)
}

// keyOrderErr checks that each key's events in ids come in id order (the
// workload's put-commit order).
func keyOrderErr(ids []int) error {
	last := map[string]int{}
	for _, id := range ids {
		k := crashOrderKey(id)
		if k == "" {
			continue
		}
		if prev, ok := last[k]; ok && id < prev {
			return fmt.Errorf("key %s: event %d after %d", k, id, prev)
		}
		last[k] = id
	}
	return nil
}

// probe takes every event of the recovered channel c with three take
// transactions in turn, each committed once it finds nothing (which
// frees its keys), and checks each delivery: the next event of its key
// in id order among those recovered and not expired (or a free one, once).
// Without RetryDelays every such event is delivered in the end; with
// them, those waiting past the clock (stopped at the crash point) are
// not, and neither is any later event of their keys.
func (w *keyedWorkload) probe(c *FileChannel, s crashSnap) error {
	ks := s.ext.(keyedSnap)
	ring, waiting, parked, err := keyedRecovered(c)
	if err != nil {
		return err
	}
	want := map[string][]int{} // by key ("": free), in id order
	for _, id := range slices.Sorted(slices.Values(slices.Concat(ring, waiting, parked))) {
		if !w.expired(ks, id) {
			want[crashOrderKey(id)] = append(want[crashOrderKey(id)], id)
		}
	}
	free := map[int]bool{}
	for _, id := range want[""] {
		free[id] = true
	}
	var txs [keyedOpenTakes]*Transaction
	for round := 0; round < 4*c.cfg.Capacity; round++ {
		held, progress := slices.ContainsFunc(txs[:], func(t *Transaction) bool { return t != nil }), false
		for i := range txs {
			got, err := probeTake(c, &txs[i])
			if err != nil || got < 0 {
				if err != nil {
					return fmt.Errorf("probe: %w", err)
				}
				continue
			}
			progress = true
			k := crashOrderKey(got)
			switch {
			case k == "" && free[got]:
				delete(free, got)
			case k != "" && len(want[k]) > 0 && want[k][0] == got:
				want[k] = want[k][1:]
			default:
				return fmt.Errorf("probe: delivered %d (key %q), expected next of its key: %v", got, k, want[k])
			}
		}
		if !progress && !held {
			break
		}
	}
	delete(want, "")
	for k, left := range want {
		if len(left) > 0 && !w.opts.retry {
			return fmt.Errorf("probe: key %s's events %v never delivered", k, left)
		}
	}
	if len(free) > 0 && !w.opts.retry {
		return fmt.Errorf("probe: free events %v never delivered", free)
	}
	return nil
}

// probeTake takes one event into *tx (begun if nil) and returns its id;
// when there is none it commits *tx, sets it to nil and returns -1.
func probeTake(c *FileChannel, tx **Transaction) (int, error) {
	if *tx == nil {
		t, err := c.Begin()
		if err != nil {
			return -1, err
		}
		*tx = t
	}
	ev, ok, err := (*tx).Take()
	if err != nil {
		return -1, err
	}
	if !ok {
		err := (*tx).Commit()
		*tx = nil
		return -1, err
	}
	id, _, _, _ := parseEventID(ev.Body)
	return id, nil
}

// crashOrderKeyedConcurrent is the keyed case with concurrent goroutines: one
// producer (so that id order stays put-commit order), which also moves
// the clock on, two takers whose take transactions (of 1 to 4 events,
// committed 3 times in 4) overlap, parking each other's keys, and a
// checkpointer: a checkpoint can come while a Take is between its pop and
// its key's claim.
func crashOrderKeyedConcurrent(opts keyedOpts) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		w := newKeyedWorkload(r, seed, opts)
		parked, err := w.concurrent(steps)
		return fmt.Sprintf(" (%d events parked)", parked), err
	}
}

// concurrent runs the producer for steps steps, and two takers and the
// checkpointer until it is done; it returns how many events were parked.
func (w *keyedWorkload) concurrent(steps int) (parked int64, err error) {
	c, err := Open(w.r.cfg)
	if err != nil {
		return 0, err
	}
	defer func() {
		c.queueMu.Lock()
		parked = c.main.order.skips
		c.queueMu.Unlock()
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}()
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				errs <- err
				done.Store(true)
			}
		}()
	}
	run(func() error {
		defer done.Store(true)
		for range steps {
			if w.tick() > 0 && w.rng.IntN(8) == 0 {
				w.clock.Add(int64(w.tick()))
			}
			if c.Len() < w.r.cfg.Capacity-60 {
				if err := w.put(c, 1+w.rng.IntN(6), w.rng.IntN(6) == 0); err != nil {
					return err
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
		return nil
	})
	for i := range 2 {
		rng := rand.New(rand.NewPCG(w.r.seed, uint64(100+i)))
		run(func() error { return w.taker(c, rng, &done) })
	}
	run(func() error {
		for !done.Load() {
			if err := c.Checkpoint(); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	wg.Wait()
	close(errs)
	return 0, <-errs
}

// taker runs take transactions of 1 to 4 events, committed 3 times in 4,
// until done.
func (w *keyedWorkload) taker(c *FileChannel, rng *rand.Rand, done *atomic.Bool) error {
	for !done.Load() {
		tx, err := c.Begin()
		if err != nil {
			return err
		}
		ids, err := w.takeIDs(tx, 1+rng.IntN(4))
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		if err := w.endTake(tx, ids, rng.IntN(4) != 0); err != nil {
			return err
		}
	}
	return nil
}
