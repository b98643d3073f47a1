package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/checkpoint"
)

// errTooManyQueues is returned when a set names a new queue and -max-queues
// are already open.
var errTooManyQueues = errors.New("too many queues")

// defaultCapacity is the capacity of a queue created without -capacity. A
// queue's checkpoint file is a ring of 8-byte slots, fully allocated:
// (1029 + capacity) × 8 bytes, so 808,232 bytes (0.8 MB) here, 52 MB for
// the default 64 queues, where the channel's default of 1,000,000 cost 8 MB
// a queue even when empty (the package doc adds up the rest of a queue's
// disk). 100,000 items is a backlog of minutes for a consumer that stops
// while producers go on at hundreds of sets a second.
const defaultCapacity = 100_000

// A queue's data dir is sized for many small queues, not for one channel
// that has the disk to itself (the channel's defaults: 1 MiB of space
// reserve and 4 MiB laid out ahead, per dir, would make an empty queue
// cost 6 MB while the server runs).
const (
	// queueFileSize is each queue's MaxFileSize. A checkpoint deletes a
	// log file only once no queued item is in it, so it also bounds the
	// taken items a queue keeps on disk.
	queueFileSize = 16 << 20
	// queueReserve is each queue's space reserve (Config.SpaceReserve),
	// the channel's own rule of MaxFileSize/64: room for the take records
	// of about 4,000 gets (61 bytes each) when the disk is full. Every
	// queue whose write meets the full disk gives up its reserve, so the
	// queues together have more.
	queueReserve = queueFileSize / 64
	// queuePreallocate is how much of each queue's active log file is
	// laid out ahead of its sets (Config.Preallocate): a set's fdatasync
	// then overwrites allocated blocks instead of growing the file.
	queuePreallocate = 256 << 10
)

// queues is the map of queue name to queue. A queue is created by the
// first set that stores an item in it, in -dir/<name>/ (checkpoint/ and
// data/), and opened again by the next start. It is removed by a delete
// when it holds nothing, and when a set needs room for a new queue beyond
// -max-queues, the empty queue without groups that was used least
// recently goes (remove has the rule).
type queues struct {
	dir string
	max int
	// capacity is -capacity, every queue's capacity; 0 means
	// defaultCapacity for a new queue and, for an existing one, the
	// capacity recorded in its checkpoint (see capacityOf).
	capacity int
	minFree  int64 // every queue's MinimumRequiredSpace (-min-free)
	logger   *slog.Logger
	// configure, if set, adjusts each queue's config (tests).
	configure func(*channel.Config)

	// mu guards byName, closed and created. Creating or removing a
	// queue opens or closes its channel under mu, so a get that arrives
	// meanwhile waits: both are rare, and the Open of a new, empty
	// channel is a few fsyncs.
	mu     sync.Mutex
	byName map[string]*queue
	closed bool
	// created is closed, and replaced, when a queue is created: a get
	// that waits (t=) for a queue that does not exist yet wakes.
	created chan struct{}
}

// queue is one queue: its channel, and the lock that lets a removal find
// it idle.
type queue struct {
	name string
	ch   *channel.FileChannel
	// mu is held shared while a command uses ch (a set's put, a get's
	// take and commit, the creation of a group) and exclusively by the
	// removal of the queue or of one of its groups, which must see it
	// empty and keep it so. Lock order: queues.mu, then queue.mu.
	mu      sync.RWMutex
	removed bool // ch is closed: look the queue up again
	// groupMu serializes the creation of groups (its -max-groups check
	// and AddGroup).
	groupMu sync.Mutex
	// used is when a set or get last used the queue (UnixNano): the
	// least recently used empty queue is the one removed for a new one.
	used atomic.Int64
}

func (q *queue) touch() { q.used.Store(time.Now().UnixNano()) }

// removedSuffix ends the name a removed queue's directory is renamed to
// before it is deleted: '~' is in no queue name, so a start never opens
// one (and deletes any a crash left).
const removedSuffix = "~removed"

