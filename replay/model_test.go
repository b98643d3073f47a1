package replay

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
)

// The property test runs a random history of put and take transactions
// against a model of the channel (the live queue as a slice), writing the
// log records the channel would write, then checks that a full replay, and
// a replay from a checkpoint taken at a random point of the history, rebuild
// the queue the replay contract promises:
//
//	full:       committed puts in commit order − committed takes
//	checkpoint: (takes in flight at W) ++ ring at W ++ puts committed after W,
//	            each − the takes committed after W
//
// Reproduce a failure or run longer with e.g.
//
//	go test -run Model -rapid.checks=20000 -rapid.steps=200 ./replay/

func TestReplayMatchesModel(t *testing.T) {
	rapid.Check(t, checkHistory)
}

// modelTx is an open transaction of the modelled channel.
type modelTx struct {
	id       uint64
	take     bool
	dir      int
	buffered int      // put: events not written yet (the channel's buffer)
	written  []ptr    // put: put records written so far; take: events taken, in order
	woids    []uint64 // put: write-order ids of written
	seq      int      // order of the first pointer (the channel's Inflight order); 0 = none
}

// commitDone is a committed transaction: its commit record's write-order id
// and its events.
type commitDone struct {
	woid uint64
	ptrs []ptr
}

// cutState is the model at the checkpoint's write-order id W.
type cutState struct {
	w         uint64
	st        *checkpoint.State
	ring      []ptr
	open      map[uint64]bool // transactions open at W
	records   int64           // records written up to W
	rollbacks int64           // rollback records written up to W
}

type history struct {
	l        *logSet
	cur      []uint32 // the file each dir writes to
	nextFile uint32
	lastTx   uint64
	seq      int

	queue       []ptr // the live queue
	open        map[uint64]*modelTx
	putCommits  []commitDone
	takeCommits []commitDone
	uncommitted []*modelTx // put transactions that ended without a commit
	completes   map[uint32]map[uint32]struct{}
	records     int64
	rollbacks   int64
	maxTx       [2]uint64 // largest tx id in a record before / after the cut
	cut         *cutState
}

func checkHistory(t *rapid.T) {
	ndirs := rapid.IntRange(1, 3).Draw(t, "dirs")
	h := &history{l: newLogSet(t, ndirs), open: map[uint64]*modelTx{}, completes: map[uint32]map[uint32]struct{}{}}
	for d := range ndirs {
		h.roll(d)
	}
	n := rapid.IntRange(20, 150).Draw(t, "steps")
	cut := n/2 + rapid.IntRange(-n/2, n-n/2).Draw(t, "cut from the middle")
	for i := 0; ; i++ {
		if i == cut {
			h.snapshot()
		}
		if i == n {
			break
		}
		h.step(t)
	}
	for _, tx := range h.open {
		if !tx.take {
			h.uncommitted = append(h.uncommitted, tx)
		}
	}

	if ndirs > 1 && rapid.Bool().Draw(t, "move files between dirs") {
		h.moveFiles(t)
	}

	full, ckpt := h.expectFull(), h.expectCheckpoint()
	capacity := max(len(h.cut.ring), len(full.queue), len(ckpt.queue), 1) + rapid.IntRange(0, 3).Draw(t, "spare capacity")

	res, q := h.l.mustRun(nil, newQueue(t, capacity, rapid.IntRange(0, capacity-1).Draw(t, "empty head"), nil))
	wantQueue(t, q, full.queue)
	h.checkResult(t, "full replay", res, full)

	res, q = h.l.mustRun(h.cut.st, newQueue(t, capacity, rapid.IntRange(0, capacity-1).Draw(t, "ring head"), h.cut.ring))
	wantQueue(t, q, ckpt.queue)
	h.checkResult(t, "replay from checkpoint", res, ckpt)
}

