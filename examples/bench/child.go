package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/flumego/filechannel/channel"
)

// childEnv holds a child's arguments as JSON: the harness runs its own
// binary again (os.Args[0], the test binary under go test) for the crash
// and memory measurements.
const childEnv = "FCBENCH_CHILD"

type childArgs struct {
	Mode      string // "crash" or "memory"
	Dir       string
	Before    int // crash: events before the checkpoint
	After     int // crash: events after it
	Capacity  int // memory: also the events queued
	EventSize int // memory
	Groups    int // memory: named groups (0: the unnamed group alone), each of Capacity
}

func isChild() bool { return os.Getenv(childEnv) != "" }

// runChild is main for a child process.
func runChild() {
	var a childArgs
	err := json.Unmarshal([]byte(os.Getenv(childEnv)), &a)
	if err == nil {
		switch a.Mode {
		case "crash":
			err = crashChild(a)
		case "memory":
			err = memoryChild(a)
		default:
			err = fmt.Errorf("unknown child mode %q", a.Mode)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
}

func childCmd(a childArgs) (*exec.Cmd, error) {
	js, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	return cmd, nil
}

// crashChild puts a.Before events, checkpoints, puts a.After events in
// batches of 100, says READY once the last commit returned, and waits to
// be killed.
func crashChild(a childArgs) error {
	c, err := channel.Open(crashConfig(a.Dir))
	if err != nil {
		return err
	}
	body := make([]byte, 1024)
	if err := fill(c, body, a.Before, 1000); err != nil {
		return err
	}
	if err := c.Checkpoint(); err != nil {
		return err
	}
	if err := fill(c, body, a.After, 100); err != nil {
		return err
	}
	fmt.Println("READY")
	// Wait to be killed; end if the parent went away (stdin closed).
	io.Copy(io.Discard, os.Stdin)
	return errors.New("not killed: the parent closed stdin")
}

// killedChild runs a crash child and kills it with SIGKILL once it is READY.
func killedChild(a childArgs) error {
	cmd, err := childCmd(a)
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	in, err := cmd.StdinPipe() // kept open until the kill
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, rerr := bufio.NewReader(out).ReadString('\n')
	kerr := cmd.Process.Kill() // SIGKILL
	werr := cmd.Wait()
	in.Close()
	if strings.TrimSpace(line) != "READY" {
		return fmt.Errorf("crash child: %q: %w", line, errors.Join(rerr, werr))
	}
	if kerr != nil {
		return fmt.Errorf("kill crash child: %w", kerr)
	}
	return nil
}

// memoryChild fills a channel of a.Capacity (with a.Groups named groups:
// each of a.Capacity, each holding every event) with a.Capacity events of
// a.EventSize bytes and reports the process's memory at a quarter, half and
// all of it, after a checkpoint, after a clean reopen, and after taking a
// tenth (from every group), as JSON on stdout.
func memoryChild(a childArgs) error {
	cfg := fcConfig(a.Dir)
	cfg.Capacity = a.Capacity
	cfg.Groups = groupConfigs(a.Groups)
	c, err := channel.Open(cfg)
	if err != nil {
		return err
	}
	m := Memory{Capacity: a.Capacity, EventSize: a.EventSize, Groups: a.Groups}
	events := a.Capacity
	point := func(label string) error {
		p, err := memPoint(label)
		p.Queued = c.Len()
		p.Backlog = int64(p.Queued) * int64(a.EventSize)
		m.Points = append(m.Points, p)
		return err
	}
	if err := point("empty"); err != nil {
		return err
	}
	body := make([]byte, a.EventSize)
	batch := max(1, min(1000, (1<<20)/a.EventSize))
	for _, q := range []int{1, 2, 4} {
		if err := fill(c, body, events*q/4-c.Len(), batch); err != nil {
			return err
		}
		if err := point(fmt.Sprintf("%d/4 backlog", q)); err != nil {
			return err
		}
	}
	if err := c.Checkpoint(); err != nil {
		return err
	}
	if err := point("4/4, checkpointed"); err != nil {
		return err
	}
	if err := c.Close(); err != nil {
		return err
	}
	rec, err := timedReopen(cfg, events)
	if err != nil {
		return err
	}
	if a.Groups > 0 {
		rec.Kind, rec.Groups = fmt.Sprintf("clean reopen (memory child, %d groups)", a.Groups), a.Groups
	}
	m.Reopen = rec
	if c, err = channel.Open(cfg); err != nil {
		return err
	}
	if err := point("reopened"); err != nil {
		return err
	}
	if a.Groups == 0 {
		for taken := 0; taken < events/10; {
			k, err := takeTx(c, 100)
			if err != nil {
				return err
			}
			taken += k
		}
	} else {
		gs, err := groupsOf(c)
		if err != nil {
			return err
		}
		for _, g := range gs {
			if err := groupTake(g, events/10, 100); err != nil {
				return err
			}
		}
	}
	if err := point("took 1/10"); err != nil {
		return err
	}
	if err := c.Close(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// memPoint reads VmRSS, RssAnon and RssFile from /proc/self/status after a
// garbage collection that returns the freed memory to the OS
// (debug.FreeOSMemory: runtime.GC alone leaves freed heap resident until the
// background scavenger returns it, which makes VmRSS depend on timing).
func memPoint(label string) (MemPoint, error) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := MemPoint{Label: label, HeapInuse: ms.HeapInuse}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return p, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &p.VmRSS
		case "RssAnon":
			dst = &p.RssAnon
		case "RssFile":
			dst = &p.RssFile
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return p, fmt.Errorf("parse %s: %w", line, err)
		}
		*dst = kb << 10
	}
	return p, nil
}

// memGroups is the number of named groups of the memory measurement's
// third child.
const memGroups = 4

// fcMemory runs the memory child three times with the same number of
// events (sz.memCap, the capacity): with sz.memBacklog bytes queued and
// with a quarter of that, so that what grows with the backlog's bytes
// shows apart from what grows with its event count, and with
// sz.memBacklog bytes queued in a channel of memGroups named groups of
// sz.memCap each (every group holding every event).
func (b *bench) fcMemory() error {
	size := int(max(256, b.sz.memBacklog/int64(b.sz.memCap)))
	for _, run := range []struct{ size, groups int }{{size / 4, 0}, {size, 0}, {size, memGroups}} {
		dir, err := b.fresh("memory")
		if err != nil {
			return err
		}
		cmd, err := childCmd(childArgs{Mode: "memory", Dir: dir, Capacity: b.sz.memCap, EventSize: run.size, Groups: run.groups})
		if err != nil {
			return err
		}
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("memory child: %w", err)
		}
		var m Memory
		if err := json.Unmarshal(out, &m); err != nil {
			return fmt.Errorf("memory child output %q: %w", out, err)
		}
		b.rep.Memory = append(b.rep.Memory, m)
		for _, p := range m.Points {
			b.logf("  %-18s queued %8d, backlog %6.0f MiB: VmRSS %.1f MiB (anon %.1f, file %.1f), heap %.1f MiB",
				p.Label, p.Queued, mib(p.Backlog), mib(p.VmRSS), mib(p.RssAnon), mib(p.RssFile), mib(int64(p.HeapInuse)))
		}
		b.addRecovery(m.Reopen)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// point returns the point labelled label (zero if there is none).
func (m *Memory) point(label string) MemPoint {
	for _, p := range m.Points {
		if p.Label == label {
			return p
		}
	}
	return MemPoint{}
}
