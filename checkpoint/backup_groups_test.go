package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Backup, RestoreBackup, Remove and CheckFormat of checkpoint sets with a
// groups catalog and group dirs.

func TestBackupRestoreWithGroups(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir, bdir, rdir := backupDirs(t, k)
			syncDirs(t, fsys, "/", "/cp")
			s := newSet(t, fsys, dir, 50, 3, 7)
			s.write(10)
			// rdir holds another set, with a group 5 of its own.
			newSet(t, fsys, rdir, 20, 5).write(4)
			replace(t, fsys, path(rdir, "in_use.lock"), nil)

			if err := Backup(fsys, dir, bdir); err != nil {
				t.Fatal(err)
			}
			if !HasBackup(fsys, bdir) {
				t.Fatal("no backup after Backup")
			}
			src := readTree(t, fsys, dir)
			sameTree(t, readTree(t, fsys, bdir), maps.Clone(src), BackupCompleteName)
			if err := RestoreBackup(fsys, bdir, rdir); err != nil {
				t.Fatal(err)
			}
			wantSet(t, fsys, rdir, 10, 3, 7)
			sameTree(t, readTree(t, fsys, rdir), src, "in_use.lock") // group-5 is gone
			if mem, ok := fsys.(*vfs.MemFS); ok {
				// Durable when they return.
				crashed := mem.CrashClone(false, 0)
				wantSet(t, crashed, rdir, 10, 3, 7)
				if !HasBackup(crashed, bdir) {
					t.Fatal("no backup after a power loss")
				}
				if err := RestoreBackup(crashed, bdir, "/cp/restored2"); err == nil {
					t.Fatal("restored into a missing dir")
				}
				if err := crashed.MkdirAll("/cp/restored2", 0o700); err != nil {
					t.Fatal(err)
				}
				if err := RestoreBackup(crashed, bdir, "/cp/restored2"); err != nil {
					t.Fatal(err)
				}
				wantSet(t, crashed, "/cp/restored2", 10, 3, 7)
			}
		})
	}
}

// TestBackupRemovesStaleGroups: the backup holds the groups of the last
// backed-up set only; a set without a catalog (an older release's layout)
// leaves none.
func TestBackupRemovesStaleGroups(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, root string) {
		dir, bdir, rdir := path(root, "cp"), path(root, "backup"), path(root, "restored")
		for _, d := range []string{dir, bdir, rdir} {
			if err := fsys.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		s := newSet(t, fsys, dir, 20, 3, 9)
		s.write(5)
		if err := Backup(fsys, dir, bdir); err != nil {
			t.Fatal(err)
		}
		s.removeGroup(9)
		s.addGroup(12)
		s.write(6)
		if err := Backup(fsys, dir, bdir); err != nil {
			t.Fatal(err)
		}
		if ids, err := ListGroupDirs(fsys, bdir); err != nil || !slices.Equal(ids, []uint32{3, 12}) {
			t.Fatalf("backup group dirs %v, %v; want [3 12]", ids, err)
		}

		// Back to a single unnamed group, without a catalog.
		s.removeGroup(3)
		s.removeGroup(12)
		if err := fsys.Remove(path(dir, CatalogName)); err != nil {
			t.Fatal(err)
		}
		s.writeRing(s.top, 7, 0)
		replace(t, fsys, path(bdir, CatalogName+tmpSuffix), []byte("leftover"))
		if err := Backup(fsys, dir, bdir); err != nil {
			t.Fatal(err)
		}
		names, _ := fsys.List(bdir)
		if want := []string{BackupCompleteName, CheckpointName, MetaName, InflightPutsName, InflightTakesName}; !slices.Equal(names, want) {
			t.Fatalf("backup dir holds %v, want %v", names, want)
		}
		newSet(t, fsys, rdir, 20, 1).write(2)
		if err := RestoreBackup(fsys, bdir, rdir); err != nil {
			t.Fatal(err)
		}
		wantSet(t, fsys, rdir, 7)
		if ids, err := ListGroupDirs(fsys, rdir); err != nil || len(ids) != 0 {
			t.Fatalf("restored dir keeps group dirs %v (%v)", ids, err)
		}
	})
}

