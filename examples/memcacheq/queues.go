package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
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

// queues is the map of queue name to file channel. A queue is created by
// the first set that names it, in -dir/<name>/ (checkpoint/ and data/),
// and opened again by the next start. A queue is never removed.
type queues struct {
	dir string
	max int
	// capacity is -capacity, every queue's capacity; 0 means
	// defaultCapacity for a new queue and, for an existing one, the
	// capacity recorded in its checkpoint (see capacityOf).
	capacity int
	minFree  int64 // every queue's MinimumRequiredSpace (-min-free)
	logger   *slog.Logger

	// mu guards byName and closed. Creating a queue opens its channel
	// under mu, so a get that arrives meanwhile waits: creation is rare
	// and the Open of a new, empty channel is a few fsyncs.
	mu     sync.Mutex
	byName map[string]*channel.FileChannel
	closed bool
}

// openQueues opens every queue found under dir. A directory whose name is
// not a queue name, or that holds no checkpoint/ directory, is left alone.
// The queues found are all opened, even beyond max: max only stops new ones.
// capacity is -capacity (0 = each queue's own; see capacityOf), minFree
// every queue's MinimumRequiredSpace.
func openQueues(dir string, max, capacity int, minFree int64, logger *slog.Logger) (*queues, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	qs := &queues{dir: dir, max: max, capacity: capacity, minFree: minFree, logger: logger, byName: map[string]*channel.FileChannel{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
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
		qs.byName[name] = ch
	}
	return qs, nil
}

func (qs *queues) config(name string) channel.Config {
	cfg := qs.dirs(name)
	cfg.Capacity = qs.capacityOf(cfg)
	cfg.MinimumRequiredSpace = qs.minFree
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
func (qs *queues) lookup(name string) (*channel.FileChannel, error) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closed {
		return nil, channel.ErrClosed
	}
	return qs.byName[name], nil
}

// create returns the queue name, opening it if it does not exist yet.
func (qs *queues) create(name string) (*channel.FileChannel, error) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closed {
		return nil, channel.ErrClosed
	}
	if ch := qs.byName[name]; ch != nil {
		return ch, nil
	}
	if len(qs.byName) >= qs.max {
		return nil, fmt.Errorf("%w: the limit is %d (-max-queues)", errTooManyQueues, qs.max)
	}
	ch, err := channel.Open(qs.config(name))
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", name, err)
	}
	qs.logger.Info("queue created", "queue", name)
	qs.byName[name] = ch
	return ch, nil
}

// snapshot returns the queues' names, sorted, and their channels.
func (qs *queues) snapshot() ([]string, map[string]*channel.FileChannel) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	m := make(map[string]*channel.FileChannel, len(qs.byName))
	names := make([]string, 0, len(qs.byName))
	for name, ch := range qs.byName {
		m[name] = ch
		names = append(names, name)
	}
	slices.Sort(names)
	return names, m
}

// close closes every queue. Transactions still open are abandoned (their
// takes return to the queue at the next start).
func (qs *queues) close() error {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.closed = true
	var errs []error
	for name, ch := range qs.byName {
		if err := ch.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close queue %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
