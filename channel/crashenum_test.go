package channel

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// Crash-state enumeration. A workload runs on a vfs.MemFS whose hook sees
// every mutating filesystem operation (each write, sync, create, rename,
// remove, directory sync...). At each one the test takes two power-loss
// images — only what was fsync'd survives, and in the second one the
// unsynced tail of every file is torn and unsynced overwrites are torn
// sector by sector — together with a snapshot of what the workload knew at
// that instant: which commits had returned and which were in progress. Each
// image is then opened and must hold:
//
//   - every event whose put commit had returned, unless its take commit had
//     also returned;
//   - no event whose put was never committed (still open, rolled back, or
//     not yet committing), and none whose take commit had returned;
//   - of a put transaction whose commit was in progress, all events or none;
//   - each event intact (body and headers exactly as put) and at most once;
//   - every producer's events in the order it committed them.
//
// The short mode runs in CI; FC_CRASH_LONG=1 runs longer workloads over more
// seeds and configurations (the count of crash states is logged), checks
// every crash point and fails every operation. The short mode runs every
// configuration but checks a sample of its crash points (crashRun.sample:
// 1 in N, and each right after a log file's fsync) and fails a sample of
// its operations (faultSample: 1 in N, and the first of each kind), so
// that the package's tests stay well under their 10-minute limit on 2
// loaded cores.

// Event states in the model, one byte per event: put phase | take phase<<4.
const (
	putPending    = 0 // in an open transaction, Commit not called
	putCommitting = 1 // Commit called, not returned
	putCommitted  = 2 // Commit returned nil
	putAborted    = 3 // rolled back
	putUncertain  = 4 // Commit returned an error: may or may not be there

	takeNone       = 0 << 4
	takeOpen       = 1 << 4 // taken by an open transaction (comes back after a crash)
	takeCommitting = 2 << 4
	takeCommitted  = 3 << 4
	takeMask       = 7 << 4

	// maybeTaken marks an event a take commit that failed once held: that
	// take's records may have reached the disk, so the event may be gone
	// after a crash even though the channel returned it at the time.
	maybeTaken = 1 << 7
)

type crashModel struct {
	mu     sync.Mutex
	states []byte // by event id
	txOf   []int  // by event id: the put transaction
	prod   []int  // by event id: the producer
	nth    []int  // by event id: the producer's sequence number
	nextTx int

	// With consumer groups (crashgroups_test.go), states holds the take
	// phase of the first group; groupTakes[g-1] that of group g, by event
	// id. An event a group never receives (committed before the group
	// was added) has takeCommitted there. dyn is the state of the group
	// the workload adds and removes (the last one).
	groupTakes [][]byte
	dyn        byte
	// receives, if set, says whether group g (an index into the run's
	// groups, > 0) receives event id, as its filter decides: an event it
	// does not receive has takeCommitted there from the start.
	receives func(g, id int) bool
}

// newEvent registers an event of producer p (its n-th) in put transaction
// tx and returns its id.
func (m *crashModel) newEvent(p, n, tx int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states = append(m.states, putPending)
	id := len(m.states) - 1
	for g := range m.groupTakes {
		phase := byte(takeNone)
		if g == len(m.groupTakes)-1 && m.dyn != dynPresent {
			phase = takeCommitted // the dynamic group does not exist
		}
		if m.receives != nil && !m.receives(g+1, id) {
			phase = takeCommitted // its filter keeps the event out
		}
		m.groupTakes[g] = append(m.groupTakes[g], phase)
	}
	m.txOf = append(m.txOf, tx)
	m.prod = append(m.prod, p)
	m.nth = append(m.nth, n)
	return id
}

func (m *crashModel) newTx() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextTx++
	return m.nextTx
}

// setPut sets the put phase of ids.
func (m *crashModel) setPut(ids []int, phase byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.states[id] = m.states[id]&^0x0f | phase
	}
}

// setTake sets the take phase of ids (and the maybeTaken flag if phase has
// it; the flag is never cleared).
func (m *crashModel) setTake(ids []int, phase byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.states[id] = m.states[id]&^takeMask | phase
	}
}

// crashSnap is the model as of one crash point.
type crashSnap struct {
	states     []byte
	txOf       []int
	prod       []int
	nth        []int
	groupTakes [][]byte
	dyn        byte
	// ext is the snapshot of a workload's own model (crashRun.ext).
	ext any
}

func (m *crashModel) snapshot() crashSnap {
	m.mu.Lock()
	defer m.mu.Unlock()
	// txOf, prod and nth are append-only: a capped slice of them is stable.
	n := len(m.states)
	s := crashSnap{states: slices.Clone(m.states), txOf: m.txOf[:n:n], prod: m.prod[:n:n], nth: m.nth[:n:n], dyn: m.dyn}
	for _, gt := range m.groupTakes {
		s.groupTakes = append(s.groupTakes, slices.Clone(gt))
	}
	return s
}

// forGroup is the snapshot as group g (an index into the run's groups)
// sees it: every event's put phase with g's take phase.
func (s crashSnap) forGroup(g int) crashSnap {
	if g == 0 {
		return s
	}
	out := s
	out.states = slices.Clone(s.states)
	for i := range out.states {
		out.states[i] = out.states[i]&^takeMask | s.groupTakes[g-1][i]&takeMask
		if s.groupTakes[g-1][i]&maybeTaken != 0 {
			out.states[i] |= maybeTaken
		}
	}
	return out
}

