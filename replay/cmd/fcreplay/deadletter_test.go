package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/channel"
)

// Dead letters across the commands: redrive, and what inspect and dump say
// of them.

// newDeadLetterFixture makes a closed channel with dead letters: the
// unnamed group, and group a with MaxDeliveries 2 (its dead letters go to
// a.dlq, which the channel creates with it). Events 0..9 are put (two
// commits of 5); a takes each of 0, 1 and 2 twice without committing (the
// second rollback moves it to a.dlq), then 3 once. The unnamed group holds
// 0..9, a 3..9 (3 delivered once), a.dlq 0, 1 and 2.
func newDeadLetterFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), data: filepath.Join(base, "data"),
		groups: []channel.GroupConfig{{}, {Name: "a", MaxDeliveries: 2}}, queued: seq(0, 10),
		groupQueued: map[string][]int{"a": seq(3, 10), "a.dlq": seq(0, 3)}}
	c := mustOpen(t, f.config())
	putN(t, c, 0, 10, 5)
	for range 7 {
		rollbackGroup(t, c, "a")
	}
	mustClose(t, c)
	return f
}

// rollbackGroup takes one event of the named group and rolls back.
func rollbackGroup(t *testing.T, c *channel.FileChannel, name string) {
	t.Helper()
	g, err := c.Group(name)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tx.Take(); err != nil || !ok {
		t.Fatalf("take from %s: %v %v", name, ok, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
}

// dumpGroup lists a group's events with dump --json.
func dumpGroup(t *testing.T, f *fixture, group string) []eventJSON {
	t.Helper()
	r := fcreplay(t, f.args("dump", "--json", "--group", group)...)
	r.wantCode(t, exitOK)
	return decodeEvents(t, r.stdout)
}

// deliveryCounts returns the delivery counts of evs (-1 for none given).
func deliveryCounts(evs []eventJSON) []int {
	out := make([]int, 0, len(evs))
	for _, e := range evs {
		n := -1
		if e.Deliveries != nil {
			n = int(*e.Deliveries)
		}
		out = append(out, n)
	}
	return out
}

// TestRedrive moves dead letters back: -n limits the move, the events land
// at the tail of the group in their order with their counts at zero, a
// redrive of an empty group moves nothing, and the channel then delivers
// them (MaxDeliveries more times each).
func TestRedrive(t *testing.T) {
	f := newDeadLetterFixture(t)
	for group, want := range f.groupQueued {
		checkEvents(t, dumpGroup(t, f, group), want)
	}

	r := fcreplay(t, f.args("redrive", "--from", "a.dlq", "--to", "a", "-n", "2")...)
	r.wantCode(t, exitOK)
	want := `moved 2 events from dead-letter group "a.dlq" to group "a"; their delivery counts start again at 0 (group "a" dead-letters an event after 2 deliveries)
1 event stays in dead-letter group "a.dlq" (-n 2)
`
	if r.stdout != want || r.stderr != "" {
		t.Errorf("redrive -n 2: stdout %q, stderr %q; want stdout %q", r.stdout, r.stderr, want)
	}
	evs := dumpGroup(t, f, "a")
	checkEvents(t, evs, append(seq(3, 10), 0, 1))
	if got, want := deliveryCounts(evs), []int{1, 0, 0, 0, 0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("a's delivery counts after the redrive: %v, want %v", got, want)
	}
	checkEvents(t, dumpGroup(t, f, "a.dlq"), []int{2})
	checkEvents(t, dumpGroup(t, f, ""), f.queued)

	r = fcreplay(t, f.args("redrive", "--from", "a.dlq", "--to", "a", "--json")...)
	r.wantCode(t, exitOK)
	var out redriveJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("redrive --json: %v\n%s", err, r.stdout)
	}
	if want := (redriveJSON{From: "a.dlq", To: "a", Limit: -1, Queued: 1, Moved: 1, MaxDeliveries: 2}); out != want {
		t.Errorf("redrive --json: %+v, want %+v", out, want)
	}
	r = fcreplay(t, f.args("redrive", "--from", "a.dlq", "--to", "a")...)
	r.wantCode(t, exitOK)
	if want := "dead-letter group \"a.dlq\" is empty: nothing to move\n"; r.stdout != want {
		t.Errorf("redrive of an empty group: %q, want %q", r.stdout, want)
	}
	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)

	// The channel delivers the redriven events last, counting from 1 again.
	c := mustOpen(t, f.config())
	defer mustClose(t, c)
	g, err := c.Group("a")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		ev, ok, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%s:%d", ev.Headers["i"], ev.Deliveries))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"3:2", "4:1", "5:1", "6:1", "7:1", "8:1", "9:1", "0:1", "1:1", "2:1"}; !slices.Equal(got, want) {
		t.Errorf("a delivers %v, want %v (event:delivery)", got, want)
	}
}

