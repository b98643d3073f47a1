package checkpoint

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// backupDirs returns a filesystem with three existing dirs: the checkpoint,
// its backup and a restore target.
func backupDirs(t *testing.T, k fsKind) (fsys vfs.FS, dir, bdir, rdir string) {
	fsys, root := newDir(t, k)
	dir, bdir, rdir = path(root, "cp"), path(root, "backup"), path(root, "restored")
	for _, d := range []string{dir, bdir, rdir} {
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return fsys, dir, bdir, rdir
}

func TestBackupRestoreRoundTrip(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir, bdir, rdir := backupDirs(t, k)
			const capacity = 3000
			rng := rand.New(rand.NewPCG(11, 12))
			c := mustCreate(t, fsys, dir, capacity)
			for i := range 100 { // sparse: most of the file is zero chunks
				c.SetSlot(i*29, rng.Uint64())
			}
			st := randomState(rng, capacity, 77)
			commit(t, c, st)
			if HasBackup(fsys, bdir) {
				t.Fatal("HasBackup before Backup")
			}
			if err := Backup(fsys, dir, bdir); err != nil {
				t.Fatal(err)
			}
			if !HasBackup(fsys, bdir) {
				t.Fatal("no backup after Backup")
			}
			replace(t, fsys, path(rdir, "in_use.lock"), nil)
			replace(t, fsys, path(rdir, MetaName), []byte("stale garbage")) // replaced by the restore
			if err := RestoreBackup(fsys, bdir, rdir); err != nil {
				t.Fatal(err)
			}
			for _, name := range checkpointFiles {
				a, _ := vfs.ReadFile(fsys, path(dir, name))
				b, err := vfs.ReadFile(fsys, path(rdir, name))
				if err != nil || string(a) != string(b) {
					t.Fatalf("%s: restored copy differs (%v)", name, err)
				}
			}
			c2, got := mustOpen(t, fsys, rdir)
			sameState(t, got, st)
			if !slices.Equal(ringOf(c2), ringOf(c)) {
				t.Fatal("restored ring differs")
			}
			names, _ := fsys.List(rdir)
			if want := []string{CheckpointName, MetaName, "in_use.lock", InflightPutsName, InflightTakesName}; !slices.Equal(names, want) {
				t.Fatalf("restored dir holds %v, want %v", names, want)
			}
		})
	}
}

func TestBackupInterruptedIsNotComplete(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			base, dir, bdir, rdir := backupDirs(t, k)
			fsys := vfs.NewFaultFS(base)
			c := mustCreate(t, fsys, dir, 100)
			commit(t, c, &State{Meta: Meta{WriteOrderID: 1, Capacity: 100}})
			if err := Backup(fsys, dir, bdir); err != nil {
				t.Fatal(err)
			}
			commit(t, c, &State{Meta: Meta{WriteOrderID: 2, Capacity: 100}})
			// The second file copied is checkpoint.meta.
			fsys.Add(vfs.Rule{Ops: []vfs.Op{"create"}, Name: MetaName + tmpSuffix})
			if err := Backup(fsys, dir, bdir); !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("Backup = %v, want the injected fault", err)
			}
			if HasBackup(fsys, bdir) {
				t.Fatal("HasBackup true after an interrupted Backup")
			}
			if err := Backup(fsys, dir, dir+"/"); err == nil {
				t.Fatal("Backup into the checkpoint dir itself succeeded")
			}
			if err := RestoreBackup(fsys, bdir, rdir); !errors.Is(err, ErrNoBackup) {
				t.Fatalf("RestoreBackup = %v, want ErrNoBackup", err)
			}
			fsys.Clear()
			if err := Backup(fsys, dir, bdir); err != nil {
				t.Fatal(err)
			}
			if err := RestoreBackup(fsys, bdir, rdir); err != nil {
				t.Fatal(err)
			}
			if _, st := mustOpen(t, fsys, rdir); st.WriteOrderID != 2 {
				t.Fatalf("restored W = %d, want 2", st.WriteOrderID)
			}
		})
	}
}

