package channel

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killResetConfig is the channel of TestSIGKILLRightAfterResetGroup: group
// "keep" never takes, so every log file stays and the history is whole.
func killResetConfig(dir string) Config {
	return Config{
		CheckpointDir:        filepath.Join(dir, "checkpoint"),
		DataDirs:             []string{filepath.Join(dir, "data1"), filepath.Join(dir, "data2")},
		Capacity:             10_000,
		TransactionCapacity:  100,
		CheckpointInterval:   20 * time.Millisecond,
		MinimumRequiredSpace: -1,
		Groups:               []GroupConfig{{Name: "keep"}, {Name: "r"}},
	}
}

// killResetChild puts 500 events, has group r take 300 of them, then resets
// r: to Earliest in odd rounds, to Latest in even ones (FILECHANNEL_ROUND).
// It prints "RESET n" when ResetGroup returned, and then waits to be
// killed, taking nothing (an open take transaction of r holds 5 events
// across the reset, and is never ended).
func killResetChild(dir string) {
	fail := func(err error) {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	round, _ := strconv.Atoi(os.Getenv("FILECHANNEL_ROUND"))
	c, err := Open(killResetConfig(dir))
	if err != nil {
		fail(err)
	}
	for i := 0; i < 500; i += 50 {
		tx, _ := c.Begin()
		for j := i; j < i+50; j++ {
			if err := tx.Put(Event{Body: []byte(strconv.Itoa(j))}); err != nil {
				fail(err)
			}
		}
		if err := tx.Commit(); err != nil {
			fail(err)
		}
	}
	g, err := c.Group("r")
	if err != nil {
		fail(err)
	}
	for range 3 {
		tx, _ := g.Begin()
		for range 100 {
			if _, _, err := tx.Take(); err != nil {
				fail(err)
			}
		}
		if err := tx.Commit(); err != nil {
			fail(err)
		}
	}
	open, _ := g.Begin()
	for range 5 {
		if _, _, err := open.Take(); err != nil {
			fail(err)
		}
	}
	p := Latest()
	if round%2 == 1 {
		p = Earliest()
	}
	n, err := c.ResetGroup("r", p)
	if err != nil {
		fail(err)
	}
	fmt.Println("RESET", n)
	select {} // killed here
}

// TestSIGKILLRightAfterResetGroup kills a process right after its
// ResetGroup returned (the reset's fsync is all that stands between it and
// the disk; a checkpoint may or may not have run since) and checks that
// the reopened channel has the reset queue.
func TestSIGKILLRightAfterResetGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for round := range 4 {
		dir := t.TempDir()
		cmd, stdout := spawnChild(t, os.Stderr, "FILECHANNEL_KILLRESET_CHILD="+dir, "FILECHANNEL_ROUND="+strconv.Itoa(round))
		sc := bufio.NewScanner(stdout)
		var line string
		for sc.Scan() {
			if line = sc.Text(); strings.HasPrefix(line, "RESET ") || strings.HasPrefix(line, "ERR") {
				break
			}
		}
		if round >= 2 {
			time.Sleep(30 * time.Millisecond) // a checkpoint runs in between
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		want := map[bool]int{true: 500, false: 0}[round%2 == 1]
		if line != fmt.Sprintf("RESET %d", want) {
			t.Fatalf("round %d: child said %q, want RESET %d", round, line, want)
		}
		c := mustOpen(t, killResetConfig(dir))
		g := mustGroup(t, c, "r")
		got := takeWith(t, g.Begin, 1000, 100)
		var wantBodies []string
		for i := range want {
			wantBodies = append(wantBodies, strconv.Itoa(i))
		}
		wantEvents(t, got, wantBodies)
		if n := mustGroup(t, c, "keep").Len(); n != 500 {
			t.Fatalf("round %d: group keep holds %d events, want 500", round, n)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
