package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/channel"
)

// TestInspectRetained: inspect counts the log files no group holds (a
// channel with Retention keeps them), their bytes and the oldest one's
// time; the held files are not counted.
func TestInspectRetained(t *testing.T) {
	base := t.TempDir()
	f := &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), data: filepath.Join(base, "data")}
	cfg := f.config()
	cfg.MaxFileSize = channel.MinMaxFileSize
	cfg.Retention = channel.Retention{MaxAge: time.Hour}
	start := time.Now().Add(-time.Second)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 60, 10)
	for range 5 {
		takeN(t, c, 10, true)
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	mustClose(t, c)
	if st.RetainedFiles < 2 || st.Queued != 10 {
		t.Fatalf("the channel retains %d files and queues %d events", st.RetainedFiles, st.Queued)
	}

	r := fcreplay(t, f.args("inspect", "--json")...)
	r.wantCode(t, exitOK)
	var out inspectJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	// Close's checkpoint kept what the channel retained, and the file it
	// was writing, which holds no event either (the last take records).
	if out.RetainedFiles < st.RetainedFiles || out.RetainedFiles >= len(out.Logs) || out.RetainedBytes <= 0 {
		t.Fatalf("inspect: %d retained of %d log files, %d bytes; the channel retained %d", out.RetainedFiles, len(out.Logs), out.RetainedBytes, st.RetainedFiles)
	}
	oldest, err := time.Parse("2006-01-02T15:04:05.000Z07:00", out.OldestRetained)
	if err != nil || oldest.Before(start) || oldest.After(time.Now()) {
		t.Fatalf("oldest retained %q (%v), want a time since the test began", out.OldestRetained, err)
	}
	r = fcreplay(t, f.args("inspect")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "\n  retained        ") || !strings.Contains(r.stdout, "that no group holds; the oldest written "+out.OldestRetained) {
		t.Fatalf("inspect lacks the retained line:\n%s", r.stdout)
	}
}
