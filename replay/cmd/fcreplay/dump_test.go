package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// TestDump lists a channel's queued events, text and JSON, with skip and
// limit; the JSON bodies decode with encoding/json back to the bodies put.
func TestDump(t *testing.T) {
	for _, kind := range []string{clean, noCheckpoint} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind)
			before := fileHashes(t, f.base)

			r := fcreplay(t, f.args("dump")...)
			r.wantCode(t, exitOK)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			if len(lines) != len(f.queued) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(f.queued), r.stdout)
			}
			for idx, ev := range f.queued {
				prefix := fmt.Sprintf("%d %d:", idx, 1+min(ev/20, 1))
				wantHeaders := fmt.Sprintf("{i=%d, src=test} %q", ev, string(body(ev)[:min(len(body(ev)), 64)]))
				if !strings.HasPrefix(lines[idx], prefix) || !strings.Contains(lines[idx], wantHeaders) {
					t.Errorf("line %d: %q, want prefix %q and %q", idx, lines[idx], prefix, wantHeaders)
				}
			}
			if !strings.Contains(lines[2], `\x00\xff\n"`) {
				t.Errorf("event 7's bytes are not quoted: %q", lines[2])
			}
			if !strings.HasSuffix(lines[24], `... (117 bytes)`) {
				t.Errorf("event 29's long body is not cut: %q", lines[24])
			}
			if !strings.Contains(r.stderr, "listed 25 of 25 queued events") {
				t.Errorf("stderr: %q", r.stderr)
			}

			r = fcreplay(t, f.args("dump", "--json")...)
			r.wantCode(t, exitOK)
			got := decodeEvents(t, r.stdout)
			if len(got) != len(f.queued) {
				t.Fatalf("%d JSON lines, want %d", len(got), len(f.queued))
			}
			for idx, ev := range f.queued {
				if got[idx].Index != idx || !bytes.Equal(got[idx].Body, body(ev)) || !maps.Equal(got[idx].Headers, headers(ev)) {
					t.Errorf("JSON line %d: %+v, want event %d", idx, got[idx], ev)
				}
			}

			r = fcreplay(t, f.args("dump", "--json", "--skip", "3", "--limit", "4")...)
			r.wantCode(t, exitOK)
			got = decodeEvents(t, r.stdout)
			if len(got) != 4 || got[0].Index != 3 || !bytes.Equal(got[0].Body, body(f.queued[3])) ||
				!bytes.Equal(got[3].Body, body(f.queued[6])) {
				t.Errorf("--skip 3 --limit 4: %+v", got)
			}
			if !strings.Contains(r.stderr, "listed 4 of 25") {
				t.Errorf("stderr: %q", r.stderr)
			}

			r = fcreplay(t, f.args("dump", "--skip", "100")...)
			r.wantCode(t, exitOK)
			if r.stdout != "" {
				t.Errorf("skip past the end: %q", r.stdout)
			}
			if !equalFiles(before, fileHashes(t, f.base)) {
				t.Errorf("dump changed files")
			}
		})
	}
}

// TestDumpDamaged: an event that does not read back is listed with its
// error and the exit code is 1; the others are listed.
func TestDumpDamaged(t *testing.T) {
	f := newFixture(t, damaged)
	r := fcreplay(t, f.args("dump", "--max-body", "0")...)
	r.wantCode(t, exitFailed)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 25 || !strings.HasPrefix(lines[7], "7 1:1401 DAMAGED: corrupt ") {
		t.Fatalf("want event 12 (index 7) damaged:\n%s", r.stdout)
	}
	if !strings.HasSuffix(lines[24], fmt.Sprintf("%q", body(29))) {
		t.Errorf("--max-body 0 cut the body: %q", lines[24])
	}
	if !strings.Contains(r.stderr, "1 does not read back") {
		t.Errorf("stderr: %q", r.stderr)
	}
	r = fcreplay(t, f.args("dump", "--json", "--skip", "7", "--limit", "1")...)
	r.wantCode(t, exitFailed)
	got := decodeEvents(t, r.stdout)
	if len(got) != 1 || got[0].Error == "" || got[0].Body != nil || got[0].Pointer != "1:1401" {
		t.Errorf("damaged JSON line: %s", r.stdout)
	}
}

func decodeEvents(t *testing.T, out string) []eventJSON {
	t.Helper()
	var evs []eventJSON
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var e eventJSON
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func equalFiles(a, b map[string]string) bool {
	for p := range a {
		if strings.HasSuffix(p, "in_use.lock") {
			continue
		}
		if a[p] != b[p] {
			return false
		}
	}
	return len(a) == len(b)
}
