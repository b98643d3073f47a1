package checkpoint

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

func TestGroupDirNames(t *testing.T) {
	if got := GroupDir("/cp", 7); got != "/cp/group-7" {
		t.Fatalf("GroupDir = %q", got)
	}
	for _, id := range []uint32{1, 9, 10, 12345, math.MaxUint32} {
		if got, ok := ParseGroupDirName(filepath.Base(GroupDir("/cp", id))); !ok || got != id {
			t.Fatalf("parse(GroupDir(%d)) = %d, %v", id, got, ok)
		}
	}
	for _, name := range []string{"group-0", "group-01", "group-", "group-+1", "group--1", "group-1.tmp", "group-1 ",
		"group-4294967296", "group-0x1", "group-1_0", "groups", "Group-1", "group1", "xgroup-1"} {
		if id, ok := ParseGroupDirName(name); ok {
			t.Errorf("%q parsed as group dir %d", name, id)
		}
	}
}

func TestCreateGroupDir(t *testing.T) {
	mem := newMem(t, "/cp")
	fsys := vfs.WithModes(mem, 0o640, 0o750)
	if err := CreateGroupDir(fsys, "/cp", 3); err != nil {
		t.Fatal(err)
	}
	fi, err := mem.Stat("/cp/group-3")
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Fatalf("group dir: %v, %v; want a directory with mode 0750", fi, err)
	}
	// Durable when it returns: the dir's entry survives a power loss.
	if ids, err := ListGroupDirs(mem.CrashClone(false, 0), "/cp"); err != nil || !slices.Equal(ids, []uint32{3}) {
		t.Fatalf("after a power loss: group dirs %v, %v", ids, err)
	}
	// A checkpoint in it is one like any other.
	c := mustCreate(t, fsys, GroupDir("/cp", 3), 10)
	commit(t, c, &State{Meta: Meta{WriteOrderID: 4, Capacity: 10}})
	if err := CreateGroupDir(fsys, "/cp", 3); err != nil { // exists: nothing made, nothing lost
		t.Fatalf("second CreateGroupDir: %v", err)
	}
	if _, st := mustOpen(t, fsys, GroupDir("/cp", 3)); st.WriteOrderID != 4 {
		t.Fatalf("W = %d after a second CreateGroupDir", st.WriteOrderID)
	}

	if err := CreateGroupDir(fsys, "/cp", 0); err == nil {
		t.Fatal("CreateGroupDir of group 0 succeeded")
	}
	if err := CreateGroupDir(fsys, "/missing", 1); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CreateGroupDir in a missing dir = %v, want fs.ErrNotExist", err)
	}
	if _, err := mem.Stat("/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("CreateGroupDir made the missing checkpoint dir")
	}
	replace(t, mem, "/cp/group-5", []byte("a file"))
	if err := CreateGroupDir(fsys, "/cp", 5); !errors.Is(err, vfs.ErrNotRegular) {
		t.Fatalf("CreateGroupDir over a file = %v, want vfs.ErrNotRegular", err)
	}
}

// An unsynced group dir (a CreateGroupDir whose fsync failed) is made
// durable by the next CreateGroupDir, which finds it there.
func TestCreateGroupDirRetrySyncs(t *testing.T) {
	mem := newMem(t, "/cp")
	fsys := vfs.NewFaultFS(mem)
	fsys.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSyncDir}, Name: "/cp", Times: 1})
	if err := CreateGroupDir(fsys, "/cp", 2); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("CreateGroupDir = %v, want the injected fault", err)
	}
	if ids, _ := ListGroupDirs(mem.CrashClone(false, 0), "/cp"); len(ids) != 0 {
		t.Fatal("the group dir is durable without an fsync")
	}
	if err := CreateGroupDir(fsys, "/cp", 2); err != nil {
		t.Fatal(err)
	}
	if ids, _ := ListGroupDirs(mem.CrashClone(false, 0), "/cp"); !slices.Equal(ids, []uint32{2}) {
		t.Fatalf("after the retry and a power loss: group dirs %v", ids)
	}
}

