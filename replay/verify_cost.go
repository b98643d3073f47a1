package replay

import (
	"math"
	"slices"

	"github.com/flumego/filechannel/eventqueue"
)

// What damage costs (Problem.Cost). Verify charges each committed event
// that a recovery would not deliver to the damage that takes it:
//
//   - a queued event (in the recovered ring, or returned from a take in
//     flight) whose record lies in a damaged range of its log file: a
//     region skipped in the middle, a torn or truncated tail, a file whose
//     header names another file. A take skips it as damaged.
//   - each event of a committed put transaction whose put record damage
//     took (Result.Damaged; its intact events are delivered), charged to
//     the damage the replay blamed.
//   - a queued pointer that reads back as something else than a put
//     (bad-pointer), one event each.
//
// Events of take transactions whose take records were damaged are charged
// as Redelivered: they stay queued.
//
// Two costs are computed: for the recovery the channel would do now
// (Lost), and for a full replay (LostFullReplay), which is what a repair or
// a rebuild does. The full replay's losses are the events the checkpoint
// (when it is used) or the damaged transactions say were committed and
// that it does not deliver; the ones no damaged range explains are charged
// to checkpoint-disagrees (their commit record was lost, or the checkpoint
// is wrong).

// damageRange is a damaged byte range of a log file and the problem that
// names it.
type damageRange struct {
	start, end int64 // end is math.MaxInt64 for a tail or a whole file
	problem    int   // index in Report.Problems, -1 when only counted
}

// placeKey names a damaged place: a log path and the offset where the
// damage starts.
type placeKey struct {
	path string
	off  int64
}

// addRange records that [start, end) of the log file at path is damaged,
// named by problem idx.
func (v *verifier) addRange(path string, start, end int64, idx int) {
	if v.ranges == nil {
		v.ranges = map[string][]damageRange{}
		v.places = map[placeKey]int{}
	}
	v.ranges[path] = append(v.ranges[path], damageRange{start: start, end: end, problem: idx})
	v.places[placeKey{path, start}] = idx
}

// addTail records the damaged tail of path from off.
func (v *verifier) addTail(path string, off int64, idx int) {
	v.addRange(path, off, math.MaxInt64, idx)
}

// rangeOf returns the damaged range p's record lies in, if any.
func (v *verifier) rangeOf(p eventqueue.Pointer) (damageRange, bool) {
	l := v.logs[p.FileID()]
	if l == nil {
		return damageRange{}, false
	}
	off := int64(p.Offset())
	for _, r := range v.ranges[l.Path] {
		if off >= r.start && off < r.end {
			return r, true
		}
	}
	return damageRange{}, false
}

// causeProblem returns the index of the problem naming the damage c, or -1:
// padding (repaired before), an unknown place, or a problem only counted.
func (v *verifier) causeProblem(c Place) int {
	if c.Padding || c.Offset < 0 {
		return -1
	}
	if idx, ok := v.places[placeKey{c.File, c.Offset}]; ok {
		return idx
	}
	return -1
}

// charge adds c to problem idx (if listed) and to the report's total.
func (v *verifier) charge(idx int, c Cost) {
	if idx >= 0 {
		v.rep.Problems[idx].Cost.add(c)
	}
	v.rep.Cost.add(c)
}

// costs charges the damage for both recoveries. recovered is every
// group's queue as the channel would recover it (ring plus returned takes)
// and recRes its replay's result (nil when that replay failed); replayed
// and fullRes are a full replay's (nil when it failed; v.replayed holds
// its events). When the channel would recover by a full replay, both are
// the same. An event queued for several groups is charged once.
func (v *verifier) costs(recovered []groupQueue, recRes *Result, replayed []groupQueue, fullRes *Result) {
	n := 0
	for _, g := range recovered {
		n += len(g.ptrs)
	}
	known := make(map[eventqueue.Pointer]bool, n)
	for _, g := range recovered {
		for _, p := range g.ptrs {
			if known[p] {
				continue
			}
			known[p] = true
			if r, ok := v.rangeOf(p); ok {
				v.charge(r.problem, Cost{Lost: 1})
			}
		}
	}
	if recRes != nil {
		for _, t := range recRes.Damaged {
			v.charge(v.causeProblem(t.Cause), Cost{Lost: t.Lost(), Redelivered: t.Redelivered()})
		}
	}
	if fullRes == nil {
		return
	}
	got := map[uint32]map[eventqueue.Pointer]bool{} // each group's full replay
	for _, g := range replayed {
		if len(replayed) == 1 {
			got[g.info.ID] = v.replayed // the same set
			break
		}
		set := make(map[eventqueue.Pointer]bool, len(g.ptrs))
		for _, p := range g.ptrs {
			set[p] = true
		}
		got[g.info.ID] = set
	}
	// Queued events the full replay does not deliver to their group, when
	// damage explains it.
	charged := map[eventqueue.Pointer]bool{}
	for _, g := range recovered {
		for _, p := range g.ptrs {
			if got[g.info.ID][p] || charged[p] {
				continue
			}
			if r, ok := v.rangeOf(p); ok {
				v.charge(r.problem, Cost{LostFullReplay: 1})
				charged[p] = true
			} else if idx, ok := v.disagrees[g.info.ID]; ok {
				// Readable, queued, and not in the full replay: its commit
				// record is gone, or the checkpoint is wrong.
				v.charge(idx, Cost{LostFullReplay: 1})
				charged[p] = true
			}
		}
	}
	afterCkpt := map[uint64]bool{} // put transactions the recovery replay found damaged too
	if recRes != nil {
		for _, t := range recRes.Damaged {
			afterCkpt[t.TxID] = t.Put
		}
	}
	for _, t := range fullRes.Damaged {
		if !t.Put {
			continue
		}
		// The events it could not read (its intact ones are delivered).
		// Of a transaction the checkpoint holds, those are queued events
		// in damaged ranges, charged above; of one written after it, the
		// recovery lost them too.
		if afterCkpt[t.TxID] || !slices.ContainsFunc(t.found, func(p eventqueue.Pointer) bool { return known[p] }) {
			v.charge(v.causeProblem(t.Cause), Cost{LostFullReplay: t.Lost()})
		}
	}
}
