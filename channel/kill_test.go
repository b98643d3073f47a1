package channel

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The child side of TestSIGKILLLosesNothingAcknowledged: a producer and a
// consumer that report on stdout. "P n" means the put transaction holding
// events ..n committed; "T a b" is printed before a take commit of events
// [a, b], "C a b" after it returned.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FILECHANNEL_KILL_CHILD"); dir != "" {
		killChild(dir)
		return
	}
	if dir := os.Getenv("FILECHANNEL_KILLGROUPS_CHILD"); dir != "" {
		killGroupsChild(dir) // killgroups_test.go
		return
	}
	if dir := os.Getenv("FILECHANNEL_KILLPOISON_CHILD"); dir != "" {
		killPoisonChild(dir) // killpoison_test.go; it does not return
		return
	}
	if dir := os.Getenv("FILECHANNEL_LOCK_CHILD"); dir != "" {
		// Try to open a channel another process holds; report the outcome.
		c, err := Open(killConfig(dir))
		switch {
		case errors.Is(err, ErrLocked):
			fmt.Println("LOCKED")
		case err != nil:
			fmt.Println("ERR", err)
		default:
			fmt.Println("OPENED")
			c.Close()
		}
		return
	}
	// The tests fail if a goroutine outlives them.
	goleak.VerifyTestMain(m)
}

func killConfig(dir string) Config {
	return Config{
		CheckpointDir:        filepath.Join(dir, "checkpoint"),
		BackupCheckpointDir:  filepath.Join(dir, "backup"),
		DataDirs:             []string{filepath.Join(dir, "data1"), filepath.Join(dir, "data2")},
		Capacity:             100_000,
		TransactionCapacity:  100,
		CheckpointInterval:   30 * time.Millisecond,
		MaxFileSize:          256 << 10,
		MinimumRequiredSpace: -1,
	}
}

func killChild(dir string) {
	c, err := Open(killConfig(dir))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(3)
	}
	start, _ := strconv.Atoi(os.Getenv("FILECHANNEL_KILL_START"))
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	go func() { // consumer
		for {
			tx, _ := c.Begin()
			var ids []int
			for range 17 {
				ev, ok, err := tx.Take()
				if err != nil || !ok {
					break
				}
				n, _ := strconv.Atoi(string(ev.Body))
				ids = append(ids, n)
			}
			if len(ids) == 0 {
				tx.Rollback()
				time.Sleep(time.Millisecond)
				continue
			}
			say("T %s", joinInts(ids))
			if err := tx.Commit(); err != nil {
				say("ERR take commit %v", err)
				continue
			}
			say("C %s", joinInts(ids))
		}
	}()
	for i := start; ; {
		tx, _ := c.Begin()
		for range 10 {
			if err := tx.Put(Event{Body: []byte(strconv.Itoa(i))}); err != nil {
				say("ERR put %v", err)
				os.Exit(3)
			}
			i++
		}
		if err := tx.Commit(); err != nil {
			say("ERR put commit %v", err)
			os.Exit(3)
		}
		say("P %d", i-1)
	}
}

func joinInts(ids []int) string {
	s := make([]string, len(ids))
	for i, n := range ids {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// TestSIGKILLLosesNothingAcknowledged kills a child process that is putting
// and taking, several times, and checks after each kill that every event
// whose put commit was acknowledged is still in the channel unless a take of
// it may have committed, and that no event whose take commit was
// acknowledged came back.
func TestSIGKILLLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	acked := -1                  // highest event id whose put commit returned
	ackedSet := map[int]bool{}   // every event whose put commit returned
	mayBeTaken := map[int]bool{} // a take commit was attempted
	taken := map[int]bool{}      // a take commit returned
	next := 0
	for round := range 4 {
		env := []string{"FILECHANNEL_KILL_CHILD=" + dir, "FILECHANNEL_KILL_START=" + strconv.Itoa(next)}
		killChildAfter(t, round, env, time.Duration(150+100*round)*time.Millisecond,
			func(l string) { parseKillLine(t, l, &acked, ackedSet, mayBeTaken, taken) },
			func() bool { return acked >= next+10 })
		if acked < next+10 {
			t.Fatalf("round %d: child acknowledged nothing", round)
		}
		next = acked + 1 + 1000 // ids of unacknowledged puts are never reused

		// Check the channel: open, read everything without consuming.
		c := mustOpen(t, killConfig(dir))
		present := map[int]bool{}
		var open []*Transaction // read everything without consuming it
		for more := true; more; {
			tx, _ := c.Begin()
			open = append(open, tx)
			more = false
			for range 100 {
				ev, ok, err := tx.Take()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				more = true
				n, _ := strconv.Atoi(string(ev.Body))
				if present[n] {
					t.Fatalf("round %d: event %d present twice", round, n)
				}
				if taken[n] {
					t.Fatalf("round %d: event %d came back after its take commit returned", round, n)
				}
				present[n] = true
			}
		}
		for i := len(open) - 1; i >= 0; i-- { // last first: the queue keeps its order
			open[i].Rollback()
		}
		for n := range ackedSet {
			if !present[n] && !mayBeTaken[n] {
				t.Fatalf("round %d: acknowledged event %d lost (%d present)", round, n, len(present))
			}
		}
		t.Logf("round %d: %d acknowledged, %d taken, %d present (%s)", round, len(ackedSet), len(taken), len(present), c.Stats().RecoveredFrom)
		c.Close()
	}
}

// killChildAfter runs this test binary as a child process with env added to
// its environment, passes each line of its stdout to parse, and kills it
// with SIGKILL once it has run for delay and ready reports true: on a
// loaded machine (the race detector, a parallel build) its start alone can
// take longer than the delay. It returns when the child is dead and its
// output read.
func killChildAfter(t *testing.T, round int, env []string, delay time.Duration, parse func(line string), ready func() bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(delay)
	giveUp := time.After(2 * time.Minute)
	late := false
	for killed := false; !killed; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("child exited early")
			}
			parse(l)
		case <-deadline:
			late = true
		case <-giveUp:
			cmd.Process.Signal(syscall.SIGKILL)
			t.Fatalf("round %d: child acknowledged nothing in 2 minutes", round)
		}
		if late && ready() {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	for l := range lines {
		parse(l)
	}
	cmd.Wait()
}

func parseKillLine(t *testing.T, l string, acked *int, ackedSet, mayBeTaken, taken map[int]bool) {
	t.Helper()
	f := strings.Fields(l)
	if len(f) < 2 {
		return
	}
	switch f[0] {
	case "P":
		n, _ := strconv.Atoi(f[1])
		*acked = max(*acked, n)
		for k := n - 9; k <= n; k++ {
			ackedSet[k] = true
		}
	case "T", "C":
		for _, s := range strings.Split(f[1], ",") {
			n, _ := strconv.Atoi(s)
			mayBeTaken[n] = true
			if f[0] == "C" {
				taken[n] = true
			}
		}
	case "ERR":
		t.Fatalf("child: %s", l)
	}
}

// TestLockAcrossProcesses: a channel held by this process cannot be opened
// by another; once it is closed, it can.
func TestLockAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	child := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "FILECHANNEL_LOCK_CHILD="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	c := mustOpen(t, killConfig(dir))
	if got := child(); got != "LOCKED" {
		t.Fatalf("child opening a held channel: %s", got)
	}
	c.Close()
	if got := child(); got != "OPENED" {
		t.Fatalf("child opening a released channel: %s", got)
	}
}
