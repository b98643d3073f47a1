package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A link named like a log file is reported by verify (with what to do);
// repair and replay, whose full replay cannot tell whether it stands for a
// log file moved away, refuse it, name it and change nothing: its target is
// neither cut nor copied. Moved away, the channel verifies clean.
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
	if !strings.Contains(r.stdout, "not-a-regular-file "+link) || !strings.Contains(r.stdout, "goes back into the data dir in place of the link") ||
		strings.Contains(r.stdout, "'fcreplay replay' rebuilds it") {
		t.Errorf("verify output:\n%s", r.stdout)
	}
	for _, cmd := range []string{"repair", "replay"} {
		r = fcreplay(t, f.args(cmd)...)
		r.wantCode(t, exitFailed)
		if !strings.Contains(r.stderr, link+" is a symbolic link, not a regular file") || !strings.Contains(r.stderr, "(nothing was changed)") {
			t.Errorf("%s stderr:\n%s", cmd, r.stderr)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != string(foreign) {
		t.Errorf("the link's target now holds %q (%v)", b, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced or removed: %v", err)
	}
	os.Remove(link)
	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
}
