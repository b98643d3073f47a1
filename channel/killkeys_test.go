package channel

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// killKeysConfig is the channel of TestSIGKILLWithOrderKey (killConfig's):
// group "k" ordered by header "key", and take transactions large enough for the
// parent to read every queued event in one (a second one would find the
// keys the first holds and park their events).
func killKeysConfig(dir string) Config {
	cfg := killConfig(dir)
	cfg.TransactionCapacity = 50_000
	cfg.MaxFileSize = 128 << 10
	cfg.Groups = []GroupConfig{{Name: "k", OrderKey: "key"}}
	return cfg
}

// killKey is the order key of kill event n: k0 to k4, none for 1 in 6.
func killKey(n int) string {
	if n%6 == 5 {
		return ""
	}
	return "k" + strconv.Itoa(n*7%5)
}

// killKeysConsumers are the child's take transactions of group k, all at
// once: their batches interleave, so that each parks events of keys
// another holds; some roll back. They take more slowly than the child
// puts: events pile up, and some are in flight or parked at each kill.
var killKeysConsumers = []killGroup{
	{name: "k", batch: 7, rollbackEvery: 3, pause: 8 * time.Millisecond},
	{name: "k", batch: 4, rollbackEvery: 5, pause: 8 * time.Millisecond},
	{name: "k", batch: 11, rollbackEvery: 4, pause: 8 * time.Millisecond},
}

// killKeysChild is the child of TestSIGKILLWithOrderKey: killWorker's
// output ("P n", "G k T ...", "G k C ...") from one producer of keyed
// events (10 a transaction, a short pause between) and three consumers
// of group k; every 20 put commits it prints "S n", the events parked so
// far (GroupStats.Skipped).
func killKeysChild(dir string) {
	c := killOpen(killKeysConfig(dir))
	say := killSayer()
	g, err := c.Group("k")
	if err != nil {
		say("ERR %v", err)
		os.Exit(3)
	}
	for _, kg := range killKeysConsumers {
		go killConsume(kg, g.Begin, "G k ", say)
	}
	start, _ := strconv.Atoi(os.Getenv("FILECHANNEL_KILL_START"))
	headers := func(n int) map[string]string {
		if k := killKey(n); k != "" {
			return map[string]string{"key": k}
		}
		return nil
	}
	for i, n := start, 0; ; i, n = i+10, n+1 {
		killPut(c, say, i, headers)
		if n%20 == 0 {
			say("S %d", g.Stats().Skipped)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestSIGKILLWithOrderKey kills, at random moments, a child whose three
// take transactions of a keyed group interleave (parking events behind
// each other's keys, committing and rolling back) while it puts, and
// checks: while it ran, each key's takes it was about to commit came in
// put order; after each kill, every event whose put commit was
// acknowledged is queued unless its take may have committed, none whose
// take commit was acknowledged came back, none twice, and a Take
// delivers each key's events in put order.
func TestSIGKILLWithOrderKey(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	cfg := killKeysConfig(dir)
	log := newKillLog("k")
	st := log.groups["k"]
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	parked := 0
	next := 0
	for round := range 5 {
		d := 100*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
		env := []string{"FILECHANNEL_KILLKEYS_CHILD=" + dir, "FILECHANNEL_KILL_START=" + strconv.Itoa(next)}
		last := map[string]int{} // per key, the last event a take was about to commit, this round
		parse := func(l string) {
			log.parse(t, l)
			if rest, ok := strings.CutPrefix(l, "G k T "); ok {
				checkKillKeyOrder(t, round, "the child's takes", last, rest)
			} else if s, ok := strings.CutPrefix(l, "S "); ok {
				n, _ := strconv.Atoi(s)
				parked = max(parked, n)
			}
		}
		killChildAfter(t, round, env, d, parse, func() bool { return log.acked >= next+10 })
		next = log.acked + 1 + 1000 // ids of unacknowledged puts are never reused
		c := mustOpen(t, cfg)
		present := peekKillKeys(t, round, mustGroup(t, c, "k"), st)
		for n := range log.ackedSet {
			if !present[n] && !st.mayBeTaken[n] {
				t.Fatalf("round %d: acknowledged event %d lost (%d queued)", round, n, len(present))
			}
		}
		t.Logf("round %d: killed after %v; %d acknowledged, %d taken, %d queued (%s)", round, d, len(log.ackedSet), len(st.taken),
			len(present), c.Stats().RecoveredFrom)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("events parked by the child: at least %d in one round", parked)
}

// checkKillKeyOrder checks that ids, a comma-separated list of events,
// come after those seen so far (last, by key) in each key's put order.
func checkKillKeyOrder(t *testing.T, round int, what string, last map[string]int, ids string) {
	t.Helper()
	for _, s := range strings.Split(ids, ",") {
		n, _ := strconv.Atoi(s)
		k := killKey(n)
		if k == "" {
			continue
		}
		if prev, ok := last[k]; ok && n <= prev {
			t.Fatalf("round %d: %s: key %s's event %d after %d", round, what, k, n, prev)
		}
		last[k] = n
	}
}

// peekKillKeys takes every event of g with one transaction (takeAll) and
// rolls it back, checking them (peekKill's checks and each key's order), and
// returns them.
func peekKillKeys(t *testing.T, round int, g *Group, st *killGroupState) map[int]bool {
	t.Helper()
	tx := mustBegin(t, g)
	defer tx.Rollback()
	present := map[int]bool{}
	var ids []string
	for _, b := range takeAll(t, tx) {
		n, err := strconv.Atoi(b)
		switch {
		case err != nil:
			t.Fatalf("round %d: event %q", round, b)
		case present[n]:
			t.Fatalf("round %d: event %d present twice", round, n)
		case st.taken[n]:
			t.Fatalf("round %d: event %d came back after its take commit returned", round, n)
		}
		present[n] = true
		ids = append(ids, strconv.Itoa(n))
	}
	if len(ids) > 0 {
		checkKillKeyOrder(t, round, "after the kill", map[string]int{}, strings.Join(ids, ","))
	}
	return present
}
