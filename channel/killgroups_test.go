package channel

import (
	"math/rand/v2"
	"testing"
	"time"
)

// killGroups are the consumer groups of TestSIGKILLWithGroups' child
// (killWorker), and how each takes: the slow group falls behind the
// producer and pins log files the fast one is done with.
var killGroups = []killGroup{
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
	var names []string
	for _, kg := range killGroups {
		names = append(names, kg.name)
	}
	log := newKillLog(names...)
	state := log.groups
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	// A random moment: before, during or after a checkpoint (every 30ms), a
	// log roll, a take or put commit of either group.
	delay := func(int) time.Duration {
		return 50*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
	}
	killLoop(t, dir, "FILECHANNEL_KILLGROUPS_CHILD", log, 6, delay, func(round int, delay time.Duration) {
		c := mustOpen(t, cfg)
		present := map[string]map[int]bool{}
		for _, kg := range killGroups {
			present[kg.name] = peekKillGroup(t, round, mustGroup(t, c, kg.name), state[kg.name])
		}
		for _, kg := range killGroups {
			name, s := kg.name, state[kg.name]
			for n := range log.ackedSet {
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
			round, delay, len(log.ackedSet), len(state["fast"].taken), len(present["fast"]), len(state["slow"].taken), len(present["slow"]),
			st.LogFiles, st.RecoveredFrom)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// peekKillGroup reads every event queued for g without consuming it
// (peekKill) and checks them against what the child acknowledged: no
// duplicate, none whose take by g was acknowledged, in put order (one
// producer; a group's rollbacks and a crash's in-flight takes go back to
// its head in order).
func peekKillGroup(t *testing.T, round int, g *Group, s *killGroupState) map[int]bool {
	t.Helper()
	present := map[int]bool{}
	last := -1
	for _, n := range peekKill(t, round, g.Name(), g.Begin, s) {
		if n < last {
			t.Fatalf("round %d: group %s: event %d after %d, out of put order", round, g.Name(), n, last)
		}
		present[n], last = true, n
	}
	return present
}
