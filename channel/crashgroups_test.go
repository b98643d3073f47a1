package channel

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
)

// The crash-state enumeration and the fault-at-every-operation test with
// consumer groups: the unnamed group and two named ones from Config, and a
// group the workload adds and removes at run time. Takes and rollbacks
// interleave across the groups; the model checks every group on its own.

// States of the dynamic group in the model.
const (
	dynAbsent   = 0 // RemoveGroup returned (or never added)
	dynAdding   = 1 // AddGroup called, not returned: either after a crash
	dynPresent  = 2 // AddGroup returned
	dynRemoving = 3 // RemoveGroup called, not returned
)

// crashGroups are the groups of the groups workload, in model order; the
// last is the dynamic one.
var crashGroups = []string{"", "a", "b", "late"}

// setTakeG is setTake for group g (an index into crashGroups).
func (m *crashModel) setTakeG(g int, ids []int, phase byte) {
	if g == 0 {
		m.setTake(ids, phase)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.groupTakes[g-1][id] = m.groupTakes[g-1][id]&maybeTaken | phase
	}
}

// setDyn sets the dynamic group's state; once added, every event already
// there is not the group's (committed before it existed).
func (m *crashModel) setDyn(st byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st == dynAdding {
		d := m.groupTakes[len(m.groupTakes)-1]
		for i := range d {
			d[i] = takeCommitted
		}
	}
	m.dyn = st
}

// groupsCrashRun is a crashRun over the groups configuration.
func groupsCrashRun(r *crashRun) *crashRun {
	r.cfg.Groups = []GroupConfig{{}, {Name: "a"}, {Name: "b", Capacity: 200}}
	r.groups, r.dynamic = crashGroups, true
	r.model.groupTakes = make([][]byte, len(crashGroups)-1)
	return r
}

// groupsWorkload drives the groups configuration: puts (c.Begin, reaching
// every group), takes from a random group committed or rolled back, a take
// held open across steps, checkpoints, restarts, and the dynamic group
// added and removed.
type groupsWorkload struct {
	*crashWorkload
}

// take runs one take transaction on group g of c.
func (w groupsWorkload) take(c *FileChannel, g int, k int, commit bool) error {
	grp, err := c.Group(crashGroups[g])
	if err != nil {
		return nil // the dynamic group is not there
	}
	tx, err := grp.Begin()
	if err != nil {
		return err
	}
	ids, err := w.takeIDsG(tx, g, k)
	if err != nil {
		tx.Rollback()
		w.r.model.setTakeG(g, ids, takeNone)
		if errors.Is(err, ErrNoGroup) {
			return nil
		}
		return err
	}
	return w.endTakeG(tx, g, ids, commit)
}

func (w groupsWorkload) takeIDsG(tx *Transaction, g, k int) ([]int, error) {
	var ids []int
	for range k {
		ev, ok, err := tx.Take()
		if err != nil || !ok {
			return ids, err
		}
		id, _, _, _ := parseEventID(ev.Body)
		ids = append(ids, id)
		w.r.model.setTakeG(g, []int{id}, takeOpen)
	}
	return ids, nil
}

func (w groupsWorkload) endTakeG(tx *Transaction, g int, ids []int, commit bool) error {
	m := &w.r.model
	if !commit {
		err := tx.Rollback()
		m.setTakeG(g, ids, takeNone)
		return err
	}
	m.setTakeG(g, ids, takeCommitting)
	if err := tx.Commit(); err != nil {
		m.setTakeG(g, ids, takeNone|maybeTaken)
		return err
	}
	m.setTakeG(g, ids, takeCommitted)
	return nil
}

// toggleDyn adds the dynamic group if it is absent, else removes it.
func (w groupsWorkload) toggleDyn(c *FileChannel) error {
	m := &w.r.model
	m.mu.Lock()
	present := m.dyn == dynPresent
	m.mu.Unlock()
	name := crashGroups[len(crashGroups)-1]
	if !present {
		m.setDyn(dynAdding)
		if _, err := c.AddGroup(GroupConfig{Name: name, Capacity: 200}); err != nil {
			return err
		}
		m.setDyn(dynPresent)
		return nil
	}
	m.setDyn(dynRemoving)
	if err := c.RemoveGroup(name); err != nil {
		return err
	}
	m.setDyn(dynAbsent)
	return nil
}

// fullest returns the largest queue of c's Block groups.
func fullest(c *FileChannel) int {
	n := 0
	for _, g := range c.currentGroups() {
		if g.cfg.WhenFull == Block {
			n = max(n, g.gate.inUse())
		}
	}
	return n
}

