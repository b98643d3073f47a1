package checkpoint

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Helpers for tests of checkpoint sets: a top-level checkpoint, a groups
// catalog and a group dir per listed group, written as the channel writes
// them and accepted as the channel's Open accepts them.

// ckptSet is a checkpoint set being written in dir.
type ckptSet struct {
	t        *testing.T
	fsys     vfs.FS
	dir      string
	capacity int
	top      *Checkpoint
	groups   map[uint32]*Checkpoint
	cat      Catalog
}

// newSet creates, in the existing dir, the checkpoints of a set listing the
// unnamed group and groups ids, each ring of capacity slots. Nothing is
// valid until write.
func newSet(t *testing.T, fsys vfs.FS, dir string, capacity int, ids ...uint32) *ckptSet {
	t.Helper()
	s := &ckptSet{t: t, fsys: fsys, dir: dir, capacity: capacity, top: mustCreate(t, fsys, dir, capacity),
		groups: map[uint32]*Checkpoint{}, cat: Catalog{NextGroupID: 1, Groups: []Group{{ID: 0, Capacity: capacity}}}}
	for _, id := range ids {
		s.addGroup(id)
	}
	return s
}

// addGroup adds group id (above every id so far) to the set.
func (s *ckptSet) addGroup(id uint32) {
	s.t.Helper()
	if err := CreateGroupDir(s.fsys, s.dir, id); err != nil {
		s.t.Fatal(err)
	}
	s.groups[id] = mustCreate(s.t, s.fsys, GroupDir(s.dir, id), s.capacity)
	s.cat.Groups = append(s.cat.Groups, Group{ID: id, Name: fmt.Sprintf("g%d", id), Since: uint64(id), Capacity: s.capacity})
	s.cat.NextGroupID = id + 1
}

// removeGroup drops group id from the set and removes its group dir.
func (s *ckptSet) removeGroup(id uint32) {
	s.t.Helper()
	if err := s.groups[id].Close(); err != nil {
		s.t.Fatal(err)
	}
	delete(s.groups, id)
	s.cat.Groups = slices.DeleteFunc(s.cat.Groups, func(g Group) bool { return g.ID == id })
	if err := RemoveGroupDir(s.fsys, s.dir, id); err != nil {
		s.t.Fatal(err)
	}
}

// write writes the set at write-order id w with WriteSet, as the channel
// does. Every ring holds setSlot(w, id, r) at each position r, its live
// part 5 slots from head id % capacity.
func (s *ckptSet) write(w uint64) {
	s.t.Helper()
	rings := []*Checkpoint{s.top}
	var groups []SetWrite
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		rings = append(rings, s.groups[id])
		groups = append(groups, SetWrite{Name: fmt.Sprintf("g%d", id), Checkpoint: s.groups[id], State: s.ringState(s.groups[id], w, id)})
	}
	top := s.ringState(s.top, w, 0)
	s.cat.WriteOrderID = w
	for _, c := range rings {
		c.Freeze()
	}
	err := WriteSet(s.fsys, s.dir, s.top, top, &s.cat, groups)
	for _, c := range rings {
		c.Thaw(err == nil)
	}
	if err != nil {
		s.t.Fatal(err)
	}
}

// writeRing writes ring c of group id alone, as write(w) would.
func (s *ckptSet) writeRing(c *Checkpoint, w uint64, id uint32) {
	s.t.Helper()
	commit(s.t, c, s.ringState(c, w, id))
}

// ringState fills ring c of group id for write(w) and returns its state.
func (s *ckptSet) ringState(c *Checkpoint, w uint64, id uint32) *State {
	for r := range s.capacity {
		c.SetSlot(r, setSlot(w, id, r))
	}
	return &State{Meta: Meta{WriteOrderID: w, Capacity: s.capacity, Head: int(id) % s.capacity, Size: 5}}
}

func setSlot(w uint64, id uint32, r int) uint64 { return w<<40 | uint64(id)<<20 | uint64(r) + 1 }

