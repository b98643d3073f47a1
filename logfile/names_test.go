package logfile

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

func TestLogNameRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		id   uint32
		name string
	}{
		{0, "log-0000000000"},
		{7, "log-0000000007"},
		{1234567890, "log-1234567890"},
		{math.MaxUint32, "log-4294967295"},
	} {
		if got := LogName(tc.id); got != tc.name {
			t.Errorf("LogName(%d) = %q, want %q", tc.id, got, tc.name)
		}
		if id, ok := ParseLogName(tc.name); !ok || id != tc.id {
			t.Errorf("ParseLogName(%q) = %d, %v; want %d", tc.name, id, ok, tc.id)
		}
	}
}

func TestParseLogNameRejects(t *testing.T) {
	for _, name := range []string{
		"", "log-", "log-1", "log-000000007", "log-00000000007",
		"log-0000000007.corrupt", "log-0000000007.tmp", "log-0000000007.meta",
		"LOG-0000000007", "lag-0000000007", "xlog-000000007", "log-00000000-7", "log-000000007a",
		"log-4294967296", "log-9999999999", // past uint32
		"foo", "checkpoint",
	} {
		if id, ok := ParseLogName(name); ok {
			t.Errorf("ParseLogName(%q) = %d, true; want rejected", name, id)
		}
	}
}

func TestListLogsReturnsIDsAscendingAndIgnoresOthers(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		"log-0000000010", "log-0000000002", "log-0000000001.corrupt", "foo", "log-1",
		"log-0000000003.tmp", "log-4294967295", "checkpoint",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "log-0000000005.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	ids, err := ListLogs(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{2, 10, math.MaxUint32}; !slices.Equal(ids, want) {
		t.Fatalf("ListLogs = %v, want %v", ids, want)
	}
	if _, err := ListLogs(vfs.OS(), filepath.Join(dir, "missing")); err == nil {
		t.Fatal("ListLogs of a missing dir succeeded")
	}
}

// An entry named like a log file that is not a regular file (here a
// directory, the MemFS's one kind) is no log file: ListLogs skips it, the
// set lists it apart and never opens it, and no new file gets its id.
func TestEntriesNamedLikeLogsThatAreNotFilesAreSetApart(t *testing.T) {
	fsys := setMem(t, "/d")
	w, err := Create(fsys, "/d", 1)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := fsys.MkdirAll("/d/"+LogName(2), 0o700); err != nil {
		t.Fatal(err)
	}
	if ids, err := ListLogs(fsys, "/d"); err != nil || !slices.Equal(ids, []uint32{1}) {
		t.Fatalf("ListLogs = %v, %v; want [1]", ids, err)
	}
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/d"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.NotRegular(); len(got) != 1 || got[0].ID != 2 || got[0].Path != "/d/"+LogName(2) || !got[0].Mode.IsDir() {
		t.Fatalf("NotRegular = %+v", got)
	}
	if l := s.Listed(); len(l) != 1 || l[0].ID != 1 {
		t.Fatalf("Listed = %+v", l)
	}
	if err := s.Start(Recovered{MaxFileID: 1}); err != nil {
		t.Fatal(err)
	}
	if got := s.NextFileID(); got != 3 {
		t.Fatalf("NextFileID = %d, want 3 (2 is taken)", got)
	}
	if err := s.Roll(0); err != nil {
		t.Fatalf("Roll: %v", err)
	}
}
