package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The command-line tools of libmemcached, Debian's package
// libmemcached-tools (.ci/run installs it). Debian names them memc*;
// upstream libmemcached names them mem*.

// tool returns the path of the first of names on $PATH; without one the
// test skips (fails in CI: missingClient).
func tool(t *testing.T, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	missingClient(t, fmt.Sprintf("none of %v on $PATH (Debian: apt-get install libmemcached-tools)", names))
	return ""
}

// toolRun is one run of a libmemcached tool.
type toolRun struct {
	out     string
	err     error
	elapsed time.Duration
}

// runTool runs path with args and --servers=addr, for at most 30s.
func runTool(t *testing.T, addr, path string, args ...string) toolRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(args, "--servers="+addr)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := toolRun{out: string(out), err: err, elapsed: time.Since(start)}
	t.Logf("%s %s: %v in %v\n%s", filepath.Base(path), strings.Join(args, " "), err, r.elapsed.Round(time.Millisecond), out)
	return r
}

// The text protocol: memcping and memcstat ask for the version and parse
// it, memccp sets a file's content under its base name, memccat gets it.
func TestLibmemcachedToolsText(t *testing.T) {
	ping := tool(t, "memcping", "memping")
	stat := tool(t, "memcstat", "memstat")
	cp := tool(t, "memccp", "memcp")
	cat := tool(t, "memccat", "memcat")
	s := startServer(t, options{dir: t.TempDir()})

	if r := runTool(t, s.addr, ping); r.err != nil {
		t.Errorf("memcping: %v\n%s", r.err, r.out)
	}
	r := runTool(t, s.addr, stat)
	if r.err != nil || !strings.Contains(r.out, "version: "+version) || !strings.Contains(r.out, "implementation: memcacheq-filechannel") {
		t.Errorf("memcstat: %v, want the version %s and the implementation in:\n%s", r.err, version, r.out)
	}

	file := filepath.Join(t.TempDir(), "jobs")
	if err := os.WriteFile(file, []byte("first job"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runTool(t, s.addr, cp, file); r.err != nil {
		t.Fatalf("memccp: %v\n%s", r.err, r.out)
	}
	// memccat ends the value with a newline of its own.
	if r := runTool(t, s.addr, cat, "jobs"); r.err != nil || strings.TrimSuffix(r.out, "\n") != "first job" {
		t.Fatalf("memccat: %v, output %q, want %q", r.err, r.out, "first job\n")
	}
	if r := runTool(t, s.addr, cat, "jobs"); r.err == nil {
		t.Fatalf("memccat of the drained queue succeeded: %q", r.out)
	}
}

// The binary protocol is refused at once: each tool fails in milliseconds
// instead of at its 5s timeout.
func TestLibmemcachedToolsBinaryFailFast(t *testing.T) {
	stat := tool(t, "memcstat", "memstat")
	cp := tool(t, "memccp", "memcp")
	cat := tool(t, "memccat", "memcat")
	file := filepath.Join(t.TempDir(), "jobs")
	if err := os.WriteFile(file, []byte("a job"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, options{dir: t.TempDir(), idleTimeout: time.Hour})
	runs := [][]string{{stat, "--binary"}, {cp, "--binary", file}, {cat, "--binary", "jobs"}}
	for _, args := range runs {
		r := runTool(t, s.addr, args[0], args[1:]...)
		if r.err == nil {
			t.Errorf("%s succeeded over the binary protocol:\n%s", strings.Join(args, " "), r.out)
		}
		if r.elapsed > 2*time.Second {
			t.Errorf("%s failed after %v, want well under its 5s timeout", strings.Join(args, " "), r.elapsed)
		}
	}
	c := dial(t, s.addr)
	stats := c.stats()
	if got, want := stats["binary_refused"], strconv.Itoa(len(runs)); got != want {
		t.Errorf("STAT binary_refused %s, want %s (one refusal a tool)", got, want)
	}
	if stats["cmd_set"] != "0" || stats["queues"] != "0" {
		t.Errorf("the binary set stored something: cmd_set %s, queues %s", stats["cmd_set"], stats["queues"])
	}
}

// memcslap sets random keys (then gets them, or others): its sets stop at
// -max-queues with CLIENT_ERROR while the other queues go on working, and
// once the queues it made are drained, new names have room again (a set
// removes an empty queue to make room).
func TestMemcslapRandomKeys(t *testing.T) {
	slap := tool(t, "memcslap", "memslap")
	s := startServer(t, options{dir: t.TempDir(), maxQueues: 4})
	c := dial(t, s.addr)
	c.exchange("jobs", "set jobs 0 0 2\r\nj1\r\n", "STORED\r\n")
	r := runTool(t, s.addr, slap, "--test=set", "--execute-number=20", "--concurrency=1")
	if !strings.Contains(r.out, "too many queues") {
		t.Errorf("memcslap's sets past -max-queues: want the too many queues error in its output")
	}
	st := c.stats()
	if st["queues"] != "4" {
		t.Fatalf("after memcslap's sets: STAT queues %s, want 4", st["queues"])
	}
	c.exchange("jobs_still_works", "get jobs\r\n", "VALUE jobs 0 2\r\nj1\r\nEND\r\n")
	for name := range st {
		q, ok := strings.CutPrefix(name, "queue_")
		if !ok || !strings.HasSuffix(q, "_items") || q == "jobs_items" {
			continue
		}
		for l := c.line("get " + strings.TrimSuffix(q, "_items") + "\r\n"); l != "END\r\n"; l = c.line("") {
		}
	}
	c.exchange("room_again", "set fresh 0 0 1\r\nx\r\nget fresh\r\n", "STORED\r\nVALUE fresh 0 1\r\nx\r\nEND\r\n")
}
