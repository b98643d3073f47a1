package replay

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
)

// applier collects the effect of the records after the checkpoint and
// applies it to the queue in one pass at the end.
type applier struct {
	txPuts  map[uint64][]eventqueue.Pointer // uncommitted put records seen, per tx
	spare   [][]eventqueue.Pointer          // emptied slices of txPuts, for reuse
	txTakes map[uint64][]takePart           // take records seen, per tx and group
	txSkips map[uint64][]uint32             // skip records seen: the groups a put tx does not reach
	// txFilters: filter skip records seen: per put tx, the events of it
	// (by put order) that a group's filter keeps out.
	txFilters map[uint64][]filterPart
	txMoves   map[uint64][]takePart // move records seen, per tx and the group moved to
	// txDups: duplicate records seen: per put tx, the ranges of its
	// events (in put order) its commit dropped. txIDs: per put tx, the
	// deduplication ids of its puts read (Options.DedupHeader).
	txDups map[uint64][]uint32
	txIDs  map[uint64][]putID
	dedup  dedupReader
	// txSpilled: put transactions with a put that holds no commit time
	// in a file that records times (version 7 on): they spilled.
	txSpilled map[uint64]bool
	puts      *eventqueue.Inflight // spilled puts in flight at the checkpoint

	// groups is the consumer groups as of the record being applied, by id
	// (catalog records change it); nextGroupID the catalog's next id.
	groups      map[uint32]*groupState
	nextGroupID uint32
	dlqs        []*groupState // the dead-letter groups among them: no put reaches them

	committed []eventqueue.Pointer // committed puts, in commit order
	res       *Result
	completes map[uint32]map[uint32]struct{} // see Result.Completes

	// short lists put transactions whose commit counts more events than
	// the replay found; finish decides, once every damaged region is
	// known, whether damage took the missing ones (see shortTx).
	short   []shortTx
	sources map[uint32]*source // by file id, for their skipped regions
}

// shortTx is a committed put transaction with fewer put records than its
// commit counts. Either log deletion removed some (a file holding only its
// spilled puts, all of them taken since: normal), or damage did (then no
// event of it may become visible).
type shortTx struct {
	tx         uint64
	commitFile uint32
	commitOff  int64
	found      []eventqueue.Pointer // its puts the replay found
	count      uint64
}

// spareSlice returns an empty pointer slice, reusing one of a finished
// transaction: a replay of a million puts in batches of a thousand then
// grows a few slices instead of a thousand.
func (a *applier) spareSlice() []eventqueue.Pointer {
	if n := len(a.spare); n > 0 {
		ps := a.spare[n-1]
		a.spare = a.spare[:n-1]
		return ps[:0]
	}
	return nil
}

// forget drops tx's pointer slice from m and keeps it for reuse (the
// pointers were copied where they are still needed).
func (a *applier) forget(m map[uint64][]eventqueue.Pointer, tx uint64) {
	if ps, ok := m[tx]; ok {
		delete(m, tx)
		if cap(ps) > 0 && len(a.spare) < maxSpare {
			a.spare = append(a.spare, ps)
		}
	}
}

// maxSpare bounds the slices forget keeps.
const maxSpare = 64

