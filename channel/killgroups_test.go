package channel

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// killGroups are the consumer groups of TestSIGKILLWithGroups' child, and
// how each takes: up to batch events per take transaction, then a pause
// (the slow group falls behind the producer and pins log files the fast
// one is done with); every rollbackEvery-th transaction is rolled back
// instead of committed (0 = none).
var killGroups = []struct {
	name          string
	batch         int
	pause         time.Duration
	rollbackEvery int
}{
	{name: "fast", batch: 17, rollbackEvery: 7},
	{name: "slow", batch: 10, pause: 2 * time.Millisecond},
}

// killGroupsConfig is killConfig with the groups of killGroups, and log
// files small enough that the slow group's takes move past some of them:
// a file is deleted only once neither group holds an event in it.
func killGroupsConfig(dir string) Config {
	cfg := killConfig(dir)
	cfg.MaxFileSize = 64 << 10
	for _, g := range killGroups {
		cfg.Groups = append(cfg.Groups, GroupConfig{Name: g.name})
	}
	return cfg
}

// killGroupsChild is the child side of TestSIGKILLWithGroups: a producer
// as in killChild ("P n": the put transaction holding events ..n
// committed) and a consumer per group, each printing "G name T a,b,..."
// before a take commit of those events and "G name C a,b,..." after it
// returned.
func killGroupsChild(dir string) {
	c, err := Open(killGroupsConfig(dir))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(3)
	}
	start, _ := strconv.Atoi(os.Getenv("FILECHANNEL_KILL_START"))
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	for _, kg := range killGroups {
		g, err := c.Group(kg.name)
		if err != nil {
			say("ERR %v", err)
			os.Exit(3)
		}
		go func() {
			for n := 1; ; n++ {
				tx, _ := g.Begin()
				var ids []int
				for range kg.batch {
					ev, ok, err := tx.Take()
					if err != nil || !ok {
						break
					}
					id, _ := strconv.Atoi(string(ev.Body))
					ids = append(ids, id)
				}
				if len(ids) == 0 || (kg.rollbackEvery > 0 && n%kg.rollbackEvery == 0) {
					tx.Rollback() // the events go back to this group's head only
					time.Sleep(time.Millisecond)
					continue
				}
				say("G %s T %s", kg.name, joinInts(ids))
				if err := tx.Commit(); err != nil {
					say("ERR take commit %s: %v", kg.name, err)
					continue
				}
				say("G %s C %s", kg.name, joinInts(ids))
				time.Sleep(kg.pause)
			}
		}()
	}
	for i := start; ; {
		tx, _ := c.Begin()
		for range 10 {
			if err := tx.Put(Event{Body: []byte(strconv.Itoa(i))}); err != nil {
				say("ERR put %v", err)
				os.Exit(3)
			}
			i++
		}
		if err := tx.Commit(); err != nil {
			say("ERR put commit %v", err)
			os.Exit(3)
		}
		say("P %d", i-1)
	}
}

// killGroupState is what the parent knows of one group from the child's
// output, over every round.
type killGroupState struct {
	mayBeTaken map[int]bool // a take commit was attempted
	taken      map[int]bool // a take commit returned
}

// TestSIGKILLWithGroups kills, at random moments, a child process that puts
// and takes from two consumer groups at different speeds, and checks after
// each kill, per group, that every event whose put commit was acknowledged
// is still queued for the group unless a take of it by that group may have
// committed, that no event whose take commit by the group was acknowledged
// came back to it, that the group's events are in put order without
// duplicates, and that a committed put reached every group or none.
func TestSIGKILLWithGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	cfg := killGroupsConfig(dir)
	acked := -1                // highest event id whose put commit returned
	ackedSet := map[int]bool{} // every event whose put commit returned
	state := map[string]*killGroupState{}
	for _, kg := range killGroups {
		state[kg.name] = &killGroupState{mayBeTaken: map[int]bool{}, taken: map[int]bool{}}
	}
	parse := func(l string) {
		if rest, ok := strings.CutPrefix(l, "G "); ok {
			name, line, _ := strings.Cut(rest, " ")
			s := state[name]
			if s == nil {
				t.Fatalf("child: a take from an unknown group: %s", l)
			}
			parseKillLine(t, line, &acked, ackedSet, s.mayBeTaken, s.taken)
			return
		}
		parseKillLine(t, l, &acked, ackedSet, nil, nil) // P or ERR
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	next := 0
	for round := range 6 {
		// A random moment: before, during or after a checkpoint (every
		// 30ms), a log roll, a take or put commit of either group.
		delay := 50*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
		env := []string{"FILECHANNEL_KILLGROUPS_CHILD=" + dir, "FILECHANNEL_KILL_START=" + strconv.Itoa(next)}
		killChildAfter(t, round, env, delay, parse, func() bool { return acked >= next+10 })
		if acked < next+10 {
			t.Fatalf("round %d: child acknowledged nothing", round)
		}
		next = acked + 1 + 1000 // ids of unacknowledged puts are never reused

		c := mustOpen(t, cfg)
		present := map[string]map[int]bool{}
		for _, kg := range killGroups {
			present[kg.name] = peekKillGroup(t, round, mustGroup(t, c, kg.name), state[kg.name])
		}
		for _, kg := range killGroups {
			name, s := kg.name, state[kg.name]
			for n := range ackedSet {
				if !present[name][n] && !s.mayBeTaken[n] {
					t.Fatalf("round %d: group %s lost acknowledged event %d (%d queued)", round, name, n, len(present[name]))
				}
			}
			// One commit reaches every group: an event queued for one
			// group was put, and the others have it or took it.
			for n := range present[name] {
				for _, other := range killGroups {
					if !present[other.name][n] && !state[other.name].mayBeTaken[n] {
						t.Fatalf("round %d: event %d is queued for group %s but neither queued for nor taken by group %s",
							round, n, name, other.name)
					}
				}
			}
		}
		st := c.Stats()
		t.Logf("round %d: killed after %v; %d acknowledged; fast: %d taken, %d queued; slow: %d taken, %d queued; %d log files (%s)",
			round, delay, len(ackedSet), len(state["fast"].taken), len(present["fast"]), len(state["slow"].taken), len(present["slow"]),
			st.LogFiles, st.RecoveredFrom)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// peekKillGroup reads every event queued for g without consuming it and
// checks them against what the child acknowledged: no duplicate, none whose
// take by g was acknowledged, in put order (one producer; a group's
// rollbacks and a crash's in-flight takes go back to its head in order).
func peekKillGroup(t *testing.T, round int, g *Group, s *killGroupState) map[int]bool {
	t.Helper()
	present := map[int]bool{}
	last := -1
	var open []*Transaction
	defer func() {
		// Last first: each rollback puts its events back at the head.
		for _, tx := range slices.Backward(open) {
			tx.Rollback()
		}
	}()
	for more := true; more; {
		tx, err := g.Begin()
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, tx)
		more = false
		for range 100 {
			ev, ok, err := tx.Take()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			more = true
			n, err := strconv.Atoi(string(ev.Body))
			if err != nil {
				t.Fatalf("round %d: group %s: event %q", round, g.Name(), ev.Body)
			}
			switch {
			case present[n]:
				t.Fatalf("round %d: group %s: event %d present twice", round, g.Name(), n)
			case s.taken[n]:
				t.Fatalf("round %d: group %s: event %d came back after its take commit returned", round, g.Name(), n)
			case n < last:
				t.Fatalf("round %d: group %s: event %d after %d, out of put order", round, g.Name(), n, last)
			}
			present[n], last = true, n
		}
	}
	return present
}
