package main

import (
	"sync"
	"time"
)

// Pending values: the data block of a set is held in memory from the
// moment the server starts to read it until the item is committed (or the
// set fails). Their total is bounded by -max-pending-bytes, counting each
// value's declared length (its \r\n excluded):
//
//   - a set whose value does not fit waits up to pendingWait for other sets
//     to finish; then its data block is read and thrown away (in small
//     pieces, without holding it) and it gets memcached's own reply for a
//     store that found no memory, outOfMemoryReply, which the memcached
//     clients know (libmemcached reports MEMCACHED_SERVER_MEMORY_ALLOCATION_
//     FAILURE) and which leaves the connection usable. STAT store_no_memory
//     counts them, STAT pending_bytes is the total held now.
//   - a data block must arrive within -value-timeout of the moment the
//     server starts to read it; a client that stalls mid-value is closed
//     and its reservation freed (STAT value_timeouts).
const (
	pendingWait      = time.Second
	outOfMemoryReply = "SERVER_ERROR out of memory storing object\r\n"
)

// pendingBytes bounds the bytes of values held at once across
// connections. It is a counting semaphore in bytes whose acquire waits a
// bounded time.
type pendingBytes struct {
	max int64

	// mu guards used and freed.
	mu   sync.Mutex
	used int64
	// freed is closed (and replaced) by each release, waking the
	// acquires that wait for room.
	freed chan struct{}
}

func newPendingBytes(max int64) *pendingBytes {
	return &pendingBytes{max: max, freed: make(chan struct{})}
}

// acquire reserves n bytes, waiting up to wait for room; false means
// there was none (or stop was closed meanwhile) and nothing is reserved.
// A request for more than the bound fails at once.
func (p *pendingBytes) acquire(n int64, wait time.Duration, stop <-chan struct{}) bool {
	if n > p.max {
		return false
	}
	var timeout <-chan time.Time
	for {
		p.mu.Lock()
		if p.used+n <= p.max {
			p.used += n
			p.mu.Unlock()
			return true
		}
		freed := p.freed
		p.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return false
		case <-stop:
			return false
		}
	}
}

// release returns n bytes reserved by acquire.
func (p *pendingBytes) release(n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	p.used -= n
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}

// inUse returns the bytes reserved now (STAT pending_bytes).
func (p *pendingBytes) inUse() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}
