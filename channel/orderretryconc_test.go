package channel

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// retryOrderCheck tracks, under mu, what takers of a keyed group with
// RetryDelays did: which taker holds each key, the position in the key's
// put order of its next event to take, and, per event, the commits of it
// and the earliest time it may be delivered again.
type retryOrderCheck struct {
	mu        sync.Mutex
	holder    map[string]int // taker id + 1, 0: free
	committed map[string]int // the key's events committed, in put order
	taken     map[string]int // the holder's last take's position in the key
	pos       []int          // event -> its position in its key's put order
	commits   []int
	notBefore []time.Time
	total     int
	delays    []time.Duration
}

// parse returns the event number and key of body "<i>:<key>".
func parseKeyed(body []byte) (int, string) {
	s, k, _ := strings.Cut(string(body), ":")
	i, _ := strconv.Atoi(s)
	return i, k
}

// took checks the take of ev by taker id: its key free or its own, the
// key's events in put order, and not before its due time.
func (o *retryOrderCheck) took(t *testing.T, id int, ev Event) {
	now := time.Now()
	i, k := parseKeyed(ev.Body)
	o.mu.Lock()
	defer o.mu.Unlock()
	if now.Before(o.notBefore[i]) {
		t.Errorf("event %d delivered %v before its due time", i, o.notBefore[i].Sub(now))
	}
	if k == "" {
		return
	}
	switch o.holder[k] {
	case 0:
		if o.pos[i] != o.committed[k] {
			t.Errorf("key %s: took its event #%d, %d are committed", k, o.pos[i], o.committed[k])
		}
		o.holder[k] = id + 1
	case id + 1:
		if o.pos[i] != o.taken[k]+1 {
			t.Errorf("key %s: its holder took its event #%d after #%d", k, o.pos[i], o.taken[k])
		}
	default:
		t.Errorf("key %s: taker %d took event %d while taker %d holds it", k, id, i, o.holder[k]-1)
	}
	o.taken[k] = o.pos[i]
}

// ending records, before the transaction ends, that taker id's takes evs
// (deliveries n) are committed but those retried (their delay), or all
// rolled back (commit false): the keys are free once it ends.
func (o *retryOrderCheck) ending(id int, evs []Event, commit bool, retried map[int]time.Duration) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ev := range evs {
		i, k := parseKeyed(ev.Body)
		after, retry := retried[i]
		switch {
		case !commit:
			o.notBefore[i] = now.Add(o.delays[min(ev.Deliveries-1, len(o.delays)-1)])
		case retry:
			o.notBefore[i] = now.Add(after)
		default:
			o.commits[i]++
			o.total++
			if k != "" {
				o.committed[k]++
			}
		}
		if k != "" && o.holder[k] == id+1 {
			o.holder[k] = 0
		}
	}
}

// step is one take transaction of taker id: up to 4 takes, then a commit,
// a rollback, or a commit with Retry of a keyed event and its key's later
// takes. It returns the number of events taken.
func (o *retryOrderCheck) step(t *testing.T, g *Group, id int, rng *rand.Rand) int {
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for n := 1 + rng.IntN(4); len(evs) < n; {
		ev, ok, err := tx.Take()
		if err != nil {
			t.Error(err)
			break
		}
		if !ok {
			break
		}
		o.took(t, id, ev)
		evs = append(evs, ev)
	}
	commit, retried := true, map[int]time.Duration{}
	switch r := rng.IntN(10); {
	case r < 2:
		commit = false
	case r < 4 && len(evs) > 0:
		from := rng.IntN(len(evs))
		_, key := parseKeyed(evs[from].Body)
		for _, ev := range evs[from:] {
			if i, k := parseKeyed(ev.Body); k == key {
				retried[i] = time.Duration(rng.IntN(5)) * time.Millisecond
				if err := tx.Retry(ev, retried[i]); err != nil {
					t.Error(err)
				}
			}
		}
	}
	o.ending(id, evs, commit, retried)
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Error(err)
	}
	return len(evs)
}

// Four takers of a keyed group with RetryDelays, rolling back, retrying
// and committing at random: a key is never held by two transactions, each
// key's events are committed in put order, every event is committed once,
// and none is delivered before its due time.
func TestOrderRetryConcurrent(t *testing.T) {
	cfg := orderConfig(t)
	cfg.Capacity = 4000
	cfg.Groups[0].RetryDelays = []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	c := mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	const events, keys = 3000, 20
	o := &retryOrderCheck{holder: map[string]int{}, committed: map[string]int{}, taken: map[string]int{},
		pos: make([]int, events), commits: make([]int, events), notBefore: make([]time.Time, events), delays: cfg.Groups[0].RetryDelays}
	perKey := map[string]int{}
	for from := 0; from < events; from += 500 {
		ks := make([]string, 500)
		for j := range ks {
			if i := from + j; i%7 != 0 {
				ks[j] = "key" + strconv.Itoa(i%keys)
				o.pos[i] = perKey[ks[j]]
				perKey[ks[j]]++
			}
		}
		putKeyed(t, c, from, ks...)
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Minute)
	for id := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 32))
			for !t.Failed() && time.Now().Before(deadline) {
				o.mu.Lock()
				done := o.total == events
				o.mu.Unlock()
				if done {
					return
				}
				if o.step(t, g, id, rng) == 0 {
					time.Sleep(200 * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, n := range o.commits {
		if n != 1 {
			t.Fatalf("event %d committed %d times", i, n)
		}
	}
	if st := g.Stats(); st.Waiting != 0 || st.Parked != 0 || st.Queued != 0 {
		t.Fatalf("at the end: %+v", st)
	}
	t.Logf("skipped %d, rollbacks %d", g.Stats().Skipped, g.Stats().Rollbacks)
}