// openQueues opens every queue found under dir. A directory whose name is
// not a queue name, or that holds no checkpoint/ directory, is left alone.
// The queues found are all opened, even beyond max: max only stops new ones.
// capacity is -capacity (0 = each queue's own; see capacityOf), minFree
// every queue's MinimumRequiredSpace.
func openQueues(dir string, max, capacity int, minFree int64, logger *slog.Logger, configure func(*channel.Config)) (*queues, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	qs := &queues{dir: dir, max: max, capacity: capacity, minFree: minFree, logger: logger, configure: configure,
		byName: map[string]*queue{}, created: make(chan struct{})}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() && strings.HasSuffix(name, removedSuffix) {
			// A removal that a crash interrupted: the queue was empty.
			qs.deleteDir(filepath.Join(dir, name))
			continue
		}
		if !e.IsDir() || !validName([]byte(name)) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name, "checkpoint")); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		ch, err := channel.Open(qs.config(name))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("open queue %s: %w", name, err), qs.close())
		}
		qs.byName[name] = newQueue(name, ch)
	}
	return qs, nil
}

func newQueue(name string, ch *channel.FileChannel) *queue {
	q := &queue{name: name, ch: ch}
	q.touch()
	return q
}

func (qs *queues) config(name string) channel.Config {
	cfg := qs.dirs(name)
	cfg.Capacity = qs.capacityOf(cfg)
	cfg.MinimumRequiredSpace = qs.minFree
	if qs.configure != nil {
		qs.configure(&cfg)
	}
	return cfg
}

// dirs is queue name's config without its capacity.
func (qs *queues) dirs(name string) channel.Config {
	return channel.Config{
		Name:          name,
		CheckpointDir: qs.checkpointDir(name),
		DataDirs:      []string{filepath.Join(qs.dir, name, "data")},
		MaxFileSize:   queueFileSize,
		SpaceReserve:  queueReserve,
		Preallocate:   queuePreallocate,
		KeepAlive:     time.Second,
		Logger:        qs.logger,
	}
}

func (qs *queues) checkpointDir(name string) string {
	return filepath.Join(qs.dir, name, "checkpoint")
}

// capacityOf returns the capacity to open queue name with: -capacity if it
// was given, else the capacity recorded in the queue's checkpoint
// (channel.RecordedCapacity), else (a new queue, or an unreadable
// checkpoint) defaultCapacity.
//
// An existing queue keeps its capacity because Open moves a queue into a
// ring of the configured Capacity and refuses when the queue holds more:
// a queue made by an older memcacheq, whose default was 1,000,000, may hold
// more than defaultCapacity items, and must still open. An explicit
// -capacity resizes every queue (and the start fails if one holds more).
func (qs *queues) capacityOf(cfg channel.Config) int {
	if qs.capacity > 0 {
		return qs.capacity
	}
	n, from, err := channel.RecordedCapacity(cfg)
	if err == nil && from != channel.CapacityDefault {
		return n
	}
	if _, serr := os.Stat(filepath.Join(cfg.CheckpointDir, checkpoint.MetaName)); !errors.Is(serr, fs.ErrNotExist) {
		// An existing queue whose checkpoint does not read: Open recovers
		// by a replay; if the queue then holds more than this, Open says
		// so and -capacity is the way out.
		qs.logger.Warn("cannot read the queue's recorded capacity; opening it with the default",
			"queue", cfg.Name, "dir", cfg.CheckpointDir, "capacity", defaultCapacity, "err", err)
	}
	return defaultCapacity
}

// lookup returns the queue name, or nil if there is none.
func (qs *queues) lookup(name string) (*queue, error) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closed {
		return nil, channel.ErrClosed
	}
	return qs.byName[name], nil
}

// createdSignal returns a channel closed when the next queue is created.
func (qs *queues) createdSignal() <-chan struct{} {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.created
}

// create returns the queue name, opening it if it does not exist yet;
// created says this call opened it. At -max-queues it first removes the
// least recently used queue that is empty and has no group (evictLocked);
// with none, it fails with errTooManyQueues.
func (qs *queues) create(name string) (q *queue, created bool, err error) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closed {
		return nil, false, channel.ErrClosed
	}
	if q := qs.byName[name]; q != nil {
		return q, false, nil
	}
	for len(qs.byName) >= qs.max { // more than one after a start with a lower -max-queues
		if !qs.evictLocked() {
			return nil, false, fmt.Errorf("%w: the limit is %d (-max-queues), and none is empty", errTooManyQueues, qs.max)
		}
	}
	ch, err := channel.Open(qs.config(name))
	if err != nil {
		return nil, false, fmt.Errorf("create queue %s: %w", name, err)
	}
	qs.logger.Info("queue created", "queue", name)
	q = newQueue(name, ch)
	qs.byName[name] = q
	close(qs.created)
	qs.created = make(chan struct{})
	return q, true, nil
}