// eventBody is the deterministic body of event id (producer p, n-th): its
// identity, a filler whose length varies from a few bytes to past the spill
// threshold of the small test config, and a checksum. Every 11th event's
// filler is zeros, and a long one holds whole zero sectors: content that
// looks like the zeros a torn overwrite leaves (Scanner.tornOverwrite).
func eventBody(id, p, n int) []byte {
	size := 8 + (id*37)%120
	if id%23 == 0 {
		size = 700 + (id*131)%900
	}
	if id%11 == 3 {
		size = 1100 + (id*53)%600
	}
	b := fmt.Appendf(nil, "%d/%d/%d|", id, p, n)
	for i := range size {
		if id%11 == 3 {
			b = append(b, 0)
			continue
		}
		b = append(b, byte('a'+(id+i)%26))
	}
	return fmt.Appendf(b, "|%08x", crc32.ChecksumIEEE(b))
}

// crashHeaders are the headers of event id: its id, a tag of "x", "y" or
// "z" that looks random (a filter's input: crashTagFilter), and for 5
// events in 6 an order key (crashOrderKey).
func crashHeaders(id int) map[string]string {
	tag := []string{"x", "y", "z"}[crc32.ChecksumIEEE([]byte(strconv.Itoa(id)))%3]
	h := map[string]string{"id": strconv.Itoa(id), "tag": tag}
	if k := crashOrderKey(id); k != "" {
		h[crashKeyHeader] = k
	}
	return h
}

// crashKeyHeader is the header of the crash events' order keys
// (GroupConfig.OrderKey in crashkeys_test.go).
const crashKeyHeader = "key"

// crashOrderKey is the order key of event id: one of k0 to k4, or ""
// (none: a free event) for 1 event in 6, looking random.
func crashOrderKey(id int) string {
	n := crc32.ChecksumIEEE([]byte("key"+strconv.Itoa(id))) % 6
	if n == 5 {
		return ""
	}
	return "k" + strconv.Itoa(int(n))
}

func parseEventID(b []byte) (id, p, n int, ok bool) {
	head, _, found := bytes.Cut(b, []byte("|"))
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(string(head), "/")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var err [3]error
	id, err[0] = strconv.Atoi(parts[0])
	p, err[1] = strconv.Atoi(parts[1])
	n, err[2] = strconv.Atoi(parts[2])
	return id, p, n, errors.Join(err[:]...) == nil
}

// crashJob is one crash image to check.
type crashJob struct {
	img  *vfs.MemFS
	snap crashSnap
	seq  int64
	op   string
	path string
	tear bool
	// recoveryCrashes: also take a crash image at every operation of the
	// recovery itself (cutting torn tails, removing empty logs, the
	// checkpoint after replay, Close) and check each the same way.
	recoveryCrashes bool
}

// crashRun drives one workload and checks every crash image it produces.
type crashRun struct {
	t     *testing.T
	name  string
	cfg   Config // FS is the workload's MemFS; each check replaces it
	fs    *vfs.MemFS
	model crashModel
	seed  uint64

	jobs     chan crashJob
	wg       sync.WaitGroup
	states   atomic.Int64 // images checked
	failures atomic.Int64
	stop     atomic.Bool // a failure stops further checks

	// groups names the consumer groups the model follows, in model order
	// (nil: the unnamed group alone); with dynamic, the last one is added
	// and removed by the workload (crashgroups_test.go).
	groups  []string
	dynamic bool
	// every, if above 1, checks only the crash points whose sequence
	// number it divides (a sample, for the short mode: see sample);
	// with syncs, also every crash point right after a log file's fsync
	// (where a commit became durable, and what other files hold unsynced
	// is not).
	every int64
	syncs bool
	// unordered: the groups have RetryDelays, which reorder their
	// events by design: the recovered events (the ring's, then those
	// waiting for their delay) are checked as a set, sorted by id, so
	// that no producer order is checked but loss, duplicates and takes
	// that committed still are.
	unordered bool
	// lazyTakes: the channel has Config.TakeSyncDelay, so a take commit
	// that returned may still come back after a crash (takeCommitting
	// stays its state in the model).
	lazyTakes bool

	// A workload with a model of its own (crashdeadletter_test.go) sets
	// these: ext snapshots its model at each crash point (crashSnap.ext),
	// recover checks a recovered channel against that snapshot instead of
	// recoveredAll's model, and probe, if set, runs on the channel that
	// check reopens after the recovery (a sample of the states), which it
	// may change: nothing reads it afterwards.
	ext     func() any
	recover func(c *FileChannel, s crashSnap) ([][]int, error)
	probe   func(c *FileChannel, s crashSnap) error
	// clockAt, if set, is the channel's clock (Config.now and
	// Config.clock, in Unix nanoseconds) as of a crash point: check
	// recovers each image on a clock stopped there, so that what has
	// expired (GroupConfig.ExpireAfter) is what the snapshot says.
	clockAt func(s crashSnap) int64
	// force makes the short mode check the next force crash points
	// whatever their sample: a workload sets it right after an operation
	// returns that must be durable by then (ResetGroup).
	force atomic.Int64
}

const maxCrashFailures = 3

// recoveryCrashEvery: every this many crash points, the recovery of the torn
// image is itself crashed at each of its operations.
var recoveryCrashEvery = map[bool]int64{false: 61, true: 11}[crashLong()]

