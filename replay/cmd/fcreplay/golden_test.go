package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestGolden runs inspect and verify, text and JSON, on each fixture and
// compares their normalized stdout with testdata/<command>-<fixture>[.json].golden.
func TestGolden(t *testing.T) {
	cases := []struct {
		fixture    string
		verifyCode int
	}{
		{clean, exitOK},
		{damaged, exitFailed},      // corrupt-record, the checkpoint disagrees with a full replay, bad-pointer
		{noCheckpoint, exitFailed}, // checkpoint-missing; recovery is a full replay
		{incomplete, exitFailed},   // checkpoint-incomplete; recovery from the backup
		{groups, exitOK},           // the unnamed group and two named groups
		{groupDamaged, exitFailed}, // checkpoint-corrupt of group audit; recovery from the backup
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			f := newFixture(t, tc.fixture)
			before := fileHashes(t, f.base)
			for _, cmd := range []string{"inspect", "verify"} {
				for _, js := range []bool{false, true} {
					name := cmd + "-" + tc.fixture
					args := f.args(cmd)
					if js {
						name += ".json"
						args = append(args, "--json")
					}
					r := fcreplay(t, args...)
					want := exitOK
					if cmd == "verify" {
						want = tc.verifyCode
					}
					r.wantCode(t, want)
					if r.stderr != "" {
						t.Errorf("%s: stderr: %s", name, r.stderr)
					}
					if js && !json.Valid([]byte(r.stdout)) {
						t.Errorf("%s: not one JSON document:\n%s", name, r.stdout)
					}
					golden(t, name+".golden", f.normalize(r.stdout))
				}
			}
			after := fileHashes(t, f.base)
			for p, b := range before {
				if after[p] != b && !strings.HasSuffix(p, "in_use.lock") {
					t.Errorf("read-only commands changed %s", p)
				}
			}
			if len(after) != len(before) {
				t.Errorf("read-only commands created or removed files: %d before, %d after", len(before), len(after))
			}
		})
	}
}