// TestRedriveRefusedWhileOpen: redrive changes nothing while the channel
// is open, and says so on one line, exit 1.
func TestRedriveRefusedWhileOpen(t *testing.T) {
	f := newDeadLetterFixture(t)
	c := mustOpen(t, f.config())
	defer mustClose(t, c)
	before := fileHashes(t, f.base)
	r := fcreplay(t, f.args("redrive", "--from", "a.dlq", "--to", "a")...)
	r.wantCode(t, exitFailed)
	want := "fcreplay: the channel is open; stop it and run this again (nothing was changed): filechannel: directory is in use by another channel: " + f.ckpt + "\n"
	if r.stderr != want || r.stdout != "" {
		t.Errorf("stdout %q, stderr %q; want stderr %q", r.stdout, r.stderr, want)
	}
	if !equalFiles(before, fileHashes(t, f.base)) {
		t.Errorf("a refused redrive changed files")
	}
}

// TestRedriveBadCommandLines: a group the channel does not have, a --from
// that is not a dead-letter group, the same group twice and a bad -n are
// usage errors (exit 2, one line naming the groups) that change nothing.
func TestRedriveBadCommandLines(t *testing.T) {
	f := newDeadLetterFixture(t)
	before := fileHashes(t, f.base)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no_from", []string{"--to", "a"}, `required flag(s) "from" not set`},
		{"no_to", []string{"--from", "a.dlq"}, `required flag(s) "to" not set`},
		{"unknown_from", []string{"--from", "nope", "--to", "a"},
			`--from "nope": the channel has no consumer group of that name (its dead-letter groups: "a.dlq")`},
		{"from_not_dead_letter", []string{"--from", "a", "--to", ""},
			`--from "a": group "a" is not a dead-letter group (its dead-letter groups: "a.dlq")`},
		{"from_unnamed", []string{"--from", "", "--to", "a"},
			`--from "": the unnamed group is not a dead-letter group (its dead-letter groups: "a.dlq")`},
		{"unknown_to", []string{"--from", "a.dlq", "--to", "nope"},
			`--to "nope": the channel has no consumer group of that name (its groups: the unnamed group (--to ""), "a", "a.dlq")`},
		{"same_group", []string{"--from", "a.dlq", "--to", "a.dlq"}, `--from and --to are both group "a.dlq"`},
		{"n_zero", []string{"--from", "a.dlq", "--to", "a", "-n", "0"}, "-n 0 moves nothing; use -1 for all"},
		{"n_negative", []string{"--from", "a.dlq", "--to", "a", "-n", "-2"}, "-n -2: use -1 for all"},
		{"n_not_a_number", []string{"--from", "a.dlq", "--to", "a", "-n", "all"}, "invalid argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := fcreplay(t, f.args("redrive", tc.args...)...)
			r.wantCode(t, exitUsage)
			line := strings.TrimSuffix(r.stderr, "\n")
			if r.stdout != "" || strings.Contains(line, "\n") || !strings.HasPrefix(line, "fcreplay redrive: ") ||
				!strings.Contains(line, tc.want) || !strings.HasSuffix(line, "; run 'fcreplay redrive --help'") {
				t.Errorf("stdout %q, stderr %q; want one line with %q", r.stdout, r.stderr, tc.want)
			}
		})
	}
	if !equalFiles(before, fileHashes(t, f.base)) {
		t.Errorf("a refused redrive changed files")
	}
}

