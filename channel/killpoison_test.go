package channel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A poison event: a consumer that dies every time it holds it, killed
// (SIGKILL) or of a panic, without a Rollback or a Close. Each Take wrote
// its deliver record before it returned, so the deaths are counted: after
// MaxDeliveries of them the event is a dead letter, and the consumer goes
// on with the next one.

// killPoisonMax is MaxDeliveries of the poison test's group "sink".
const killPoisonMax = 3

// killPoisonConfig is killConfig with group "sink" (MaxDeliveries
// killPoisonMax, dead letters in sink.dlq) and group "other", which counts
// nothing.
func killPoisonConfig(dir string) Config {
	cfg := killConfig(dir)
	cfg.Groups = []GroupConfig{{Name: "sink", MaxDeliveries: killPoisonMax}, {Name: "other"}}
	return cfg
}

// killPoisonChild is the child side of TestPoisonEventKillsConsumer: it
// opens the channel, takes the head event of "sink" and prints "TOOK body
// deliveries" ("EMPTY" if there is none), then, as FILECHANNEL_POISON_MODE
// says, blocks until it is killed ("kill") or panics ("panic"): it dies
// holding the event either way.
func killPoisonChild(dir string) {
	c, err := Open(killPoisonConfig(dir))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(3)
	}
	g, err := c.Group("sink")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(3)
	}
	tx, err := g.Begin()
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(3)
	}
	ev, ok, err := tx.Take()
	switch {
	case err != nil:
		fmt.Println("ERR", err)
		os.Exit(3)
	case !ok:
		fmt.Println("EMPTY")
	default:
		fmt.Printf("TOOK %s %d\n", ev.Body, ev.Deliveries) // os.Stdout is not buffered
	}
	if os.Getenv("FILECHANNEL_POISON_MODE") == "panic" {
		panic("poison event " + string(ev.Body))
	}
	time.Sleep(10 * time.Minute) // until SIGKILL (the parent gives up after 2)
	os.Exit(4)
}

// runPoisonChild runs the poison child on dir in mode and returns the
// line it printed once it is dead: killed by SIGKILL once it printed it
// (mode kill), or dead of its panic (mode panic).
func runPoisonChild(t *testing.T, dir, mode string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd, stdout := spawnChild(t, &stderr, "FILECHANNEL_KILLPOISON_CHILD="+dir, "FILECHANNEL_POISON_MODE="+mode)
	// A child that hangs before printing is killed; the test then fails
	// on its missing line.
	watchdog := time.AfterFunc(2*time.Minute, func() { cmd.Process.Signal(syscall.SIGKILL) })
	defer watchdog.Stop()
	out := bufio.NewReader(stdout)
	line, _ := out.ReadString('\n')
	line = strings.TrimSpace(line)
	if mode == "kill" {
		cmd.Process.Signal(syscall.SIGKILL)
	}
	rest, _ := io.ReadAll(out) // to EOF: the child is dead
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child (%s): %v, want it dead; it printed %q %q", mode, err, line, rest)
	}
	switch ws, _ := exit.Sys().(syscall.WaitStatus); {
	case mode == "kill" && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL):
		t.Fatalf("child (kill): %v, want death by SIGKILL; it printed %q; stderr:\n%s", err, line, stderr.String())
	case mode == "panic" && (ws.Signaled() || !strings.Contains(stderr.String(), "panic: poison event")):
		t.Fatalf("child (panic): %v, want death by its panic; it printed %q; stderr:\n%s", err, line, stderr.String())
	}
	if strings.HasPrefix(line, "ERR") || line == "" {
		t.Fatalf("child (%s): %q; stderr:\n%s", mode, line, stderr.String())
	}
	return line
}

// TestPoisonEventKillsConsumer: the parent puts events; then a consumer
// process takes the head of group "sink" and dies holding it, again and
// again. The first killPoisonMax deaths hold event-0, delivered 1, 2, 3
// times; the next take moves it to sink.dlq and returns event-1, delivered
// once. Group "other" keeps every event.
func TestPoisonEventKillsConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const n = 5
	for _, mode := range []string{"kill", "panic"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			cfg := killPoisonConfig(dir)
			c := mustOpen(t, cfg)
			putN(t, c, 0, n, n)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			for run := 1; run <= killPoisonMax+2; run++ {
				want := fmt.Sprintf("TOOK event-0 %d", run)
				switch {
				case run == killPoisonMax+1:
					// The take found event-0 at its limit: moved.
					want = "TOOK event-1 1"
				case run > killPoisonMax+1:
					want = fmt.Sprintf("TOOK event-1 %d", run-killPoisonMax)
				}
				if got := runPoisonChild(t, dir, mode); got != want {
					t.Fatalf("child run %d printed %q, want %q", run, got, want)
				}
			}
			c = mustOpen(t, cfg)
			v := viewGroups(t, c)
			if got := v["sink.dlq"].Queued; !slices.Equal(got, []string{"event-0"}) {
				t.Fatalf("sink.dlq holds %q, want event-0 alone", got)
			}
			if got, want := v["sink"].Queued, bodies(1, n-1); !slices.Equal(got, want) {
				t.Fatalf("sink holds %q, want %q", got, want)
			}
			if got := v["sink"].Deliveries; len(got) != 1 || got["event-1"] != 2 {
				t.Fatalf("sink's delivery counts %v, want event-1 delivered twice", got)
			}
			if got, want := v["other"].Queued, bodies(0, n); !slices.Equal(got, want) {
				t.Fatalf("other holds %q, want %q", got, want)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