// TestBackupWithGroupsCrash takes a power-loss image at every operation of
// a Backup: whenever backupComplete is there, the backup restores to the old
// set or the new one, whole.
func TestBackupWithGroupsCrash(t *testing.T) {
	mem := newMem(t, "/cp", "/backup")
	s := newSet(t, mem, "/cp", 30, 2, 5)
	s.write(1)
	if err := Backup(mem, "/cp", "/backup"); err != nil {
		t.Fatal(err)
	}
	s.removeGroup(5)
	s.addGroup(8)
	s.write(2)
	var images []*vfs.MemFS
	mem.SetHook(func(p vfs.CrashPoint) { images = append(images, p.Clone(false, int64(p.Seq))) })
	err := Backup(mem, "/cp", "/backup")
	mem.SetHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	var none, old int
	for i, img := range images {
		if !HasBackup(img, "/backup") {
			none++
			continue
		}
		if err := img.MkdirAll("/r", 0o700); err != nil {
			t.Fatal(err)
		}
		if err := RestoreBackup(img, "/backup", "/r"); err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		w, ids, err := openSet(img, "/r")
		switch {
		case err == nil && w == 1 && slices.Equal(ids, []uint32{2, 5}):
			old++
		case err == nil && w == 2 && slices.Equal(ids, []uint32{2, 8}) && i == len(images)-1:
		default:
			t.Fatalf("image %d of %d: a complete backup restores to W %d, groups %v, err %v", i, len(images), w, ids, err)
		}
	}
	if old == 0 || none == 0 {
		t.Fatalf("crash points did not cover all outcomes: old=%d none=%d of %d", old, none, len(images))
	}
}

// A Backup that fails at any operation leaves no backupComplete, before or
// after a power loss; once one succeeds the backup restores the new set.
func TestBackupWithGroupsFailureMidway(t *testing.T) {
	mem := newMem(t, "/cp", "/backup", "/r")
	fsys := vfs.NewFaultFS(mem)
	s := newSet(t, fsys, "/cp", 30, 2, 5)
	s.write(1)
	if err := Backup(fsys, "/cp", "/backup"); err != nil {
		t.Fatal(err)
	}
	s.removeGroup(5)
	s.addGroup(8)
	s.write(2)

	fsys.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpCreate}, Name: "/backup/group-8/" + MetaName + tmpSuffix})
	if err := Backup(fsys, "/cp", "/backup"); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Backup = %v, want the injected fault", err)
	}
	if HasBackup(fsys, "/backup") || HasBackup(mem.CrashClone(false, 0), "/backup") {
		t.Fatal("HasBackup after a Backup failed in a group dir")
	}
	fsys.Clear()

	for k := 1; ; k++ {
		fsys.Add(vfs.Rule{Seq: fsys.Ops() + int64(k), FailAfter: true})
		err := Backup(fsys, "/cp", "/backup")
		fsys.Clear()
		if err == nil {
			break
		}
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("k=%d: Backup = %v", k, err)
		}
		if HasBackup(mem.CrashClone(false, 0), "/backup") {
			t.Fatalf("k=%d: HasBackup after a failed Backup and a power loss", k)
		}
		// Only the fsync that makes the marker durable fails after it is
		// there (the channel then keeps every log file).
		var pe *fs.PathError
		if HasBackup(fsys, "/backup") && !(errors.As(err, &pe) && pe.Op == string(vfs.OpSyncDir) && pe.Path == "/backup") {
			t.Fatalf("k=%d: HasBackup after a failed Backup (%v)", k, err)
		}
	}
	if err := RestoreBackup(mem, "/backup", "/r"); err != nil {
		t.Fatal(err)
	}
	wantSet(t, mem, "/r", 2, 2, 8)
}

