package logfile

import (
	"testing"
)

// The set keeps each file's FileIndex and spilled commits as commits note
// them (the extremes, whatever the order of the notes), gives them to a
// Snapshot, takes a recovered index and spilled commits at Start (an
// unknown index stays unknown), and forgets both with the file.
func TestSetFileIndexAndSpilledCommits(t *testing.T) {
	fsys := setMem(t, "/a")
	_, _, end := setLog(t, fsys, "/a", 1, 1)
	_, _, end2 := setLog(t, fsys, "/a", 2, 2)
	s, err := OpenSet(SetOptions{FS: fsys, Dirs: []string{"/a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	unknown := FileIndex{}
	err = s.Start(Recovered{MaxWriteOrderID: 2, MaxFileID: 2, Ends: map[uint32]int64{1: end, 2: end2},
		Index:   map[uint32]FileIndex{1: unknown, 9: {Known: true, FirstCommit: 1, LastCommit: 1}},
		Spilled: map[uint32]map[uint64]SpilledCommit{2: {7: {WriteOrderID: 40, Time: 5}}, 9: {1: {}}}})
	if err != nil {
		t.Fatal(err)
	}
	rollFiles(t, s, 0, 1)
	s.NoteEvents([]uint32{1, 2, 3}, 50, 500)
	s.NoteEvents([]uint32{2, 3}, 45, 700) // an earlier commit noted later
	s.NoteEvents([]uint32{3}, 60, 600)
	wantIndex := map[uint32]FileIndex{
		1: unknown,
		2: {Known: true, FirstCommit: 45, LastCommit: 50, MinTime: 500, MaxTime: 700},
		3: {Known: true, FirstCommit: 45, LastCommit: 60, MinTime: 500, MaxTime: 700},
	}
	for id, want := range wantIndex {
		if got, ok := s.FileIndex(id); !ok || got != want {
			t.Errorf("FileIndex(%d) = %+v, %v; want %+v", id, got, ok, want)
		}
	}
	if _, ok := s.FileIndex(9); ok {
		t.Error("an index of a file the set does not hold was kept")
	}
	s.NoteSpilledCommit([]uint32{2, 3}, 8, SpilledCommit{WriteOrderID: 61, Time: 800})
	if c, ok := s.SpilledCommit(2, 7); !ok || c != (SpilledCommit{WriteOrderID: 40, Time: 5}) {
		t.Errorf("recovered spilled commit: %+v, %v", c, ok)
	}
	if c, ok := s.SpilledCommit(3, 8); !ok || c.WriteOrderID != 61 {
		t.Errorf("noted spilled commit: %+v, %v", c, ok)
	}
	if _, ok := s.SpilledCommit(3, 7); ok {
		t.Error("a spilled commit of file 2 found for file 3")
	}
	sn := s.Snapshot()
	for _, f := range sn.Files {
		want, ok := wantIndex[f.ID]
		if !ok {
			want = FileIndex{Known: true} // no event yet
		}
		if f.Index != want {
			t.Errorf("snapshot of log %d: index %+v, want %+v", f.ID, f.Index, want)
		}
		if f.ID == 2 && len(f.Spilled) != 2 {
			t.Errorf("snapshot of log 2: spilled %+v", f.Spilled)
		}
	}
	if _, err := s.Reclaim(sn, func(c []uint32) []uint32 { return c }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{1, 2} {
		if _, ok := s.FileIndex(id); ok {
			t.Errorf("log %d deleted, its index kept", id)
		}
	}
	if _, ok := s.SpilledCommit(2, 7); ok {
		t.Error("log 2 deleted, its spilled commit kept")
	}
}