// run is the serial workload of the groups configuration (see serialOn
// for tolerant).
func (w groupsWorkload) run(steps int, tolerant bool) (err error) {
	cfg := w.r.cfg
	c, err := Open(cfg)
	if tolerant && err != nil {
		c, err = Open(cfg)
	}
	if err != nil {
		return err
	}
	defer func() {
		if c == nil {
			return
		}
		if cerr := c.Close(); !tolerant && err == nil {
			err = cerr
		}
	}()
	var openTake *Transaction
	var openIDs []int
	openGroup := 0
	stop := func(e error) bool {
		if e != nil && !tolerant {
			err = e
			return true
		}
		return false
	}
	for range steps {
		switch x := w.rng.IntN(100); {
		case x < 38 && fullest(c) < 150:
			if stop(w.put(c, 0, 1+w.rng.IntN(8), w.rng.IntN(6) == 0)) {
				return err
			}
		case x < 66:
			g := w.rng.IntN(len(crashGroups))
			if stop(w.take(c, g, 1+w.rng.IntN(10), w.rng.IntN(5) != 0)) {
				return err
			}
		case x < 74:
			if openTake != nil {
				if stop(w.endTakeG(openTake, openGroup, openIDs, w.rng.IntN(2) == 0)) {
					return err
				}
				openTake, openIDs = nil, nil
				continue
			}
			openGroup = w.rng.IntN(len(crashGroups) - 1) // a static group
			grp, gerr := c.Group(crashGroups[openGroup])
			if stop(gerr) {
				return err
			} else if gerr != nil {
				continue
			}
			tx, berr := grp.Begin()
			if stop(berr) {
				return err
			} else if berr != nil {
				continue
			}
			ids, terr := w.takeIDsG(tx, openGroup, 1+w.rng.IntN(4))
			if stop(terr) {
				return err
			}
			openTake, openIDs = tx, ids
		case x < 80:
			if stop(w.toggleDyn(c)) {
				return err
			}
		case x < 92:
			if stop(c.Checkpoint()) {
				return err
			}
		default:
			if stop(c.Close()) {
				return err
			}
			if openTake != nil {
				w.r.model.setTakeG(openGroup, openIDs, takeNone)
				openTake, openIDs = nil, nil
			}
			oerr := error(nil)
			if c, oerr = Open(cfg); tolerant && oerr != nil {
				c, oerr = Open(cfg)
			}
			if oerr != nil {
				return oerr
			}
		}
	}
	return nil
}

func TestCrashStateEnumerationGroups(t *testing.T) {
	t.Parallel() // the long crash tests run side by side, after the package's other tests
	type config struct {
		name   string
		dirs   int
		backup bool
		steps  int
		seeds  int
		every  int64 // short mode: check 1 crash point in every, and each after a log fsync (crashRun.sample)
	}
	configs := []config{
		{name: "groups/1dir", dirs: 1, steps: 40, seeds: 4, every: 4},
		{name: "groups/2dirs+backup", dirs: 2, backup: true, steps: 20, seeds: 3, every: 8},
	}
	var total atomic.Int64
	for _, cf := range configs {
		seeds, steps := 1, cf.steps
		if crashLong() {
			seeds, steps = cf.seeds, 4*cf.steps
		}
		for seed := range seeds {
			name := fmt.Sprintf("%s/seed=%d", cf.name, seed)
			t.Run(name, func(t *testing.T) {
				r := groupsCrashRun(newCrashRun(t, name, cf.dirs, cf.backup, uint64(seed)))
				r.sample(cf.every, true)
				w := groupsWorkload{&crashWorkload{r: r, rng: rand.New(rand.NewPCG(uint64(seed), 7)), n: map[int]int{}}}
				err := w.run(steps, false)
				n := r.finish()
				if err != nil {
					t.Fatalf("workload: %v", err)
				}
				total.Add(n)
				t.Logf("%d crash states checked", n)
			})
		}
	}
	t.Logf("crash states checked in all: %d (FC_CRASH_LONG=%q)", total.Load(), os.Getenv("FC_CRASH_LONG"))
}

// TestFaultAtEveryOperationGroups is TestFaultAtEveryOperation over the
// groups workload.
func TestFaultAtEveryOperationGroups(t *testing.T) {
	t.Parallel() // the long crash tests run side by side, after the package's other tests
	steps := 18
	if crashLong() {
		steps = 100
	}
	faultAtEveryOperation(t, 4, func(r *crashRun) error {
		w := groupsWorkload{&crashWorkload{r: r, rng: rand.New(rand.NewPCG(11, 42)), n: map[int]int{}}}
		return w.run(steps, true)
	}, func(r *crashRun) { groupsCrashRun(r) })
}