func (a *applier) apply(src *source, off int64, r *logfile.Record, log *slog.Logger) {
	file := src.id
	switch r.Type {
	case logfile.RecordPut:
		if r.Time == 0 && src.timed() {
			a.txSpilled[r.TxID] = true
		}
		ps, ok := a.txPuts[r.TxID]
		if !ok {
			ps = a.spareSlice()
		}
		if src.hasID || src.idUnread {
			a.noteID(r, len(ps), src.dedupID, src.idUnread)
		}
		a.txPuts[r.TxID] = append(ps, eventqueue.NewPointer(file, uint32(off)))
	case logfile.RecordTake:
		a.addPart(a.txTakes, r)
	case logfile.RecordSkip:
		a.txSkips[r.TxID] = append(a.txSkips[r.TxID], r.Skip...)
	case logfile.RecordFilterSkip:
		if a.txFilters == nil {
			a.txFilters = map[uint64][]filterPart{}
		}
		a.txFilters[r.TxID] = append(a.txFilters[r.TxID], filterPart{group: r.Group, ranges: r.Ranges})
	case logfile.RecordDuplicate:
		if a.txDups == nil {
			a.txDups = map[uint64][]uint32{}
		}
		a.txDups[r.TxID] = append(a.txDups[r.TxID], r.Ranges...)
	case logfile.RecordDeliver:
		a.res.Deliveries += len(r.Pointers)
		if g := a.groups[r.Group]; g != nil && len(r.Counts) == len(r.Pointers) {
			for i, p := range r.Pointers {
				g.delivered(eventqueue.Pointer(p), r.Counts[i])
			}
		}
	case logfile.RecordRetry:
		if g := a.groups[r.Group]; g != nil && len(r.Due) == len(r.Pointers) {
			for i, p := range r.Pointers {
				g.waitUntil(eventqueue.Pointer(p), r.Due[i])
			}
		}
	case logfile.RecordMove:
		a.addPart(a.txMoves, r)
	case logfile.RecordGroups:
		a.catalog(r)
	case logfile.RecordRollback:
		a.res.Rollbacks++
		a.res.Dropped += len(a.puts.Remove(r.TxID)) + len(a.txPuts[r.TxID])
		a.forget(a.txPuts, r.TxID)
		a.forgetTakes(r.TxID)
		delete(a.txSkips, r.TxID)
		delete(a.txFilters, r.TxID)
		delete(a.txDups, r.TxID)
		delete(a.txIDs, r.TxID)
		delete(a.txSpilled, r.TxID)
	case logfile.RecordCommit:
		a.res.Commits++
		switch r.CommitType {
		case logfile.RecordPut:
			a.commitPuts(file, off, r)
		case logfile.RecordTake:
			a.commitTakes(src, off, r, log)
		}
	}
}

// addPart adds the pointers of take or move record r to its
// transaction's parts in m: to the last one if it is r's group's, else to
// a new one.
func (a *applier) addPart(m map[uint64][]takePart, r *logfile.Record) {
	parts := m[r.TxID]
	if n := len(parts); n == 0 || parts[n-1].group != r.Group {
		parts = append(parts, takePart{group: r.Group, ptrs: a.spareSlice()})
	}
	last := &parts[len(parts)-1]
	for _, p := range r.Pointers {
		last.ptrs = append(last.ptrs, eventqueue.Pointer(p))
	}
	m[r.TxID] = parts
}

// commitPuts applies a put commit: the transaction's events go to every
// group but those its skip records name, and the events its drop records
// list (a full DropOldest group's oldest) leave their groups.
func (a *applier) commitPuts(file uint32, off int64, r *logfile.Record) {
	spilled := a.puts.Remove(r.TxID)
	if n := len(spilled) + len(a.txPuts[r.TxID]); uint64(n) < r.Count {
		found := append(append([]eventqueue.Pointer(nil), spilled...), a.txPuts[r.TxID]...)
		a.short = append(a.short, shortTx{tx: r.TxID, commitFile: file, commitOff: off, found: found, count: r.Count})
	}
	// The commit record completes puts that may sit in older files:
	// this file must outlive them (see Result.Completes). With filter
	// skip records or a duplicate record (indices into all of its puts),
	// they must outlive it too (channel's pinSpilledPuts).
	pinned := len(a.txFilters[r.TxID]) > 0 || len(a.txDups[r.TxID]) > 0
	for _, ps := range [][]eventqueue.Pointer{spilled, a.txPuts[r.TxID]} {
		for _, p := range ps {
			if f := p.FileID(); f != file {
				addCompletes(a.completes, file, f)
				if pinned {
					addCompletes(a.completes, f, file)
				}
			}
		}
	}
	if len(spilled) > 0 || a.txSpilled[r.TxID] {
		a.noteSpilled(r, spilled, a.txPuts[r.TxID])
	}
	a.noteEvents(r, spilled, a.txPuts[r.TxID])
	a.commitIDs(r, spilled)
	start := len(a.committed)
	a.committed = append(a.committed, spilled...)
	a.committed = append(a.committed, a.txPuts[r.TxID]...)
	a.res.Puts += int64(len(spilled) + len(a.txPuts[r.TxID]))
	a.forget(a.txPuts, r.TxID)
	for _, id := range a.txSkips[r.TxID] {
		if g := a.groups[id]; g != nil {
			g.skip(start, len(a.committed))
			a.res.GroupSkips += int64(len(a.committed) - start)
		}
	}
	for _, g := range a.dlqs {
		g.skip(start, len(a.committed))
	}
	delete(a.txSkips, r.TxID)
	a.applyFilters(r.TxID, start, len(a.committed))
	for _, part := range a.txTakes[r.TxID] {
		if g := a.groups[part.group]; g != nil {
			for _, p := range part.ptrs {
				g.took(p)
			}
			a.res.GroupDrops += int64(len(part.ptrs))
		}
	}
	a.forgetTakes(r.TxID)
}

