package channel

import (
	"hash/maphash"

	"github.com/flumego/filechannel/eventqueue"
)

// Key tags. Beside each slot of a keyed group's ring (OrderKey) the
// queue keeps a tag (eventqueue's tags.go): what the channel knows of the
// key of the event queued there without reading it, so that a keyed Take
// claims (or parks) the event it pops in the same queueMu round, with no
// read, under orderMu shared, and reads it after, in parallel with the
// other takers (takeKeyed).
//
//   - tagUnknown (0): not known. The Take reads the event under orderMu
//     exclusive, as it did before tags, and claims its key then.
//   - tagNoKey (1): the event has no key (no header OrderKey, or "").
//   - any other value: the hash of its key (orderKeyOf). A key whose hash
//     is 0 or 1 is tagged unknown (one key in 2^63: it is read).
//
// Where tags come from: each Put computes, for every keyed group, the
// tag of its event from its headers (markKeys, no lock held, before any
// spill: a spilled put has its tag too), and the commit queues the
// events with them (queuePuts). The events a Take returns to the head
// keep their key's hash: a rollback's or an expired lease's keyed takes
// and a read that failed (keyTake.key), the events parked behind a key
// (their lane's key). Everything else queues tagUnknown: recovery (Open
// from a checkpoint, a full replay, Rebuild), ResetGroup, dead letters,
// Redrive, a keyless take returned, a DropOldest drop undone, a keyed
// group added after some of a transaction's Puts (for those puts).
// Unkeyed groups queue tag 0 only, so their rings keep no tags.
//
// Memory: 8 bytes per slot of a keyed group's ring once its first tagged
// event is queued (capacity × 8: 8 MB for a capacity of 1,000,000), in
// memory only; nothing per event elsewhere.

// The key tags that are not a hash.
const (
	tagUnknown uint64 = 0
	tagNoKey   uint64 = 1
)

// keyTagOf returns the key tag, in g, of an event with headers h.
func (g *groupState) keyTagOf(h map[string]string) uint64 {
	v := h[g.cfg.OrderKey]
	if v == "" {
		return tagNoKey
	}
	return keyTag(maphash.String(keySeed, v))
}

// keyTag returns the key tag of key hash k.
func keyTag(k uint64) uint64 {
	if k > tagNoKey {
		return k
	}
	return tagUnknown
}

// tagAt returns tags[i], tagUnknown if tags is nil.
func tagAt(tags []uint64, i int) uint64 {
	if tags == nil {
		return tagUnknown
	}
	return tags[i]
}

// keyMark is the key tags of a transaction's puts in a keyed group, by
// put index.
type keyMark struct {
	g    *groupState
	tags []uint64
}

// markKeys notes, for put i of t (the next, with headers h), its key tag
// in every keyed group of gs. It allocates nothing once the scratch is
// warm.
func (t *Transaction) markKeys(gs []*groupState, h map[string]string, i int) {
	for _, g := range gs {
		if g.keyed() {
			m := t.keyMarkOf(g)
			m.tags = append(padTags(m.tags, i), g.keyTagOf(h))
		}
	}
}

// padTags returns tags cut or padded with tagUnknown to n.
func padTags(tags []uint64, n int) []uint64 {
	tags = tags[:min(len(tags), n)]
	for len(tags) < n {
		tags = append(tags, tagUnknown)
	}
	return tags
}

// keyMarkOf returns t's key tags of g, adding them if missing.
func (t *Transaction) keyMarkOf(g *groupState) *keyMark {
	s := t.scratch()
	for i := range s.kmarks {
		if s.kmarks[i].g == g {
			return &s.kmarks[i]
		}
	}
	if len(s.kmarks) < cap(s.kmarks) {
		s.kmarks = s.kmarks[:len(s.kmarks)+1] // reuse its tags' memory
	} else {
		s.kmarks = append(s.kmarks, keyMark{})
	}
	m := &s.kmarks[len(s.kmarks)-1]
	m.g, m.tags = g, m.tags[:0]
	return m
}

// keyTagsOf returns the key tags of t's puts in g, by put index (those
// put before g was added are unknown), or nil if g is not keyed.
func (t *Transaction) keyTagsOf(g *groupState) []uint64 {
	if !g.keyed() {
		return nil
	}
	m := t.keyMarkOf(g)
	m.tags = padTags(m.tags, t.puts)
	return m.tags
}

// clearKeyMarks forgets t's key tags (commit or rollback), keeping their
// memory in the scratch.
func (t *Transaction) clearKeyMarks() {
	if t.s == nil {
		return
	}
	for i := range t.s.kmarks {
		t.s.kmarks[i].g = nil // no pointer to a group outlives its transaction
	}
	t.s.kmarks = t.s.kmarks[:0]
}

// takeTags returns the key tags of takes (tx's, in take order), to put
// them back in the ring: the key of each of tx's keyed takes
// (order.byTx, in the same order), tagUnknown for the others. The caller
// holds queueMu, before the keys are released.
func (g *groupState) takeTags(tx uint64, takes []eventqueue.Pointer) []uint64 {
	kts := g.order.byTx[tx]
	if len(kts) == 0 {
		return nil
	}
	tags := make([]uint64, len(takes))
	for i, p := range takes {
		if len(kts) > 0 && kts[0].p == p {
			tags[i], kts = keyTag(kts[0].key), kts[1:]
		}
	}
	return tags
}
