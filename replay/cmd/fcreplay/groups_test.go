package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
)

// Consumer groups across the commands (inspect and verify of the groups
// fixtures are golden files: golden_test.go).

// TestDumpGroup lists a named consumer group's events with --group (the
// unnamed group's without it), after a full replay too; an unknown group is
// a usage error naming the groups.
func TestDumpGroup(t *testing.T) {
	f := newFixture(t, groups)
	for name, want := range f.groupQueued {
		r := fcreplay(t, f.args("dump", "--json", "--group", name)...)
		r.wantCode(t, exitOK)
		checkEvents(t, decodeEvents(t, r.stdout), want)
		if !strings.Contains(r.stderr, fmt.Sprintf("listed %d of %d queued events of group %q", len(want), len(want), name)) {
			t.Errorf("--group %s: stderr %q", name, r.stderr)
		}
	}
	r := fcreplay(t, f.args("dump", "--json")...)
	r.wantCode(t, exitOK)
	checkEvents(t, decodeEvents(t, r.stdout), f.queued)

	r = fcreplay(t, f.args("dump", "--group", "nope")...)
	r.wantCode(t, exitUsage)
	if want := `fcreplay dump: --group "nope": the channel has no consumer group of that name (its groups: the unnamed group (no --group), "audit", "mirror"); run 'fcreplay dump --help'`; strings.TrimSpace(r.stderr) != want || r.stdout != "" {
		t.Errorf("unknown group: stdout %q, stderr %q, want %q", r.stdout, r.stderr, want)
	}

	// A full replay (no checkpoint) gives each group the same.
	if err := checkpoint.Remove(vfs.OS(), f.ckpt); err != nil {
		t.Fatal(err)
	}
	f.backup = ""
	r = fcreplay(t, f.args("dump", "--json", "--group", "mirror", "--skip", "28")...)
	r.wantCode(t, exitOK)
	checkEvents(t, decodeEvents(t, r.stdout), f.groupQueued["mirror"][28:])
}

// TestNamedGroupsOnly: a channel without an unnamed group. dump needs
// --group; replay rebuilds its groups and adds none.
func TestNamedGroupsOnly(t *testing.T) {
	base := t.TempDir()
	f := &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), data: filepath.Join(base, "data"),
		groups: []channel.GroupConfig{{Name: "audit"}, {Name: "mirror", Capacity: 50, WhenFull: channel.DropOldest}}}
	c := mustOpen(t, f.config())
	putN(t, c, 0, 10, 5)
	takeGroup(t, c, "audit", 4)
	mustClose(t, c)

	r := fcreplay(t, f.args("dump")...)
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, `the channel has no unnamed group: name one of its consumer groups with --group (its groups: "audit", "mirror")`) {
		t.Errorf("dump without --group: %q", r.stderr)
	}
	r = fcreplay(t, f.args("replay")...)
	r.wantCode(t, exitOK)
	for _, want := range []string{"rebuilt the checkpoint: 2 consumer groups (10 puts and 4 takes applied); read ",
		"\n  group \"audit\": 6 events, capacity 100, block when full\n",
		"\n  group \"mirror\": 10 events, capacity 50, drop-oldest when full\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("replay output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "capacity 1000000") || strings.Contains(r.stdout, "unnamed") {
		t.Errorf("replay output speaks of an unnamed group:\n%s", r.stdout)
	}
	r = fcreplay(t, f.args("inspect", "--json")...)
	r.wantCode(t, exitOK)
	var out inspectJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Groups) != 2 || out.Groups[0].Name != "audit" || out.Groups[0].Queued != 6 || out.Groups[1].Queued != 10 || out.Problems != 0 {
		t.Errorf("inspect after replay: groups %+v, %d problems", out.Groups, out.Problems)
	}
	r = fcreplay(t, f.args("dump", "--json", "--group", "audit")...)
	r.wantCode(t, exitOK)
	checkEvents(t, decodeEvents(t, r.stdout), seq(4, 10))
}

// TestRebuildGroups: repair and replay rebuild every consumer group and
// say what each holds.
func TestRebuildGroups(t *testing.T) {
	f := newFixture(t, groupDamaged)
	r := fcreplay(t, f.args("repair")...)
	r.wantCode(t, exitOK)
	for _, want := range []string{"the log files have no damage to repair\n",
		"rebuilt the checkpoint from the logs: 25 events queued (capacity 100)\n" +
			"  the unnamed group: 25 events, capacity 100, block when full\n" +
			"  group \"audit\": 22 events, capacity 100, block when full\n" +
			"  group \"mirror\": 30 events, capacity 50, drop-oldest when full\n",
		"verify after the repair: ok, no problems\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("repair output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = fcreplay(t, f.args("replay", "--json")...)
	r.wantCode(t, exitOK)
	var out rebuildJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	want := []rebuildGroupJSON{{0, "", 25, 100, "block"}, {1, "audit", 22, 100, "block"}, {2, "mirror", 30, 50, "drop-oldest"}}
	if out.Events != 25 || !slices.Equal(out.Groups, want) {
		t.Errorf("replay --json: events %d, groups %+v; want 25, %+v", out.Events, out.Groups, want)
	}
	for name, want := range f.groupQueued {
		r := fcreplay(t, f.args("dump", "--json", "--group", name)...)
		r.wantCode(t, exitOK)
		checkEvents(t, decodeEvents(t, r.stdout), want)
	}
}