func newCrashRun(t *testing.T, name string, dirs int, backup bool, seed uint64) *crashRun {
	fsys := vfs.NewMem()
	cfg := memConfig(fsys, dirs)
	cfg.Capacity = 300
	cfg.TransactionCapacity = 40
	if backup {
		cfg.BackupCheckpointDir = "/fc/backup"
	}
	r := &crashRun{t: t, name: name, cfg: cfg, fs: fsys, seed: seed, jobs: make(chan crashJob, 16)}
	for range 2 {
		r.wg.Add(1)
		go r.checker()
	}
	fsys.SetHook(func(p vfs.CrashPoint) {
		forced := r.force.Add(-1) >= 0
		if !forced {
			r.force.Store(0)
		}
		if r.stop.Load() || (!forced && r.every > 1 && p.Seq%r.every != 0 && !(r.syncs && isLogSync(p))) {
			return
		}
		snap := r.model.snapshot()
		if r.ext != nil {
			snap.ext = r.ext()
		}
		r.jobs <- crashJob{img: p.Clone(false, 0), snap: snap, seq: p.Seq, op: p.Op, path: p.Path}
		r.jobs <- crashJob{img: p.Clone(true, int64(seed)<<20^p.Seq), snap: snap, seq: p.Seq, op: p.Op, path: p.Path, tear: true,
			recoveryCrashes: p.Seq%recoveryCrashEvery == 0}
	})
	return r
}

// sample makes the short mode check only the crash points whose sequence
// number every divides, and with syncs also each one right after a log
// file's fsync (crashRun.every); the long mode checks them all. every must
// be coprime with 3, 5 and recoveryCrashEvery: check picks its further
// checks by sequence number (Verify at 1 point in 3, a reopen at 1 in 5, a
// crash during recovery at 1 in recoveryCrashEvery), and with a common
// factor they would run at every point of the sample, or at none.
func (r *crashRun) sample(every int64, syncs bool) {
	if crashLong() {
		return
	}
	if err := checkSampleStep(every); err != nil {
		r.t.Fatal(err)
	}
	r.every, r.syncs = every, syncs
}

// checkSampleStep checks that every, a short mode's sampling step, is
// coprime with the steps check samples its further checks with.
func checkSampleStep(every int64) error {
	for _, m := range []int64{3, 5, recoveryCrashEvery} {
		a, b := every, m
		for b != 0 {
			a, b = b, a%b
		}
		if every > 1 && a != 1 {
			return fmt.Errorf("sampling 1 point in %d: shares a factor with %d, the step of one of check's own samples", every, m)
		}
	}
	return nil
}

// isLogSync reports whether p is the fsync of a log file.
func isLogSync(p vfs.CrashPoint) bool {
	_, ok := logfile.ParseLogName(path.Base(p.Path))
	return ok && p.Op == "sync"
}

// finish stops taking crash points, waits for the checks and returns how
// many images were checked.
func (r *crashRun) finish() int64 {
	r.fs.SetHook(nil)
	close(r.jobs)
	r.wg.Wait()
	return r.states.Load()
}

func (r *crashRun) checker() {
	defer r.wg.Done()
	for j := range r.jobs {
		if r.stop.Load() {
			continue
		}
		if err := r.check(j); err != nil {
			if r.failures.Add(1) >= maxCrashFailures {
				r.stop.Store(true)
			}
			r.t.Errorf("%s: crash after op %d (%s %s, tear=%v): %v", r.name, j.seq, j.op, j.path, j.tear, err)
		}
		r.states.Add(1)
	}
}

// check recovers one crash image and compares it with the model.
func (r *crashRun) check(j crashJob) error {
	cfg := r.cfg
	cfg.fs = j.img
	cfg.Logger = nil
	if r.clockAt != nil {
		at := r.clockAt(j.snap)
		cfg.now, cfg.clock = func() time.Time { return time.Unix(0, at) }, func() int64 { return at }
	}
	var inner []crashJob
	if j.recoveryCrashes {
		j.img.SetHook(func(p vfs.CrashPoint) {
			inner = append(inner, crashJob{img: p.Clone(true, p.Seq), snap: j.snap, seq: p.Seq, op: p.Op, path: p.Path, tear: true})
		})
		defer func() {
			j.img.SetHook(nil)
			for _, in := range inner {
				if err := r.check(in); err != nil {
					r.t.Errorf("%s: crash after op %d (%s %s, tear=%v), then again during recovery after op %d (%s %s): %v",
						r.name, j.seq, j.op, j.path, j.tear, in.seq, in.op, in.path, err)
					return
				}
				r.states.Add(1)
			}
		}()
	}
	c, err := Open(cfg)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	got, err := r.recoveredAll(c, j.snap)
	if err == nil {
		if s := c.Stats(); s.ReplayCorrupt != 0 || s.ReplayDamagedTxs != 0 || s.CorruptSkipped != 0 {
			err = fmt.Errorf("a crash left damage the replay had to skip: %+v", s)
		}
	}
	if cerr := c.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		return err
	}
	// After the recovery and a clean close, the files hold no
	// inconsistency at all. (Checked on a sample in the short mode: it
	// costs about as much as the recovery.)
	if j.recoveryCrashes {
		j.img.SetHook(nil)
	}
	if crashLong() || j.seq%3 == 0 {
		if rep, err := Verify(cfg); err != nil {
			return fmt.Errorf("verify after recovery: %w", err)
		} else if !rep.OK() {
			return fmt.Errorf("verify after recovery: %s", rep)
		}
	}
	// The recovered state must itself be durable: reopen (after the clean
	// close) and find the same events.
	if j.seq%5 == 0 {
		c, err := Open(cfg)
		if err != nil {
			return fmt.Errorf("reopen after recovery: %w", err)
		}
		again, err := r.recoveredAll(c, j.snap)
		if err == nil && !slices.EqualFunc(again, got, slices.Equal) {
			err = fmt.Errorf("%d events, first recovery had %d", len(again), len(got))
		}
		if err == nil && r.probe != nil {
			err = r.probe(c, j.snap)
		}
		c.Close()
		if err != nil {
			return fmt.Errorf("reopen after recovery: %w", err)
		}
	}
	return nil
}