// TestBackupRefusesInconsistentSet: a set the channel would not accept is
// no backup (ErrBadCheckpoint, no backupComplete).
func TestBackupRefusesInconsistentSet(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, s *ckptSet)
		file string // the *corrupt.Error's, under the backup dir; "" for none
	}{
		{"catalog_of_other_w", func(t *testing.T, s *ckptSet) {
			s.cat.WriteOrderID = 2
			if err := WriteCatalog(s.fsys, s.dir, &s.cat); err != nil {
				t.Fatal(err)
			}
		}, CatalogName},
		{"group_of_other_w", func(t *testing.T, s *ckptSet) { s.writeRing(s.groups[4], 2, 4) }, "group-4/" + MetaName},
		{"group_dir_missing", func(t *testing.T, s *ckptSet) {
			s.groups[4].Close()
			if err := RemoveGroupDir(s.fsys, s.dir, 4); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"group_incomplete", func(t *testing.T, s *ckptSet) {
			patch(t, s.fsys, path(GroupDir(s.dir, 4), CheckpointName), slotMarker*8, be64(markerIncomplete))
		}, ""},
		{"catalog_damaged", func(t *testing.T, s *ckptSet) { patch(t, s.fsys, path(s.dir, CatalogName), 9, []byte{0xFF}) }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t, "/cp", "/backup")
			s := newSet(t, mem, "/cp", 10, 1, 4)
			s.write(1)
			if err := Backup(mem, "/cp", "/backup"); err != nil {
				t.Fatal(err)
			}
			tc.edit(t, s)
			err := Backup(mem, "/cp", "/backup")
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("Backup = %v, want ErrBadCheckpoint", err)
			}
			var ce *corrupt.Error
			if tc.file != "" && (!errors.As(err, &ce) || ce.File != path("/backup", tc.file)) {
				t.Fatalf("Backup = %v, want a *corrupt.Error naming %s", err, tc.file)
			}
			if HasBackup(mem, "/backup") {
				t.Fatal("an inconsistent set was marked complete")
			}
		})
	}
}

// TestRestoreWithGroupsCrashNeverMixes takes a power-loss image at every
// operation of a restore: the set in the target is then the old one, the
// backup's, or one the channel rejects, never a mix, and the backup stays
// complete.
func TestRestoreWithGroupsCrashNeverMixes(t *testing.T) {
	mem := newMem(t, "/a", "/b")
	s := newSet(t, mem, "/a", 30, 2, 5)
	s.write(5)
	if err := Backup(mem, "/a", "/b"); err != nil {
		t.Fatal(err)
	}
	s.removeGroup(5)
	s.addGroup(8)
	s.write(6)
	var images []*vfs.MemFS
	mem.SetHook(func(p vfs.CrashPoint) { images = append(images, p.Clone(p.Seq%2 == 0, p.Seq)) })
	err := RestoreBackup(mem, "/b", "/a")
	mem.SetHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	var sawOld, sawBad, sawNew bool
	for i, img := range images {
		w, ids, err := openSet(img, "/a")
		switch {
		case err != nil:
			sawBad = true
		case w == 6 && slices.Equal(ids, []uint32{2, 8}) && !sawBad:
			sawOld = true
		case w == 5 && slices.Equal(ids, []uint32{2, 5}):
			sawNew = true
		default:
			t.Fatalf("image %d (after old=%v bad=%v new=%v): W %d with groups %v", i, sawOld, sawBad, sawNew, w, ids)
		}
		if !HasBackup(img, "/b") {
			t.Fatalf("image %d: a restore destroyed the backup", i)
		}
	}
	if !sawOld || !sawBad || !sawNew {
		t.Fatalf("crash points did not cover all outcomes: old=%v bad=%v new=%v", sawOld, sawBad, sawNew)
	}
	wantSet(t, images[len(images)-1], "/a", 5, 2, 5)
}

func TestRemoveClearsGroups(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		syncDirs(t, fsys, "/")
		s := newSet(t, fsys, dir, 10, 1, 4)
		s.write(3)
		for _, n := range []string{"in_use.lock", "notes.txt", CatalogName + tmpSuffix, "group-4/" + MetaName + tmpSuffix} {
			replace(t, fsys, path(dir, n), []byte(n))
		}
		if err := Remove(fsys, dir); err != nil {
			t.Fatal(err)
		}
		want := []string{"in_use.lock", "notes.txt"}
		if names, _ := fsys.List(dir); !slices.Equal(names, want) {
			t.Fatalf("after Remove: %v, want %v", names, want)
		}
		if mem, ok := fsys.(*vfs.MemFS); ok {
			if names, _ := mem.CrashClone(false, 0).List(dir); !slices.Equal(names, want) {
				t.Fatalf("after Remove and a power loss: %v, want %v", names, want)
			}
		}
		if _, _, err := openSet(fsys, dir); !errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("open after Remove = %v, want ErrNoCheckpoint", err)
		}
		if err := Remove(fsys, dir); err != nil {
			t.Fatalf("second Remove: %v", err)
		}
	})
}

