package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors: a bad command line exits 2 with one line on stderr that
// says what is wrong and where help is, and nothing on stdout.
func TestUsageErrors(t *testing.T) {
	f := newFixture(t, clean)
	cases := []struct {
		name string
		args []string
		want string // in the stderr line
	}{
		{"no_command", nil, "no command given"},
		{"flags_without_command", []string{"--json"}, "no command given"},
		{"unknown_command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"misspelt_command", []string{"verfy"}, "did you mean verify?"},
		{"unknown_flag", f.args("verify", "--frobnicate"), "unknown flag: --frobnicate"},
		{"bad_flag_value", f.args("dump", "--limit", "many"), "invalid argument"},
		{"extra_argument", f.args("inspect", "extra"), `unknown command "extra"`},
		{"no_checkpoint_dir", []string{"verify", "--data-dirs", f.data}, "--checkpoint-dir is required"},
		{"no_data_dirs", []string{"verify", "--checkpoint-dir", f.ckpt}, "--data-dirs is required"},
		{"no_dirs", []string{"inspect"}, "--checkpoint-dir and --data-dirs are required"},
		{"missing_dir", []string{"verify", "--checkpoint-dir", f.ckpt, "--data-dirs", filepath.Join(f.base, "nope")}, "does not exist"},
		{"file_not_dir", []string{"verify", "--checkpoint-dir", filepath.Join(f.ckpt, "checkpoint"), "--data-dirs", f.data}, "is not a directory"},
		{"same_dir_twice", []string{"verify", "--checkpoint-dir", f.data, "--data-dirs", f.data}, "given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := fcreplay(t, tc.args...)
			r.wantCode(t, exitUsage)
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.Contains(lines[0], "--help'") {
				t.Errorf("stderr %q: want one line containing %q and a --help hint", r.stderr, tc.want)
			}
		})
	}
}

// TestHelp: the tool and each command have help with an example, on
// stdout, exit 0.
func TestHelp(t *testing.T) {
	for _, cmd := range []string{"", "inspect", "verify", "dump", "repair", "replay", "redrive", "version"} {
		t.Run("help_"+cmd, func(t *testing.T) {
			args := []string{"--help"}
			if cmd != "" {
				args = []string{cmd, "--help"}
			}
			r := fcreplay(t, args...)
			r.wantCode(t, exitOK)
			if !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "fcreplay "+cmd) ||
				!strings.Contains(r.stdout, "--checkpoint-dir") {
				t.Errorf("help for %q lacks an example or the flags:\n%s", cmd, r.stdout)
			}
		})
	}
}