// use returns the queue name with its mu held shared (the caller
// RUnlocks it), or nil if there is none; with create it makes the queue
// (see create). A queue removed between the look-up and the lock is
// looked up again.
func (qs *queues) use(name string, create bool) (q *queue, created bool, err error) {
	for {
		if create {
			q, created, err = qs.create(name)
		} else {
			q, err = qs.lookup(name)
		}
		if err != nil || q == nil {
			return nil, false, err
		}
		q.mu.RLock()
		if !q.removed {
			q.touch()
			return q, created, nil
		}
		q.mu.RUnlock()
	}
}

// errNotEmpty refuses the removal of a queue or group that holds items:
// a removal never discards one.
type errNotEmpty struct {
	what         string // "queue q" or "group audit of queue q"
	queued, open int
}

func (e *errNotEmpty) Error() string {
	return fmt.Sprintf("%s is not empty: %d items queued, %d open; take them first", e.what, e.queued, e.open)
}

// errNoQueue is a delete of a queue or group that does not exist.
var errNoQueue = errors.New("no such queue or group")

// emptyLocked returns an *errNotEmpty if a group of q (all of them for
// name "*") holds an item, queued or open; the caller holds q.mu
// exclusively, so none can arrive until it lets go.
func (q *queue) emptyLocked(group string) error {
	for _, name := range q.ch.GroupNames() {
		if group != "*" && name != group {
			continue
		}
		g, err := q.ch.Group(name)
		if err != nil {
			return err
		}
		st := g.Stats()
		if st.Queued > 0 || st.InflightTakes > 0 {
			what := "queue " + q.name
			if group != "*" {
				what = fmt.Sprintf("group %s of queue %s", group, q.name)
			}
			return &errNotEmpty{what: what, queued: st.Queued, open: st.InflightTakes}
		}
	}
	return nil
}

