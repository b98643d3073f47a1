package channel

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/replay"
)

// closedGroupsChannel is a closed channel with the unnamed group and the
// named groups a and b, each of which took another number of events, b with
// a take in flight at the close, and a backup checkpoint when backup is set.
// want is what each group holds, by name.
func closedGroupsChannel(t *testing.T, backup bool, groups ...GroupConfig) (cfg Config, want map[string][]string) {
	t.Helper()
	if len(groups) == 0 {
		groups = []GroupConfig{{}, {Name: "a"}, {Name: "b", Capacity: 500, WhenFull: DropOldest}}
	}
	cfg = groupsConfig(t, groups...)
	if backup {
		cfg.BackupCheckpointDir = filepath.Join(filepath.Dir(cfg.CheckpointDir), "backup")
	}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 40, 10)
	want = map[string][]string{}
	for i, g := range groups {
		wantEvents(t, takeGroup(t, mustGroup(t, c, g.Name), 3*i+1, 2), bodies(0, 3*i+1))
		want[g.Name] = bodies(3*i+1, 40-(3*i+1))
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	putN(t, c, 40, 10, 5) // after the checkpoint
	last := groups[len(groups)-1].Name
	tx, err := mustGroup(t, c, last).Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tx.Take(); !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	for name := range want {
		want[name] = append(want[name], bodies(40, 10)...)
	}
	if err := c.Close(); err != nil { // the take stays in flight in the close checkpoint
		t.Fatal(err)
	}
	return cfg, want
}

// groupEvents opens cfg and returns each group's events (taken and rolled
// back: the channel is unchanged) and the groups' names.
func groupEvents(t *testing.T, cfg Config) map[string][]string {
	t.Helper()
	c := mustOpen(t, cfg)
	defer c.Close()
	out := map[string][]string{}
	for _, name := range c.GroupNames() {
		out[name] = peekGroup(t, mustGroup(t, c, name))
	}
	return out
}

func wantGroups(t *testing.T, got, want map[string][]string) {
	t.Helper()
	for name, w := range want {
		if g, ok := got[name]; !ok || !slices.Equal(g, w) {
			t.Errorf("%s holds %s, want %s", groupLabel(name), short(g), short(w))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s exists, and should not", groupLabel(name))
		}
	}
}

// TestVerifyGroups: Verify of a healthy channel with three consumer groups
// finds no problem, and reports each group's queue as Open recovers it.
func TestVerifyGroups(t *testing.T) {
	cfg, want := closedGroupsChannel(t, true)
	rep, err := Verify(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Notes) != 0 || rep.RecoveredFrom != replay.FromCheckpoint {
		t.Fatalf("recovered from %q, problems:\n%v\nnotes: %v", rep.RecoveredFrom, rep, rep.Notes)
	}
	if len(rep.Groups) != 3 {
		t.Fatalf("groups %+v", rep.Groups)
	}
	for _, g := range rep.Groups {
		n := len(want[g.Info.Name])
		if g.Queued != n || g.FullReplayQueued != n {
			t.Errorf("%s: %d queued, %d by a full replay; want %d", groupLabel(g.Info.Name), g.Queued, g.FullReplayQueued, n)
		}
	}
	if b := rep.Group(2); b == nil || b.Info.Name != "b" || b.InflightTakes != 1 || b.Info.Capacity != 500 || FullPolicy(b.Info.Policy) != DropOldest {
		t.Errorf("group b: %+v", b)
	}
	if rep.Queued != len(want[""]) || rep.InflightTakes != 1 {
		t.Errorf("queued %d, in flight %d; want the unnamed group's %d, 1", rep.Queued, rep.InflightTakes, len(want[""]))
	}
	wantGroups(t, groupEvents(t, cfg), want)
}