// TestRedriveToAnotherGroupRefused: a --to that does not send its dead
// letters to --from may hold the events already: redrive refuses it.
func TestRedriveToAnotherGroupRefused(t *testing.T) {
	f := newDeadLetterFixture(t)
	r := fcreplay(t, f.args("redrive", "--from", "a.dlq", "--to", "", "-n", "1")...)
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, `is not the dead-letter group of the unnamed group`) || r.stdout != "" {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// TestInspectDeadLetters: inspect shows each group's dead-letter settings
// and delivery counts, and the dead-letter group (golden files, text and
// JSON); verify finds nothing wrong.
func TestInspectDeadLetters(t *testing.T) {
	f := newDeadLetterFixture(t)
	for _, js := range []bool{false, true} {
		name, args := "inspect-deadletters", f.args("inspect")
		if js {
			name, args = name+".json", append(args, "--json")
		}
		r := fcreplay(t, args...)
		r.wantCode(t, exitOK)
		if r.stderr != "" {
			t.Errorf("%s: stderr %q", name, r.stderr)
		}
		golden(t, name+".golden", f.normalize(r.stdout))
	}
	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
}

// TestDumpDeliveries: dump shows each event's delivery count in a group
// with MaxDeliveries, text and JSON, and none in the others; it lists a
// dead-letter group's events like any group's.
func TestDumpDeliveries(t *testing.T) {
	f := newDeadLetterFixture(t)
	r := fcreplay(t, f.args("dump", "--group", "a", "--limit", "2", "--max-body", "9")...)
	r.wantCode(t, exitOK)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !regexpMatch(`^0 1:\d+ id=\d+ time=\S+ deliveries=1 \{i=3, src=test\} "event-003"\.\.\. \(\d+ bytes\)$`, lines[0]) ||
		!regexpMatch(`^1 1:\d+ id=\d+ time=\S+ deliveries=0 \{i=4, src=test\} "event-004"`, lines[1]) {
		t.Errorf("dump --group a:\n%s", r.stdout)
	}
	if got, want := deliveryCounts(dumpGroup(t, f, "a")), []int{1, 0, 0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("a's delivery counts: %v, want %v", got, want)
	}
	for _, group := range []string{"", "a.dlq"} {
		if got := deliveryCounts(dumpGroup(t, f, group)); slices.ContainsFunc(got, func(n int) bool { return n != -1 }) {
			t.Errorf("group %q, which counts no deliveries, has counts %v", group, got)
		}
	}
	r = fcreplay(t, f.args("dump", "--group", "a.dlq")...)
	r.wantCode(t, exitOK)
	if lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); len(lines) != 3 || strings.Contains(r.stdout, "deliveries=") ||
		!strings.Contains(lines[0], "{i=0, src=test}") || r.stderr != "fcreplay: listed 3 of 3 queued events of dead-letter group \"a.dlq\"\n" {
		t.Errorf("dump --group a.dlq: stdout\n%s\nstderr %q", r.stdout, r.stderr)
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

// TestRedriveForeignDataDir: given another channel's data dir, redrive
// prints the library's refusal on one line, exit 1, and changes nothing
// (but the lock file the open creates, as repair's).
func TestRedriveForeignDataDir(t *testing.T) {
	f := newDeadLetterFixture(t)
	other := *f
	other.ckpt = filepath.Join(f.base, "checkpoint2")
	if err := os.Mkdir(other.ckpt, 0o700); err != nil {
		t.Fatal(err)
	}
	before := fileHashes(t, f.base)
	r := fcreplay(t, other.args("redrive", "--from", "a.dlq", "--to", "a")...)
	r.wantCode(t, exitFailed)
	line := strings.TrimSuffix(r.stderr, "\n")
	for _, want := range []string{"fcreplay: filechannel: ", "directory belongs to another channel: DataDirs[0] " + f.data,
		"delete " + filepath.Join(f.data, "channel.id"), "(nothing was changed)"} {
		if !strings.Contains(line, want) || strings.Contains(line, "\n") || r.stdout != "" {
			t.Errorf("stdout %q, stderr %q: want one line with %q", r.stdout, r.stderr, want)
		}
	}
	after := fileHashes(t, f.base)
	for p, h := range after {
		if b, ok := before[p]; (ok && b != h) || (!ok && p != filepath.Join(other.ckpt, channel.LockFileName)) {
			t.Errorf("a refused redrive changed or created %s", p)
		}
	}
}