// TestRemoveRefusesBeforeChanging: what Remove must not delete stops it
// before it deletes anything.
func TestRemoveRefusesBeforeChanging(t *testing.T) {
	for what, edit := range map[string]func(t *testing.T, mem *vfs.MemFS){
		"unknown_file_in_group_dir": func(t *testing.T, mem *vfs.MemFS) { replace(t, mem, "/cp/group-4/notes.txt", nil) },
		"file_named_group_9":        func(t *testing.T, mem *vfs.MemFS) { replace(t, mem, "/cp/group-9", nil) },
	} {
		t.Run(what, func(t *testing.T) {
			mem := newMem(t, "/cp")
			newSet(t, mem, "/cp", 10, 1, 4).write(3)
			edit(t, mem)
			before := readTree(t, mem, "/cp")
			if err := Remove(mem, "/cp"); err == nil {
				t.Fatal("Remove succeeded")
			}
			sameTree(t, readTree(t, mem, "/cp"), before)
		})
	}
}

// TestRemoveWithGroupsCrash: a power loss during Remove leaves the whole set
// or one the channel rejects, never the top level without its catalog (an
// older release's one-group channel).
func TestRemoveWithGroupsCrash(t *testing.T) {
	mem := newMem(t, "/cp")
	newSet(t, mem, "/cp", 10, 1, 4).write(3)
	var images []*vfs.MemFS
	mem.SetHook(func(p vfs.CrashPoint) { images = append(images, p.Clone(false, 0)) })
	err := Remove(mem, "/cp")
	mem.SetHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	var whole, rejected int
	for i, img := range images {
		w, ids, err := openSet(img, "/cp")
		switch {
		case err != nil:
			rejected++
		case w == 3 && slices.Equal(ids, []uint32{1, 4}):
			whole++
		default:
			t.Fatalf("image %d: W %d with groups %v", i, w, ids)
		}
	}
	if whole == 0 || rejected == 0 {
		t.Fatalf("whole=%d rejected=%d of %d images", whole, rejected, len(images))
	}
}

