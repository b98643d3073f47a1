package checkpoint

import (
	"fmt"
	"slices"
)

// Dirty pages: slot changes are buffered in memory, a page of pageSlots
// consecutive file slots at a time, and reach the file only when a
// checkpoint writes them. A page is keyed by file slot >> pageShift (a file
// slot is HeaderSlots + the ring slot).
const (
	pageShift = 9
	pageSlots = 1 << pageShift // 512 slots, 4 KiB
	pageMask  = pageSlots - 1
)

type page [pageSlots]uint64

// pages holds the two generations of dirty pages. Every field is touched only
// by Slot, SetSlot, Freeze, Thaw and DirtyPages, which the caller serialises
// (under its queue lock); between Freeze and Thaw, Write also reads frozen and
// its pages, which nobody modifies then.
type pages struct {
	cur    map[int]*page // changed since the last Freeze
	frozen map[int]*page // the generation being written; nil when none
	spare  map[int]*page // an emptied map for the next Freeze

	// The page last touched. cacheCur says it is in cur (SetSlot may write
	// it); otherwise it is a frozen page (Slot may read it).
	cacheKey  int // -1 = nothing cached
	cachePage *page
	cacheCur  bool
}

func (g *pages) init() {
	g.cur = make(map[int]*page)
	g.cacheKey = -1
}

func (g *pages) setCache(k int, p *page, cur bool) {
	g.cacheKey, g.cachePage, g.cacheCur = k, p, cur
}

func (g *pages) dropCache() { g.setCache(-1, nil, false) }

// fileSlot returns the file slot of ring slot i (HeaderSlots+i); it panics,
// as a slice would, on an index outside the ring.
func (c *Checkpoint) fileSlot(i int) int {
	if uint(i) >= uint(c.capacity) {
		panic(fmt.Sprintf("checkpoint: ring slot %d outside the ring [0, %d)", i, c.capacity))
	}
	return HeaderSlots + i
}

// Slot returns ring slot i, in [0, Capacity()) (file slot HeaderSlots+i):
// its buffered value if it is dirty, else the file's. Calls to Slot,
// SetSlot, Freeze, Thaw and DirtyPages must be serialised by the caller;
// Slot may run concurrently with Write.
func (c *Checkpoint) Slot(i int) uint64 {
	i = c.fileSlot(i)
	g := &c.pages
	k := i >> pageShift
	if k == g.cacheKey {
		return g.cachePage[i&pageMask]
	}
	if p := g.cur[k]; p != nil {
		g.setCache(k, p, true)
		return p[i&pageMask]
	}
	if p := g.frozen[k]; p != nil {
		g.setCache(k, p, false)
		return p[i&pageMask]
	}
	v, err := c.store.slot(i)
	if err != nil {
		c.setReadErr(err)
	}
	return v
}

// SetSlot sets ring slot i (in [0, Capacity())) to v in a dirty page of the
// current generation; it never touches the file. The first change to a page
// copies it from the frozen generation if that has it, else from the file.
func (c *Checkpoint) SetSlot(i int, v uint64) {
	i = c.fileSlot(i)
	g := &c.pages
	k := i >> pageShift
	if k == g.cacheKey && g.cacheCur {
		g.cachePage[i&pageMask] = v
		return
	}
	p := g.cur[k]
	if p == nil {
		p = c.loadPage(k)
		g.cur[k] = p
	}
	g.setCache(k, p, true)
	p[i&pageMask] = v
}

// loadPage returns a new copy of page k as a reader sees it now.
func (c *Checkpoint) loadPage(k int) *page {
	p := new(page)
	if f := c.pages.frozen[k]; f != nil {
		*p = *f
		return p
	}
	lo, hi := c.pageRange(k)
	base := k << pageShift
	if err := c.store.readSlots(lo, p[lo-base:hi-base]); err != nil {
		c.setReadErr(err)
	}
	return p
}

// pageRange is the part of page k that lies in the ring: physical slots
// [lo, hi).
func (c *Checkpoint) pageRange(k int) (lo, hi int) {
	base := k << pageShift
	return max(base, HeaderSlots), min(base+pageSlots, c.total)
}

// Freeze makes the current dirty pages the frozen generation, which the next
// Write persists, and starts an empty current generation. It is O(1) and is
// called under the caller's queue lock at the moment the checkpoint's state is
// captured. Each Freeze must be followed by Write and then Thaw; a second
// Freeze before Thaw panics.
func (c *Checkpoint) Freeze() {
	g := &c.pages
	if g.frozen != nil {
		panic("checkpoint: Freeze called again before Thaw")
	}
	g.frozen, g.cur = g.cur, g.spare
	if g.cur == nil {
		g.cur = make(map[int]*page)
	}
	g.spare = nil
	g.dropCache()
}

// Thaw ends the frozen generation; it is called under the queue lock after
// Write returns. ok=true (Write succeeded) drops the frozen pages: the file
// has them now. ok=false merges them back under the current generation
// (current pages, copied from the frozen ones and changed since, win), so the
// next checkpoint writes those slots again. Thaw without Freeze does nothing.
func (c *Checkpoint) Thaw(ok bool) {
	g := &c.pages
	if g.frozen == nil {
		return
	}
	if !ok {
		for k, p := range g.frozen {
			if _, newer := g.cur[k]; !newer {
				g.cur[k] = p
			}
		}
	}
	clear(g.frozen)
	g.spare, g.frozen = g.frozen, nil
	g.dropCache()
}

// DirtyPages is the number of pages buffered in memory: the current
// generation plus the frozen one, if any. Zero means the file holds every slot
// value. It is serialised like SetSlot.
func (c *Checkpoint) DirtyPages() int {
	return len(c.pages.cur) + len(c.pages.frozen)
}

// frozenKeys returns the keys of the frozen pages in ascending order, in a
// slice reused by every Write.
func (c *Checkpoint) frozenKeys() []int {
	keys := c.keys[:0]
	for k := range c.pages.frozen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	c.keys = keys
	return keys
}
