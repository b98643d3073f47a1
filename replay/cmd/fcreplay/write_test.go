package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepair: a dry run lists the padding of the damaged record and
// changes nothing; the repair pads it, keeps its bytes in a .corrupt file,
// rebuilds the checkpoint, and the channel then verifies clean and holds
// the undamaged events (the damaged event's transaction, 10..14, is lost).
func TestRepair(t *testing.T) {
	f := newFixture(t, damaged)
	log1 := filepath.Join(f.data, "log-0000000001")
	before := fileHashes(t, f.base)

	r := fcreplay(t, f.args("repair", "--dry-run")...)
	r.wantCode(t, exitOK)
	wantAction := "pad-damaged-region " + log1 + " at offset 1113: 107 bytes, kept in " + log1 + ".1113.corrupt"
	if !strings.HasPrefix(r.stdout, "dry run: nothing was changed") || !strings.Contains(r.stdout, wantAction) ||
		!strings.Contains(r.stdout, "verify now: 3 problems") {
		t.Errorf("dry run output:\n%s", r.stdout)
	}
	if !equalFiles(before, fileHashes(t, f.base)) {
		t.Fatalf("repair --dry-run changed files")
	}

	r = fcreplay(t, f.args("repair")...)
	r.wantCode(t, exitOK)
	if !strings.HasPrefix(r.stdout, wantAction) || !strings.Contains(r.stdout, "rebuilt the checkpoint from the logs: 20 events queued") ||
		!strings.HasSuffix(r.stdout, "verify after the repair: ok, no problems\n") {
		t.Errorf("repair output:\n%s", r.stdout)
	}
	kept, err := os.ReadFile(log1 + ".1113.corrupt")
	if err != nil || len(kept) != 107 || !strings.Contains(string(kept), "event-012") {
		t.Errorf(".corrupt file: %d bytes, %v", len(kept), err)
	}

	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
	r = fcreplay(t, f.args("dump", "--json")...)
	r.wantCode(t, exitOK)
	var want []int
	for _, ev := range f.queued {
		if ev < 10 || ev > 14 {
			want = append(want, ev)
		}
	}
	checkEvents(t, decodeEvents(t, r.stdout), want)

	r = fcreplay(t, f.args("repair", "--json")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, `"actions": []`) || !strings.Contains(r.stdout, `"ok": true`) {
		t.Errorf("second repair:\n%s", r.stdout)
	}
}

// TestReplay: with the checkpoint deleted, a dry run reports the events a
// rebuild recovers and writes nothing; replay writes a checkpoint of the
// old capacity and the channel verifies clean with the same events; a
// capacity too small fails and changes nothing.
func TestReplay(t *testing.T) {
	f := newFixture(t, noCheckpoint)
	before := fileHashes(t, f.base)

	r := fcreplay(t, f.args("replay", "--dry-run")...)
	r.wantCode(t, exitOK)
	if !strings.HasPrefix(r.stdout, "dry run: nothing was changed; a rebuild would recover 25 events (30 puts and 5 takes applied)") {
		t.Errorf("dry run output:\n%s", r.stdout)
	}
	r = fcreplay(t, f.args("replay", "--capacity", "10")...)
	r.wantCode(t, exitFailed)
	if r.stderr != "fcreplay: the logs hold 25 events, more than the capacity 10; run again with --capacity 25 or more (nothing was changed)\n" {
		t.Errorf("capacity too small: %q", r.stderr)
	}
	if !equalFiles(before, fileHashes(t, f.base)) {
		t.Fatalf("a dry run or a failed replay changed files")
	}
	fcreplay(t, f.args("replay", "--capacity", "-1")...).wantCode(t, exitUsage)

	r = fcreplay(t, f.args("replay", "--capacity", "200")...)
	r.wantCode(t, exitOK)
	if !strings.HasPrefix(r.stdout, "rebuilt the checkpoint: 25 events queued (30 puts and 5 takes applied), capacity 200; read ") ||
		!strings.Contains(r.stdout, " MB/s\n") {
		t.Errorf("replay output:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(f.ckpt, "checkpoint")); err != nil {
		t.Fatalf("no checkpoint written: %v", err)
	}
	r = fcreplay(t, f.args("inspect", "--json")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, `"capacity": 200`) || !strings.Contains(r.stdout, `"problems": 0`) {
		t.Errorf("inspect after replay:\n%s", r.stdout)
	}
	r = fcreplay(t, f.args("dump", "--json")...)
	r.wantCode(t, exitOK)
	checkEvents(t, decodeEvents(t, r.stdout), f.queued)

	// Without --capacity, the rebuilt checkpoint keeps the existing one's.
	// -v shows the library's log lines on stderr; stdout stays JSON.
	r = fcreplay(t, f.args("replay", "--json", "-v")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, `"capacity": 200`) || !strings.Contains(r.stdout, `"events": 25`) {
		t.Errorf("replay --json:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "level=INFO msg=opened") {
		t.Errorf("-v: no log lines on stderr: %q", r.stderr)
	}
	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
}

// TestLocked: while the channel is open (here, in the test process; flock
// works across processes), repair and replay refuse with one line and
// exit 1, dry runs included, and change nothing; the read-only commands
// warn and run.
func TestLocked(t *testing.T) {
	f := newFixture(t, damaged)
	c := mustOpen(t, f.config())
	defer mustClose(t, c)
	before := fileHashes(t, f.base)
	for _, args := range [][]string{{"repair"}, {"repair", "--dry-run"}, {"replay"}, {"replay", "--dry-run"}} {
		r := fcreplay(t, f.args(args[0], args[1:]...)...)
		r.wantCode(t, exitFailed)
		if r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
			!strings.HasPrefix(r.stderr, "fcreplay: the channel is open; stop it and run this again (nothing was changed): ") {
			t.Errorf("%v: stdout %q stderr %q", args, r.stdout, r.stderr)
		}
	}
	if !equalFiles(before, fileHashes(t, f.base)) {
		t.Errorf("a refused command changed files")
	}
	for _, cmd := range []string{"inspect", "verify", "dump"} {
		r := fcreplay(t, f.args(cmd)...)
		if r.stdout == "" || !strings.HasPrefix(r.stderr, "fcreplay: warning: the channel is in use (") {
			t.Errorf("%s: code %d, stdout %q, stderr %q", cmd, r.code, r.stdout, r.stderr)
		}
	}
}

// checkEvents compares dumped events with the bodies and headers of the
// events numbered want.
func checkEvents(t *testing.T, got []eventJSON, want []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, ev := range want {
		if string(got[i].Body) != string(body(ev)) || got[i].Headers["i"] != headers(ev)["i"] {
			t.Errorf("event %d: %q, want event %d", i, got[i].Body, ev)
		}
	}
}