// TestCheckFormatGroups: a newer release's catalog, or a newer file in any
// group dir (listed or not), is refused by CheckFormat, Open and
// RestoreBackup, which change nothing.
func TestCheckFormatGroups(t *testing.T) {
	golden := goldenFiles(t)
	cat := EncodeCatalog(goldenCatalog())
	type tc struct {
		file               string // under /cp
		b                  []byte
		version, supported uint64
	}
	cases := map[string]tc{
		"catalog_version_6":         {CatalogName, put16(versionOffset, 6)(bytes.Clone(cat)), 6, catalogVersion},
		"catalog_version_6_6_bytes": {CatalogName, put16(versionOffset, 6)(bytes.Clone(cat))[:versionEnd], 6, catalogVersion},
		"catalog_v1_as_version_6":   {CatalogName, put16(versionOffset, 6)(encodeCatalogV1(goldenCatalog())), 6, catalogVersion},
	}
	for _, name := range checkpointFiles {
		nv := newerVersion(name)
		cases["group_"+name+"_newer"] = tc{"group-3/" + name, withVersion(name, golden[name], nv), uint64(nv), uint64(nv - 1)}
		cases["unlisted_group_"+name+"_newer"] = tc{"group-9/" + name, withVersion(name, golden[name], nv), uint64(nv), uint64(nv - 1)}
	}
	for what, c := range cases {
		t.Run(what, func(t *testing.T) {
			mem := newMem(t, "/cp", "/other")
			for _, d := range []string{"/cp", "/cp/group-3", "/cp/group-9", "/other"} {
				if err := mem.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			writeDir(t, mem, "/cp", golden)
			writeDir(t, mem, "/cp/group-3", golden)
			replace(t, mem, "/cp/"+CatalogName, cat)
			writeDir(t, mem, "/other", golden)
			replace(t, mem, path("/other", BackupCompleteName), nil)
			replace(t, mem, path("/cp", c.file), c.b)
			before, beforeOther := readTree(t, mem, "/cp"), readTree(t, mem, "/other")

			file := path("/cp", c.file)
			requireNewerThan(t, CheckFormat(mem, "/cp"), file, c.version, c.supported)
			_, _, err := Open(mem, "/cp")
			requireNewerThan(t, err, file, c.version, c.supported)
			requireNewerThan(t, RestoreBackup(mem, "/other", "/cp"), file, c.version, c.supported)
			replace(t, mem, path("/cp", BackupCompleteName), nil)
			before[BackupCompleteName] = nil
			requireNewerThan(t, RestoreBackup(mem, "/cp", "/other"), file, c.version, c.supported)
			if c.file == CatalogName {
				_, err := ReadCatalog(mem, "/cp")
				requireNewerThan(t, err, file, c.version, c.supported)
			}
			sameTree(t, readTree(t, mem, "/cp"), before)
			sameTree(t, readTree(t, mem, "/other"), beforeOther)
		})
	}
	// Versions 1 and 2 of the catalog are this build's: not newer.
	for what, b := range map[string][]byte{"catalog_version_1": encodeCatalogV1(goldenCatalog()), "catalog_version_2": cat} {
		t.Run(what, func(t *testing.T) {
			mem := newMem(t, "/cp")
			writeDir(t, mem, "/cp", golden)
			replace(t, mem, "/cp/"+CatalogName, b)
			if err := CheckFormat(mem, "/cp"); err != nil {
				t.Fatalf("CheckFormat = %v, want nil", err)
			}
			if c, err := ReadCatalog(mem, "/cp"); err != nil || !reflect.DeepEqual(c, goldenCatalog()) {
				t.Fatalf("ReadCatalog = %+v, %v", c, err)
			}
		})
	}
	t.Run("damage_is_for_open", func(t *testing.T) {
		mem := newMem(t, "/cp")
		b := put16(versionOffset, 3)(bytes.Clone(cat))
		b[1] ^= 0x20 // another magic: not a newer catalog
		replace(t, mem, "/cp/"+CatalogName, b)
		if err := CheckFormat(mem, "/cp"); err != nil {
			t.Fatalf("CheckFormat = %v, want nil", err)
		}
		if _, err := ReadCatalog(mem, "/cp"); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Fatalf("ReadCatalog = %v, want corruption", err)
		}
	})
	t.Run("missing_dir", func(t *testing.T) {
		if err := CheckFormat(vfs.NewMem(), "/nowhere"); err != nil {
			t.Fatalf("CheckFormat of a missing dir = %v", err)
		}
	})
	t.Run("file_named_group_3", func(t *testing.T) {
		mem := newMem(t, "/cp")
		replace(t, mem, "/cp/group-3", nil)
		if err := CheckFormat(mem, "/cp"); !errors.Is(err, vfs.ErrNotRegular) {
			t.Fatalf("CheckFormat = %v, want vfs.ErrNotRegular", err)
		}
	})
}

// A restore refuses a backup whose catalog lists a group it has no dir for,
// before it changes anything.
func TestRestoreRefusesBackupMissingGroupDir(t *testing.T) {
	mem := newMem(t, "/cp", "/backup")
	s := newSet(t, mem, "/cp", 10, 2)
	s.write(1)
	if err := Backup(mem, "/cp", "/backup"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveGroupDir(mem, "/backup", 2); err != nil {
		t.Fatal(err)
	}
	before := readTree(t, mem, "/cp")
	if err := RestoreBackup(mem, "/backup", "/cp"); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("RestoreBackup = %v, want ErrBadCheckpoint", err)
	}
	sameTree(t, readTree(t, mem, "/cp"), before)
	if _, err := mem.Stat("/cp/group-2"); errors.Is(err, fs.ErrNotExist) {
		t.Fatal("group dir removed")
	}
}

// syncDirs makes the entries of dirs durable on a MemFS (a crash clone then
// keeps the test's directories); on other filesystems it does nothing.
func syncDirs(t *testing.T, fsys vfs.FS, dirs ...string) {
	t.Helper()
	mem, ok := fsys.(*vfs.MemFS)
	if !ok {
		return
	}
	for _, d := range dirs {
		if err := mem.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
}