// recoveredAll checks every group of c against the model snapshot s and
// returns each group's recovered event ids (the run's groups in order; nil
// for an absent dynamic group). Without groups it is the unnamed group.
func (r *crashRun) recoveredAll(c *FileChannel, s crashSnap) ([][]int, error) {
	if r.recover != nil {
		return r.recover(c, s)
	}
	if r.groups == nil {
		got, err := r.recovered(c, c.main)
		if err == nil {
			err = compareWithModel(got, s)
		}
		return [][]int{got}, err
	}
	out := make([][]int, len(r.groups))
	for i, name := range r.groups {
		g, err := c.Group(name)
		dynamic := i == len(r.groups)-1 && r.dynamic
		switch {
		case err != nil && dynamic && s.dyn != dynPresent:
			continue // absent, or its AddGroup was interrupted
		case err == nil && dynamic && s.dyn == dynAbsent:
			return nil, fmt.Errorf("group %q is back after its RemoveGroup returned", name)
		case err == nil && dynamic && s.dyn != dynPresent:
			// An AddGroup or RemoveGroup the crash (or a fault)
			// interrupted: the group may be there or not; what it holds
			// is not followed.
			continue
		case err != nil:
			return nil, fmt.Errorf("group %q: %w", name, err)
		}
		got, err := r.recovered(c, g.g)
		if err == nil {
			err = compareWithModel(got, s.forGroup(i))
		}
		if err != nil {
			return nil, fmt.Errorf("group %q: %w", name, err)
		}
		out[i] = got
	}
	return out, nil
}

// recovered returns the ids of the events queued in c's group g, in order,
// without consuming them; a damaged or foreign event is an error.
func (r *crashRun) recovered(c *FileChannel, g *groupState) ([]int, error) {
	ids, _, err := recoveredPointers(c, g)
	if r.unordered {
		slices.Sort(ids)
	}
	return ids, err
}

// recoveredPointers is recovered, with the events' pointers: the ring's,
// then those waiting for their retry delay (in due order).
func recoveredPointers(c *FileChannel, g *groupState) ([]int, []eventqueue.Pointer, error) {
	c.queueMu.Lock()
	ptrs := g.queue.Pointers()
	waiting := slices.Clone(g.wait.heap)
	slices.SortFunc(waiting, func(a, b waitingEvent) int { return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.p, b.p)) })
	for _, w := range waiting {
		ptrs = append(ptrs, w.p)
	}
	inflight := g.inflight.Len() + c.inflightPuts.Len()
	c.queueMu.Unlock()
	if inflight != 0 {
		return nil, nil, fmt.Errorf("%d events in flight right after Open", inflight)
	}
	ids, err := crashEventIDs(c, ptrs)
	return ids, ptrs, err
}