func TestRemoveGroupDir(t *testing.T) {
	mem := newMem(t, "/cp")
	if err := CreateGroupDir(mem, "/cp", 4); err != nil {
		t.Fatal(err)
	}
	g := GroupDir("/cp", 4)
	c := mustCreate(t, mem, g, 10)
	commit(t, c, &State{Meta: Meta{WriteOrderID: 4, Capacity: 10}})
	replace(t, mem, path(g, MetaName+tmpSuffix), []byte("leftover"))

	replace(t, mem, path(g, "notes.txt"), nil)
	if err := RemoveGroupDir(mem, "/cp", 4); err == nil {
		t.Fatal("RemoveGroupDir removed a dir holding an unknown file")
	}
	if names, _ := mem.List(g); len(names) != 6 {
		t.Fatalf("a refused RemoveGroupDir left %v", names)
	}
	if err := mem.Remove(path(g, "notes.txt")); err != nil {
		t.Fatal(err)
	}

	if err := RemoveGroupDir(mem, "/cp", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(g); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("group dir still there: %v", err)
	}
	if _, err := mem.CrashClone(false, 0).Stat(g); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the group dir came back after a power loss")
	}
	if err := RemoveGroupDir(mem, "/cp", 4); err != nil {
		t.Fatalf("second RemoveGroupDir: %v", err)
	}
	if err := RemoveGroupDir(mem, "/cp", 0); err == nil {
		t.Fatal("RemoveGroupDir of group 0 succeeded")
	}
	replace(t, mem, "/cp/group-6", nil)
	if err := RemoveGroupDir(mem, "/cp", 6); !errors.Is(err, vfs.ErrNotRegular) {
		t.Fatalf("RemoveGroupDir of a file = %v, want vfs.ErrNotRegular", err)
	}
	if _, err := mem.Stat("/cp/group-6"); err != nil {
		t.Fatal("RemoveGroupDir removed a file named group-6")
	}
}

func TestListGroupDirs(t *testing.T) {
	mem := newMem(t, "/cp")
	for _, d := range []string{"group-10", "group-2", "group-1", "group-01", "group-0", "group-x", "other"} {
		if err := mem.MkdirAll(path("/cp", d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{CatalogName, "group-3.tmp", CheckpointName} {
		replace(t, mem, path("/cp", f), nil)
	}
	ids, err := ListGroupDirs(mem, "/cp")
	if err != nil || !slices.Equal(ids, []uint32{1, 2, 10}) {
		t.Fatalf("ListGroupDirs = %v, %v; want [1 2 10]", ids, err)
	}
	if ids, err := ListGroupDirs(newMem(t, "/empty"), "/empty"); err != nil || ids != nil {
		t.Fatalf("ListGroupDirs of an empty dir = %v, %v", ids, err)
	}
	if _, err := ListGroupDirs(mem, "/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ListGroupDirs of a missing dir = %v, want fs.ErrNotExist", err)
	}
	replace(t, mem, "/cp/group-7", nil)
	if _, err := ListGroupDirs(mem, "/cp"); !errors.Is(err, vfs.ErrNotRegular) {
		t.Fatalf("ListGroupDirs with a file named group-7 = %v, want vfs.ErrNotRegular", err)
	}
}

// A group-N that is a symbolic link, even to a directory, is no group dir:
// it is refused, never followed, and nothing is changed on either side.
func TestGroupDirThatIsALinkIsRefused(t *testing.T) {
	fsys := vfs.OS()
	dir, target := t.TempDir(), t.TempDir()
	c := mustCreate(t, fsys, target, 10)
	commit(t, c, &State{Meta: Meta{WriteOrderID: 3, Capacity: 10}})
	c.Close()
	link := filepath.Join(dir, "group-3")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	before := readDir(t, fsys, target)
	for what, err := range map[string]error{
		"ListGroupDirs":  func() error { _, err := ListGroupDirs(fsys, dir); return err }(),
		"CreateGroupDir": CreateGroupDir(fsys, dir, 3),
		"RemoveGroupDir": RemoveGroupDir(fsys, dir, 3),
		"Remove":         Remove(fsys, dir),
		"CheckFormat":    CheckFormat(fsys, dir),
	} {
		if !errors.Is(err, vfs.ErrNotRegular) {
			t.Errorf("%s = %v, want vfs.ErrNotRegular", what, err)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link changed: %v, %v", fi, err)
	}
	if after := readDir(t, fsys, target); len(after) != len(before) {
		t.Fatalf("the link's target changed: %d files, had %d", len(after), len(before))
	}
	if _, _, err := Open(fsys, dir); !errors.Is(err, vfs.ErrNotRegular) {
		t.Fatalf("Open = %v, want vfs.ErrNotRegular", err)
	}
}