// openSet opens the set in dir with OpenSet, as the channel does, and
// returns W and the listed group ids (>= 1), after checking that every
// live slot of every ring is the one write(W) put there: a set is never a
// mix.
func openSet(fsys vfs.FS, dir string) (uint64, []uint32, error) {
	s, err := OpenSet(fsys, dir)
	if err != nil {
		return 0, nil, err
	}
	defer s.Close()
	w := s.State.WriteOrderID
	if err := checkSetRing(s.Top, s.State, w, 0); err != nil {
		return 0, nil, err
	}
	var ids []uint32
	for _, g := range s.Groups {
		if err := checkSetRing(g.Checkpoint, g.State, w, g.Group.ID); err != nil {
			return 0, nil, err
		}
		ids = append(ids, g.Group.ID)
	}
	return w, ids, nil
}

func checkSetRing(c *Checkpoint, st *State, w uint64, id uint32) error {
	if st.WriteOrderID != w {
		return fmt.Errorf("group %d: W %d, the set's is %d", id, st.WriteOrderID, w)
	}
	for i := range st.Size {
		r := (st.Head + i) % st.Capacity
		if got := c.Slot(r); got != setSlot(w, id, r) {
			return fmt.Errorf("group %d: slot %d holds %#x, not W %d's", id, r, got, w)
		}
	}
	return nil
}

// wantSet fails t unless openSet of dir gives W w and groups ids.
func wantSet(t *testing.T, fsys vfs.FS, dir string, w uint64, ids ...uint32) {
	t.Helper()
	gotW, gotIDs, err := openSet(fsys, dir)
	if err != nil || gotW != w || !slices.Equal(gotIDs, ids) {
		t.Fatalf("set in %s: W %d, groups %v, err %v; want W %d, groups %v", dir, gotW, gotIDs, err, w, ids)
	}
}

// readTree returns every file under dir, by path relative to dir, with its
// bytes; a directory maps to nil with a trailing slash.
func readTree(t *testing.T, fsys vfs.FS, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var walk func(rel string)
	walk = func(rel string) {
		names, err := fsys.List(path(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			r := path(rel, n)
			fi, err := fsys.Lstat(path(dir, r))
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out[r+"/"] = nil
				walk(r)
				continue
			}
			if out[r], err = vfs.ReadFile(fsys, path(dir, r)); err != nil {
				t.Fatal(err)
			}
		}
	}
	walk("")
	return out
}

// sameTree fails t unless a and b hold the same entries and bytes, but for
// the names in except.
func sameTree(t *testing.T, a, b map[string][]byte, except ...string) {
	t.Helper()
	for _, m := range []map[string][]byte{a, b} {
		for _, e := range except {
			delete(m, e)
		}
	}
	if !slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))) {
		t.Fatalf("trees differ: %v and %v", slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
	}
	for k, v := range a {
		if string(v) != string(b[k]) {
			t.Fatalf("%s differs", k)
		}
	}
}

// TestOpenSet opens whole sets: with named groups, each at the set's W and
// found by Group, and an older release's set without a catalog.
func TestOpenSet(t *testing.T) {
	mem := newMem(t, "/cp", "/old")
	newSet(t, mem, "/cp", 10, 1, 4).write(2)
	s, err := OpenSet(mem, "/cp")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Catalog == nil || s.Catalog.WriteOrderID != 2 || len(s.Groups) != 2 || s.Groups[0].Group.ID != 1 || s.Groups[1].Group.ID != 4 {
		t.Fatalf("set: catalog %+v, groups %+v", s.Catalog, s.Groups)
	}
	if g, ok := s.Group(4); !ok || g.Dir != GroupDir("/cp", 4) || g.State.WriteOrderID != 2 || g.Group.Name != "g4" {
		t.Fatalf("Group(4) = %+v, %v", g, ok)
	}
	if _, ok := s.Group(2); ok {
		t.Fatal("Group(2) found a group the catalog does not list")
	}

	newSet(t, mem, "/old", 10).write(3)
	if err := mem.Remove(path("/old", CatalogName)); err != nil {
		t.Fatal(err)
	}
	old, err := OpenSet(mem, "/old")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if old.Catalog != nil || old.Groups != nil || old.State.WriteOrderID != 3 {
		t.Fatalf("older release's set: catalog %+v, groups %+v", old.Catalog, old.Groups)
	}
}

