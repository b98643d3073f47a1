package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The clients people use with memcached, as Debian and npm ship them:
// pymemcache (python3-pymemcache) and the npm memcached package, whose
// small scripts are in testdata/. .ci/run installs them (and
// libmemcached-tools, libmemcached_test.go); a test whose client is
// missing skips, except in CI.

// missingClient skips the test for want of a client, or fails it in CI
// (CI=true), where .ci/run installs every client.
func missingClient(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; CI must have it (.ci/run installs it)", msg)
	}
	t.Skip(msg)
}

// pymemcache returns a python3 that imports pymemcache. Debian's package
// installs it for /usr/bin/python3, which need not be the first python3
// on $PATH.
func pymemcache(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(name)
		if err == nil && exec.Command(path, "-c", "import pymemcache").Run() == nil {
			return path
		}
	}
	missingClient(t, "no python3 that imports pymemcache (Debian: apt-get install python3-pymemcache)")
	return ""
}

// npmMemcached returns node and the script that drives the npm memcached
// client installed in testdata/npm.
func npmMemcached(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missingClient(t, "no node on $PATH (Debian: apt-get install nodejs npm)")
	}
	if _, err := os.Stat(filepath.Join("testdata", "npm", "node_modules", "memcached")); err != nil {
		missingClient(t, "the npm memcached package is not installed (cd examples/memcacheq/testdata/npm && npm ci)")
	}
	return node, filepath.Join("testdata", "npm", "memcached_client.js")
}

// runClient runs a client script (at most 60s) and decodes the JSON line
// it prints into out.
func runClient(t *testing.T, out any, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, name, args...).Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	t.Logf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, b, stderr)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("output %q: %v", b, err)
	}
}

func hostPort(t *testing.T, addr string) (string, string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return host, port
}

// pymemcache sends sets with noreply by default. Refused sets (too large,
// a bad name, a full queue) must get no reply, or the client reads the
// error as the reply to its next get, which fails while the server has
// taken the item for it: the lost job1.
func TestPymemcacheNoreplySets(t *testing.T) {
	py := pymemcache(t)
	s := startServer(t, options{dir: t.TempDir(), maxValue: 1000, capacity: 1})
	host, port := hostPort(t, s.addr)
	var got []*string
	runClient(t, &got, py, filepath.Join("testdata", "pymemcache_client.py"), "noreply", host, port)
	if len(got) != 2 || got[0] == nil || *got[0] != "job1" || got[1] != nil {
		t.Fatalf("pymemcache's gets after the refused sets: %v, want job1 then a miss", got)
	}
	if st := dial(t, s.addr).stats(); st["noreply_refused"] != "3" || st["curr_items"] != "0" {
		t.Errorf("STAT noreply_refused %s, curr_items %s; want 3, 0", st["noreply_refused"], st["curr_items"])
	}
}

// A pymemcache client killed while it holds an open item: the item comes
// back to the head, and a reliable reader gets it first, then the rest in
// order.
func TestPymemcacheKilledHoldingAnOpenItem(t *testing.T) {
	py := pymemcache(t)
	s := startServer(t, options{dir: t.TempDir()})
	host, port := hostPort(t, s.addr)
	c := dial(t, s.addr)
	c.exchange("set", "set jobs 0 0 2\r\nj1\r\nset jobs 0 0 2\r\nj2\r\nset jobs 0 0 2\r\nj3\r\n", strings.Repeat("STORED\r\n", 3))

	cmd := exec.Command(py, filepath.Join("testdata", "pymemcache_client.py"), "open", host, port)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "\"j1\"\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the client opened %q (%v), want \"j1\"", line, err)
	}
	c.exchange("invisible", "get jobs/peek\r\n", "VALUE jobs/peek 0 2\r\nj2\r\nEND\r\n")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitStat(t, c, "open_transactions", "0")

	var got []string
	runClient(t, &got, py, filepath.Join("testdata", "pymemcache_client.py"), "drain", host, port)
	if want := []string{"j1", "j2", "j3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the reliable reader got %q, want %q", got, want)
	}
	if st := c.stats(); st["curr_items"] != "0" || st["open_transactions"] != "0" || st["canceled_transactions"] != "1" {
		t.Errorf("STAT curr_items %s, open_transactions %s, canceled_transactions %s; want 0, 0, 1",
			st["curr_items"], st["open_transactions"], st["canceled_transactions"])
	}
}

// npmResult is one command's outcome in memcached_client.js.
type npmResult struct {
	Err       *string `json:"err"`
	NotStored bool    `json:"notStored"`
	V         any     `json:"v"` // a get's value (null: a miss), a set's true or false
}

func (r npmResult) value() string {
	if r.V == nil {
		return "<none>"
	}
	return fmt.Sprint(r.V)
}

// The npm memcached client, default options: a full queue is NOT_STORED,
// a failed store, and the client goes on using the server, so the gets
// that drain the queue work. A SERVER_ERROR made it mark the server as
// failing and refuse every later command.
func TestNpmMemcachedFullQueue(t *testing.T) {
	node, script := npmMemcached(t)
	s := startServer(t, options{dir: t.TempDir(), capacity: 2})
	var got struct{ Sets, Gets []npmResult }
	runClient(t, &got, node, script, "full", s.addr)
	if len(got.Sets) != 3 || got.Sets[0].Err != nil || got.Sets[1].Err != nil || !got.Sets[2].NotStored {
		t.Errorf("sets: %+v, want two stored and one not stored", got.Sets)
	}
	var values []string
	for _, r := range got.Gets {
		if r.Err != nil {
			t.Errorf("get: %s", *r.Err)
		}
		values = append(values, r.value())
	}
	if want := []string{"job1", "job2", "<none>"}; !reflect.DeepEqual(values, want) {
		t.Errorf("gets after the full queue: %q, want %q", values, want)
	}
}

// Reliable reads through the npm memcached client.
func TestNpmMemcachedReliableReads(t *testing.T) {
	node, script := npmMemcached(t)
	s := startServer(t, options{dir: t.TempDir()})
	c := dial(t, s.addr)
	c.exchange("set", "set jobs 0 0 2\r\nj1\r\nset jobs 0 0 2\r\nj2\r\n", "STORED\r\nSTORED\r\n")
	var got map[string]npmResult
	runClient(t, &got, node, script, "reliable", s.addr)
	want := map[string]string{"open": "j1", "peek": "j2", "abort": "<none>", "reopen": "j1", "next": "j2", "close": "<none>"}
	for step, v := range want {
		if r := got[step]; r.Err != nil || r.value() != v {
			t.Errorf("%s: %+v, want %s", step, r, v)
		}
	}
	if st := c.stats(); st["curr_items"] != "0" || st["open_transactions"] != "0" {
		t.Errorf("STAT curr_items %s, open_transactions %s; want 0, 0", st["curr_items"], st["open_transactions"])
	}
}
