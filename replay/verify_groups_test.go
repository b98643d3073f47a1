package replay

import (
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// groupChannel is a channel with consumer groups built from the primitives
// the way the channel leaves its files: the unnamed group 0 and the named
// groups a (1) and b (2, drop oldest), one data dir, and a checkpoint set
// (top level, catalog, group-1 and group-2 dirs; and its backup) at
// write-order id W.
//
//	file 1: groups{0, a, b} | put e0 e1 e2, commit | take e0 (group 0), commit
//	        | take e0 e1 (a), commit
//	W: group 0 holds e1 e2, a holds e2, b holds e0 e1 e2 with e0 taken in flight by tx 4
//	after W: put f0, commit | take e0 (b, tx 4), commit
//
// The channel holds: group 0 e1 e2 f0, a e2 f0, b e1 e2 f0.
type groupChannel struct {
	*verifyChannel
	e, f    []ptr
	catalog []logfile.GroupInfo
	rings   map[uint32][]ptr             // each group's ring at W
	states  map[uint32]*checkpoint.State // each group's state at W (0: the top level's)
	w       uint64
}

func newGroupChannel(t *testing.T) *groupChannel {
	t.Helper()
	mem := vfs.NewMem()
	fault := vfs.NewFaultFS(mem)
	g := &groupChannel{verifyChannel: &verifyChannel{t: t, mem: mem, fault: fault, l: newLogSetOn(t, fault, "/data", 1)}}
	l := g.l
	l.create(0, 1)
	g.catalog = []logfile.GroupInfo{
		{ID: 0, Since: 1, Capacity: 8},
		{ID: 1, Name: "a", Since: 1, Capacity: 8},
		{ID: 2, Name: "b", Since: 1, Capacity: 4, Policy: 1},
	}
	l.write(1, logfile.Record{Type: logfile.RecordGroups, NextGroupID: 3, Catalog: g.catalog})
	g.e = l.putCommitted(1, 1, 3)
	l.takeCommitted(1, 2, g.e[0])
	l.write(1, logfile.Record{Type: logfile.RecordTake, TxID: 3, Group: 1, Pointers: []uint64{uint64(g.e[0]), uint64(g.e[1])}})
	l.commitTake(1, 3)

	g.w = l.woid
	g.rings = map[uint32][]ptr{0: {g.e[1], g.e[2]}, 1: {g.e[2]}, 2: {g.e[1], g.e[2]}}
	g.states = map[uint32]*checkpoint.State{}
	for id, ring := range g.rings {
		st := l.state(g.w, ring)
		st.Capacity, st.MaxTxID = int(g.catalog[id].Capacity), 4
		g.states[id] = st
	}
	g.states[2].InflightTakes = []eventqueue.InflightTx{{Tx: 4, Pointers: []ptr{g.e[0]}}}

	g.f = l.putCommitted(1, 5, 1)
	l.write(1, logfile.Record{Type: logfile.RecordTake, TxID: 4, Group: 2, Pointers: []uint64{uint64(g.e[0])}})
	l.commitTake(1, 4)
	for _, d := range []string{vCkptDir, vBackupDir} {
		if err := fault.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// setGroupRing replaces group id's ring at W, keeping its refs consistent.
func (g *groupChannel) setGroupRing(id uint32, ring ...ptr) {
	g.rings[id] = ring
	st := g.states[id]
	st.Size = len(ring)
	refs := map[uint32]int{}
	for _, p := range ring {
		refs[p.FileID()]++
	}
	for i := range st.Logs {
		st.Logs[i].Refs = refs[st.Logs[i].FileID]
	}
}

// writeCheckpoint writes the checkpoint set as the channel does (each
// named group's dir, the catalog, the top level) and backs it up.
func (g *groupChannel) writeCheckpoint() {
	t := g.t
	t.Helper()
	cat := &checkpoint.Catalog{WriteOrderID: g.w, NextGroupID: 3}
	for _, gi := range g.catalog {
		cat.NextGroupID = max(cat.NextGroupID, gi.ID+1)
		cat.Groups = append(cat.Groups, checkpoint.Group{ID: gi.ID, Name: gi.Name, Since: gi.Since,
			Capacity: int(gi.Capacity), Policy: gi.Policy})
		if gi.ID == 0 {
			continue
		}
		if err := checkpoint.CreateGroupDir(g.fault, vCkptDir, gi.ID); err != nil {
			t.Fatal(err)
		}
		writeCheckpoint(t, g.fault, checkpoint.GroupDir(vCkptDir, gi.ID), g.states[gi.ID], g.rings[gi.ID])
	}
	if err := checkpoint.WriteCatalog(g.fault, vCkptDir, cat); err != nil {
		t.Fatal(err)
	}
	writeCheckpoint(t, g.fault, vCkptDir, g.states[0], g.rings[0])
	if err := checkpoint.Backup(g.fault, vCkptDir, vBackupDir); err != nil {
		t.Fatal(err)
	}
}

func (g *groupChannel) groupFile(id uint32, name string) string {
	return filepath.Join(checkpoint.GroupDir(vCkptDir, id), name)
}

// groupQueued is each group's Queued and FullReplayQueued in rep.
func groupQueued(rep *Report) map[string][2]int {
	out := map[string][2]int{}
	for _, gr := range rep.Groups {
		out[gr.Info.Name] = [2]int{gr.Queued, gr.FullReplayQueued}
	}
	return out
}

// TestVerifyGroupsClean: a channel with three consumer groups in good order
// verifies OK, and the report has each group's queue.
func TestVerifyGroupsClean(t *testing.T) {
	g := newGroupChannel(t)
	g.writeCheckpoint()
	rep := g.verify(g.opts())
	if !rep.OK() || len(rep.Notes) != 0 {
		t.Fatalf("problems:\n%v\nnotes: %v", rep, rep.Notes)
	}
	want := map[string][2]int{"": {3, 3}, "a": {2, 2}, "b": {3, 3}}
	if got := groupQueued(rep); !maps.Equal(got, want) {
		t.Errorf("groups queued %v, want %v", got, want)
	}
	if rep.RecoveredFrom != FromCheckpoint || rep.Queued != 3 || rep.FullReplayQueued != 3 || rep.InflightTakes != 1 {
		t.Errorf("recovered from %q, queued %d, full replay %d, in flight %d; want checkpoint, 3, 3, 1",
			rep.RecoveredFrom, rep.Queued, rep.FullReplayQueued, rep.InflightTakes)
	}
	// e0 (b's in-flight take), e1, e2, f0: each read back once.
	if rep.PointersChecked != 4 {
		t.Errorf("pointers checked %d, want 4", rep.PointersChecked)
	}
	if b := rep.Group(2); b == nil || b.InflightTakes != 1 || b.Info.Name != "b" || b.Info.Capacity != 4 || b.Info.Policy != 1 {
		t.Errorf("group b: %+v", b)
	}
	if c := rep.Checkpoint.Catalog; c == nil || len(c.Groups) != 3 || c.WriteOrderID != g.w {
		t.Errorf("checkpoint catalog %+v", c)
	}
}

// TestVerifyGroupsFindsEachProblem: damage to one group's checkpoint, or a
// group's checkpoint that disagrees with the logs, is reported under that
// group; recovery falls back as the channel's would.
func TestVerifyGroupsFindsEachProblem(t *testing.T) {
	type want struct {
		kind  ProblemKind
		group string // "-": no group
		file  func(g *groupChannel) string
	}
	for _, tc := range []struct {
		name   string
		edit   func(g *groupChannel) // the checkpoint state, before it is written
		damage func(g *groupChannel) // the files, after
		want   []want
		from   string
		queued map[string][2]int
	}{
		{
			name:   "group_checkpoint_removed",
			damage: func(g *groupChannel) { g.remove(g.groupFile(2, "checkpoint"), g.groupFile(2, "checkpoint.meta")) },
			want: []want{{ProblemCheckpointCorrupt, "b",
				func(*groupChannel) string { return checkpoint.GroupDir(vCkptDir, 2) }}},
			from: FromBackup,
		},
		{
			name:   "group_checkpoint_file_damaged",
			damage: func(g *groupChannel) { g.flip(g.groupFile(1, "checkpoint.meta"), 9) },
			want: []want{{ProblemCheckpointCorrupt, "a",
				func(g *groupChannel) string { return g.groupFile(1, "checkpoint.meta") }}},
			from: FromBackup,
		},
		{
			name: "two_group_checkpoints_damaged",
			damage: func(g *groupChannel) {
				g.flip(g.groupFile(1, "checkpoint.meta"), 9)
				g.remove(g.groupFile(2, "inflighttakes"))
			},
			want: []want{
				{ProblemCheckpointCorrupt, "a", func(g *groupChannel) string { return g.groupFile(1, "checkpoint.meta") }},
				{ProblemCheckpointCorrupt, "b", nil},
			},
			from: FromBackup,
		},
		{
			name:   "group_checkpoint_incomplete",
			damage: func(g *groupChannel) { g.setSlot(checkpoint.GroupDir(vCkptDir, 1), 4, 0x494E434F4D504C54) },
			want: []want{{ProblemCheckpointIncomplete, "a",
				func(g *groupChannel) string { return g.groupFile(1, "checkpoint") }}},
			from: FromBackup,
		},
		{
			name: "group_checkpoint_of_another_checkpoint",
			damage: func(g *groupChannel) {
				st := *g.states[1]
				st.WriteOrderID--
				writeCheckpoint(g.t, g.fault, checkpoint.GroupDir(vCkptDir, 1), &st, g.rings[1])
			},
			want: []want{{ProblemCheckpointIncomplete, "a",
				func(g *groupChannel) string { return g.groupFile(1, "checkpoint") }}},
			from: FromBackup,
		},
		{
			name: "catalog_of_another_checkpoint",
			damage: func(g *groupChannel) {
				cat, err := checkpoint.ReadCatalog(g.mem, vCkptDir)
				if err != nil {
					g.t.Fatal(err)
				}
				cat.WriteOrderID++
				if err := checkpoint.WriteCatalog(g.mem, vCkptDir, cat); err != nil {
					g.t.Fatal(err)
				}
			},
			want: []want{{ProblemCheckpointIncomplete, "-",
				func(*groupChannel) string { return filepath.Join(vCkptDir, checkpoint.CatalogName) }}},
			from: FromBackup,
		},
		{
			name:   "catalog_damaged",
			damage: func(g *groupChannel) { g.flip(filepath.Join(vCkptDir, checkpoint.CatalogName), 30) },
			want: []want{{ProblemCheckpointCorrupt, "-",
				func(*groupChannel) string { return filepath.Join(vCkptDir, checkpoint.CatalogName) }}},
			from: FromBackup,
		},
		{
			name: "every_checkpoint_of_a_group_removed",
			damage: func(g *groupChannel) {
				for _, d := range []string{vCkptDir, vBackupDir} {
					if err := checkpoint.RemoveGroupDir(g.mem, d, 1); err != nil {
						g.t.Fatal(err)
					}
				}
			},
			want: []want{
				{ProblemCheckpointCorrupt, "a", func(*groupChannel) string { return checkpoint.GroupDir(vCkptDir, 1) }},
				{ProblemBackupCorrupt, "a", func(*groupChannel) string { return checkpoint.GroupDir(vBackupDir, 1) }},
			},
			from:   FromFullReplay,
			queued: map[string][2]int{"": {3, 3}, "a": {2, 2}, "b": {3, 3}},
		},
		{
			name: "group_ring_loses_an_event",
			edit: func(g *groupChannel) { g.setGroupRing(1) },
			want: []want{{ProblemCheckpointDisagrees, "a", nil}},
			from: FromCheckpoint, queued: map[string][2]int{"": {3, 3}, "a": {1, 2}, "b": {3, 3}},
		},
		{
			name: "unnamed_group_ring_resurrects_an_event",
			edit: func(g *groupChannel) { g.setGroupRing(0, g.e[0], g.e[1], g.e[2]) },
			want: []want{{ProblemCheckpointDisagrees, "", nil}},
			from: FromCheckpoint, queued: map[string][2]int{"": {4, 3}, "a": {2, 2}, "b": {3, 3}},
		},
		{
			name: "group_ring_holds_an_event_twice",
			edit: func(g *groupChannel) { g.setGroupRing(2, g.e[1], g.e[1], g.e[2]) },
			want: []want{{ProblemCheckpointDisagrees, "b", nil}, {ProblemDuplicatePointer, "b", nil}},
			from: FromCheckpoint, queued: map[string][2]int{"": {3, 3}, "a": {2, 2}, "b": {4, 3}},
		},
		{
			name: "group_ring_points_between_records",
			edit: func(g *groupChannel) { g.setGroupRing(1, g.e[2], eventqueue.NewPointer(1, 20)) },
			want: []want{{ProblemCheckpointDisagrees, "a", nil},
				{ProblemBadPointer, "a", func(g *groupChannel) string { return g.l.path(1) }}},
			from: FromCheckpoint, queued: map[string][2]int{"": {3, 3}, "a": {3, 2}, "b": {3, 3}},
		},
		{
			name: "group_refs_disagree_with_its_ring",
			edit: func(g *groupChannel) { logState(g.states[2], 1).Refs = 7 },
			want: []want{{ProblemRefcountMismatch, "b",
				func(g *groupChannel) string { return g.groupFile(2, "checkpoint.meta") }}},
			from: FromCheckpoint,
		},
		{
			name: "catalog_lists_a_group_the_logs_do_not",
			edit: func(g *groupChannel) {
				g.catalog = append(g.catalog, logfile.GroupInfo{ID: 3, Name: "c", Since: 1, Capacity: 8})
				g.rings[3] = nil
				g.states[3] = g.l.state(g.w, nil)
				g.states[3].Capacity = 8
			},
			want: []want{{ProblemCheckpointDisagrees, "c", nil}},
			from: FromCheckpoint, queued: map[string][2]int{"": {3, 3}, "a": {2, 2}, "b": {3, 3}, "c": {1, -1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroupChannel(t)
			if tc.edit != nil {
				tc.edit(g)
			}
			g.writeCheckpoint()
			if tc.damage != nil {
				tc.damage(g)
			}
			rep := g.verify(g.opts())
			if len(rep.Problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", len(rep.Problems), len(tc.want), rep)
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(rep.Problems, func(p Problem) bool {
					switch {
					case p.Kind != w.kind || p.Detail == "":
						return false
					case w.group == "-" && p.Group != nil:
						return false
					case w.group != "-" && (p.Group == nil || p.Group.Name != w.group):
						return false
					case w.file != nil && p.File != w.file(g):
						return false
					}
					return true
				}) {
					t.Errorf("no %s problem for group %q in:\n%v", w.kind, w.group, rep)
				}
			}
			if rep.RecoveredFrom != tc.from {
				t.Errorf("recovered from %q, want %q", rep.RecoveredFrom, tc.from)
			}
			want := tc.queued
			if want == nil {
				want = map[string][2]int{"": {3, 3}, "a": {2, 2}, "b": {3, 3}}
			}
			if got := groupQueued(rep); !maps.Equal(got, want) {
				t.Errorf("groups queued %v, want %v", got, want)
			}
		})
	}
}

// TestVerifyGroupProblemsNameTheGroup: a problem about a group says which
// in its text; in a channel whose only group is the unnamed one, problems
// name no group (as before groups).
func TestVerifyGroupProblemsNameTheGroup(t *testing.T) {
	g := newGroupChannel(t)
	g.setGroupRing(1)
	g.writeCheckpoint()
	rep := g.verify(g.opts())
	if len(rep.Problems) != 1 || !strings.HasPrefix(rep.Problems[0].String(), `checkpoint-disagrees (group "a"): recovery from the checkpoint gives 1 events, a full replay 2`) {
		t.Errorf("problems:\n%v", rep)
	}
	if d := rep.Group(1).Diff; !slices.Equal(d.OnlyReplayed, []ptr{g.e[2]}) || len(d.OnlyRecovered) != 0 {
		t.Errorf("group a's diff %+v, want only replayed %v", d, g.e[2])
	}
	if d := rep.Diff; len(d.OnlyReplayed)+len(d.OnlyRecovered) != 0 {
		t.Errorf("report diff (the unnamed group's) %+v, want none", d)
	}

	v := newVerifyChannel(t)
	v.setRing(v.b[0], v.b[1])
	v.writeCheckpoint()
	rep = v.verify(v.opts())
	if len(rep.Problems) != 1 || rep.Problems[0].Group != nil || len(rep.Groups) != 1 || rep.Groups[0].Info.ID != 0 {
		t.Errorf("a channel of the unnamed group alone: problems %v, groups %+v", rep.Problems, rep.Groups)
	}
}

// TestListEventsPerGroup: the events of each group, and a clear error for a
// group the channel does not have.
func TestListEventsPerGroup(t *testing.T) {
	g := newGroupChannel(t)
	g.writeCheckpoint()
	for _, tc := range []struct {
		group string
		want  []ptr
	}{
		{"", []ptr{g.e[1], g.e[2], g.f[0]}},
		{"a", []ptr{g.e[2], g.f[0]}},
		{"b", []ptr{g.e[1], g.e[2], g.f[0]}},
	} {
		var got []ptr
		l, err := ListEvents(g.opts(), tc.group, 0, -1, func(e Event) error {
			got = append(got, e.Pointer)
			return e.Err
		})
		n := l.Queued
		if err != nil || n != len(tc.want) || !slices.Equal(got, tc.want) {
			t.Errorf("group %q: %d events %v, %v; want %v", tc.group, n, got, err, tc.want)
		}
	}
	// With the checkpoint gone: a full replay gives the same.
	g.remove(filepath.Join(vBackupDir, checkpoint.BackupCompleteName))
	if err := checkpoint.Remove(g.mem, vCkptDir); err != nil {
		t.Fatal(err)
	}
	var got []ptr
	if _, err := ListEvents(g.opts(), "a", 1, -1, func(e Event) error {
		got = append(got, e.Pointer)
		return nil
	}); err != nil || !slices.Equal(got, []ptr{g.f[0]}) {
		t.Errorf("group a after a full replay, from 1: %v, %v", got, err)
	}
	_, err := ListEvents(g.opts(), "nope", 0, -1, func(Event) error { return nil })
	var ne *NoGroupError
	if !errors.Is(err, ErrNoGroup) || !errors.As(err, &ne) || ne.Name != "nope" || len(ne.Groups) != 3 ||
		!strings.Contains(err.Error(), `no consumer group "nope" (its consumer groups: the unnamed group, group "a", group "b")`) {
		t.Errorf("unknown group: %v", err)
	}
}
