package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/internal/testutil"
)

// checkpointSize is the size of a checkpoint file for capacity: 1029
// header slots and one slot per item, 8 bytes each.
func checkpointSize(capacity int) int64 { return (1029 + int64(capacity)) * 8 }

// wantCapacity checks the size of queue name's checkpoint file, which is
// what the queue's capacity costs on disk.
func wantCapacity(t *testing.T, dir, name string, capacity int) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, name, "checkpoint", "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != checkpointSize(capacity) {
		t.Fatalf("queue %s: checkpoint file of %d bytes, want %d (capacity %d)", name, fi.Size(), checkpointSize(capacity), capacity)
	}
}

func TestNewQueueGetsTheDefaultCapacity(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir})
	dial(t, s.addr).exchange("create", "set jobs 0 0 1\r\nx\r\n", "STORED\r\n")
	// The package doc gives this number as a queue's disk cost.
	wantCapacity(t, dir, "jobs", 100_000)
	if checkpointSize(100_000) != 808_232 {
		t.Fatalf("checkpointSize(100000) = %d", checkpointSize(100_000))
	}
}

// The package doc says what a queue holding one small item costs on disk
// in all: at most 1.4 MB while the server runs (the checkpoint's ring, the
// space reserve, the log laid out ahead) and 1.1 MB once it stopped. The
// channel's defaults for one channel alone on a disk (1 MiB of reserve,
// 4 MiB laid out ahead) would make it 6 MB.
func TestAQueueCostsWhatTheDocSays(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir})
	c := dial(t, s.addr)
	c.exchange("create", "set jobs 0 0 1\r\nx\r\n", "STORED\r\n")
	// A second set waits for the zero-fill the first one started, if it
	// reaches it, so the log is as large as it gets for a few items.
	c.exchange("again", "set jobs 0 0 1\r\ny\r\n", "STORED\r\n")
	const small = 8 << 10 // the small files and the two items' records
	least := checkpointSize(defaultCapacity) + queueReserve
	running := least + queuePreallocate + small
	if got := testutil.DirBytes(t, filepath.Join(dir, "jobs")); got > running || got < least {
		t.Fatalf("a running queue holding 2 items: %d bytes on disk, want %d to %d (1.4 MB)", got, least, running)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	stopped := checkpointSize(defaultCapacity) + queueReserve + small
	if got := testutil.DirBytes(t, filepath.Join(dir, "jobs")); got > stopped {
		t.Fatalf("a stopped queue holding 2 items: %d bytes on disk, want at most %d (1.1 MB)", got, stopped)
	}
	if running > 1_450_000 || stopped > 1_150_000 { // 1.4 MB and 1.1 MB, rounded
		t.Fatalf("the package doc says 1.4 MB and 1.1 MB; the bounds are %d and %d bytes", running, stopped)
	}
}

// A queue made by an older memcacheq, whose default capacity was 1,000,000,
// can hold more items than today's default. Reopened without -capacity, it
// keeps its capacity and every item (Open refuses to move a queue into a
// smaller ring than it fills).
func TestOldQueueFullerThanTheDefaultStillOpens(t *testing.T) {
	dir := t.TempDir()
	const oldCapacity, items = 1_000_000, defaultCapacity + 5
	old := &queues{dir: dir, capacity: oldCapacity, logger: slog.New(slog.DiscardHandler)}
	ch, err := channel.Open(old.config("old"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < items; {
		tx, err := ch.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < channel.DefaultTransactionCapacity && i < items; n, i = n+1, i+1 {
			if err := tx.Put(channel.Event{Body: []byte(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}

	s := startServer(t, options{dir: dir})
	c := dial(t, s.addr)
	if got := c.stats()["queue_old_items"]; got != strconv.Itoa(items) {
		t.Fatalf("STAT queue_old_items %s, want %d", got, items)
	}
	c.exchange("head", "get old\r\n", "VALUE old 0 1\r\n0\r\nEND\r\n")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	wantCapacity(t, dir, "old", oldCapacity)
}

// -capacity resizes every queue; without it, a queue keeps the capacity it
// was last opened with; a capacity below what a queue holds stops the start
// with an error that says what to do.
func TestExplicitCapacityResizesQueues(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir})
	dial(t, s.addr).exchange("three items", "set q 0 0 1\r\n1\r\nset q 0 0 1\r\n2\r\nset q 0 0 1\r\n3\r\n", "STORED\r\nSTORED\r\nSTORED\r\n")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	wantCapacity(t, dir, "q", defaultCapacity)

	for _, tt := range []struct {
		name     string
		capacity int // -capacity
		want     int // the capacity after the run
	}{
		{"explicit_smaller", 50, 50},
		{"default_keeps_it", 0, 50},
		{"explicit_larger", 200_000, 200_000},
		{"default_keeps_the_larger", 0, 200_000},
	} {
		s := startServer(t, options{dir: dir, capacity: tt.capacity})
		dial(t, s.addr).exchange(tt.name, "version\r\n", "VERSION "+version+"\r\n")
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		wantCapacity(t, dir, "q", tt.want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, options{addr: "127.0.0.1:0", dir: dir, maxQueues: 8, maxValue: 1 << 20, maxConns: 8, maxPendingBytes: 1 << 20, capacity: 2}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "open queue q") || !strings.Contains(err.Error(), "Capacity >= 3") {
		t.Fatalf("run with -capacity 2 and 3 items queued: %v, want an error naming the queue and the capacity it needs", err)
	}
	s = startServer(t, options{dir: dir})
	dial(t, s.addr).exchange("all items there", "get q\r\nget q\r\nget q\r\n",
		"VALUE q 0 1\r\n1\r\nEND\r\nVALUE q 0 1\r\n2\r\nEND\r\nVALUE q 0 1\r\n3\r\nEND\r\n")
}

// A group costs its ring, as the package doc says: (1029 + capacity) × 8
// bytes, 808,232 at the default capacity.
func TestAGroupCostsItsRing(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, options{dir: dir})
	c := dial(t, s.addr)
	c.exchange("create", "set jobs 0 0 1\r\nx\r\n", "STORED\r\n")
	before := testutil.DirBytes(t, filepath.Join(dir, "jobs"))
	c.exchange("group", "get jobs+audit\r\n", "END\r\n")
	const small = 4 << 10 // the groups record and catalog
	got := testutil.DirBytes(t, filepath.Join(dir, "jobs")) - before
	if want := checkpointSize(defaultCapacity); got < want || got > want+small {
		t.Fatalf("a group costs %d bytes on disk, want %d to %d", got, want, want+small)
	}
}
