package owner

import (
	"errors"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// TestReadOwnersRules runs ReadOwners' rules over the channel.id files of a
// checkpoint dir /ck, a backup dir /bk and data dirs /d0 and /d1: each case
// is the files found, and what Open then does.
func TestReadOwnersRules(t *testing.T) {
	a, b := NewID(), NewID()
	at := func(id ID, ck string) *Owner { return &Owner{ID: id, CheckpointDir: ck} }
	type files struct{ ck, bk, d0, d1 *Owner }
	for _, tc := range []struct {
		name    string
		files   files
		id      ID     // zero: a new one
		write   string // the dirs written, in order
		foreign string // the roles refused, in order
		channel string // ForeignDirError.Channel of the first refused: "a", "b" or "" (none)
	}{
		{name: "new_channel", write: "/ck /bk /d0 /d1"},
		{name: "older_release_dirs_adopted", write: "/ck /bk /d0 /d1"}, // the same files: none
		{name: "all_recorded", files: files{at(a, "/ck"), at(a, "/ck"), at(a, "/ck"), at(a, "/ck")}, id: a},
		{name: "new_data_dir", files: files{ck: at(a, "/ck"), bk: at(a, "/ck"), d0: at(a, "/ck")}, id: a, write: "/d1"},
		{name: "data_dir_of_another_channel", files: files{ck: at(a, "/ck"), bk: at(a, "/ck"), d0: at(a, "/ck"), d1: at(b, "/ck2")},
			id: a, foreign: "DataDirs[1]", channel: "a"},
		{name: "backup_of_another_channel", files: files{ck: at(a, "/ck"), bk: at(b, "/ck2"), d0: at(a, "/ck")},
			id: a, write: "/d1", foreign: "BackupCheckpointDir", channel: "a"},
		{name: "other_id_recording_this_checkpoint_dir", files: files{ck: at(a, "/ck"), d0: at(b, "/ck")},
			id: a, write: "/bk /d1", foreign: "DataDirs[0]", channel: "a"},
		{name: "lost_checkpoint_dir", files: files{bk: at(a, "/ck"), d0: at(a, "/ck"), d1: at(a, "/ck")}, id: a, write: "/ck"},
		{name: "lost_checkpoint_and_backup", files: files{d0: at(a, "/ck"), d1: at(a, "/ck")}, id: a, write: "/ck /bk"},
		{name: "new_checkpoint_dir_on_a_foreign_data_dir", files: files{d0: at(a, "/ck1")},
			write: "/ck /bk /d1", foreign: "DataDirs[0]", channel: ""},
		{name: "data_dirs_of_two_channels", files: files{d0: at(a, "/ck1"), d1: at(b, "/ck2")},
			write: "/ck /bk", foreign: "DataDirs[0] DataDirs[1]", channel: ""},
		{name: "lost_checkpoint_with_a_foreign_data_dir", files: files{d0: at(a, "/ck"), d1: at(b, "/ck2")},
			id: a, write: "/ck /bk", foreign: "DataDirs[1]", channel: "a"},
		{name: "moved_checkpoint_dir", files: files{ck: at(a, "/old"), bk: at(a, "/old"), d0: at(a, "/old"), d1: at(a, "/old")},
			id: a, write: "/ck /bk /d0 /d1"},
		{name: "moved_and_lost_checkpoint_dir", files: files{d0: at(a, "/old")},
			write: "/ck /bk /d1", foreign: "DataDirs[0]", channel: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			for dir, o := range map[string]*Owner{"/ck": tc.files.ck, "/bk": tc.files.bk, "/d0": tc.files.d0, "/d1": tc.files.d1} {
				if err := fsys.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if o != nil {
					if err := Write(fsys, dir, *o); err != nil {
						t.Fatal(err)
					}
				}
			}
			own, err := ReadOwners(Options{FS: fsys, CheckpointDir: "/ck", BackupCheckpointDir: "/bk", DataDirs: []string{"/d0", "/d1"}})
			if err != nil {
				t.Fatal(err)
			}
			if own.CheckpointDir != "/ck" {
				t.Errorf("CheckpointDir %q", own.CheckpointDir)
			}
			switch {
			case own.New != tc.id.IsZero(), !own.New && own.ID != tc.id:
				t.Errorf("ID %v New %v, want %v (zero: a new one)", own.ID, own.New, tc.id)
			case own.New && (own.ID.IsZero() || own.ID == a || own.ID == b):
				t.Errorf("new ID %v: zero or one found", own.ID)
			}
			var write, foreign []string
			for _, d := range own.Dirs {
				if d.Write {
					write = append(write, d.Dir)
				}
			}
			for _, fe := range own.Foreign {
				foreign = append(foreign, fe.Role)
			}
			if got := strings.Join(write, " "); got != tc.write {
				t.Errorf("written %q, want %q", got, tc.write)
			}
			if got := strings.Join(foreign, " "); got != tc.foreign {
				t.Errorf("refused %q, want %q", got, tc.foreign)
			}
			if tc.foreign == "" {
				if err := own.Err(); err != nil {
					t.Errorf("Err: %v", err)
				}
				return
			}
			err = own.Err()
			var fe *ForeignDirError
			if !errors.Is(err, ErrForeignDir) || !errors.As(err, &fe) {
				t.Fatalf("Err: %v, want a *ForeignDirError", err)
			}
			want := map[string]string{"a": a.String(), "b": b.String(), "": ""}[tc.channel]
			if fe.Channel != want || fe.CheckpointDir != "/ck" || fe.File != fe.Dir+"/channel.id" {
				t.Errorf("%+v: want Channel %q", fe, want)
			}
			msg := err.Error()
			for _, w := range []string{"directory belongs to another channel", fe.Role + " " + fe.Dir, fe.Owner, fe.OwnerCheckpointDir, "delete " + fe.File} {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
		})
	}
}

// TestReadOwnersDamagedAndNewer: a damaged channel.id is refused (Err,
// matching ErrCorrupt, naming the file); one of a newer version is
// ReadOwners' error.
func TestReadOwnersDamagedAndNewer(t *testing.T) {
	fsys := vfs.NewMem()
	opts := Options{FS: fsys, CheckpointDir: "/ck", DataDirs: []string{"/d0"}}
	for _, d := range []string{"/ck", "/d0"} {
		if err := fsys.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := vfs.WriteFileAtomic(fsys, "/d0/channel.id", []byte("FCID\x00\x01garbage")); err != nil {
		t.Fatal(err)
	}
	own, err := ReadOwners(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Err(); !errors.Is(err, corrupt.ErrCorrupt) || !strings.Contains(err.Error(), "/d0/channel.id") || !strings.Contains(err.Error(), "delete the file") {
		t.Fatalf("Err: %v, want the corruption of /d0/channel.id", err)
	}
	if err := vfs.WriteFileAtomic(fsys, "/d0/channel.id", []byte("FCID\x00\x02")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadOwners(opts); !errors.Is(err, corrupt.ErrUnsupportedFormat) || !strings.Contains(err.Error(), "DataDirs[0] /d0") {
		t.Fatalf("ReadOwners: %v, want ErrUnsupportedFormat", err)
	}
}