// crashEventIDs reads the events ptrs point at in c and returns their ids;
// a damaged or foreign event is an error.
func crashEventIDs(c *FileChannel, ptrs []eventqueue.Pointer) ([]int, error) {
	ids := make([]int, 0, len(ptrs))
	for _, p := range ptrs {
		ev, err := c.readEvent(p)
		if err != nil {
			return nil, fmt.Errorf("read queued event %v: %w", p, err)
		}
		id, prod, n, ok := parseEventID(ev.Body)
		if !ok || !bytes.Equal(ev.Body, eventBody(id, prod, n)) || !maps.Equal(ev.Headers, crashHeaders(id)) {
			return nil, fmt.Errorf("event at %v is damaged: headers %v, body %.40q", p, ev.Headers, ev.Body)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// compareWithModel checks recovered event ids against the model snapshot.
func compareWithModel(got []int, s crashSnap) error {
	present := make(map[int]bool, len(got))
	last := map[int]int{} // producer -> last sequence number seen
	txPresent := map[int]int{}
	for _, id := range got {
		if id >= len(s.states) {
			return fmt.Errorf("event %d did not exist at the crash", id)
		}
		if present[id] {
			return fmt.Errorf("event %d recovered twice", id)
		}
		present[id] = true
		st := s.states[id]
		put, take := st&0x0f, st&takeMask
		switch {
		case put == putPending || put == putAborted:
			return fmt.Errorf("event %d recovered but its put was never committed (state %#x)", id, st)
		case take == takeCommitted:
			return fmt.Errorf("event %d recovered but its take had committed", id)
		}
		if n, ok := last[s.prod[id]]; ok && s.nth[id] <= n {
			return fmt.Errorf("producer %d's event %d (its #%d) recovered after its #%d: commit order broken", s.prod[id], id, s.nth[id], n)
		}
		last[s.prod[id]] = s.nth[id]
		txPresent[s.txOf[id]]++
	}
	txSize := map[int]int{}
	for id, st := range s.states {
		put, take := st&0x0f, st&takeMask
		if put == putCommitted && take != takeCommitting && take != takeCommitted && st&maybeTaken == 0 && !present[id] {
			return fmt.Errorf("event %d was committed (and not taken) but is lost; %d events recovered", id, len(got))
		}
		if put == putCommitting && take != takeCommitting && take != takeCommitted {
			txSize[s.txOf[id]]++
		}
	}
	// A put transaction caught committing is there whole or not at all. (Its
	// events become visible just before Commit returns, so a consumer may
	// already have taken some: those whose take was committing or committed
	// are not counted.)
	for tx, n := range txSize {
		if k := txPresent[tx]; k != 0 && k < n {
			return fmt.Errorf("put transaction %d was committing at the crash: %d of its %d events recovered", tx, k, n)
		}
	}
	return nil
}

// crashWorkload is what a workload may do to a channel; the model follows.
type crashWorkload struct {
	r   *crashRun
	rng *rand.Rand
	n   map[int]int // producer -> events made so far
}

// newCrashWorkload returns a workload on r whose random choices come from
// the PCG of seed and stream.
func newCrashWorkload(r *crashRun, seed, stream uint64) *crashWorkload {
	return &crashWorkload{r: r, rng: rand.New(rand.NewPCG(seed, stream)), n: map[int]int{}}
}

// put runs one put transaction of producer p with k events; it commits
// unless rollback.
func (w *crashWorkload) put(c *FileChannel, p, k int, rollback bool) error {
	start := w.n[p]
	w.n[p] += k
	return w.putN(c, p, start, k, rollback)
}

// takeIDs takes up to k events into tx and returns their ids (marked open).
func (w *crashWorkload) takeIDs(tx *Transaction, k int) ([]int, error) { return w.takeIDsG(tx, 0, k) }

// takeIDsG is takeIDs from group g (an index into the run's groups).
func (w *crashWorkload) takeIDsG(tx *Transaction, g, k int) ([]int, error) {
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

// endTake commits or rolls back a take transaction holding ids.
func (w *crashWorkload) endTake(tx *Transaction, ids []int, commit bool) error {
	return w.endTakeG(tx, 0, ids, commit)
}

// endTakeG is endTake of a take transaction of group g.
func (w *crashWorkload) endTakeG(tx *Transaction, g int, ids []int, commit bool) error {
	m := &w.r.model
	if !commit {
		err := tx.Rollback()
		m.setTakeG(g, ids, takeNone)
		return err
	}
	m.setTakeG(g, ids, takeCommitting)
	if err := tx.Commit(); err != nil {
		// The channel returned the events, but the take may be on disk.
		m.setTakeG(g, ids, takeNone|maybeTaken)
		return err
	}
	if !w.r.lazyTakes {
		m.setTakeG(g, ids, takeCommitted)
	}
	return nil
}

// serial runs steps random operations from one goroutine: put transactions
// (committed or rolled back, some large enough to spill), take transactions
// (committed or rolled back), a take transaction left open across other
// steps (and across checkpoints), checkpoints, and clean restarts.
func (w *crashWorkload) serial(steps int) error {
	return w.serialOn(steps, false)
}

// serialOn is serial; with tolerant set, failed operations (injected faults)
// do not end the workload: the model records their outcome as uncertain and
// the workload goes on, as an application would.
func (w *crashWorkload) serialOn(steps int, tolerant bool) (err error) {
	s, err := w.session(tolerant)
	if err != nil {
		return err
	}
	defer s.close(&err)
	for range steps {
		switch x := w.rng.IntN(100); {
		case x < 40 && s.c.Len() < s.cfg.Capacity-40:
			if s.stop(w.put(s.c, 0, 1+w.rng.IntN(8), w.rng.IntN(6) == 0)) {
				return s.err
			}
		case x < 68:
			if s.openTake != nil {
				if s.stop(w.endTake(s.openTake, s.openIDs, w.rng.IntN(2) == 0)) {
					return s.err
				}
				s.openTake, s.openIDs = nil, nil
			}
			tx, berr := s.c.Begin()
			if s.stop(berr) {
				return s.err
			} else if berr != nil {
				continue
			}
			ids, terr := w.takeIDs(tx, 1+w.rng.IntN(10))
			if s.stop(terr) {
				return s.err
			}
			if s.stop(w.endTake(tx, ids, w.rng.IntN(5) != 0)) {
				return s.err
			}
		case x < 78:
			if s.openTake == nil {
				tx, berr := s.c.Begin()
				if s.stop(berr) {
					return s.err
				} else if berr != nil {
					continue
				}
				ids, terr := w.takeIDs(tx, 1+w.rng.IntN(4))
				if s.stop(terr) {
					return s.err
				}
				s.openTake, s.openIDs = tx, ids
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

// crashSession is the channel a serial crash workload drives (serialOn,
// groupsWorkload.run), reopened by its restarts, and the take it holds
// open across steps. With tolerant set, failed operations (injected
// faults) do not end the workload, and a failed Open is tried once more.
type crashSession struct {
	cfg      Config
	model    *crashModel
	tolerant bool
	c        *FileChannel // nil after a failed reopen
	err      error        // what ended the workload (stop)

	// The take held open across steps (nil for none), its events, and
	// its group (an index into the run's groups).
	openTake  *Transaction
	openIDs   []int
	openGroup int
}

// session opens the channel of w's run for a serial workload.
func (w *crashWorkload) session(tolerant bool) (*crashSession, error) {
	s := &crashSession{cfg: w.r.cfg, model: &w.r.model, tolerant: tolerant}
	var err error
	if s.c, err = s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *crashSession) open() (*FileChannel, error) {
	c, err := Open(s.cfg)
	if s.tolerant && err != nil {
		c, err = Open(s.cfg) // one injected fault: the retry works
	}
	return c, err
}

// stop reports whether e ends the workload (it does unless tolerant); the
// workload returns s.err.
func (s *crashSession) stop(e error) bool {
	if e != nil && !s.tolerant {
		s.err = e
		return true
	}
	return false
}

// close closes the channel when the workload returns *err; unless
// tolerant, a failed Close is the workload's error if it had none.
func (s *crashSession) close(err *error) {
	if s.c == nil {
		return
	}
	if cerr := s.c.Close(); !s.tolerant && *err == nil {
		*err = cerr
	}
}

// restart is a clean restart: it closes the channel and opens it again.
// It abandons the open take: its events come back at the head. It reports
// whether the workload ends (s.err says why).
func (s *crashSession) restart() bool {
	if s.stop(s.c.Close()) {
		return true
	}
	if s.openTake != nil {
		s.model.setTakeG(s.openGroup, s.openIDs, takeNone)
		s.openTake, s.openIDs = nil, nil
	}
	var err error
	if s.c, err = s.open(); err != nil {
		s.err = err
		return true
	}
	return false
}

// concurrent runs producers committing at the same time (group commit),
// one consumer and a checkpointer, each for its share of steps.
func (w *crashWorkload) concurrent(steps, producers int) error {
	c, err := Open(w.r.cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, producers+2)
	var mu sync.Mutex // guards w.n and w.rng
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range steps / producers {
				mu.Lock()
				k, rollback := 1+w.rng.IntN(5), w.rng.IntN(8) == 0
				mu.Unlock()
				if c.Len() > w.r.cfg.Capacity-60 {
					continue
				}
				// w.put reads w.n[p] only for its own p; guard the map.
				mu.Lock()
				start := w.n[p]
				w.n[p] += k
				mu.Unlock()
				if err := w.putN(c, p, start, k, rollback); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(2)
	go func() { // consumer
		defer wg.Done()
		for range steps / 2 {
			tx, err := c.Begin()
			if err != nil {
				errs <- err
				return
			}
			ids, err := w.takeIDs(tx, 1+rand.IntN(6))
			if err == nil {
				err = w.endTake(tx, ids, rand.IntN(5) != 0)
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // checkpointer
		defer wg.Done()
		for range steps / 10 {
			if err := c.Checkpoint(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	return <-errs
}

// putN is put for concurrent producers: sequence numbers start..start+k-1
// were reserved by the caller.
func (w *crashWorkload) putN(c *FileChannel, p, start, k int, rollback bool) error {
	m := &w.r.model
	tx, err := c.Begin()
	if err != nil {
		return err
	}
	txID := m.newTx()
	ids := make([]int, 0, k)
	var putErr error // the first Put that failed but for a full channel
	for i := range k {
		id := m.newEvent(p, start+i, txID)
		err := tx.Put(Event{Headers: crashHeaders(id), Body: eventBody(id, p, start+i)})
		if err == nil {
			ids = append(ids, id)
			continue
		}
		// A Put that fails adds nothing: its event must never appear.
		m.setPut([]int{id}, putAborted)
		if errors.Is(err, ErrChannelFull) || errors.Is(err, ErrTransactionFailed) {
			tx.Rollback()
			m.setPut(ids, putAborted)
			if errors.Is(err, ErrChannelFull) {
				return nil
			}
			return err
		}
		// Otherwise the transaction goes on without it (a failed spill
		// leaves it as it was) and commits the rest.
		if putErr == nil {
			putErr = err
		}
	}
	if rollback {
		err := tx.Rollback()
		m.setPut(ids, putAborted)
		return errors.Join(putErr, err)
	}
	m.setPut(ids, putCommitting)
	if err := tx.Commit(); err != nil {
		m.setPut(ids, putUncertain)
		return errors.Join(putErr, err)
	}
	m.setPut(ids, putCommitted)
	return putErr
}

// TestFaultAtEveryOperation fails each filesystem operation of a workload in
// turn — with EIO, or with ENOSPC after writing half the bytes — and lets the
// workload go on as an application would (a failed commit's outcome is
// uncertain; everything else must hold). Then it checks the channel after a
// clean restart and after a power loss: never a panic or a hang, every
// successful commit kept, nothing damaged.
func TestFaultAtEveryOperation(t *testing.T) {
	t.Parallel() // the long crash tests run side by side, after the package's other tests
	steps := 30
	if crashLong() {
		steps = 120
	}
	faultAtEveryOperation(t, 2, func(r *crashRun) error {
		return newCrashWorkload(r, 7, 42).serialOn(steps, true)
	})
}

// TestFaultAtEveryOperationEncrypted is TestFaultAtEveryOperation on an
// encrypted channel, whose puts are sealed in place when they are written:
// a failed write (a spill's or a commit's) must leave the transaction's
// buffered puts as they were, so that the commit that follows writes them
// sealed once, readable (issue 27, item 2).
func TestFaultAtEveryOperationEncrypted(t *testing.T) {
	t.Parallel()
	steps := 24
	if crashLong() {
		steps = 100
	}
	faultAtEveryOperation(t, 2, func(r *crashRun) error {
		return newCrashWorkload(r, 11, 42).serialOn(steps, true)
	}, withCrashKeys)
}

// faultAtEveryOperation runs workload (tolerant of failed operations) once
// to count its filesystem operations, then once per operation and kind of
// fault with that operation failing, and checks each run's channel after a
// clean restart and after a power loss. The short mode fails a sample of
// the operations: 1 in every, and the first of each kind (faultSample).
// setup may change the crashRun (its groups) before the workload.
func faultAtEveryOperation(t *testing.T, every int64, workload func(*crashRun) error, setup ...func(*crashRun)) {
	run := func(fault *vfs.Rule) (*crashRun, *vfs.MemFS, *vfs.FaultFS, error) {
		mem := vfs.NewMem()
		ff := vfs.NewFaultFS(mem)
		if fault != nil {
			ff.Add(*fault)
		}
		cfg := memConfig(ff, 1)
		cfg.Capacity, cfg.TransactionCapacity = 300, 40
		r := &crashRun{t: t, cfg: cfg, fs: mem}
		for _, f := range setup {
			f(r)
		}
		return r, mem, ff, workload(r)
	}
	_, _, ff, err := run(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSampleStep(every); err != nil {
		t.Fatal(err)
	}
	total := ff.Ops()
	ops := faultSample(total, ff.Log(), every)
	states := 0
	for _, n := range ops {
		for _, fault := range []vfs.Rule{
			{Seq: n, Times: 1, Err: syscall.EIO},
			{Seq: n, Times: 1, Err: syscall.ENOSPC, Short: vfs.ShortHalf},
		} {
			r, mem, ff, err := run(&fault)
			r.name = fmt.Sprintf("fault %v at op %d of %d", fault.Err, n, total)
			if err != nil {
				t.Errorf("%s: the workload could not go on: %v\n%s", r.name, err, strings.Join(ff.Log(), "\n"))
				continue
			}
			snap := r.model.snapshot()
			for _, img := range []struct {
				fs   *vfs.MemFS
				tear bool
			}{{mem, false}, {mem.CrashClone(true, n), true}} {
				if err := r.check(crashJob{img: img.fs, snap: snap, seq: n, tear: img.tear}); err != nil {
					t.Errorf("%s (then power loss: %v): %v\n%s", r.name, img.tear, err, strings.Join(ff.Log(), "\n"))
				}
				states++
			}
			if t.Failed() {
				return
			}
		}
	}
	t.Logf("%d operations, %d faults, %d states checked", total, 2*len(ops), states)
}

// faultSample returns the operations, numbered 1 to total, that
// faultAtEveryOperation fails: all of them in the long mode; in the short
// mode those whose number every divides and the first of each kind, so
// that every kind of operation still fails once. An operation's kind is
// its line in log (FaultFS.Log of the run without faults: "sync
// log-0000000003") with the digits dropped: "sync log-".
func faultSample(total int64, log []string, every int64) []int64 {
	first := total - int64(len(log)) + 1 // the number of log[0]
	seen := map[string]bool{}
	var ops []int64
	for n := int64(1); n <= total; n++ {
		kindFirst := false
		if i := n - first; i >= 0 {
			kind := strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return -1
				}
				return r
			}, log[i])
			kindFirst = !seen[kind]
			seen[kind] = true
		}
		if crashLong() || every <= 1 || n%every == 0 || kindFirst {
			ops = append(ops, n)
		}
	}
	return ops
}

// crashLong reports whether the long mode was asked for.
func crashLong() bool { return os.Getenv("FC_CRASH_LONG") != "" }

// crashCase is one configuration of a crash-state enumeration: a workload
// on a channel with dirs data dirs, and a backup checkpoint dir or not.
type crashCase struct {
	name   string
	dirs   int
	backup bool
	// The short mode runs one seed of steps steps (0: the case is for the
	// long mode only) and checks 1 crash point in every, and each right
	// after a log file's fsync (crashRun.sample); the long mode runs seeds
	// seeds of longSteps steps (0: 4*steps) and checks every crash point.
	steps     int
	every     int64
	longSteps int
	seeds     int
	run       crashDriver
}

// crashDriver is a workload of the crash-state enumeration: it sets r up
// for the workload (the groups its model follows, or a model of its own:
// crashRun.ext, recover and probe), runs steps steps of it from seed, and
// returns what the test's log line says besides the count of crash states.
type crashDriver func(r *crashRun, seed uint64, steps int) (note string, err error)

// runCrashEnumeration runs each case, once per seed, on a crashRun that
// checks every crash image its workload produces, and logs the count of
// crash states checked.
func runCrashEnumeration(t *testing.T, cases []crashCase) {
	var total atomic.Int64
	for _, cc := range cases {
		seeds, steps := 1, cc.steps
		if crashLong() {
			seeds, steps = cc.seeds, cc.longSteps
			if steps == 0 {
				steps = 4 * cc.steps
			}
		} else if steps == 0 {
			continue
		}
		for seed := range seeds {
			name := fmt.Sprintf("%s/seed=%d", cc.name, seed)
			t.Run(name, func(t *testing.T) {
				r := newCrashRun(t, name, cc.dirs, cc.backup, uint64(seed))
				r.sample(cc.every, true)
				note, err := cc.run(r, uint64(seed), steps)
				n := r.finish()
				if err != nil {
					t.Fatalf("workload: %v", err)
				}
				total.Add(n)
				t.Logf("%d crash states checked%s", n, note)
			})
		}
	}
	t.Logf("crash states checked in all: %d (FC_CRASH_LONG=%q)", total.Load(), os.Getenv("FC_CRASH_LONG"))
}

func TestCrashStateEnumeration(t *testing.T) {
	t.Parallel() // the long crash tests run side by side, after the package's other tests
	runCrashEnumeration(t, []crashCase{
		{name: "serial/1dir", dirs: 1, steps: 70, seeds: 6, every: 2, run: crashSerial},
		{name: "serial/2dirs+backup", dirs: 2, backup: true, steps: 50, seeds: 4, every: 4, run: crashSerial},
		{name: "concurrent/2dirs", dirs: 2, steps: 60, seeds: 4, every: 2, run: crashConcurrent},
		{name: "encrypted/serial/2dirs", dirs: 2, steps: 40, seeds: 3, every: 2, run: crashEncrypted(crashSerial)},
		{name: "retention/serial/2dirs", dirs: 2, steps: 150, seeds: 3, every: 7, run: crashRetained(crashSerial)},
		{name: "dedup/retention/serial/1dir", dirs: 1, steps: 80, seeds: 3, every: 4, run: crashDeduped(crashRetained(crashSerial))},
		{name: "dedup/encrypted/serial/1dir", dirs: 1, steps: 40, seeds: 2, every: 4, run: crashDeduped(crashEncrypted(crashSerial))},
		{name: "retry/serial/2dirs", dirs: 2, steps: 40, seeds: 3, every: 4, run: crashRetrying(crashSerial)},
		{name: "orderretry/serial/2dirs", dirs: 2, steps: 40, seeds: 2, every: 4, run: crashRetrying(crashKeyed(crashSerial))},
		{name: "keys/expire-drop/2dirs", dirs: 2, steps: 120, seeds: 4, every: 4, run: crashOrderKeyed(keyedOpts{expire: time.Second})},
		{name: "keys/expire-dlq/1dir", dirs: 1, steps: 120, seeds: 3, every: 4, run: crashOrderKeyed(keyedOpts{expire: time.Second, dlq: true})},
		// Long mode only: kept out of CI while it failed (both failures it found are fixed).
		{name: "keys/concurrent/2dirs", dirs: 2, steps: 100, longSteps: 320, seeds: 2, every: 4, run: crashOrderKeyedConcurrent(keyedOpts{expire: time.Second})},
		{name: "keys/retry/2dirs", dirs: 2, steps: 60, seeds: 3, every: 4, run: crashOrderKeyed(keyedOpts{retry: true})},
		{name: "recycled/serial/2dirs", dirs: 2, steps: 80, seeds: 4, every: 2, run: crashRecycled(crashSerial)},
		{name: "recycled/encrypted/serial/1dir", dirs: 1, steps: 60, seeds: 2, every: 4, run: crashRecycled(crashEncrypted(crashSerial))},
	})
}

// crashRecycled is d with Config.RecycleLogFiles: the log files the
// workload's takes consume are overwritten by the next ones (MaxFileSize
// is 4 KiB: files roll every few steps). Its note says how many were.
func crashRecycled(d crashDriver) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		r.cfg.RecycleLogFiles = 2
		note, err := d(r, seed, steps)
		if err != nil {
			return note, err
		}
		n, err := recycledLogs(r.fs, r.cfg.DataDirs)
		if err == nil && n == 0 {
			err = errors.New("no log file left at the end is a recycled one: the case tests nothing")
		}
		return fmt.Sprintf("%s, %d recycled log files at the end", note, n), err
	}
}

// recycledLogs counts the log files of dirs whose header says a recycled
// version (logfile.RecycledVersion, RecycledBoundVersion).
func recycledLogs(fsys vfs.FS, dirs []string) (int, error) {
	n := 0
	for _, d := range dirs {
		ids, err := logfile.ListLogs(fsys, d)
		if err != nil {
			return 0, err
		}
		for _, id := range ids {
			b, err := vfs.ReadFile(fsys, filepath.Join(d, logfile.LogName(id)))
			if err != nil {
				return 0, err
			}
			if len(b) >= 6 && binary.BigEndian.Uint16(b[4:]) >= logfile.RecycledVersion {
				n++
			}
		}
	}
	return n, nil
}

// crashRetained is d with Config.Retention.MaxBytes set to two log files:
// files every group is done with are kept, the oldest deleted past it.
func crashRetained(d crashDriver) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		r.cfg.Retention = Retention{MaxBytes: 2 * r.cfg.MaxFileSize}
		return d(r, seed, steps)
	}
}

// crashRetrying is d on a channel whose unnamed group has RetryDelays
// of 0 then 1 ms: rolled-back events wait (most of them due at once),
// through the retry records, the catalog's waiting events and replay.
func crashRetrying(d crashDriver) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		r.cfg.Groups = []GroupConfig{{RetryDelays: []time.Duration{0, time.Millisecond}}}
		r.unordered = true
		return d(r, seed, steps)
	}
}

// crashKeyed is d with the unnamed group (crashRetrying's) keyed by the
// events' tag header (three keys): keys wait with their events, through
// the retry records naming a key's first, the parked events in a
// checkpoint, and Open's keyWaiting.
func crashKeyed(d crashDriver) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		r.cfg.Groups[0].OrderKey = "tag"
		return d(r, seed, steps)
	}
}

// crashSerial is the serial workload (crashWorkload.serial).
func crashSerial(r *crashRun, seed uint64, steps int) (string, error) {
	return "", newCrashWorkload(r, seed, 42).serial(steps)
}

// crashConcurrent is the concurrent workload, with 3 producers.
func crashConcurrent(r *crashRun, seed uint64, steps int) (string, error) {
	return "", newCrashWorkload(r, seed, 42).concurrent(steps, 3)
}

// crashEncrypted is d on an encrypted channel: every log file encrypted.
func crashEncrypted(d crashDriver) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		withCrashKeys(r)
		return d(r, seed, steps)
	}
}

// withCrashKeys sets the keys of r's channel (Config.Keys).
func withCrashKeys(r *crashRun) {
	r.cfg.Keys = StaticKeys("k1", map[string][]byte{"k1": bytes.Repeat([]byte{0x5c}, KeySize)})
}
