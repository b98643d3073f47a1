package channel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the child side of the tests that spawn processes when its
// variable is set (spawnChild), the tests otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FILECHANNEL_KILL_CHILD"); dir != "" {
		killWorker(killConfig(dir), []killGroup{{batch: 17}})
		return
	}
	if dir := os.Getenv("FILECHANNEL_KILLGROUPS_CHILD"); dir != "" {
		killWorker(killGroupsConfig(dir), killGroups) // killgroups_test.go
		return
	}
	if dir := os.Getenv("FILECHANNEL_KILLPOISON_CHILD"); dir != "" {
		killPoisonChild(dir) // killpoison_test.go; it does not return
		return
	}
	if dir := os.Getenv("FILECHANNEL_KILLKEYS_CHILD"); dir != "" {
		killKeysChild(dir) // killkeys_test.go; it does not return
		return
	}
	if dir := os.Getenv("FILECHANNEL_KILLRESET_CHILD"); dir != "" {
		killResetChild(dir) // killreset_test.go; it does not return
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

// killGroup is a consumer of a kill child, and how it takes: from group
// name ("": the channel's only group, by FileChannel.Begin), up to batch
// events per take transaction, then a pause; every rollbackEvery-th
// transaction is rolled back instead of committed (0 = none).
type killGroup struct {
	name          string
	batch         int
	pause         time.Duration
	rollbackEvery int
}

// killWorker is the child side of the kill tests (killLoop): it opens cfg,
// starts a consumer per group and puts events from FILECHANNEL_KILL_START
// on, 10 a transaction, until it is killed. It reports on stdout: "P n"
// means the put transaction holding events ..n committed; "T a,b,..." is
// printed before a take commit of those events, "C a,b,..." after it
// returned, each prefixed with "G name " for a named group.
func killWorker(cfg Config, groups []killGroup) {
	c := killOpen(cfg)
	start, _ := strconv.Atoi(os.Getenv("FILECHANNEL_KILL_START"))
	say := killSayer()
	for _, kg := range groups {
		begin, prefix := c.Begin, ""
		if kg.name != "" {
			g, err := c.Group(kg.name)
			if err != nil {
				say("ERR %v", err)
				os.Exit(3)
			}
			begin, prefix = g.Begin, "G "+kg.name+" "
		}
		go killConsume(kg, begin, prefix, say)
	}
	for i := start; ; i += 10 {
		killPut(c, say, i, nil)
	}
}

// killPut is a kill child's put transaction of events i to i+9 (body: the
// id; headers: headers(id), if set), and its "P" line once it committed.
// It exits after an "ERR" line if it fails.
func killPut(c *FileChannel, say func(format string, args ...any), i int, headers func(int) map[string]string) {
	tx, _ := c.Begin()
	for n := i; n < i+10; n++ {
		ev := Event{Body: []byte(strconv.Itoa(n))}
		if headers != nil {
			ev.Headers = headers(n)
		}
		if err := tx.Put(ev); err != nil {
			say("ERR put %v", err)
			os.Exit(3)
		}
	}
	if err := tx.Commit(); err != nil {
		say("ERR put commit %v", err)
		os.Exit(3)
	}
	say("P %d", i+9)
}

// killOpen opens cfg in a kill child; it exits after an "ERR" line if it
// cannot.
func killOpen(cfg Config) *FileChannel {
	c, err := Open(cfg)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(3)
	}
	return c
}

// killSayer returns how a kill child writes a line of its output: at
// once (it may be killed any time after), safe for concurrent use.
func killSayer() func(format string, args ...any) {
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
}

