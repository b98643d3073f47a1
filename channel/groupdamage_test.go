package channel

import (
	"testing"

	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// groupsRecords returns the offsets of the groups records in the log file
// at path.
func groupsRecords(t *testing.T, path string) []int64 {
	t.Helper()
	s, err := logfile.NewScanner(vfsOS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var offs []int64
	for s.Next() {
		if s.Record().Type == logfile.RecordGroups {
			offs = append(offs, s.Offset())
		}
	}
	return offs
}

// TestDamagedAddGroupRecordDoesNotStarveTheGroup (issue 27, item 3): one
// flipped bit in the groups record AddGroup wrote costs nothing: its copy
// names the group, so a full replay gives it every event committed after
// AddGroup, and Verify reports the damage at its true cost, none.
func TestDamagedAddGroupRecordDoesNotStarveTheGroup(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 5, 5) // before the group: not its events
	if _, err := c.AddGroup(GroupConfig{Name: "audit"}); err != nil {
		t.Fatal(err)
	}
	putN(t, c, 5, 10, 1)
	path := c.logs.Active(0).Path()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	offs := groupsRecords(t, path)
	if len(offs) < 2 { // the file's first, then AddGroup's (two copies)
		t.Fatalf("groups records at %v, want the file's first and AddGroup's", offs)
	}
	flipAt(t, path, offs[1]+logfile.FrameHeaderSize+20)
	removeCheckpoint(t, cfg)
	expectProblems(t, replay.ProblemCorruptRecord)

	rep, err := Verify(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cost.Lost != 0 || rep.Cost.LostFullReplay != 0 || rep.Cost.Redelivered != 0 || len(rep.Problems) != 2 ||
		rep.Problems[0].Kind != replay.ProblemCorruptRecord || rep.Problems[1].Kind != replay.ProblemCheckpointMissing {
		t.Fatalf("verify: %s", rep)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	g, err := c.Group("audit")
	if err != nil {
		t.Fatalf("the full replay lost the group: %v", err)
	}
	wantEvents(t, takeWith(t, g.Begin, 10, 10), bodies(5, 10))
	if s := c.Stats(); s.ReplayCorrupt != 1 {
		t.Errorf("ReplayCorrupt %d, want 1", s.ReplayCorrupt)
	}
}
