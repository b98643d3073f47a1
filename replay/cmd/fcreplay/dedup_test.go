package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/checkpoint"
)

// TestInspectDedup: inspect shows the deduplication snapshot's header and
// id count, and says when it does not read.
func TestInspectDedup(t *testing.T) {
	base := t.TempDir()
	f := &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), data: filepath.Join(base, "data")}
	cfg := f.config()
	cfg.Dedup = channel.Dedup{Header: "msg-id"}
	c := mustOpen(t, cfg)
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := tx.Put(channel.Event{Headers: map[string]string{"msg-id": strconv.Itoa(i % 3)}, Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, c)
	r := fcreplay(t, f.args("inspect")...)
	r.wantCode(t, exitOK)
	if want := `3 ids remembered for header "msg-id"`; !strings.Contains(r.stdout, want) {
		t.Fatalf("inspect lacks %q:\n%s", want, r.stdout)
	}
	r = fcreplay(t, f.args("inspect", "--json")...)
	var out inspectJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Dedup == nil || out.Dedup.IDs != 3 || out.Dedup.Header != "msg-id" {
		t.Fatalf("inspect --json: dedup %+v", out.Dedup)
	}
	if err := os.WriteFile(filepath.Join(f.ckpt, checkpoint.DedupName), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = fcreplay(t, f.args("inspect")...)
	if !strings.Contains(r.stdout, "snapshot unusable") {
		t.Fatalf("inspect of a damaged snapshot:\n%s", r.stdout)
	}
}
