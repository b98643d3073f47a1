package channel

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// orderConfig is a channel with one group "a" keyed by header "k".
func orderConfig(t testing.TB) Config {
	cfg := testConfig(t, 1)
	cfg.TransactionCapacity = 1000
	cfg.Groups = []GroupConfig{{Name: "a", OrderKey: "k"}}
	return cfg
}

// putKeyed commits one event per entry of keys ("" = no header), with
// body "<i>:<key>".
func putKeyed(t testing.TB, c *FileChannel, from int, keys ...string) {
	t.Helper()
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		h := map[string]string{}
		if k != "" {
			h["k"] = k
		}
		if err := tx.Put(Event{Headers: h, Body: []byte(strconv.Itoa(from+i) + ":" + k)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// takeAll takes from tx until nothing is free; it returns the bodies.
func takeAll(t testing.TB, tx *Transaction) []string {
	t.Helper()
	var out []string
	for {
		ev, ok, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, string(ev.Body))
	}
}

func mustBegin(t testing.TB, g *Group) *Transaction {
	t.Helper()
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func wantBodies(t testing.TB, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: took %v, want %v", what, got, want)
	}
}

// A held key's events are skipped (parked), events without the key are
// free, and a rollback returns the key's events first, in order.
func TestOrderKeySkipAndRollback(t *testing.T) {
	cfg := orderConfig(t)
	reg := prometheus.NewPedanticRegistry()
	cfg.Registerer, cfg.Name = reg, "m"
	c := mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x", "y", "", "x", "y")
	tx1 := mustBegin(t, g)
	ev, _, err := tx1.Take()
	if err != nil || string(ev.Body) != "0:x" {
		t.Fatalf("first take: %q, %v", ev.Body, err)
	}
	tx2 := mustBegin(t, g)
	wantBodies(t, "past held x", takeAll(t, tx2), "2:y", "3:", "5:y")
	if st := g.Stats(); st.Parked != 2 || st.Skipped != 2 {
		t.Fatalf("Parked, Skipped = %d, %d; want 2, 2", st.Parked, st.Skipped)
	}
	wantMetric(t, reg, "filechannel_group_order_parked_events", map[string]string{"channel_name": "m", "group": "a"}, 2)
	wantMetric(t, reg, "filechannel_group_order_skipped_total", map[string]string{"channel_name": "m", "group": "a"}, 2)
	if err := tx1.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx3 := mustBegin(t, g)
	wantBodies(t, "after rollback", takeAll(t, tx3), "0:x", "1:x", "4:x")
	for _, tx := range []*Transaction{tx2, tx3} {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if g.Stats().Queued != 0 || g.Stats().Parked != 0 {
		t.Fatalf("left: %+v", g.Stats())
	}
}

// A commit frees the key: its parked events are taken next, in order.
func TestOrderKeyCommitFrees(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x", "y", "x")
	tx1 := mustBegin(t, g)
	if _, _, err := tx1.Take(); err != nil {
		t.Fatal(err)
	}
	tx2 := mustBegin(t, g)
	wantBodies(t, "past held x", takeAll(t, tx2), "2:y")
	if err := tx1.Commit(); err != nil {
		t.Fatal(err)
	}
	wantBodies(t, "after commit", takeAll(t, tx2), "1:x", "3:x")
	if err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A stuck key (its taker never ends) does not stop the others.
func TestOrderKeyStuckKey(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	keys := make([]string, 200)
	for i := range keys {
		if keys[i] = "k" + strconv.Itoa(i%10); i%10 == 0 {
			keys[i] = "stuck"
		}
	}
	putKeyed(t, c, 0, keys...)
	stuck := mustBegin(t, g)
	if ev, _, err := stuck.Take(); err != nil || string(ev.Body) != "0:stuck" {
		t.Fatalf("stuck take: %q, %v", ev.Body, err)
	}
	n := 0
	for {
		tx := mustBegin(t, g)
		got := takeAll(t, tx)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		n += len(got)
	}
	if n != 180 {
		t.Fatalf("took %d events past the stuck key, want 180", n)
	}
	if err := stuck.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx := mustBegin(t, g)
	got := takeAll(t, tx)
	if len(got) != 20 || got[0] != "0:stuck" || got[19] != "190:stuck" {
		t.Fatalf("stuck key's events after its rollback: %v", got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// orderCheck tracks, for a concurrent test, which transaction holds each
// key and the next sequence number of each key's events.
type orderCheck struct {
	mu   sync.Mutex
	held map[string]int // key -> taker
	next map[string]int
}

// takeStep is one take transaction of taker id: up to 5 takes, each
// checked against the key's holder and order, then a commit or (1 in 5)
// a rollback. It returns the number committed.
func (oc *orderCheck) takeStep(t *testing.T, g *Group, id int, rng *rand.Rand) int {
	tx := mustBegin(t, g)
	local := map[string]int{}
	var errs []string
	for range 5 {
		ev, ok, err := tx.Take()
		if err != nil {
			t.Error(err)
			break
		}
		if !ok {
			break
		}
		k := ev.Headers["k"]
		seq, _ := strconv.Atoi(ev.Headers["seq"])
		oc.mu.Lock()
		if h, ok := oc.held[k]; ok && h != id {
			errs = append(errs, fmt.Sprintf("key %s taken by %d while %d holds it", k, id, h))
		}
		oc.held[k] = id
		want, ok := local[k]
		if !ok {
			want = oc.next[k]
		}
		if seq != want {
			errs = append(errs, fmt.Sprintf("key %s: took seq %d, want %d", k, seq, want))
		}
		local[k] = seq + 1
		oc.mu.Unlock()
	}
	commit := rng.IntN(5) != 0
	oc.mu.Lock()
	n := 0
	for k, s := range local {
		delete(oc.held, k)
		if commit {
			n += s - oc.next[k]
			oc.next[k] = s
		}
	}
	oc.mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	var err error
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// With 4 takers and 20 keys, random rollbacks included: no key is held by
// two open transactions, and each key's events are committed in order.
// The group's lag is scraped meanwhile (its parked events in it: lag.go),
// and is zero at the end.
func TestOrderKeyConcurrent(t *testing.T) {
	c, g, reg := openKeyedMetered(t)
	const events, keys = 800, 20
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range events {
		k := "key" + strconv.Itoa(i%keys)
		if err := tx.Put(Event{Headers: map[string]string{"k": k, "seq": strconv.Itoa(i / keys)}, Body: body(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	oc := &orderCheck{held: map[string]int{}, next: map[string]int{}}
	stopScrapes := scrapeLag(t, c, g, reg)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for id := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 1))
			for idle := 0; idle < 50 && !t.Failed(); {
				n := oc.takeStep(t, g, id, rng)
				mu.Lock()
				total += n
				done := total == events
				mu.Unlock()
				if done {
					return
				}
				if n == 0 {
					idle++
				}
			}
		}()
	}
	wg.Wait()
	stopScrapes()
	if total != events {
		t.Fatalf("committed %d events, want %d", total, events)
	}
	if st := g.Stats(); st.Skipped == 0 || st.Parked != 0 || !st.Oldest.IsZero() {
		t.Fatalf("Skipped %d, Parked %d, Oldest %v: want some skipped (keys collided), none left parked, no lag", st.Skipped, st.Parked, st.Oldest)
	}
}

// Recovery keeps per-key order: a holder's events in flight come back
// before the events parked behind its key (Close, crash).
func TestOrderKeyRecovery(t *testing.T) {
	for _, how := range []string{"close", "crash"} {
		t.Run(how, func(t *testing.T) {
			cfg := orderConfig(t)
			c := mustOpen(t, cfg)
			g := mustGroup(t, c, "a")
			holdXParkX(t, c, g) // both stay open until the restart
			if err := c.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if how == "crash" {
				crash(t, c)
			} else if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = mustOpen(t, cfg)
			g = mustGroup(t, c, "a")
			tx := mustBegin(t, g)
			got := takeAll(t, tx)
			var xs []string
			for _, b := range got {
				if b[len(b)-1] == 'x' {
					xs = append(xs, b)
				}
			}
			wantBodies(t, "key x after reopen", xs, "0:x", "1:x", "3:x")
			if len(got) != 5 {
				t.Fatalf("after reopen: %v", got)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// holdX puts events 0:x, 1:x and 2:y, and returns an open transaction
// that took 0:x (and holds x), after another took and committed 2:y
// (1:x is parked).
func holdX(t *testing.T, c *FileChannel, g *Group) *Transaction {
	t.Helper()
	putKeyed(t, c, 0, "x", "x", "y")
	holder := mustBegin(t, g)
	if _, _, err := holder.Take(); err != nil {
		t.Fatal(err)
	}
	tx := mustBegin(t, g)
	wantBodies(t, "past held x", takeAll(t, tx), "2:y")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return holder
}

// An expired lease frees its keys: the key's events, its own first, go to
// the next taker in order.
func TestOrderKeyLeaseExpiryFreesKeys(t *testing.T) {
	const lease = 100 * time.Millisecond
	cfg := orderConfig(t)
	cfg.Groups[0].LeaseTimeout = lease
	c := mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	stuck := holdX(t, c, g)
	deadline := time.Now().Add(50 * lease)
	for g.Stats().LeasesExpired == 0 && time.Now().Before(deadline) {
		time.Sleep(lease / 10)
	}
	tx := mustBegin(t, g)
	wantBodies(t, "after the expiry", takeAll(t, tx), "0:x", "1:x")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := stuck.Rollback(); err != nil {
		t.Fatal(err)
	}
}

// A reset drops the parked events with the rest: none comes back twice.
func TestOrderKeyResetDropsParked(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	holder := holdX(t, c, g)
	if _, err := c.ResetGroup("a", Latest()); err != nil {
		t.Fatal(err)
	}
	if st := g.Stats(); st.Parked != 0 || st.Queued != 0 {
		t.Fatalf("after the reset: %+v", st)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	putKeyed(t, c, 10, "x")
	tx := mustBegin(t, g)
	wantBodies(t, "after the reset", takeAll(t, tx), "10:x")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// OrderKey with RetryDelays opens and AddGroup takes them (they were
// refused before issue 32), and Transaction.Retry works in a keyed group.
func TestOrderKeyWithRetry(t *testing.T) {
	cfg := orderConfig(t)
	cfg.Groups[0].RetryDelays = []time.Duration{time.Second}
	c := mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x")
	tx := mustBegin(t, g)
	ev, _, err := tx.Take()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Retry(ev, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if st := g.Stats(); st.Waiting != 1 {
		t.Fatalf("%d waiting, want 1", st.Waiting)
	}
	if _, err := c.AddGroup(GroupConfig{Name: "b", OrderKey: "k", RetryDelays: []time.Duration{time.Second}}); err != nil {
		t.Fatalf("AddGroup with OrderKey and RetryDelays: %v", err)
	}
}

// A taker waiting in TakeContext behind a held key wakes when its holder
// commits.
func TestOrderKeyTakeContextWakesAtCommit(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	holder := holdX(t, c, g)
	tx := mustBegin(t, g)
	got := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ev, err := tx.TakeContext(ctx)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(ev.Body)
	}()
	time.Sleep(50 * time.Millisecond) // let it wait: 1:x is parked
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; b != "1:x" {
		t.Fatalf("TakeContext: %s, want 1:x", b)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A crash after takes and commits past the last checkpoint keeps each
// key's order: the logs after it settle what the checkpoint had parked.
func TestOrderKeyCrashAfterCheckpointedParking(t *testing.T) {
	cfg := orderConfig(t)
	c := mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	holder, _ := holdXParkX(t, c, g)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Commit(); err != nil { // 0:x gone; 1:x, 3:x back at the head
		t.Fatal(err)
	}
	next := mustBegin(t, g)
	wantBodies(t, "after the commit", takeAll(t, next), "1:x", "3:x")
	crash(t, c)
	c = mustOpen(t, cfg)
	g = mustGroup(t, c, "a")
	tx := mustBegin(t, g)
	got := takeAll(t, tx)
	var xs []string
	for _, b := range got {
		if b[len(b)-1] == 'x' {
			xs = append(xs, b)
		}
	}
	wantBodies(t, "key x after the crash", xs, "1:x", "3:x")
	if len(got) != 4 {
		t.Fatalf("after the crash: %v", got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// holdXParkX puts 0:x 1:x 2:y 3:x 4:y, lets holder take 0:x (holding x)
// and open take the rest it can: 2:y and 4:y, parking 1:x and 3:x.
func holdXParkX(t *testing.T, c *FileChannel, g *Group) (holder, open *Transaction) {
	t.Helper()
	putKeyed(t, c, 0, "x", "x", "y", "x", "y")
	holder = mustBegin(t, g)
	if _, _, err := holder.Take(); err != nil {
		t.Fatal(err)
	}
	open = mustBegin(t, g)
	wantBodies(t, "past held x", takeAll(t, open), "2:y", "4:y")
	return holder, open
}
