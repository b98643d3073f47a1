package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A link named like a log file is reported by verify (with what to do) and
// left alone by repair and replay: its target is neither cut nor copied.
func TestLinkNamedLikeALogIsReportedAndLeftAlone(t *testing.T) {
	f := newFixture(t, clean)
	target := filepath.Join(t.TempDir(), "foreign")
	foreign := []byte("someone else's file, never to be cut or copied\n")
	if err := os.WriteFile(target, foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(f.data, "log-0000000099")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}

	r := fcreplay(t, f.args("verify")...)
	r.wantCode(t, exitFailed)
	if !strings.Contains(r.stdout, "not-a-regular-file "+link) || !strings.Contains(r.stdout, "move them away") {
		t.Errorf("verify output:\n%s", r.stdout)
	}
	r = fcreplay(t, f.args("repair")...)
	r.wantCode(t, exitFailed) // the problem remains
	if strings.Contains(r.stdout, "kept in "+link) || !strings.Contains(r.stdout, "not-a-regular-file "+link) {
		t.Errorf("repair output:\n%s", r.stdout)
	}
	fcreplay(t, f.args("replay")...).wantCode(t, exitOK)
	if b, err := os.ReadFile(target); err != nil || string(b) != string(foreign) {
		t.Errorf("the link's target now holds %q (%v)", b, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced or removed: %v", err)
	}
	os.Remove(link)
	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
}
