package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// reset --dry-run changes nothing and says what reset does; reset then does
// it; a bad position or group is a usage error.
func TestResetCommand(t *testing.T) {
	f := newFixture(t, groups)
	before := fileHashes(t, f.base)
	r := fcreplay(t, f.args("reset", "--group", "audit", "--to", "earliest", "--dry-run", "--json")...)
	r.wantCode(t, exitOK)
	var out resetJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("reset --json: %v\n%s", err, r.stdout)
	}
	want := resetJSON{Group: "audit", To: "earliest", DryRun: true, Held: 22, Found: 30, Queued: 30, Capacity: 100, Policy: "block"}
	if out != want {
		t.Errorf("reset --dry-run --json: %+v, want %+v", out, want)
	}
	if after := fileHashes(t, f.base); len(after) != len(before) {
		t.Errorf("a dry run changed the files: %d before, %d after", len(before), len(after))
	} else {
		for name, h := range before {
			if after[name] != h {
				t.Errorf("a dry run changed %s", name)
			}
		}
	}

	r = fcreplay(t, f.args("reset", "--group", "audit", "--to", "earliest")...)
	r.wantCode(t, exitOK)
	if wantOut := "group \"audit\" held 22 events; the logs retain 30 events from earliest on\ngroup \"audit\" holds 30 events after the reset\n"; r.stdout != wantOut {
		t.Errorf("reset: stdout %q, want %q", r.stdout, wantOut)
	}
	c := mustOpen(t, f.config())
	g, err := c.Group("audit")
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 30 {
		t.Errorf("audit holds %d events after the reset, want 30", g.Len())
	}
	mustClose(t, c)

	r = fcreplay(t, f.args("reset", "--group", "audit", "--to", "latest")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "holds 0 events after the reset") {
		t.Errorf("reset --to latest: stdout %q", r.stdout)
	}

	for _, bad := range [][]string{
		{"--group", "audit", "--to", "yesterday"},
		{"--group", "audit"},
	} {
		r := fcreplay(t, f.args("reset", bad...)...)
		r.wantCode(t, exitUsage)
	}
	r = fcreplay(t, f.args("reset", "--group", "nope", "--to", "earliest")...)
	r.wantCode(t, exitFailed)
	if !strings.Contains(r.stderr, "nope") {
		t.Errorf("reset of an unknown group: stderr %q", r.stderr)
	}
}

// reset --to TIME: a time after every event leaves the group empty; one
// before them all queues every retained event.
func TestResetCommandToATime(t *testing.T) {
	f := newFixture(t, groups)
	r := fcreplay(t, f.args("reset", "--group", "audit", "--to", "2001-01-01T00:00:00Z", "--dry-run", "--json")...)
	r.wantCode(t, exitOK)
	var out resetJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("reset --json: %v\n%s", err, r.stdout)
	}
	if out.Found != 30 || out.To != "2001-01-01T00:00:00Z" {
		t.Errorf("reset to 2001: %+v, want 30 events found", out)
	}
	r = fcreplay(t, f.args("reset", "--group", "audit", "--to", "2999-01-01T00:00:00Z")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "holds 0 events after the reset") {
		t.Errorf("reset to 2999: stdout %q", r.stdout)
	}
}

// dump gives each event the id and time a Take gives it, and reset --to
// after:ID starts a group right after that event.
func TestDumpIDsAndResetAfterOne(t *testing.T) {
	f := newFixture(t, groups)
	dumped := dumpGroup(t, f, "mirror") // events 0..29
	c := mustOpen(t, f.config())
	g, err := c.Group("mirror")
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := g.Begin()
	for i, d := range dumped {
		ev, ok, err := tx.Take()
		if err != nil || !ok {
			t.Fatalf("take %d: %v %v", i, ok, err)
		}
		if ev.ID.String() != d.ID || ev.Time.UTC().Format(time.RFC3339Nano) != d.Time {
			t.Fatalf("event %d: Take gives id %s time %v; dump %q %q", i, ev.ID, ev.Time, d.ID, d.Time)
		}
	}
	tx.Rollback()
	mustClose(t, c)
	r := fcreplay(t, f.args("reset", "--group", "audit", "--to", "after:"+dumped[19].ID)...)
	r.wantCode(t, exitOK)
	got := dumpGroup(t, f, "audit")
	if len(got) != 10 || got[0].ID != dumped[20].ID {
		t.Fatalf("audit after reset --to after:%s: %d events, first %+v; want the 10 after it", dumped[19].ID, len(got), got)
	}
}
