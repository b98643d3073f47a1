package channel

import (
	"errors"
	"fmt"
	"testing"
	"time"
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
	if r.model.receives != nil {
		r.cfg.Groups[2].Filter = crashTagFilter // crashFiltered
	}
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
	resets bool // some steps reset a group (ResetGroup)
	// earliest: half the resets are to Earliest (the channel retains
	// every log file: Config.Retention), the others to Latest.
	earliest bool
	nreset   *int // resets done
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

// reset resets a random static group to Latest: while ResetGroup runs,
// each event the group holds may be gone after a crash (takeCommitting);
// once it returns, all are (takeCommitted). An open take transaction of
// the group is fenced: its Commit fails, and it ends without the model
// changing (the reset decided).
func (w groupsWorkload) reset(s *crashSession) error {
	g := w.rng.IntN(len(crashGroups) - 1)
	m := &w.r.model
	all := make([]int, 0, len(m.states))
	m.mu.Lock()
	for id := range m.states {
		all = append(all, id)
	}
	m.mu.Unlock()
	if w.earliest && w.rng.IntN(2) == 0 {
		if err := w.resetEarliest(s.c, g, all); err != nil {
			return err
		}
	} else {
		held := w.heldBy(g, all)
		m.setTakeG(g, held, takeCommitting)
		if _, err := s.c.ResetGroup(crashGroups[g], Latest()); err != nil {
			return err
		}
		m.setTakeG(g, held, takeCommitted)
	}
	w.r.force.Store(6) // a crash right after it keeps the reset
	if w.nreset != nil {
		*w.nreset++
	}
	if s.openTake != nil && s.openGroup == g {
		if err := s.openTake.Commit(); !errors.Is(err, ErrGroupReset) {
			return fmt.Errorf("commit of a take transaction open across a reset: %v, want ErrGroupReset", err)
		}
		s.openTake, s.openIDs = nil, nil
	}
	return nil
}

// resetEarliest resets group g to Earliest: every committed event comes
// back to it, in commit order. While ResetGroup runs, those it had taken
// may be back or not after a crash (takeCommitting); once it returns, all
// are queued (takeNone, and no longer maybe taken: the reset queued them
// again whatever an earlier failed take commit left on disk).
func (w groupsWorkload) resetEarliest(c *FileChannel, g int, all []int) error {
	m := &w.r.model
	var committed, gone []int
	m.mu.Lock()
	for _, id := range all {
		if m.states[id]&0x0f != putCommitted || g > 0 && m.receives != nil && !m.receives(g, id) {
			continue // not committed, or not the group's (its filter)
		}
		committed = append(committed, id)
		st := m.states[id]
		if g > 0 {
			st = m.groupTakes[g-1][id]
		}
		if st&takeMask == takeCommitted {
			gone = append(gone, id)
		}
	}
	m.mu.Unlock()
	m.setTakeG(g, gone, takeCommitting)
	if _, err := c.ResetGroup(crashGroups[g], Earliest()); err != nil {
		return err
	}
	m.mu.Lock()
	for _, id := range committed {
		if g == 0 {
			m.states[id] &^= takeMask | maybeTaken
		} else {
			m.groupTakes[g-1][id] = takeNone
		}
	}
	m.mu.Unlock()
	return nil
}

// heldBy returns the events of ids that group g may hold: not taken for
// good there.
func (w groupsWorkload) heldBy(g int, ids []int) []int {
	m := &w.r.model
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for _, id := range ids {
		st := m.states[id]
		if g > 0 {
			st = st&0x0f | m.groupTakes[g-1][id]&^0x0f
		}
		if st&takeMask != takeCommitted {
			out = append(out, id)
		}
	}
	return out
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
	s, err := w.session(tolerant)
	if err != nil {
		return err
	}
	defer s.close(&err)
	for range steps {
		switch x := w.rng.IntN(100); {
		case x < 38 && fullest(s.c) < 150:
			if s.stop(w.put(s.c, 0, 1+w.rng.IntN(8), w.rng.IntN(6) == 0)) {
				return s.err
			}
		case x < 66:
			g := w.rng.IntN(len(crashGroups))
			if s.stop(w.take(s.c, g, 1+w.rng.IntN(10), w.rng.IntN(5) != 0)) {
				return s.err
			}
		case x < 74:
			if s.openTake != nil {
				if s.stop(w.endTakeG(s.openTake, s.openGroup, s.openIDs, w.rng.IntN(2) == 0)) {
					return s.err
				}
				s.openTake, s.openIDs = nil, nil
				continue
			}
			s.openGroup = w.rng.IntN(len(crashGroups) - 1) // a static group
			grp, gerr := s.c.Group(crashGroups[s.openGroup])
			if s.stop(gerr) {
				return s.err
			} else if gerr != nil {
				continue
			}
			tx, berr := grp.Begin()
			if s.stop(berr) {
				return s.err
			} else if berr != nil {
				continue
			}
			ids, terr := w.takeIDsG(tx, s.openGroup, 1+w.rng.IntN(4))
			if s.stop(terr) {
				return s.err
			}
			s.openTake, s.openIDs = tx, ids
		case w.resets && x < 79:
			if s.stop(w.reset(s)) {
				return s.err
			}
		case x < 80:
			if s.stop(w.toggleDyn(s.c)) {
				return s.err
			}
		case x < 92:
			if s.stop(s.c.Checkpoint()) {
				return s.err
			}
		default:
			if s.restart() {
				return s.err
			}
		}
	}
	return nil
}

func TestCrashStateEnumerationGroups(t *testing.T) {
	t.Parallel() // the long crash tests run side by side, after the package's other tests
	runCrashEnumeration(t, []crashCase{
		{name: "groups/1dir", dirs: 1, steps: 40, seeds: 4, every: 4, run: crashGroupsDriver},
		{name: "groups/2dirs+backup", dirs: 2, backup: true, steps: 20, seeds: 3, every: 8, run: crashGroupsDriver},
		{name: "groups+resets/2dirs", dirs: 2, steps: 120, seeds: 3, every: 8, run: crashGroupsResetDriver},
		{name: "groups+resets+retention/1dir", dirs: 1, steps: 100, seeds: 3, every: 8, run: crashGroupsResetEarliestDriver},
		{name: "groups+filter/2dirs", dirs: 2, steps: 40, seeds: 3, every: 4, run: crashFiltered(crashGroupsDriver)},
		{name: "groups+filter+resets+retention/1dir", dirs: 1, steps: 80, seeds: 3, every: 8,
			run: crashFiltered(crashGroupsResetEarliestDriver)},
	})
}

// crashTagFilter is the filter of group "b" in crashFiltered's runs: the
// events whose tag (crashHeaders) is x or y.
var crashTagFilter = TagFilter("tag", "x", "y")

// crashFiltered is d, a groups driver, with group "b" filtered
// (crashTagFilter): the model expects b to hold exactly the matching
// committed events it has not taken, after every crash, and a reset of b
// to Earliest to queue the matching ones only.
func crashFiltered(d crashDriver) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		r.model.receives = func(g, id int) bool {
			return crashGroups[g] != "b" || crashHeaders(id)["tag"] != "z"
		}
		return d(r, seed, steps) // groupsCrashRun gives b its filter

	}
}

