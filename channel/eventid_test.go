package channel

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/logfile"
)

func TestEventIDText(t *testing.T) {
	for _, id := range []EventID{{1, 1}, {42, 42}, {1<<64 - 1, 1<<64 - 1}, {7, 3}, {3, 7}, {1<<64 - 1, 1}} {
		s := id.String()
		got, err := ParseEventID(s)
		if err != nil || got != id {
			t.Fatalf("ParseEventID(%q) = %v, %v; want %v", s, got, err, id)
		}
	}
	if s := (EventID{5, 5}).String(); s != "5" {
		t.Fatalf("String of an event written with its commit: %q, want 5", s)
	}
	if s := (EventID{9, 5}).String(); s != "9.5" {
		t.Fatalf("String of a spilled event: %q, want 9.5", s)
	}
	if s := (EventID{}).String(); s != "" || !(EventID{}).IsZero() || (EventID{1, 1}).IsZero() {
		t.Fatalf("zero EventID: String %q, IsZero %v", s, (EventID{}).IsZero())
	}
	for _, s := range []string{"", "0", "00", "01", "+1", "-1", " 1", "1 ", "1.", ".1", "1.1", "1.0", "1.01", "1.2.3", "a",
		"18446744073709551616", "1.18446744073709551616", "1e3", "0x10", "１"} {
		if id, err := ParseEventID(s); !errors.Is(err, ErrBadEventID) {
			t.Errorf("ParseEventID(%q) = %v, %v; want ErrBadEventID", s, id, err)
		}
	}
}

