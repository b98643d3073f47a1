package main

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// The compatibility rule (docs/format.md, "Compatibility"): every command
// refuses files a newer release wrote, says which file and version on one
// line, exits 1 and changes nothing.

func TestNewerFilesAreRefused(t *testing.T) {
	lastLog := func(t *testing.T, f *fixture) string {
		ids, err := logfile.ListLogs(vfs.OS(), f.data)
		if err != nil || len(ids) == 0 {
			t.Fatalf("list logs: %v %v", ids, err)
		}
		return filepath.Join(f.data, logfile.LogName(slices.Max(ids)))
	}
	cases := []struct {
		name  string
		patch func(t *testing.T, f *fixture) (file, what string)
	}{
		{"log_file_version_11", func(t *testing.T, f *fixture) (string, string) {
			p := filepath.Join(f.data, logfile.LogName(1))
			testutil.SetLogVersion(t, p, logfile.MaxFormatVersion+1)
			return p, "format version 11"
		}},
		{"log_record_of_type_18", func(t *testing.T, f *fixture) (string, string) {
			p := lastLog(t, f)
			testutil.AppendRecord(t, p, 18, 1<<40, []byte("newer"))
			return p, "record type 18"
		}},
		{"checkpoint_version_2", func(t *testing.T, f *fixture) (string, string) {
			p := filepath.Join(f.ckpt, checkpoint.CheckpointName)
			testutil.SetCheckpointVersion(t, p, 2)
			return p, "format version 2"
		}},
		{"checkpoint_meta_version_3", func(t *testing.T, f *fixture) (string, string) {
			p := filepath.Join(f.ckpt, checkpoint.MetaName)
			testutil.SetFileVersion(t, p, checkpoint.MetaVersion+1)
			return p, "format version 3"
		}},
		{"data_dir_channel_id_version_2", func(t *testing.T, f *fixture) (string, string) {
			p := filepath.Join(f.data, logfile.OwnerName)
			testutil.SetFileVersion(t, p, 2)
			return p, "format version 2"
		}},
		{"backup_inflightputs_version_2", func(t *testing.T, f *fixture) (string, string) {
			p := filepath.Join(f.backup, checkpoint.InflightPutsName)
			testutil.SetFileVersion(t, p, 2)
			return p, "format version 2"
		}},
	}
	commands := [][]string{
		{"inspect"}, {"verify"}, {"dump"},
		{"repair", "--dry-run"}, {"repair"},
		{"replay", "--dry-run"}, {"replay"},
		{"redrive", "--from", "dlq", "--to", ""},
		{"verify", "--json"},
	}
	for _, tc := range cases {
		for _, cmd := range commands {
			t.Run(tc.name+"/"+strings.Join(cmd, "_"), func(t *testing.T) {
				f := newFixture(t, clean)
				file, what := tc.patch(t, f)
				before := fileHashes(t, f.base)
				r := fcreplay(t, f.args(cmd[0], cmd[1:]...)...)
				r.wantCode(t, exitFailed)
				line := strings.TrimSuffix(r.stderr, "\n")
				for _, want := range []string{"fcreplay: ", "unsupported format: " + file, what, "newer release", "(nothing was changed)"} {
					if !strings.Contains(line, want) || strings.Contains(line, "\n") {
						t.Errorf("stderr %q: want one line with %q", r.stderr, want)
					}
				}
				if strings.Count(line, "(nothing was changed)") != 1 {
					t.Errorf("stderr %q: want \"(nothing was changed)\" once", r.stderr)
				}
				if strings.Contains(line, "corrupt") {
					t.Errorf("stderr %q calls a newer file corrupt", r.stderr)
				}
				if r.stdout != "" {
					t.Errorf("stdout %q, want nothing", r.stdout)
				}
				if after := fileHashes(t, f.base); !maps.Equal(before, after) {
					t.Errorf("%s changed the files", cmd[0])
				}
			})
		}
	}
}
