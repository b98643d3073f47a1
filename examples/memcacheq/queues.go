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
)

// errTooManyQueues is returned when a set names a new queue and -max-queues
// are already open.
var errTooManyQueues = errors.New("too many queues")

// queues is the map of queue name to file channel. A queue is created by
// the first set that names it, in -dir/<name>/ (checkpoint/ and data/),
// and opened again by the next start. A queue is never removed.
type queues struct {
	dir      string
	max      int
	capacity int
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
func openQueues(dir string, max, capacity int, logger *slog.Logger) (*queues, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	qs := &queues{dir: dir, max: max, capacity: capacity, logger: logger, byName: map[string]*channel.FileChannel{}}
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
	return channel.Config{
		Name:          name,
		CheckpointDir: filepath.Join(qs.dir, name, "checkpoint"),
		DataDirs:      []string{filepath.Join(qs.dir, name, "data")},
		Capacity:      qs.capacity,
		MaxFileSize:   64 << 20,
		KeepAlive:     time.Second,
		Logger:        qs.logger,
	}
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