// TestOpenSetRefuses: a set that is not whole at one W opens nothing, with
// an error naming the part that spoils it.
func TestOpenSetRefuses(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(t *testing.T, s *ckptSet)
		want   []error  // every one matches
		groups []uint32 // the *GroupError of each, in order; nil: a *CatalogError
	}{
		{"catalog_of_other_w", func(t *testing.T, s *ckptSet) {
			s.cat.WriteOrderID = 2
			if err := WriteCatalog(s.fsys, s.dir, &s.cat); err != nil {
				t.Fatal(err)
			}
		}, []error{ErrBadCheckpoint, ErrIncomplete}, nil},
		{"catalog_damaged", func(t *testing.T, s *ckptSet) { patch(t, s.fsys, path(s.dir, CatalogName), 9, []byte{0xFF}) },
			[]error{ErrBadCheckpoint, corrupt.ErrCorrupt}, nil},
		{"group_of_other_w", func(t *testing.T, s *ckptSet) { s.writeRing(s.groups[4], 2, 4) },
			[]error{ErrBadCheckpoint, ErrIncomplete}, []uint32{4}},
		{"two_groups_bad", func(t *testing.T, s *ckptSet) {
			s.writeRing(s.groups[4], 2, 4)
			patch(t, s.fsys, path(GroupDir(s.dir, 1), CheckpointName), slotMarker*8, be64(markerIncomplete))
		}, []error{ErrBadCheckpoint}, []uint32{1, 4}},
		{"group_dir_missing", func(t *testing.T, s *ckptSet) {
			s.groups[1].Close()
			if err := RemoveGroupDir(s.fsys, s.dir, 1); err != nil {
				t.Fatal(err)
			}
		}, []error{ErrBadCheckpoint, ErrNoCheckpoint}, []uint32{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t, "/cp")
			s := newSet(t, mem, "/cp", 10, 1, 4)
			s.write(1)
			tc.edit(t, s)
			set, err := OpenSet(mem, "/cp")
			if set != nil || err == nil {
				t.Fatalf("OpenSet = %+v, %v; want an error", set, err)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("OpenSet = %v, want it to match %v", err, w)
				}
			}
			if tc.groups == nil {
				var ce *CatalogError
				if !errors.As(err, &ce) || ce.File != path("/cp", CatalogName) {
					t.Fatalf("OpenSet = %v, want a *CatalogError naming the catalog", err)
				}
				return
			}
			var got []uint32
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ge *GroupError
				if !errors.As(e, &ge) || ge.Dir != GroupDir("/cp", ge.Group.ID) {
					t.Fatalf("part %v of OpenSet's error is no *GroupError naming its dir", e)
				}
				got = append(got, ge.Group.ID)
			}
			if !slices.Equal(got, tc.groups) {
				t.Fatalf("OpenSet names groups %v, want %v (%v)", got, tc.groups, err)
			}
		})
	}
	t.Run("no_checkpoint", func(t *testing.T) {
		if set, err := OpenSet(newMem(t, "/cp"), "/cp"); set != nil || !errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("OpenSet = %+v, %v; want ErrNoCheckpoint", set, err)
		}
	})
}

// TestWriteSetFailsFirstGroup: a group checkpoint that fails to write
// stops WriteSet before the catalog and the top level, so that the set on
// disk stays the previous one.
func TestWriteSetFailsFirstGroup(t *testing.T) {
	mem := newMem(t, "/cp")
	s := newSet(t, mem, "/cp", 10, 1, 4)
	s.write(1)
	top := s.ringState(s.top, 2, 0)
	cat := s.cat
	cat.WriteOrderID = 2
	err := WriteSet(mem, "/cp", s.top, top, &cat, []SetWrite{{Name: "g1", Checkpoint: s.groups[1]}})
	if err == nil || !strings.Contains(err.Error(), `group "g1"`) {
		t.Fatalf("WriteSet = %v, want an error naming group g1", err)
	}
	wantSet(t, mem, "/cp", 1, 1, 4)
}

// TestStaleGroupDirs lists the group dirs that no live group owns.
func TestStaleGroupDirs(t *testing.T) {
	mem := newMem(t, "/cp")
	for _, id := range []uint32{1, 3, 5} {
		if err := CreateGroupDir(mem, "/cp", id); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := StaleGroupDirs(mem, "/cp", []uint32{0, 3}); err != nil || !slices.Equal(got, []uint32{1, 5}) {
		t.Fatalf("StaleGroupDirs = %v, %v; want [1 5]", got, err)
	}
	if got, err := StaleGroupDirs(mem, "/cp", []uint32{1, 3, 5}); err != nil || got != nil {
		t.Fatalf("StaleGroupDirs = %v, %v; want none", got, err)
	}
}
