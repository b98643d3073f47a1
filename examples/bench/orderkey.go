package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/channel"
)

// The OrderKey measurements (issue 32): durable take commits of batch 100
// by 4 takers (goroutines, each committing its own take transactions) from
// one named group g0, side by side in one interleaved run:
//
//   - none: g0 without OrderKey;
//   - keys: g0 with OrderKey "k", the same events: header k is one of 1,000
//     keys, in turn (round robin);
//   - stuck: g0 with OrderKey "k", orderFill events queued (1,000,000 in a
//     full run), every 10th on the key "stuck" and the others on the 1,000
//     keys in turn; before the measurement a take transaction takes the
//     first event (of "stuck") and stays open until it ends, so the takers
//     park each of the key's events (unread: the ring keeps its key's hash)
//     and must take every other one. Only the events the takers take count;
//   - random: g0 with OrderKey "k", each event's key drawn at random from
//     the 1,000 (a fixed seed): a taker often meets a key another holds and
//     parks the event (unread) until that taker commits. Reported beside
//     keys, without a target.
//
// Targets: keys >= 0.8 of none; stuck >= 0.8 of keys. A keyed group's pops
// and key claims are serial (under its orderMu); its takers read the
// events after, side by side as none's do (the ring keeps each event's key
// hash, computed at its put: channel/keytags.go).

const (
	orderHeader     = "k"     // the OrderKey header
	orderKeys       = 1000    // the keys, in turn
	orderTakers     = 4       // goroutines taking at once
	orderStuckEvery = 10      // every 10th event of the stuck channel is on orderStuckKey
	orderStuckKey   = "stuck" // the key held by the stuck transaction
	orderBodySize   = 1024    // bytes of an event's body
)

// orderID is the ID of the take commits of mode none, keys or stuck.
func orderID(mode string) string { return "filechannel/orderkey=" + mode + "/take/batch=100" }

// orderFill puts n events of body to c in transactions of 1,000: if
// stuckEvery > 0, every stuckEvery-th (the first among them) on
// orderStuckKey, the others on the orderKeys keys in turn, or, if random,
// drawn at random. It returns how many are on orderStuckKey.
func orderFill(c *channel.FileChannel, body []byte, n, stuckEvery int, random bool) (int, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	evs := make([]channel.Event, orderKeys)
	for i := range evs {
		evs[i] = channel.Event{Headers: map[string]string{orderHeader: "key" + strconv.Itoa(i)}, Body: body}
	}
	stuck := channel.Event{Headers: map[string]string{orderHeader: orderStuckKey}, Body: body}
	i, j, s := 0, 0, 0
	next := func() channel.Event {
		defer func() { i++ }()
		if stuckEvery > 0 && i%stuckEvery == 0 {
			s++
			return stuck
		}
		j++
		if random {
			return evs[rng.IntN(orderKeys)]
		}
		return evs[(j-1)%orderKeys]
	}
	for i < n {
		tx, err := c.Begin()
		if err != nil {
			return s, err
		}
		for range min(1000, n-i) {
			if err := tx.Put(next()); err != nil {
				return s, errors.Join(err, tx.Rollback())
			}
		}
		if err := tx.Commit(); err != nil {
			return s, fmt.Errorf("orderkey fill: %w", err)
		}
	}
	return s, nil
}

// orderTake takes n events of g with orderTakers goroutines, each
// committing take transactions of up to 100, and returns how many they
// took. An event of orderStuckKey is an error.
func orderTake(g *channel.Group, n int64) (int64, error) {
	var left, took atomic.Int64
	left.Store(n)
	errs := make([]error, orderTakers)
	var wg sync.WaitGroup
	for i := range orderTakers {
		wg.Go(func() { errs[i] = orderTaker(g, &left, &took) })
	}
	wg.Wait()
	return took.Load(), errors.Join(errs...)
}

