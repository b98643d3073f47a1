package main

import (
	"os"
	"path/filepath"
	"regexp"
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
	// The damaged event's transaction has 5 events; its commit record is
	// intact, so the repair's rebuild loses the damaged one only, as the
	// channel opened as it is does.
	wantAction := "pad-damaged-region " + log1 + " at offset 1401: 119 bytes, 1 committed event lost, kept in " + log1 + ".1401.corrupt"
	wantCost := "the repair would cost 1 committed event (a lower bound); opening the channel unrepaired loses 1\n"
	if !strings.HasPrefix(r.stdout, "dry run: nothing was changed") || !strings.Contains(r.stdout, wantAction) ||
		!strings.Contains(r.stdout, wantCost) || !strings.Contains(r.stdout, "verify now: 1 problem") {
		t.Errorf("dry run output:\n%s", r.stdout)
	}
	if !equalFiles(before, fileHashes(t, f.base)) {
		t.Fatalf("repair --dry-run changed files")
	}

	r = fcreplay(t, f.args("repair")...)
	r.wantCode(t, exitOK)
	if !strings.HasPrefix(r.stdout, wantAction) || !strings.Contains(r.stdout, "rebuilt the checkpoint from the logs: 24 events queued") ||
		!strings.HasSuffix(r.stdout, "verify after the repair: ok, no problems\n") {
		t.Errorf("repair output:\n%s", r.stdout)
	}
	kept, err := os.ReadFile(log1 + ".1401.corrupt")
	if err != nil || len(kept) != 119 || !strings.Contains(string(kept), "event-012") {
		t.Errorf(".corrupt file: %d bytes, %v", len(kept), err)
	}

	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
	r = fcreplay(t, f.args("dump", "--json")...)
	r.wantCode(t, exitOK)
	var want []int
	for _, ev := range f.queued {
		if ev != 12 { // the damaged event
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
	// No checkpoint records the capacity: the summary says the default
	// is used and that the application's Open will change it.
	if !strings.HasPrefix(r.stdout, "dry run: nothing was changed; a rebuild would recover 25 events (30 puts and 5 takes applied)") ||
		!strings.Contains(r.stdout, "capacity 1000000: the default, as no checkpoint recorded the channel's capacity; the application's next Open resizes") {
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
		!strings.Contains(r.stdout, " MB/s\ncapacity 200: as --capacity asked") {
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
	if !strings.Contains(r.stdout, `"capacity": 200`) || !strings.Contains(r.stdout, `"capacity_from": "checkpoint"`) ||
		!strings.Contains(r.stdout, `"events": 25`) {
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

// TestTruncatedLogIsNotATornTail: a log file cut below the length the
// checkpoint recorded is lost committed data, and every read-only command
// says so with the events it costs; bytes past the checkpoint's length
// that are not a record are a crash's torn tail, which costs nothing.
func TestTruncatedLogIsNotATornTail(t *testing.T) {
	t.Run("truncated", func(t *testing.T) {
		f := newFixture(t, clean)
		log1 := filepath.Join(f.data, "log-0000000001")
		fi, err := os.Stat(log1)
		if err != nil {
			t.Fatal(err)
		}
		// Half, plus a few bytes: inside a frame (half alone may fall on a
		// record boundary, which leaves no torn tail to cut).
		if err := os.Truncate(log1, fi.Size()/2+5); err != nil {
			t.Fatal(err)
		}
		r := fcreplay(t, f.args("verify")...)
		r.wantCode(t, exitFailed)
		if !strings.Contains(r.stdout, "truncated-log "+log1) || strings.Contains(r.stdout, "torn-tail") ||
			!regexp.MustCompile(`truncated-log .*\[costs [1-9][0-9]* committed events`).MatchString(r.stdout) ||
			!strings.Contains(r.stdout, "committed events lost to damage: ") {
			t.Errorf("verify:\n%s", r.stdout)
		}
		r = fcreplay(t, f.args("inspect")...)
		r.wantCode(t, exitOK)
		if !regexp.MustCompile(`log 1: truncated: .*\[costs [1-9][0-9]* committed events`).MatchString(r.stdout) ||
			!strings.Contains(r.stdout, "events lost") {
			t.Errorf("inspect:\n%s", r.stdout)
		}
		r = fcreplay(t, f.args("repair", "--dry-run")...)
		if !regexp.MustCompile(`cut-torn-tail .*, [1-9][0-9]* committed events lost`).MatchString(r.stdout) ||
			!strings.Contains(r.stdout, "the repair would cost ") {
			t.Errorf("repair --dry-run:\n%s", r.stdout)
		}
	})
	t.Run("torn_tail", func(t *testing.T) {
		f := newFixture(t, clean)
		log2 := filepath.Join(f.data, "log-0000000002")
		fh, err := os.OpenFile(log2, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.Write([]byte{0, 0, 0, 90, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
		r := fcreplay(t, f.args("verify")...)
		r.wantCode(t, exitFailed)
		if !strings.Contains(r.stdout, "torn-tail "+log2) || strings.Contains(r.stdout, "truncated-log") ||
			strings.Contains(r.stdout, "costs") || strings.Contains(r.stdout, "events lost") {
			t.Errorf("verify:\n%s", r.stdout)
		}
	})
}