// noteSpilled records put commit r of a transaction that spilled, for the
// files holding its puts (Result.Spilled): the ids and times of those
// events come from it.
func (a *applier) noteSpilled(r *logfile.Record, puts ...[]eventqueue.Pointer) {
	delete(a.txSpilled, r.TxID)
	c := logfile.SpilledCommit{WriteOrderID: r.WriteOrderID, Time: r.Time}
	for _, ps := range puts {
		for _, p := range ps {
			addSpilled(a.res.Spilled, p.FileID(), r.TxID, c)
		}
	}
}

// noteEvents extends the index of every file holding an event of put
// commit r (Result.Index). A file the checkpoint listed without an index
// stays unknown.
func (a *applier) noteEvents(r *logfile.Record, puts ...[]eventqueue.Pointer) {
	last := uint32(0)
	for _, ps := range puts {
		for _, p := range ps {
			if f := p.FileID(); f != last {
				last = f
				x, ok := a.res.Index[f]
				if !ok {
					x.Known = true
				}
				a.res.Index[f] = x.Add(r.WriteOrderID, r.Time)
			}
		}
	}
}

// addSpilled records in m the spilled commit c of transaction tx whose
// puts are in file.
func addSpilled(m map[uint32]map[uint64]logfile.SpilledCommit, file uint32, tx uint64, c logfile.SpilledCommit) {
	if m[file] == nil {
		m[file] = map[uint64]logfile.SpilledCommit{}
	}
	m[file][tx] = c
}

// commitTakes applies a take commit: the group's events it lists are gone.
func (a *applier) commitTakes(src *source, off int64, r *logfile.Record, log *slog.Logger) {
	// The channel writes a transaction's take record (listing every
	// event it took, in flight at the checkpoint or not) together
	// with its commit.
	n := 0
	for _, part := range a.txTakes[r.TxID] {
		n += len(part.ptrs)
	}
	if uint64(n) != r.Count {
		// Take records lost to damage: the events they took stay
		// in the channel (delivered again, never lost).
		a.res.DamagedTxs++
		a.res.Damaged = append(a.res.Damaged, DamagedTx{TxID: r.TxID, File: src.path, CommitOffset: off,
			Events: int(r.Count), Found: n, Cause: a.takeDamage(src, off)})
		log.Error("replay: a committed take transaction's records were damaged; its lost takes stay queued",
			"file", src.path, "tx", r.TxID, "commit_offset", off, "events", r.Count, "found", n)
	}
	for _, part := range a.txTakes[r.TxID] {
		g := a.groups[part.group]
		if g == nil {
			// A group removed since (or damage took the catalog
			// that named it): nothing of it is recovered.
			a.res.TakesOfNoGroup += len(part.ptrs)
			continue
		}
		for _, p := range part.ptrs {
			a.res.Takes++
			if g.takes.RemovePointer(r.TxID, p) {
				delete(g.deliveries, p)
				delete(g.waiting, p)
			} else {
				g.took(p)
			}
		}
	}
	// Its move records: the events it took land in their new group.
	for _, part := range a.txMoves[r.TxID] {
		if g := a.groups[part.group]; g != nil {
			a.moveIn(g, part.ptrs)
		} else {
			a.res.TakesOfNoGroup += len(part.ptrs)
		}
	}
	a.forgetTakes(r.TxID)
}

