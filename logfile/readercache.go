package logfile

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/flumego/filechannel/internal/vfs"
)

// DefaultMaxOpenReaders is the number of log file readers a Set keeps open
// when SetOptions.MaxOpenReaders is 0.
const DefaultMaxOpenReaders = 256

// readerCache keeps the readers of a Set's log files open for takes, at
// most max of them: Pebble's table cache in small. It is an LRU of nodes,
// each a file's reader with a reference count: the cache holds one
// reference while the node is cached, and every ReaderRef handed out holds
// one more. Evicting a node (the least recently used, when a new one would
// pass max; the file's, when it is deleted) only drops the cache's
// reference: the reader is closed by whoever drops the last one, so a
// reader in use is never closed under its user, and a reader nobody uses
// is closed as soon as it leaves the cache.
//
// So at most max readers are open for the cache, plus those evicted while
// in use (one per concurrent take at most), until their users release them.
//
// A reader is opened outside mu, by the first caller that needs it; the
// others wait for it on the node's loaded channel. A failed open is not
// cached here (the Set keeps the *corrupt.Error of a header naming another
// file id; an I/O error is retried on the next use).
type readerCache struct {
	fs   vfs.FS
	log  *slog.Logger
	max  int
	keys Keys // opens encrypted files' puts (nil: they read back sealed)
	// channel is the set's channel: a version-6 file bound to another is
	// refused (zero: not checked).
	channel ChannelID

	// mu guards nodes, the LRU list and each node's refs, cached and
	// links. A leaf: no other lock is taken under it, and no I/O is done
	// under it.
	mu    sync.Mutex
	nodes map[uint32]*cacheNode
	lru   cacheNode // the list's sentinel: lru.next is the most recently used

	open atomic.Int64 // readers open now (cached or in use)
}

// cacheNode is one log file's reader in a readerCache.
type cacheNode struct {
	id   uint32
	path string

	refs       int  // the cache's (while cached) and one per ReaderRef
	cached     bool // in nodes and the list
	prev, next *cacheNode

	loaded chan struct{} // closed once r or err is set; they never change after
	r      *Reader
	err    error
}

func newReaderCache(fsys vfs.FS, log *slog.Logger, max int, keys Keys, channel ChannelID) *readerCache {
	c := &readerCache{fs: fsys, log: log, max: max, keys: keys, channel: channel, nodes: map[uint32]*cacheNode{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// ReaderRef is a reference to a log file's reader in a Set's cache of
// open readers (Set.Reader). The reader stays open until Release, even if
// the cache evicts it or the file is deleted meanwhile; Release must be
// called exactly once, and the Reader not used after.
type ReaderRef struct {
	*Reader
	c *readerCache
	n *cacheNode
}

// Release gives the reference back. The reader is closed if the cache no
// longer holds it and nobody else uses it.
func (r ReaderRef) Release() {
	if r.n != nil {
		r.c.release(r.n)
	}
}

// get returns a reference to the reader of log file id at path, opening it
// if the cache does not hold it. The caller must make sure the file is
// still one of the set's while get inserts its node (the Set holds its mu
// shared): a deleted file's node is evicted after it leaves the set.
func (c *readerCache) get(id uint32, path string) (ReaderRef, error) {
	c.mu.Lock()
	n := c.nodes[id]
	if n != nil {
		n.refs++
		c.unlinkLocked(n)
		c.pushFrontLocked(n)
		c.mu.Unlock()
		<-n.loaded
		if n.err != nil {
			c.release(n)
			return ReaderRef{}, n.err
		}
		return ReaderRef{Reader: n.r, c: c, n: n}, nil
	}
	n = &cacheNode{id: id, path: path, refs: 2, cached: true, loaded: make(chan struct{})}
	c.nodes[id] = n
	c.pushFrontLocked(n)
	var evicted []*cacheNode
	for len(c.nodes) > c.max {
		if e := c.evictLocked(c.lru.prev); e != nil {
			evicted = append(evicted, e)
		}
	}
	c.mu.Unlock()
	for _, e := range evicted {
		c.closeReader(e)
	}

	n.r, n.err = openReader(c.fs, path, c.keys, c.channel)
	if n.err == nil {
		c.open.Add(1)
	}
	close(n.loaded)
	if n.err != nil {
		c.mu.Lock()
		if n.cached {
			c.evictLocked(n) // n still holds our reference: nothing to close
		}
		c.mu.Unlock()
		c.release(n)
		return ReaderRef{}, n.err
	}
	return ReaderRef{Reader: n.r, c: c, n: n}, nil
}

// release drops one reference to n and closes its reader if it was the
// last.
func (c *readerCache) release(n *cacheNode) {
	c.mu.Lock()
	n.refs--
	last := n.refs == 0
	c.mu.Unlock()
	if last {
		c.closeReader(n)
	}
}

// evict takes log file id's reader out of the cache (the file is being
// deleted) and closes it unless it is in use; its last user closes it then.
func (c *readerCache) evict(id uint32) error {
	c.mu.Lock()
	var e *cacheNode
	if n := c.nodes[id]; n != nil {
		e = c.evictLocked(n)
	}
	c.mu.Unlock()
	if e == nil || e.r == nil {
		return nil
	}
	c.open.Add(-1)
	return e.r.Close()
}

// closeAll evicts every reader and closes those not in use (Set.Close).
func (c *readerCache) closeAll() error {
	c.mu.Lock()
	var evicted []*cacheNode
	for c.lru.next != &c.lru {
		if e := c.evictLocked(c.lru.next); e != nil {
			evicted = append(evicted, e)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, e := range evicted {
		if e.r != nil {
			c.open.Add(-1)
			errs = append(errs, e.r.Close())
		}
	}
	return errors.Join(errs...)
}

// evictLocked takes n out of the cache and drops the cache's reference. It
// returns n if that was the last one (the caller closes its reader, outside
// mu), else nil. A node whose last reference goes here was loaded: a node
// being loaded holds its loader's reference.
func (c *readerCache) evictLocked(n *cacheNode) *cacheNode {
	c.unlinkLocked(n)
	delete(c.nodes, n.id)
	n.cached = false
	n.refs--
	if n.refs == 0 {
		return n
	}
	return nil
}

// closeReader closes the reader of n, whose last reference was dropped.
// Closing a read-only file fails only if the descriptor was bad; there is
// no caller to tell, so it is logged.
func (c *readerCache) closeReader(n *cacheNode) {
	if n.r == nil {
		return
	}
	c.open.Add(-1)
	if err := n.r.Close(); err != nil {
		c.log.Warn("close log file reader", "file", n.path, "err", err)
	}
}

func (c *readerCache) pushFrontLocked(n *cacheNode) {
	n.prev, n.next = &c.lru, c.lru.next
	n.prev.next, n.next.prev = n, n
}

func (c *readerCache) unlinkLocked(n *cacheNode) {
	if n.prev == nil {
		return
	}
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
}