// crashGroupsResetEarliestDriver is crashGroupsResetDriver with every log
// file retained (Config.Retention), and half the resets to Earliest.
func crashGroupsResetEarliestDriver(r *crashRun, seed uint64, steps int) (string, error) {
	groupsCrashRun(r)
	r.cfg.resetChunk = 3
	r.cfg.Retention = Retention{MaxAge: 1000 * time.Hour}
	n := 0
	err := groupsWorkload{crashWorkload: newCrashWorkload(r, seed, 10), resets: true, earliest: true, nreset: &n}.run(steps, false)
	return fmt.Sprintf("; %d resets", n), err
}

// crashGroupsResetDriver is the groups workload with resets, each writing
// its takes and moves in records of 3 pointers (several writes).
func crashGroupsResetDriver(r *crashRun, seed uint64, steps int) (string, error) {
	groupsCrashRun(r)
	r.cfg.resetChunk = 3
	n := 0
	err := groupsWorkload{crashWorkload: newCrashWorkload(r, seed, 9), resets: true, nreset: &n}.run(steps, false)
	return fmt.Sprintf("; %d resets", n), err
}

// crashGroupsDriver is the groups workload (groupsWorkload.run).
func crashGroupsDriver(r *crashRun, seed uint64, steps int) (string, error) {
	groupsCrashRun(r)
	return "", groupsWorkload{crashWorkload: newCrashWorkload(r, seed, 7)}.run(steps, false)
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
		return groupsWorkload{crashWorkload: newCrashWorkload(r, 11, 42)}.run(steps, true)
	}, func(r *crashRun) { groupsCrashRun(r) })
}

// TestFaultAtEveryOperationGroupResets is TestFaultAtEveryOperationGroups
// with resets among the steps: a failed write or sync in the middle of a
// ResetGroup leaves the group as before it or as after it.
func TestFaultAtEveryOperationGroupResets(t *testing.T) {
	t.Parallel() // the long crash tests run side by side, after the package's other tests
	steps := 14
	if crashLong() {
		steps = 80
	}
	faultAtEveryOperation(t, 4, func(r *crashRun) error {
		return groupsWorkload{crashWorkload: newCrashWorkload(r, 12, 43), resets: true}.run(steps, true)
	}, func(r *crashRun) { groupsCrashRun(r); r.cfg.resetChunk = 3 })
}