// forgetTakes drops tx's take and move records, keeping their slices for
// reuse.
func (a *applier) forgetTakes(tx uint64) {
	for _, m := range []map[uint64][]takePart{a.txTakes, a.txMoves} {
		for _, part := range m[tx] {
			if cap(part.ptrs) > 0 && len(a.spare) < maxSpare {
				a.spare = append(a.spare, part.ptrs)
			}
		}
		delete(m, tx)
	}
}

// damaged reports whether damage may have taken the missing puts of t, and
// the damage it blames: a skipped region in the file of its commit, from (or
// right before) its first put there up to the commit; or, in a file holding
// its other puts, a skipped region or a torn tail after (or right before)
// the first of them. Padding records count as skipped regions: a repair
// wrote them over damage. Missing puts without such damage were in log files
// deleted because every event in them was taken.
func (a *applier) damaged(t shortTx) (Place, bool) {
	lo := map[uint32]int64{t.commitFile: t.commitOff}
	for _, p := range t.found {
		if l, ok := lo[p.FileID()]; !ok || int64(p.Offset()) < l {
			lo[p.FileID()] = int64(p.Offset())
		}
	}
	// Files in id order, so that the place blamed does not depend on map
	// order.
	files := make([]uint32, 0, len(lo))
	for f := range lo {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, f := range files {
		l := lo[f]
		src := a.sources[f]
		if src == nil {
			continue
		}
		for i, regions := range [2][]logfile.Skip{src.sc.Skipped(), src.pads} {
			for _, sk := range regions {
				if sk.Offset == 0 || sk.Offset+sk.Length < l {
					continue // a damaged header, or damage well before its records
				}
				if f == t.commitFile && sk.Offset >= t.commitOff {
					continue
				}
				return Place{File: src.path, Offset: sk.Offset, Padding: i == 1}, true
			}
		}
		if src.sc.Tail() == logfile.TailTorn && src.sc.End() >= l && f != t.commitFile {
			// Its later puts may have been in the damaged end.
			return Place{File: src.path, Offset: src.sc.End(), Tail: true}, true
		}
	}
	return Place{}, false
}

// finish applies the collected commits to every group's queue (see
// finishGroup) and returns the groups as the end of the logs leaves them.
// newQueue makes the queue of a group the checkpoint did not have.
func (a *applier) finish(newQueue func(logfile.GroupInfo) (*eventqueue.Queue, error), journal []checkpoint.JournalEntry,
	log *slog.Logger) ([]GroupResult, error) {
	a.decideShort(log)
	noted := journalCounts(journal)
	var out []GroupResult
	var buf []eventqueue.Pointer
	groups := a.sortedGroups()
	for i, g := range groups {
		if i == len(groups)-1 {
			// The last group to read applier.committed: its puts are
			// sorted out in place (groupPuts), with no copy.
			buf = a.committed[g.from:g.from]
		}
		if g.queue == nil {
			q, err := newQueue(g.info)
			if err != nil {
				return nil, fmt.Errorf("queue of consumer group %d (%q): %w", g.info.ID, g.info.Name, err)
			}
			g.queue = q
		}
		var err error
		if buf, err = a.finishGroup(g, buf[:0], log); err != nil {
			if len(a.groups) > 1 || g.info.ID != 0 {
				err = fmt.Errorf("consumer group %d (%q): %w", g.info.ID, g.info.Name, err)
			}
			return nil, err
		}
		out = append(out, GroupResult{Info: g.info, Queue: g.queue, New: !g.seeded, Deliveries: queuedDeliveries(g, noted[g.info.ID]),
			Waiting: queuedWaiting(g)})
	}
	a.res.Dropped += a.puts.Len()
	for _, ps := range a.txPuts {
		a.res.Dropped += len(ps)
	}
	return out, nil
}

// finishGroup applies the collected commits to g's queue:
//
//	returned in-flight takes ++ (checkpointed ring − taken) ++ (committed puts g receives − taken)
//
// buf is scratch space for the puts; it returns it.
func (a *applier) finishGroup(g *groupState, buf []eventqueue.Pointer, log *slog.Logger) ([]eventqueue.Pointer, error) {
	q := g.queue
	// The takes match the events' occurrences oldest first: in flight at
	// the checkpoint, then the ring, then what came after.
	entries := inflightTakes(g)
	if err := a.removeTaken(g); err != nil {
		return buf, err
	}
	puts := a.groupPuts(buf, g)
	a.countMissing(g, log)
	needed := q.Size() + len(puts)
	for _, e := range entries {
		needed += len(e.Pointers)
	}
	if over := needed - q.Capacity(); over > 0 {
		if g.info.Policy == policyBlock {
			return puts, &CapacityError{Needed: needed, Capacity: q.Capacity()}
		}
		// A group that drops when full does not stop a recovery: damage
		// took a record of its drops, or its capacity shrank. Apply its
		// policy to what does not fit, and say so.
		puts = a.dropOverflow(g, puts, over)
		log.Warn("replay: a consumer group holds more events than its capacity: its full policy dropped the overflow",
			"group", g.info.Name, "policy", g.info.Policy, "capacity", q.Capacity(), "dropped", over)
	}
	// Takes in flight at the checkpoint that never committed go back to the
	// head, oldest first.
	for i := len(entries) - 1; i >= 0; i-- {
		ps := entries[i].Pointers
		for j := len(ps) - 1; j >= 0; j-- {
			if err := q.AddHead(ps[j]); err != nil {
				return puts, fmt.Errorf("return in-flight takes: %d events do not fit in capacity %d: %w", q.Size()+1, q.Capacity(), err)
			}
			a.res.Returned++
		}
	}
	for i, p := range puts {
		if err := q.AddTail(p); err != nil {
			return puts, fmt.Errorf("%d recovered events do not fit in capacity %d: %w", q.Size()+len(puts)-i, q.Capacity(), err)
		}
	}
	return puts, nil
}

// queuedDeliveries returns the delivery counts of the events g's queue
// holds, each the larger of the replay's and the journal's (noted), or
// nil. A count whose event is gone (taken or moved since, or its take
// record lost with a deleted log file or to damage) is dropped.
func queuedDeliveries(g *groupState, noted map[eventqueue.Pointer]uint32) map[eventqueue.Pointer]uint32 {
	if len(g.deliveries) == 0 && len(noted) == 0 {
		return nil
	}
	out := make(map[eventqueue.Pointer]uint32, len(g.deliveries))
	for i := range g.queue.Size() {
		p := g.queue.Get(i)
		if n := max(g.deliveries[p], noted[p]); n > 0 {
			out[p] = n
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// journalCounts returns the journal's largest count of each event, by
// group.
func journalCounts(entries []checkpoint.JournalEntry) map[uint32]map[eventqueue.Pointer]uint32 {
	out := map[uint32]map[eventqueue.Pointer]uint32{}
	for _, e := range entries {
		m := out[e.Group]
		if m == nil {
			m = map[eventqueue.Pointer]uint32{}
			out[e.Group] = m
		}
		p := eventqueue.Pointer(e.Pointer)
		m[p] = max(m[p], e.Count)
	}
	return out
}

// Consumer-group full policies, as groups records number them.
const (
	policyBlock      = 0
	policyDropOldest = 1
)

// dropOverflow drops over events of g that do not fit its capacity: the
// oldest (from the head of its ring, then from puts) for a DropOldest
// group, the newest puts otherwise. It returns what is left of puts.
func (a *applier) dropOverflow(g *groupState, puts []eventqueue.Pointer, over int) []eventqueue.Pointer {
	a.res.GroupDrops += int64(over)
	if g.info.Policy != policyDropOldest {
		return puts[:max(len(puts)-over, 0)]
	}
	for ; over > 0 && g.queue.Size() > 0; over-- {
		g.queue.RemoveHead()
	}
	return puts[min(over, len(puts)):]
}

// decideShort sorts out each put transaction with fewer puts than its
// commit counts, now that every damaged region is known. Its commit record
// is intact, so it is committed either way, and every put of it that was
// read back is delivered. If damage lies among or right before its records
// (damaged), the missing puts are counted as lost to that damage and the
// transaction is listed in Result.Damaged; otherwise they were in log files
// deleted because every event in them was taken.
func (a *applier) decideShort(log *slog.Logger) {
	deletedTxs, deletedEvents := 0, uint64(0)
	for _, t := range a.short {
		cause, ok := a.damaged(t)
		if !ok {
			deletedTxs++
			deletedEvents += t.count - uint64(len(t.found))
			log.Debug("replay: a committed put transaction has puts in deleted log files (their events were taken)",
				"tx", t.tx, "events", t.count, "found", len(t.found))
			continue
		}
		a.res.DamagedTxs++
		a.res.Damaged = append(a.res.Damaged, DamagedTx{Put: true, TxID: t.tx, File: a.sources[t.commitFile].path,
			CommitOffset: t.commitOff, Events: int(t.count), Found: len(t.found), Cause: cause, found: t.found})
		log.Error("replay: damage took events of a committed put transaction; its intact events are delivered",
			"file", logfile.LogName(t.commitFile), "tx", t.tx, "commit_offset", t.commitOff, "events", t.count, "found", len(t.found),
			"lost", t.count-uint64(len(t.found)), "damage_file", cause.File, "damage_offset", cause.Offset)
	}
	if deletedTxs > 0 {
		log.Info("replay: committed put transactions with puts in deleted log files (normal: every event in those files was taken)",
			"transactions", deletedTxs, "events", deletedEvents)
	}
}

// inflightTakes returns g's takes in flight at the checkpoint that no
// committed transaction completed. One may have rolled back (which writes
// nothing) and its events been taken again by a transaction that
// committed: those events are gone, not in flight.
func inflightTakes(g *groupState) []eventqueue.InflightTx {
	entries := g.takes.Entries()
	for i := range entries {
		ps := entries[i].Pointers[:0:0]
		for _, p := range entries[i].Pointers {
			if g.consume(p) {
				continue
			}
			ps = append(ps, p)
		}
		entries[i].Pointers = ps
	}
	return entries
}

// removeTaken removes g's taken events from its checkpointed ring. They
// are almost always near its head: it walks a bounded prefix, then uses the
// index. The takes it does not find there are left for the events after
// the checkpoint (groupPuts), then counted by countMissing.
func (a *applier) removeTaken(g *groupState) error {
	q := g.queue
	if len(g.taken) == 0 {
		return nil
	}
	limit := 4*len(g.taken) + 1024
	var kept []eventqueue.Pointer
	for walked := 0; len(g.taken) > 0 && walked < limit && q.Size() > 0; walked++ {
		p, _ := q.RemoveHead()
		if g.consume(p) {
			continue
		}
		kept = append(kept, p)
	}
	for i := len(kept) - 1; i >= 0; i-- {
		if err := q.AddHead(kept[i]); err != nil {
			return fmt.Errorf("restore queue head: %w", err)
		}
	}
	for p := range g.taken {
		if q.Remove(p) {
			g.consume(p)
		}
	}
	q.DropIndex()
	return nil
}

// countMissing counts the takes of g that matched no event in Missing (in
// MissingDeleted when the event's file was deleted: normal in a full
// replay), and logs the others.
func (a *applier) countMissing(g *groupState, log *slog.Logger) {
	var unexpected []eventqueue.Pointer
	deleted := 0
	for p, n := range g.taken {
		a.res.Missing += n
		if _, ok := a.sources[p.FileID()]; !ok {
			// The put's file was deleted, as every event in it was taken.
			a.res.MissingDeleted += n
			deleted += n
			continue
		}
		unexpected = append(unexpected, p)
	}
	clear(g.taken)
	if deleted > 0 {
		log.Info("replay: committed takes of events in deleted log files (normal: a file is deleted once every event in it is taken)",
			"takes", deleted)
	}
	a.logMissing(unexpected, log)
}

// takeDamage is the damage blamed for the lost take records of a take
// transaction committed at off in src: the last damaged region before the
// commit (the channel writes a transaction's take record right before its
// commit, so the damage is almost always the region just before it). The
// regions read so far are the scanner's and the padding seen.
func (a *applier) takeDamage(src *source, off int64) Place {
	var best Place
	found := false
	for i, regions := range [2][]logfile.Skip{src.sc.Skipped(), src.pads} {
		for _, sk := range regions {
			if sk.Offset == 0 || sk.Offset >= off { // a damaged header (at 0), or after the commit
				continue
			}
			if !found || sk.Offset > best.Offset {
				best, found = Place{File: src.path, Offset: sk.Offset, Padding: i == 1}, true
			}
		}
	}
	if !found {
		return Place{File: src.path, Offset: -1}
	}
	return best
}

// logMissing logs, in one line, the committed takes of events that are not
// queued although the log file of their put is there. (Takes of events in
// deleted files are normal and only counted.) This happens when the put was
// dropped by damage, or when the checkpoint and the logs disagree.
func (a *applier) logMissing(ps []eventqueue.Pointer, log *slog.Logger) {
	if len(ps) == 0 {
		return
	}
	slices.Sort(ps)
	first := make([]string, 0, min(len(ps), maxLogged))
	for _, p := range ps[:min(len(ps), maxLogged)] {
		first = append(first, p.String())
	}
	log.Warn("replay: committed takes refer to events that are not queued, in log files that exist (their puts were lost to damage, or the checkpoint disagrees with the logs: run fcreplay verify)",
		"takes", len(ps), "first", first)
}

// maxLogged is how many pointers a summary log line names.
const maxLogged = 5

// filterPart is a filter skip record: the events of a put transaction
// (ranges of (first, count) in put order) that group's filter keeps out.
type filterPart struct {
	group  uint32
	ranges []uint32
}

// applyFilters applies the filter skip and duplicate records of put
// transaction tx, whose events are applier.committed[start:end]: each group
// skips the events its filter kept out, and every group the duplicates
// (ranges past end, of events damage took, are cut).
func (a *applier) applyFilters(tx uint64, start, end int) {
	parts, dups := a.txFilters[tx], a.txDups[tx]
	delete(a.txFilters, tx)
	delete(a.txDups, tx)
	for _, fp := range parts {
		a.res.FilteredOut += int64(countRanges(fp.ranges, end-start))
	}
	if len(dups) == 0 {
		for _, fp := range parts {
			if g := a.groups[fp.group]; g != nil {
				skipRanges(g, start, end, fp.ranges)
			}
		}
		return
	}
	a.res.Duplicates += int64(countRanges(dups, end-start))
	for id, g := range a.groups {
		rs := dups
		for _, fp := range parts {
			if fp.group == id {
				rs = unionRanges(fp.ranges, dups)
			}
		}
		skipRanges(g, start, end, rs)
	}
}

// skipRanges makes g skip the events of ranges rs (increasing) of a
// transaction whose events are committed[start:end].
func skipRanges(g *groupState, start, end int, rs []uint32) {
	for i := 0; i+1 < len(rs); i += 2 {
		from := start + int(rs[i])
		if to := min(from+int(rs[i+1]), end); from < to {
			g.skip(from, to)
		}
	}
}