// orderTaker commits take transactions of g, each of up to 100 of the
// events left, until none is left. A transaction that finds no free event
// (the rest parked behind keys the other takers hold until they commit)
// gives its share back and the taker tries again shortly; 10 s without an
// event is an error.
func orderTaker(g *channel.Group, left, took *atomic.Int64) error {
	var dry time.Time
	for {
		k := claim(left, 100)
		if k == 0 {
			return nil
		}
		got, err := orderTakeTx(g, int(k))
		took.Add(int64(got))
		left.Add(k - int64(got))
		switch {
		case err != nil:
			return err
		case got > 0:
			dry = time.Time{}
		case dry.IsZero():
			dry = time.Now()
		case time.Since(dry) > 10*time.Second:
			return fmt.Errorf("group %q: no event to take for 10 s with %d left", g.Name(), left.Load())
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// claim takes up to k from left and returns how much it took.
func claim(left *atomic.Int64, k int64) int64 {
	for {
		l := left.Load()
		if l <= 0 {
			return 0
		}
		if left.CompareAndSwap(l, l-min(l, k)) {
			return min(l, k)
		}
	}
}

// orderTakeTx commits one take transaction of up to n events of g and
// returns how many it took; an event of orderStuckKey is an error (its
// key is held).
func orderTakeTx(g *channel.Group, n int) (int, error) {
	tx, err := g.Begin()
	if err != nil {
		return 0, err
	}
	k := 0
	for ; k < n; k++ {
		ev, ok, err := tx.Take()
		if err == nil && ev.Headers[orderHeader] == orderStuckKey {
			err = errors.New("took an event of the held key")
		}
		if err != nil {
			return 0, errors.Join(err, tx.Rollback())
		}
		if !ok {
			break
		}
	}
	return k, tx.Commit()
}

// orderTakes measures take commits of batch 100 by orderTakers takers
// from g0 without OrderKey, with it over 1,000 keys, and with one key
// held by a stuck transaction, interleaved; then checks that the takers
// took every event but the held key's, which wait parked.
func (b *bench) orderTakes() error {
	var ms []*meter
	var checks []func() error
	var closers []func() error
	err := func() error {
		for _, mode := range []string{"none", "keys", "stuck", "random"} {
			m, check, closeC, err := b.orderMeter(mode)
			if err != nil {
				return err
			}
			ms, checks, closers = append(ms, m), append(checks, check), append(closers, closeC)
		}
		if err := b.interleave(2*b.sz.rounds, b.sz.dur, ms); err != nil {
			return err
		}
		var err error
		for _, check := range checks {
			err = errors.Join(err, check())
		}
		return err
	}()
	return errors.Join(err, closeAll(closers))
}

// orderMeter opens and fills the channel of mode (none, keys or stuck)
// and returns its meter, a check to run after the measurement and a
// function that ends the stuck transaction, closes the channel and
// removes its files.
func (b *bench) orderMeter(mode string) (*meter, func() error, func() error, error) {
	n, stuckEvery := b.sz.orderFill, 0
	if mode == "stuck" {
		stuckEvery = orderStuckEvery
	}
	c, closeC, err := b.openChannel("orderkey-"+mode, func(cfg *channel.Config) {
		cfg.Capacity = n + 1000
		cfg.Groups = []channel.GroupConfig{{Name: "g0"}}
		if mode != "none" {
			cfg.Groups[0].OrderKey = orderHeader
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	start := time.Now()
	stuck, err := orderFill(c, b.orderBody, n, stuckEvery, mode == "random")
	var g *channel.Group
	if err == nil {
		g, err = c.Group("g0")
	}
	var holder *channel.Transaction
	if err == nil && stuck > 0 {
		holder, err = orderHold(g)
	}
	if err != nil {
		return nil, nil, nil, errors.Join(err, closeC())
	}
	b.logf("  %s: %d events of %d B put in %.1f s", mode, n, len(b.orderBody), time.Since(start).Seconds())
	what := map[string]string{"none": "without OrderKey", "keys": "OrderKey over 1000 keys",
		"stuck":  fmt.Sprintf("OrderKey, one key held by a stuck transaction (%d of %d queued)", stuck, n),
		"random": "OrderKey over 1000 keys drawn at random"}[mode]
	m := withRounds(withCPU(&meter{
		res: Result{ID: orderID(mode), System: "filechannel", Op: fmt.Sprintf("g0, %s: take commit, %d takers", what, orderTakers),
			Batch: 100, Producers: orderTakers, Groups: 1,
			Note: fmt.Sprintf("%d B events, header k on 1000 keys %s; takes read the page cache", len(b.orderBody), map[bool]string{true: "drawn at random", false: "in turn"}[mode == "random"])},
		max: int64(n - stuck),
		run: func(_ time.Duration, max int64) (int64, error) { return orderTake(g, max) },
	}))
	check := func() error {
		st := g.Stats()
		if mode != "none" {
			b.logf("  %s: %d takes parked an event behind a held key (Stats.Skipped)", mode, st.Skipped)
		}
		if m.res.Events != m.max || st.Queued != 0 || st.Parked != max(stuck-1, 0) {
			return fmt.Errorf("orderkey %s: took %d of %d; %d queued, %d parked (want 0, %d)",
				mode, m.res.Events, m.max, st.Queued, st.Parked, max(stuck-1, 0))
		}
		return nil
	}
	end := func() error {
		if holder != nil {
			return errors.Join(holder.Rollback(), closeC())
		}
		return closeC()
	}
	return m, check, end, nil
}

// orderHold begins a take transaction of g and takes one event, which must
// be of orderStuckKey: the transaction holds that key until it ends.
func orderHold(g *channel.Group) (*channel.Transaction, error) {
	tx, err := g.Begin()
	if err != nil {
		return nil, err
	}
	ev, ok, err := tx.Take()
	if err == nil && (!ok || ev.Headers[orderHeader] != orderStuckKey) {
		err = fmt.Errorf("the stuck transaction took %q (%v), not an event of %q", ev.Headers[orderHeader], ok, orderStuckKey)
	}
	if err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	return tx, nil
}

// orderTargets checks the OrderKey targets: take commits of 4 takers with
// OrderKey over 1,000 keys >= 0.8 of the same without OrderKey, and with
// one key stuck (its events parked) >= 0.8 of those with none stuck.
func orderTargets(r *Report) []Target {
	ts := ratioTarget(r, fmt.Sprintf("orderkey: take commits batch 100, %d takers, OrderKey over 1000 keys / without", orderTakers),
		orderID("keys"), orderID("none"), 0.8)
	ts = append(ts, ratioTarget(r, fmt.Sprintf("orderkey: take commits batch 100, %d takers, one key stuck (every 10th event) / none stuck", orderTakers),
		orderID("stuck"), orderID("keys"), 0.8)...)
	random := ratioTarget(r, fmt.Sprintf("orderkey: take commits batch 100, %d takers, keys drawn at random / in turn", orderTakers),
		orderID("random"), orderID("keys"), 0)
	for i := range random {
		if random[i].Status != "-" {
			random[i].Want, random[i].Status = "-", "INFO"
		}
	}
	return append(ts, random...)
}