// TestRestoreCrashNeverMixes crashes a restore at every step: Open of the
// target then finds the old checkpoint, the backup's, or ErrBadCheckpoint,
// and the backup is still complete for another try.
func TestRestoreCrashNeverMixes(t *testing.T) {
	for k := 1; ; k++ {
		mem := newMem(t, "/a", "/b")
		fsys := vfs.NewFaultFS(mem)
		ca := mustCreate(t, fsys, "/a", 100)
		commit(t, ca, &State{Meta: Meta{WriteOrderID: 5, Capacity: 100}})
		if err := Backup(fsys, "/a", "/b"); err != nil {
			t.Fatal(err)
		}
		commit(t, ca, &State{Meta: Meta{WriteOrderID: 6, Capacity: 100}})
		fsys.Add(vfs.Rule{Seq: fsys.Ops() + int64(k), FailAfter: true}) // the process dies at op k
		rerr := RestoreBackup(fsys, "/b", "/a")
		mem = mem.CrashClone(false, 0)
		c, st, err := Open(mem, "/a")
		switch {
		case err != nil:
			if !errors.Is(err, ErrBadCheckpoint) && !errors.Is(err, ErrNoCheckpoint) {
				t.Fatalf("k=%d: Open = %v", k, err)
			}
		case st.WriteOrderID != 5 && st.WriteOrderID != 6:
			t.Fatalf("k=%d: W = %d", k, st.WriteOrderID)
		default:
			c.Close()
		}
		if !HasBackup(mem, "/b") {
			t.Fatalf("k=%d: a restore destroyed the backup", k)
		}
		if rerr == nil {
			if err != nil || st.WriteOrderID != 5 {
				t.Fatalf("k=%d: restore succeeded but Open = %v", k, err)
			}
			return
		}
	}
}

// TestBackupCarriesRingChecksum garbles a live ring slot of the checkpoint
// before Backup, or of the backup before RestoreBackup. The ring CRC travels
// with the copy: Backup refuses a damaged source (no backupComplete), and a
// damaged backup restores to a checkpoint that Open rejects as corrupt.
func TestBackupCarriesRingChecksum(t *testing.T) {
	const capacity = 600
	garble := func(t *testing.T, fsys vfs.FS, dir string) {
		name := path(dir, CheckpointName)
		b, err := vfs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(hs+capacity-1)*8 + 7 // live: the ring wraps from 590
		patch(t, fsys, name, off, []byte{b[off] ^ 1})
	}
	wantCorrupt := func(t *testing.T, err error, file string) {
		t.Helper()
		var ce *corrupt.Error
		if !errors.Is(err, ErrBadCheckpoint) || !errors.As(err, &ce) || ce.File != file {
			t.Fatalf("got %v, want ErrBadCheckpoint with a *corrupt.Error naming %s", err, file)
		}
	}
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir, bdir, rdir := backupDirs(t, k)
			c := mustCreate(t, fsys, dir, capacity)
			for i := range capacity {
				c.SetSlot(i, uint64(i+1))
			}
			st := &State{Meta: Meta{WriteOrderID: 3, Capacity: capacity, Head: 590, Size: 20}}
			commit(t, c, st)

			garble(t, fsys, dir)
			wantCorrupt(t, Backup(fsys, dir, bdir), path(bdir, CheckpointName))
			if HasBackup(fsys, bdir) {
				t.Fatal("a backup of a damaged checkpoint is marked complete")
			}

			garble(t, fsys, dir) // undo
			if err := Backup(fsys, dir, bdir); err != nil {
				t.Fatal(err)
			}
			garble(t, fsys, bdir)
			if err := RestoreBackup(fsys, bdir, rdir); err != nil {
				t.Fatal(err)
			}
			c2, _, err := Open(fsys, rdir)
			if err == nil {
				c2.Close()
			}
			wantCorrupt(t, err, path(rdir, CheckpointName))
		})
	}
}