// killConsume is the consumer of kg in a kill child: it takes by the
// transactions begin starts, and prefixes its T and C lines with prefix.
func killConsume(kg killGroup, begin func() (*Transaction, error), prefix string, say func(format string, args ...any)) {
	for n := 1; ; n++ {
		tx, _ := begin()
		var ids []int
		for range kg.batch {
			ev, ok, err := tx.Take()
			if err != nil || !ok {
				break
			}
			id, _ := strconv.Atoi(string(ev.Body))
			ids = append(ids, id)
		}
		if len(ids) == 0 || (kg.rollbackEvery > 0 && n%kg.rollbackEvery == 0) {
			tx.Rollback() // the events go back to this group's head only
			time.Sleep(time.Millisecond)
			continue
		}
		say("%sT %s", prefix, joinInts(ids))
		if err := tx.Commit(); err != nil {
			say("ERR take commit %s: %v", groupLabel(kg.name), err)
			continue
		}
		say("%sC %s", prefix, joinInts(ids))
		time.Sleep(kg.pause)
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
	log := newKillLog("")
	g := log.groups[""]
	delay := func(round int) time.Duration { return time.Duration(150+100*round) * time.Millisecond }
	killLoop(t, dir, "FILECHANNEL_KILL_CHILD", log, 4, delay, func(round int, _ time.Duration) {
		// Check the channel: open, read everything without consuming.
		c := mustOpen(t, killConfig(dir))
		present := map[int]bool{}
		for _, n := range peekKill(t, round, "", c.Begin, g) {
			present[n] = true
		}
		for n := range log.ackedSet {
			if !present[n] && !g.mayBeTaken[n] {
				t.Fatalf("round %d: acknowledged event %d lost (%d present)", round, n, len(present))
			}
		}
		t.Logf("round %d: %d acknowledged, %d taken, %d present (%s)", round, len(log.ackedSet), len(g.taken), len(present), c.Stats().RecoveredFrom)
		c.Close()
	})
}

// killLog is what the parent of kill children knows from their output,
// over every round.
type killLog struct {
	acked    int                        // highest event id whose put commit returned
	ackedSet map[int]bool               // every event whose put commit returned
	groups   map[string]*killGroupState // by the name of the group taken from
}

// killGroupState is what the parent knows of one group's takes.
type killGroupState struct {
	mayBeTaken map[int]bool // a take commit was attempted
	taken      map[int]bool // a take commit returned
}

// newKillLog returns the log of children that take from groups.
func newKillLog(groups ...string) *killLog {
	l := &killLog{acked: -1, ackedSet: map[int]bool{}, groups: map[string]*killGroupState{}}
	for _, name := range groups {
		l.groups[name] = &killGroupState{mayBeTaken: map[int]bool{}, taken: map[int]bool{}}
	}
	return l
}

// parse reads one line of a child's output (killWorker); it fails t on an
// error the child reported.
func (l *killLog) parse(t *testing.T, line string) {
	t.Helper()
	g := l.groups[""]
	if rest, ok := strings.CutPrefix(line, "G "); ok {
		var name string
		name, line, _ = strings.Cut(rest, " ")
		if g = l.groups[name]; g == nil {
			t.Fatalf("child: a take from an unknown group: G %s", rest)
		}
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return
	}
	switch f[0] {
	case "P":
		n, _ := strconv.Atoi(f[1])
		l.acked = max(l.acked, n)
		for k := n - 9; k <= n; k++ {
			l.ackedSet[k] = true
		}
	case "T", "C":
		if g == nil {
			t.Fatalf("child: a take from the unnamed group, which it has not: %s", line)
		}
		for _, s := range strings.Split(f[1], ",") {
			n, _ := strconv.Atoi(s)
			g.mayBeTaken[n] = true
			if f[0] == "C" {
				g.taken[n] = true
			}
		}
	case "ERR":
		t.Fatalf("child: %s", line)
	}
}

// killLoop is the parent side of the kill tests. Each of rounds rounds
// runs the child that the variable child (set to dir) selects in TestMain,
// its event ids starting past those of the rounds before, feeds its output
// to log, kills it with SIGKILL after delay(round) once it acknowledged a
// put, and calls check on what it left.
func killLoop(t *testing.T, dir, child string, log *killLog, rounds int, delay func(round int) time.Duration,
	check func(round int, delay time.Duration)) {
	t.Helper()
	next := 0
	for round := range rounds {
		d := delay(round)
		env := []string{child + "=" + dir, "FILECHANNEL_KILL_START=" + strconv.Itoa(next)}
		killChildAfter(t, round, env, d, func(l string) { log.parse(t, l) }, func() bool { return log.acked >= next+10 })
		if log.acked < next+10 {
			t.Fatalf("round %d: child acknowledged nothing", round)
		}
		next = log.acked + 1 + 1000 // ids of unacknowledged puts are never reused
		check(round, d)
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
	cmd, stdout := spawnChild(t, nil, env...)
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

// childCommand is this test binary run as a child process that runs no
// test, with env added to its environment: a variable TestMain reads
// makes it the child side of a test.
func childCommand(env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// spawnChild starts childCommand(env...), its stderr to stderr (nil: none
// kept), and returns it with its stdout.
func spawnChild(t *testing.T, stderr io.Writer, env ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := childCommand(env...)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout
}

// peekKill reads every event queued for a group, by the transactions begin
// starts, without consuming it, and returns their ids in queue order. It
// fails t on an event queued twice and on one whose take from the group
// was acknowledged (g).
func peekKill(t *testing.T, round int, group string, begin func() (*Transaction, error), g *killGroupState) []int {
	t.Helper()
	var ids []int
	present := map[int]bool{}
	var open []*Transaction
	defer func() {
		// Last first: each rollback puts its events back at the head.
		for _, tx := range slices.Backward(open) {
			tx.Rollback()
		}
	}()
	for more := true; more; {
		tx, err := begin()
		if err != nil {
			t.Fatal(err)
		}
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
			n, err := strconv.Atoi(string(ev.Body))
			if err != nil {
				t.Fatalf("round %d: %s: event %q", round, groupLabel(group), ev.Body)
			}
			switch {
			case present[n]:
				t.Fatalf("round %d: %s: event %d present twice", round, groupLabel(group), n)
			case g.taken[n]:
				t.Fatalf("round %d: %s: event %d came back after its take commit returned", round, groupLabel(group), n)
			}
			present[n] = true
			ids = append(ids, n)
		}
	}
	return ids
}

// TestLockAcrossProcesses: a channel held by this process cannot be opened
// by another; once it is closed, it can.
func TestLockAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	child := func() string {
		out, err := childCommand("FILECHANNEL_LOCK_CHILD=" + dir).Output()
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
