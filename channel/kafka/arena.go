package kafka

import "sync"

// arenaChunk is the size of the blocks a put transaction copies its events'
// bodies into, recycled once Kafka acknowledged them: no allocation (and no
// zeroing) per event.
const arenaChunk = 64 << 10

var chunks = sync.Pool{New: func() any { b := make([]byte, 0, arenaChunk); return &b }}

// arena holds copies of a transaction's bodies in pooled chunks; a body
// larger than a quarter chunk gets a block of its own, not pooled.
type arena struct {
	cur    []byte    // the chunk being filled
	pooled []*[]byte // every pooled chunk in use, cur's included
}

// copy returns a copy of b (non-nil, even when empty).
func (a *arena) copy(b []byte) []byte {
	n := len(b)
	if n > arenaChunk/4 {
		return append(make([]byte, 0, n), b...)
	}
	if cap(a.cur)-len(a.cur) < n || a.cur == nil {
		p := chunks.Get().(*[]byte)
		a.pooled = append(a.pooled, p)
		a.cur = (*p)[:0]
	}
	off := len(a.cur)
	a.cur = append(a.cur, b...)
	return a.cur[off : off+n : off+n]
}

// free returns the chunks to the pool: nothing may use the copies after.
func (a *arena) free() {
	for _, p := range a.pooled {
		*p = (*p)[:0]
		chunks.Put(p)
	}
	*a = arena{}
}
