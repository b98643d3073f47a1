package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"testing"

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

// write writes the set at write-order id w as the channel does: every
// group's Write, then WriteCatalog, then the top-level Write. Every ring
// holds setSlot(w, id, r) at each position r, its live part 5 slots from
// head id % capacity.
func (s *ckptSet) write(w uint64) {
	s.t.Helper()
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		s.writeRing(s.groups[id], w, id)
	}
	s.cat.WriteOrderID = w
	if err := WriteCatalog(s.fsys, s.dir, &s.cat); err != nil {
		s.t.Fatal(err)
	}
	s.writeRing(s.top, w, 0)
}

func (s *ckptSet) writeRing(c *Checkpoint, w uint64, id uint32) {
	s.t.Helper()
	for r := range s.capacity {
		c.SetSlot(r, setSlot(w, id, r))
	}
	commit(s.t, c, &State{Meta: Meta{WriteOrderID: w, Capacity: s.capacity, Head: int(id) % s.capacity, Size: 5}})
}

func setSlot(w uint64, id uint32, r int) uint64 { return w<<40 | uint64(id)<<20 | uint64(r) + 1 }

// openSet opens the set in dir as the channel does: the top level must
// open; a dir without a catalog is one unnamed group; with one, the
// catalog's W and that of every group it lists must be the top level's. It
// returns W and the listed group ids (>= 1), after checking that every
// live slot of every ring is the one write(W) put there: a set is never a
// mix.
func openSet(fsys vfs.FS, dir string) (uint64, []uint32, error) {
	c, st, err := Open(fsys, dir)
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	w := st.WriteOrderID
	if err := checkSetRing(c, st, w, 0); err != nil {
		return 0, nil, err
	}
	cat, err := ReadCatalog(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return w, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	if cat.WriteOrderID != w {
		return 0, nil, fmt.Errorf("catalog W %d, top level %d", cat.WriteOrderID, w)
	}
	var ids []uint32
	for _, g := range cat.Groups {
		if g.ID == 0 {
			continue
		}
		gc, gst, err := Open(fsys, GroupDir(dir, g.ID))
		if err != nil {
			return 0, nil, fmt.Errorf("group %d: %w", g.ID, err)
		}
		err = checkSetRing(gc, gst, w, g.ID)
		gc.Close()
		if err != nil {
			return 0, nil, err
		}
		ids = append(ids, g.ID)
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
