package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestForeignDataDir: given another channel's data dir, verify lists a
// foreign-data-dir problem and says what to do; repair and replay (dry runs
// included) print the library's refusal on one line, exit 1 and change
// nothing.
func TestForeignDataDir(t *testing.T) {
	f := newFixture(t, clean)
	other := *f
	other.ckpt, other.backup = filepath.Join(f.base, "checkpoint2"), ""
	if err := os.Mkdir(other.ckpt, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(f.data, "channel.id")
	before := fileHashes(t, f.base)

	r := fcreplay(t, other.args("verify")...)
	r.wantCode(t, exitFailed)
	for _, want := range []string{"foreign-data-dir " + file + ": DataDirs[0] " + f.data + " belongs to channel ",
		"next: a directory belongs to another channel"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("verify's output does not say %q:\n%s", want, r.stdout)
		}
	}
	for _, cmd := range [][]string{{"repair"}, {"repair", "--dry-run"}, {"replay"}, {"replay", "--dry-run"}} {
		r := fcreplay(t, other.args(cmd[0], cmd[1:]...)...)
		r.wantCode(t, exitFailed)
		line := strings.TrimSuffix(r.stderr, "\n")
		for _, want := range []string{"fcreplay: filechannel: ", "directory belongs to another channel: DataDirs[0] " + f.data,
			"delete " + file, "(nothing was changed)"} {
			if !strings.Contains(line, want) || strings.Contains(line, "\n") {
				t.Errorf("%s: stderr %q: want one line with %q", cmd, r.stderr, want)
			}
		}
	}
	after := fileHashes(t, f.base)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
}
