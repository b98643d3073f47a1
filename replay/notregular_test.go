package replay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// NeededNotRegular refuses an entry that is not a regular file where a
// replay needs the log file of its name, and leaves the others alone.
func TestNeededNotRegular(t *testing.T) {
	// The checkpoint lists log files 3 (3 queued events) and 4 (none);
	// 1 and 2 were deleted before it; 5 is the next id.
	st := &checkpoint.State{Meta: checkpoint.Meta{NextFileID: 5,
		Logs: []checkpoint.LogState{{FileID: 3, Refs: 3}, {FileID: 4}}}}
	for _, tc := range []struct {
		name string
		id   uint32
		st   *checkpoint.State
		held bool   // data dir 1 holds a regular file of that id
		want string // "" = left alone
		ours bool
	}{
		{"queued_per_the_checkpoint", 3, st, false, "log file log-0000000003 holds 3 queued events according to the checkpoint, but ", true},
		{"listed_by_the_checkpoint", 4, st, false, "log file log-0000000004 is one the checkpoint lists, which may hold events committed after it, but ", true},
		{"next_id", 5, st, false, "log file log-0000000005 is newer than the checkpoint and may hold events committed after it, but ", false},
		{"newer", 9, st, false, "log file log-0000000009 is newer than the checkpoint", false},
		{"deleted_before_the_checkpoint", 2, st, false, "", false},
		{"full_replay", 2, nil, false, "a full replay reads every log file, but ", false},
		{"held_by_another_data_dir", 3, st, true, "", false},
		{"held_by_another_data_dir_full_replay", 3, nil, true, "", false},
		{"checkpoint_without_next_file_id", 5, &checkpoint.State{Meta: checkpoint.Meta{
			Logs: []checkpoint.LogState{{FileID: 3, Refs: 3}}}}, false, "log file log-0000000005 is newer than the checkpoint", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dirs := []string{filepath.Join(base, "data0"), filepath.Join(base, "data1")}
			for _, d := range dirs {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			entry := filepath.Join(dirs[0], logfile.LogName(tc.id))
			if err := os.Symlink(filepath.Join(base, "elsewhere"), entry); err != nil {
				t.Fatal(err)
			}
			if tc.held { // an unfinished create: listed, holding no record
				if err := os.WriteFile(filepath.Join(dirs[1], logfile.LogName(tc.id)), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			logs, err := logfile.OpenSet(logfile.SetOptions{FS: vfs.OS(), Dirs: dirs})
			if err != nil {
				t.Fatal(err)
			}
			defer logs.Close()
			err = NeededNotRegular(logs, tc.st)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err %v, want the entry left alone", err)
				}
				return
			}
			var ne *logfile.NotRegularError
			if !errors.Is(err, vfs.ErrNotRegular) || !errors.As(err, &ne) || ne.Path != entry || ne.ID != tc.id || ne.Ours != tc.ours {
				t.Fatalf("err %#v, want a *logfile.NotRegularError for %s (ours %v)", err, entry, tc.ours)
			}
			if !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), entry+" is a symbolic link, not a regular file: ") {
				t.Errorf("error %q, want it to start %q and name %s", err, tc.want, entry)
			}
		})
	}
}