// moveFiles moves log files to other data dirs, as an operator emptying a
// dir would: replay merges by write-order id whatever dir holds a file, so
// a dir's files need not be in the order the dir wrote them.
func (h *history) moveFiles(t *rapid.T) {
	for id := uint32(1); id <= h.nextFile; id++ {
		from := h.l.path(id)
		to := filepath.Join(rapid.SampledFrom(h.l.dirs).Draw(t, "new dir"), filepath.Base(from))
		if to == from {
			continue
		}
		if err := h.l.fs.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
}

// Actions of a history step.
const (
	actPut = iota
	actSpill
	actCommitPuts
	actRollbackPuts
	actTake
	actCommitTakes
	actRollbackTakes
	actRoll
)

// actions weighs the actions: enough puts and commits to keep events queued.
var actions = []int{
	actPut, actPut, actPut, actSpill, actCommitPuts, actCommitPuts, actRollbackPuts,
	actTake, actTake, actCommitTakes, actRollbackTakes, actRoll,
}

func (h *history) step(t *rapid.T) {
	switch rapid.SampledFrom(actions).Draw(t, "action") {
	case actPut:
		tx := h.pickOrBegin(t, false)
		tx.buffered += rapid.IntRange(1, 3).Draw(t, "puts")
	case actSpill:
		if tx := h.pick(t, false); tx != nil {
			h.spill(tx)
		}
	case actCommitPuts:
		if tx := h.pick(t, false); tx != nil {
			h.commitPuts(tx)
		}
	case actRollbackPuts:
		if tx := h.pick(t, false); tx != nil {
			h.rollbackPuts(t, tx)
		}
	case actTake:
		tx := h.pickOrBegin(t, true)
		for n := rapid.IntRange(1, 3).Draw(t, "takes"); n > 0 && len(h.queue) > 0; n-- {
			h.addPointer(tx, h.queue[0])
			h.queue = h.queue[1:]
		}
	case actCommitTakes:
		if tx := h.pick(t, true); tx != nil {
			h.commitTakes(tx)
		}
	case actRollbackTakes:
		if tx := h.pick(t, true); tx != nil {
			h.rollbackTakes(tx)
		}
	case actRoll:
		h.roll(rapid.IntRange(0, len(h.cur)-1).Draw(t, "roll dir"))
	}
}

// pickOrBegin draws an open transaction of the kind, or begins one.
func (h *history) pickOrBegin(t *rapid.T, take bool) *modelTx {
	if rapid.IntRange(0, 3).Draw(t, "new tx") == 0 {
		return h.begin(t, take)
	}
	if tx := h.pick(t, take); tx != nil {
		return tx
	}
	return h.begin(t, take)
}

func (h *history) begin(t *rapid.T, take bool) *modelTx {
	h.lastTx++
	tx := &modelTx{id: h.lastTx, take: take, dir: rapid.IntRange(0, len(h.cur)-1).Draw(t, "tx dir")}
	h.open[tx.id] = tx
	return tx
}

// pick draws an open transaction of the kind, or returns nil if there is
// none.
func (h *history) pick(t *rapid.T, take bool) *modelTx {
	var ids []uint64
	for id, tx := range h.open {
		if tx.take == take {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return h.open[rapid.SampledFrom(ids).Draw(t, "tx")]
}

func (h *history) roll(dir int) {
	h.nextFile++
	h.l.create(dir, h.nextFile)
	if dir < len(h.cur) {
		h.cur[dir] = h.nextFile
	} else {
		h.cur = append(h.cur, h.nextFile)
	}
}

// wrote accounts for a record of tx just written.
func (h *history) wrote(tx uint64) {
	h.records++
	phase := 0
	if h.cut != nil {
		phase = 1
	}
	h.maxTx[phase] = max(h.maxTx[phase], tx)
}

func (h *history) addPointer(tx *modelTx, p ptr) {
	if tx.seq == 0 {
		h.seq++
		tx.seq = h.seq
	}
	tx.written = append(tx.written, p)
}

// spill writes the buffered puts of tx.
func (h *history) spill(tx *modelTx) {
	for ; tx.buffered > 0; tx.buffered-- {
		h.addPointer(tx, h.l.put(h.cur[tx.dir], tx.id))
		tx.woids = append(tx.woids, h.l.woid)
		h.wrote(tx.id)
	}
}

func (h *history) commitPuts(tx *modelTx) {
	delete(h.open, tx.id)
	if tx.buffered+len(tx.written) == 0 {
		return // the channel writes nothing
	}
	h.spill(tx)
	f := h.cur[tx.dir]
	h.l.commitPut(f, tx.id)
	h.wrote(tx.id)
	for _, p := range tx.written {
		if p.FileID() != f {
			addCompletes(h.completes, f, p.FileID()) // puts spilled to older files
		}
	}
	h.queue = append(h.queue, tx.written...)
	h.putCommits = append(h.putCommits, commitDone{h.l.woid, tx.written})
}

func (h *history) rollbackPuts(t *rapid.T, tx *modelTx) {
	delete(h.open, tx.id)
	// The channel writes a rollback record after a spill, as a hint that
	// may be lost.
	if len(tx.written) > 0 && rapid.Bool().Draw(t, "rollback record") {
		h.l.rollback(h.cur[tx.dir], tx.id)
		h.wrote(tx.id)
		h.rollbacks++
	}
	h.uncommitted = append(h.uncommitted, tx)
}

func (h *history) commitTakes(tx *modelTx) {
	delete(h.open, tx.id)
	if len(tx.written) == 0 {
		return
	}
	f := h.cur[tx.dir]
	h.l.take(f, tx.id, tx.written...)
	h.wrote(tx.id)
	h.l.commitTake(f, tx.id)
	h.wrote(tx.id)
	h.takeCommits = append(h.takeCommits, commitDone{h.l.woid, tx.written})
	for _, p := range tx.written {
		if p.FileID() != f {
			addCompletes(h.completes, f, p.FileID())
		}
	}
}

// rollbackTakes returns the events of tx to the head; the channel writes no
// record, so a take in flight at the checkpoint may roll back after it and
// another transaction take and commit its events.
func (h *history) rollbackTakes(tx *modelTx) {
	delete(h.open, tx.id)
	h.queue = append(slices.Clone(tx.written), h.queue...)
}

// snapshot builds the checkpoint the channel would write now.
func (h *history) snapshot() {
	c := &cutState{w: h.l.woid, ring: slices.Clone(h.queue), open: map[uint64]bool{}, records: h.records, rollbacks: h.rollbacks}
	c.st = h.l.state(c.w, c.ring)
	c.st.MaxTxID = h.lastTx
	for i := range c.st.Logs {
		ls := &c.st.Logs[i]
		ls.Completes = slices.Sorted(maps.Keys(h.completes[ls.FileID]))
	}
	txs := slices.Collect(maps.Values(h.open))
	slices.SortFunc(txs, func(a, b *modelTx) int { return a.seq - b.seq })
	for _, tx := range txs {
		c.open[tx.id] = true
		if len(tx.written) == 0 {
			continue
		}
		e := eventqueue.InflightTx{Tx: tx.id, Pointers: slices.Clone(tx.written)}
		if tx.take {
			c.st.InflightTakes = append(c.st.InflightTakes, e)
		} else {
			c.st.InflightPuts = append(c.st.InflightPuts, e)
		}
	}
	h.cut = c
}

// expected is what a replay must produce.
type expected struct {
	queue     []ptr
	counts    counts
	maxTx     uint64
	completes map[uint32][]uint32
}

func (h *history) expectFull() expected {
	return h.expect(0, nil, nil, nil, 0, 0, max(h.maxTx[0], h.maxTx[1]))
}

func (h *history) expectCheckpoint() expected {
	c := h.cut
	var inflight []ptr
	for _, e := range c.st.InflightTakes {
		inflight = append(inflight, e.Pointers...)
	}
	return h.expect(c.w, inflight, c.ring, c.open, c.records, c.rollbacks, max(c.st.MaxTxID, h.maxTx[1]))
}

// expect computes the replay of the records after w onto ring and the takes
// in flight at w.
func (h *history) expect(w uint64, inflight, ring []ptr, openAtW map[uint64]bool, recordsAtW, rollbacksAtW int64, maxTx uint64) expected {
	e := expected{maxTx: maxTx, completes: map[uint32][]uint32{}}
	taken := map[ptr]bool{}
	for _, c := range h.takeCommits {
		if c.woid > w {
			for _, p := range c.ptrs {
				taken[p] = true
			}
			e.counts.takes += int64(len(c.ptrs))
			e.counts.commits++
		}
	}
	keep := func(ps []ptr) {
		for _, p := range ps {
			if !taken[p] {
				e.queue = append(e.queue, p)
			}
		}
	}
	keep(inflight)
	e.counts.returned = len(e.queue)
	keep(ring)
	for _, c := range h.putCommits {
		if c.woid > w {
			keep(c.ptrs)
			e.counts.puts += int64(len(c.ptrs))
			e.counts.commits++
		}
	}
	for _, tx := range h.uncommitted {
		for _, woid := range tx.woids {
			if woid > w || openAtW[tx.id] {
				e.counts.dropped++
			}
		}
	}
	e.counts.records = h.records - recordsAtW
	e.counts.rollbacks = h.rollbacks - rollbacksAtW
	for f, from := range h.completes {
		e.completes[f] = slices.Sorted(maps.Keys(from))
	}
	return e
}

func (h *history) checkResult(t *rapid.T, what string, res *Result, want expected) {
	got := counts{
		records: res.Records, skipped: res.Skipped, puts: res.Puts, takes: res.Takes, commits: res.Commits,
		rollbacks: res.Rollbacks, returned: res.Returned, dropped: res.Dropped, missing: res.Missing,
	}
	if got != want.counts {
		t.Fatalf("%s: counts\n got  %+v\n want %+v", what, got, want.counts)
	}
	if res.MaxWriteOrderID != h.l.woid || res.MaxTxID != want.maxTx || res.MaxFileID != h.nextFile {
		t.Fatalf("%s: MaxWriteOrderID, MaxTxID, MaxFileID = %d, %d, %d, want %d, %d, %d",
			what, res.MaxWriteOrderID, res.MaxTxID, res.MaxFileID, h.l.woid, want.maxTx, h.nextFile)
	}
	if !maps.EqualFunc(res.Completes, want.completes, slices.Equal) {
		t.Fatalf("%s: Completes = %v, want %v", what, res.Completes, want.completes)
	}
	if len(res.Logs) != int(h.nextFile) {
		t.Fatalf("%s: %d logs, want %d", what, len(res.Logs), h.nextFile)
	}
	for i, lf := range res.Logs {
		if lf.ID != uint32(i+1) || lf.End != h.l.size(lf.ID) {
			t.Fatalf("%s: Logs[%d] = %+v, want file %d ending at %d", what, i, lf, i+1, h.l.size(lf.ID))
		}
	}
}