func TestEventIDCompare(t *testing.T) {
	// Commit order: a spilled transaction's events (order = its commit's
	// id) after the events committed before its commit, whatever their
	// own ids; within one order by their own ids.
	ids := []EventID{{}, {3, 3}, {5, 5}, {9, 2}, {9, 4}, {9, 9}, {10, 10}}
	for i, a := range ids {
		for j, b := range ids {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Fatalf("%v.Compare(%v) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"1", "9.5", "18446744073709551615", "0", "1.1", "01.2", "1.2.3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseEventID(s)
		if err != nil {
			if !errors.Is(err, ErrBadEventID) || !id.IsZero() {
				t.Fatalf("ParseEventID(%q) = %v, %v", s, id, err)
			}
			return
		}
		if id.IsZero() || id.String() != s {
			t.Fatalf("ParseEventID(%q) = %v, which prints as %q", s, id, id.String())
		}
	})
}

// stamp is what Take says of an event: its id and commit time.
type stamp struct {
	id EventID
	at time.Time
}

// takeStamps takes every event of group name in one transaction, rolls it
// back, and returns each event's body with its stamp, in take order.
func takeStamps(t *testing.T, c *FileChannel, name string) ([]string, map[string]stamp) {
	t.Helper()
	g, err := c.Group(name)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	got := map[string]stamp{}
	for {
		e, ok, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		order = append(order, string(e.Body))
		got[string(e.Body)] = stamp{e.ID, e.Time}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	return order, got
}

// TestEventIDsFollowCommitOrder: Take gives every event an id and its
// commit's time from the log, in commit order: a transaction that spilled
// its puts to the log (big) commits after two small ones written in the
// meantime, and its events come after theirs; the events of one commit
// increase in Put order. The same ids and times come back after a
// restart, a full replay, Repair and Rebuild, and from a group's take, a
// plain take and a take from a dead-letter group.
func TestEventIDsFollowCommitOrder(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.MaxFileSize = 64 << 10 // a spill every 16 KiB
	cfg.Capacity, cfg.TransactionCapacity = 1000, 200
	cfg.Groups = []GroupConfig{{}, {Name: "a", MaxDeliveries: 1, DeadLetter: "dead"}, {Name: "dead"}}
	before := time.Now()
	c := mustOpen(t, cfg)
	put := func(tx *Transaction, name string, n int) {
		for i := range n {
			if err := tx.Put(Event{Body: fmt.Appendf(bytes.Repeat([]byte{'.'}, 300), "%s-%03d", name, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(name string, n int) {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		put(tx, name, n)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	big, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	put(big, "big", 60) // spills
	commit("b", 3)
	commit("c", 2)
	put(big, "big2", 70) // spills again, and some stay buffered
	if err := big.Commit(); err != nil {
		t.Fatal(err)
	}
	commit("d", 1)
	after := time.Now()

	order, want := takeStamps(t, c, "")
	if len(order) != 136 {
		t.Fatalf("%d events, want 136", len(order))
	}
	spilled := 0
	for i, b := range order {
		s := want[b]
		if s.id.IsZero() || s.at.Before(before) || s.at.After(after) {
			t.Fatalf("event %d (%.12q): id %v, time %v, not within [%v, %v]", i, strings.Trim(b, "."), s.id, s.at, before, after)
		}
		if strings.Contains(s.id.String(), ".") {
			spilled++
		}
		if i == 0 {
			continue
		}
		p := want[order[i-1]]
		if p.id.Compare(s.id) >= 0 || s.at.Before(p.at) {
			t.Fatalf("event %d (%.12q) has id %v at %v after id %v at %v", i, strings.Trim(b, "."), s.id, s.at, p.id, p.at)
		}
	}
	if spilled == 0 || !strings.HasPrefix(strings.Trim(order[5], "."), "big-000") {
		t.Fatalf("%d events with a spilled id; event 5 is %.12q: the test does not exercise a spill", spilled, strings.Trim(order[5], "."))
	}
	same := func(how string, c *FileChannel, group string) {
		t.Helper()
		_, got := takeStamps(t, c, group)
		for b, w := range want {
			if g, ok := got[b]; ok && (g.id != w.id || !g.at.Equal(w.at)) {
				t.Fatalf("%s, group %q: %.12q has id %v at %v, want %v at %v", how, group, strings.Trim(b, "."), g.id, g.at, w.id, w.at)
			}
		}
		if len(got) == 0 {
			t.Fatalf("%s, group %q: no event", how, group)
		}
	}
	index := fileIndexes(t, c)
	checkIndex(t, index, want)
	same("group", c, "a")
	// Every event of a has had its one delivery: the next take moves them
	// to the dead-letter group.
	if _, got := takeStamps(t, c, "a"); len(got) != 0 {
		t.Fatalf("%d events still in a after their one delivery", len(got))
	}
	same("dead-letter group", c, "dead")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopen := func(how string) {
		t.Helper()
		c := mustOpen(t, cfg)
		if got := fileIndexes(t, c); !maps.Equal(got, index) {
			t.Fatalf("%s: file indexes %+v, want %+v", how, got, index)
		}
		same(how, c, "")
		same(how, c, "dead")
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	reopen("restart")
	removeCheckpoint(t, cfg)
	reopen("full replay")
	if _, err := Repair(cfg, RepairOptions{}); err != nil {
		t.Fatal(err)
	}
	reopen("repair")
	if _, err := Rebuild(cfg, RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	reopen("rebuild")
	// From a checkpoint taken after the spilled commit.
	c = mustOpen(t, cfg)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopen("restart from a checkpoint after the commit")
}

// fileIndexes returns the index of every log file of c that has one.
func fileIndexes(t *testing.T, c *FileChannel) map[uint32]logfile.FileIndex {
	t.Helper()
	out := map[uint32]logfile.FileIndex{}
	for id := uint32(1); id < c.logs.NextFileID(); id++ {
		if x, ok := c.logs.FileIndex(id); ok {
			out[id] = x
		}
	}
	return out
}

// checkIndex checks the file indexes against the events' stamps: every
// index known and ordered, the commits of all the files together reaching
// the largest id's order, and their times covering every event's.
func checkIndex(t *testing.T, index map[uint32]logfile.FileIndex, events map[string]stamp) {
	t.Helper()
	var last uint64
	lo, hi := int64(math.MaxInt64), int64(0)
	for id, x := range index {
		if !x.Known || x.FirstCommit == 0 || x.FirstCommit > x.LastCommit || x.MinTime > x.MaxTime {
			t.Fatalf("log %d: index %+v", id, x)
		}
		last, lo, hi = max(last, x.LastCommit), min(lo, x.MinTime), max(hi, x.MaxTime)
	}
	for b, s := range events {
		if s.id.order > last || s.at.UnixNano() < lo || s.at.UnixNano() > hi {
			t.Fatalf("%.12q: id %v at %v outside the indexes (last commit %d, times %d to %d)", strings.Trim(b, "."), s.id, s.at, last, lo, hi)
		}
	}
}

// TestOldFilesHaveNoTime: the events of a log file older than version 7
// (testdata/v2channel) have ids and a zero Time; events committed since
// have a time and larger ids.
func TestOldFilesHaveNoTime(t *testing.T) {
	base := t.TempDir()
	if err := os.CopyFS(base, os.DirFS("testdata/v2channel")); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, 1)
	cfg.CheckpointDir, cfg.DataDirs = filepath.Join(base, "checkpoint"), []string{filepath.Join(base, "data")}
	cfg.Capacity, cfg.TransactionCapacity = 100, 100
	c := mustOpen(t, cfg)
	old := c.logs.NextFileID() - 1 // Open's new file
	putN(t, c, 40, 2, 2)
	// The files the old checkpoint lists have no index it knows; the
	// files of this build have.
	for id, x := range fileIndexes(t, c) {
		if x.Known != (id >= old) {
			t.Fatalf("log %d (new logs from %d): index %+v", id, old, x)
		}
	}
	order, got := takeStamps(t, c, "")
	if len(order) != 34 {
		t.Fatalf("%d events, want 34", len(order))
	}
	for i, b := range order {
		s := got[b]
		old := !slices.Contains(bodies(40, 2), b)
		if s.id.IsZero() || s.at.IsZero() != old {
			t.Fatalf("event %d (%s): id %v, time %v; old file: %v", i, b, s.id, s.at, old)
		}
		if i > 0 && got[order[i-1]].id.Compare(s.id) >= 0 {
			t.Fatalf("event %d (%s): id %v after %v", i, b, s.id, got[order[i-1]].id)
		}
	}
}
