package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/channel"
)

// TestInspectAndDumpRetry: inspect shows a group's events waiting for
// their retry delay and the earliest due time (text and JSON), and dump
// shows a waiting event's due time; verify finds nothing wrong.
func TestInspectAndDumpRetry(t *testing.T) {
	base := t.TempDir()
	f := &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), data: filepath.Join(base, "data"),
		groups: []channel.GroupConfig{{Name: "a", RetryDelays: []time.Duration{time.Hour}}}}
	c := mustOpen(t, f.config())
	putN(t, c, 0, 3, 3)
	start := time.Now()
	rollbackGroup(t, c, "a")
	mustClose(t, c)

	r := fcreplay(t, f.args("inspect", "--json")...)
	r.wantCode(t, exitOK)
	var out inspectJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Groups) != 1 || out.Groups[0].Waiting != 1 || out.Groups[0].Queued != 3 {
		t.Fatalf("inspect: groups %+v", out.Groups)
	}
	due, err := time.Parse(time.RFC3339Nano, out.Groups[0].EarliestDue)
	if err != nil || due.Before(start.Add(time.Hour-time.Second)) || due.After(time.Now().Add(time.Hour)) {
		t.Fatalf("earliest due %q (%v), want an hour after the rollback", out.Groups[0].EarliestDue, err)
	}
	r = fcreplay(t, f.args("inspect")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "group a: 1 event waiting for their retry delay, the earliest due ") {
		t.Errorf("inspect:\n%s", r.stdout)
	}
	evs := dumpGroup(t, f, "a")
	if len(evs) != 3 || evs[0].Due == "" || evs[1].Due != "" || evs[2].Due != "" {
		t.Fatalf("dump: %+v", evs)
	}
	r = fcreplay(t, f.args("dump", "--group", "a")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(strings.SplitN(r.stdout, "\n", 2)[0], " due=") {
		t.Errorf("dump's first line has no due time:\n%s", r.stdout)
	}
	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
}