// TestVerifyDamagedGroupCheckpoint: a group checkpoint file damaged or
// removed is a problem under that group, and the channel then falls back as
// Verify says (to the backup, else to a full replay) and recovers every
// group all the same.
func TestVerifyDamagedGroupCheckpoint(t *testing.T) {
	groupFile := func(cfg Config, id uint32, name string) string {
		return filepath.Join(checkpoint.GroupDir(cfg.CheckpointDir, id), name)
	}
	for _, tc := range []struct {
		name   string
		backup bool
		damage func(t *testing.T, cfg Config)
		kind   replay.ProblemKind
		group  string
		from   string
	}{
		{"meta_damaged", true, func(t *testing.T, cfg Config) { flipAt(t, groupFile(cfg, 1, checkpoint.MetaName), 20) },
			replay.ProblemCheckpointCorrupt, "a", replay.FromBackup},
		{"meta_damaged_no_backup", false, func(t *testing.T, cfg Config) { flipAt(t, groupFile(cfg, 2, checkpoint.MetaName), 20) },
			replay.ProblemCheckpointCorrupt, "b", replay.FromFullReplay},
		{"ring_file_removed", true, func(t *testing.T, cfg Config) {
			if err := os.Remove(groupFile(cfg, 2, checkpoint.CheckpointName)); err != nil {
				t.Fatal(err)
			}
		}, replay.ProblemCheckpointCorrupt, "b", replay.FromBackup},
		{"group_dir_removed", false, func(t *testing.T, cfg Config) {
			if err := os.RemoveAll(checkpoint.GroupDir(cfg.CheckpointDir, 1)); err != nil {
				t.Fatal(err)
			}
		}, replay.ProblemCheckpointCorrupt, "a", replay.FromFullReplay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, want := closedGroupsChannel(t, tc.backup)
			tc.damage(t, cfg)
			rep, err := Verify(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Problems) != 1 {
				t.Fatalf("problems:\n%v", rep)
			}
			if p := rep.Problems[0]; p.Kind != tc.kind || p.Group == nil || p.Group.Name != tc.group {
				t.Errorf("problem %v, want %s of %s", p, tc.kind, groupLabel(tc.group))
			}
			if rep.RecoveredFrom != tc.from {
				t.Errorf("recovered from %q, want %q", rep.RecoveredFrom, tc.from)
			}
			c := mustOpen(t, cfg)
			if got := c.Stats().RecoveredFrom; !strings.HasPrefix(got, tc.from) { // ", groups changed" may follow
				t.Errorf("Open recovered from %q, Verify says %q", got, tc.from)
			}
			c.Close()
			// The take in flight at the close came back to b's head: a full
			// replay gives it back too.
			wantGroups(t, groupEvents(t, cfg), want)
		})
	}
}

// TestVerifyGroupDirIsALink: a group dir that is a symbolic link is not
// read (Open refuses it): Verify reports it as not-a-regular-file, and the
// group's checkpoint as missing from the set.
func TestVerifyGroupDirIsALink(t *testing.T) {
	cfg, _ := closedGroupsChannel(t, false)
	dir := checkpoint.GroupDir(cfg.CheckpointDir, 1)
	moved := filepath.Join(t.TempDir(), "group-1")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, dir); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range rep.Problems {
		kinds = append(kinds, p.Kind.String())
		if p.Kind == replay.ProblemNotRegularFile && p.File != dir {
			t.Errorf("%v: want it about %s", p, dir)
		}
		if p.Kind == replay.ProblemCheckpointCorrupt && (p.Group == nil || p.Group.Name != "a") {
			t.Errorf("%v: want it about group a", p)
		}
	}
	if !slices.Equal(kinds, []string{"not-a-regular-file", "checkpoint-corrupt"}) {
		t.Errorf("problems:\n%v", rep)
	}
	if _, err := Open(cfg); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Open: %v, want ErrNotRegular", err)
	}
	if err := os.Remove(dir); err != nil { // for the Verify at the end of the test
		t.Fatal(err)
	}
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
}