// remove removes queue name if nothing is queued or open in it or in any
// of its groups (else an *errNotEmpty); errNoQueue if there is none.
func (qs *queues) remove(name string) error {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closed {
		return channel.ErrClosed
	}
	q := qs.byName[name]
	if q == nil {
		return errNoQueue
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.emptyLocked("*"); err != nil {
		return err
	}
	return qs.removeLocked(q, "deleted")
}

// removeIfEmpty removes q, which a set created and then failed to store
// in, unless something was stored in it since: a queue exists only once
// a set has stored an item in it.
func (qs *queues) removeIfEmpty(q *queue) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closed || qs.byName[q.name] != q {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.emptyLocked("*") != nil || len(q.ch.GroupNames()) > 1 {
		return
	}
	if err := qs.removeLocked(q, "its first set failed"); err != nil {
		qs.logger.Warn("could not remove a queue whose first set failed", "queue", q.name, "err", err)
	}
}

// evictLocked removes the least recently used queue that is idle (its mu
// free at once), holds nothing and has no named group, to make room for
// a new one; false if there is none. The caller holds qs.mu.
func (qs *queues) evictLocked() bool {
	byUse := make([]*queue, 0, len(qs.byName))
	for _, q := range qs.byName {
		byUse = append(byUse, q)
	}
	slices.SortFunc(byUse, func(a, b *queue) int { return cmp.Compare(a.used.Load(), b.used.Load()) })
	for _, q := range byUse {
		if !q.mu.TryLock() {
			continue // in use: not a queue to remove
		}
		ok := len(q.ch.GroupNames()) == 1 && q.emptyLocked("*") == nil
		if ok {
			if err := qs.removeLocked(q, "room for a new queue (-max-queues)"); err != nil {
				qs.logger.Warn("could not remove an empty queue to make room for a new one", "queue", q.name, "err", err)
				ok = false
			}
		}
		q.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// removeLocked closes q's channel and deletes its directory. The caller
// holds qs.mu and q.mu exclusively and has seen q empty. The directory is
// renamed first (to <name>~removed), so that a crash leaves either the
// queue or a directory the next start deletes. If the rename fails, the
// queue is opened again and stays.
func (qs *queues) removeLocked(q *queue, why string) error {
	closeErr := q.ch.Close()
	dir := filepath.Join(qs.dir, q.name)
	trash := dir + removedSuffix
	err := os.RemoveAll(trash) // what a failed removal of an earlier queue of this name left
	if err == nil {
		err = os.Rename(dir, trash)
	}
	if err != nil {
		err = fmt.Errorf("remove queue %s: %w", q.name, errors.Join(closeErr, err))
		ch, oerr := channel.Open(qs.config(q.name))
		if oerr != nil {
			// Gone until the next start opens it again.
			q.removed = true
			delete(qs.byName, q.name)
			return errors.Join(err, fmt.Errorf("reopen queue %s: %w", q.name, oerr))
		}
		q.ch = ch
		return err
	}
	if closeErr != nil {
		qs.logger.Warn("closing an empty queue being removed failed; removed all the same", "queue", q.name, "err", closeErr)
	}
	q.removed = true
	delete(qs.byName, q.name)
	syncDir(qs.dir)
	qs.deleteDir(trash)
	qs.logger.Info("queue removed", "queue", q.name, "why", why)
	return nil
}

// deleteDir deletes a removed queue's directory; a failure is logged (the
// next start tries again).
func (qs *queues) deleteDir(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		qs.logger.Warn("could not delete a removed queue's directory; the next start tries again", "dir", dir, "err", err)
	}
}

// syncDir fsyncs dir, so that a rename in it lasts; a failure only means
// a removed queue may come back, empty, after a power loss.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// snapshot returns the queues, sorted by name.
func (qs *queues) snapshot() []*queue {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	out := make([]*queue, 0, len(qs.byName))
	for _, q := range qs.byName {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *queue) int { return cmp.Compare(a.name, b.name) })
	return out
}

// close closes every queue. Transactions still open are abandoned (their
// takes return to the queue at the next start).
func (qs *queues) close() error {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.closed = true
	var errs []error
	for name, q := range qs.byName {
		if err := q.ch.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close queue %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// errTooManyGroups refuses a get that would create a group of a queue
// that has -max-groups already.
var errTooManyGroups = errors.New("too many groups")

// group returns group name of q ("" is the queue itself), creating it
// (channel.AddGroup: it gets the sets from now on) when create is set and
// q has fewer than max named groups. The caller holds q.mu shared.
func (q *queue) group(name string, create bool, max int, log *slog.Logger) (*channel.Group, error) {
	g, err := q.ch.Group(name)
	if err == nil || !errors.Is(err, channel.ErrNoGroup) || !create {
		return g, err
	}
	q.groupMu.Lock()
	defer q.groupMu.Unlock()
	if g, err := q.ch.Group(name); err == nil {
		return g, nil
	}
	named := 0
	for _, n := range q.ch.GroupNames() {
		if n != "" {
			named++
		}
	}
	if named >= max {
		return nil, fmt.Errorf("%w: queue %s has %d, the limit (-max-groups)", errTooManyGroups, q.name, named)
	}
	g, err = q.ch.AddGroup(channel.GroupConfig{Name: name})
	if err != nil {
		return nil, fmt.Errorf("create group %s of queue %s: %w", name, q.name, err)
	}
	log.Info("group created", "queue", q.name, "group", name)
	return g, nil
}

// removeGroup removes group of queue name if nothing is queued or open in
// it (else an *errNotEmpty); errNoQueue if there is no such group.
func (qs *queues) removeGroup(name, group string) error {
	q, err := qs.lookup(name)
	if err != nil {
		return err
	}
	if q == nil {
		return errNoQueue
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.removed {
		return errNoQueue
	}
	if _, err := q.ch.Group(group); errors.Is(err, channel.ErrNoGroup) {
		return errNoQueue
	} else if err != nil {
		return err
	}
	if err := q.emptyLocked(group); err != nil {
		return err
	}
	if err := q.ch.RemoveGroup(group); err != nil {
		return fmt.Errorf("remove group %s of queue %s: %w", group, q.name, err)
	}
	qs.logger.Info("group removed", "queue", q.name, "group", group)
	return nil
}
