package channel

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/replay"
)

// closedChannel is a closed channel holding events 5..29 (30 put, 5 taken),
// with a backup checkpoint when backup is set.
func closedChannel(t *testing.T, backup bool) Config {
	t.Helper()
	cfg := testConfig(t, 2)
	if backup {
		cfg.BackupCheckpointDir = filepath.Join(filepath.Dir(cfg.CheckpointDir), "backup")
	}
	c := mustOpen(t, cfg)
	putN(t, c, 0, 30, 10)
	wantEvents(t, takeN(t, c, 5, 5), bodies(0, 5))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRebuildRecoversTheLogsState(t *testing.T) {
	garble := func(t *testing.T, cfg Config) {
		for _, n := range []string{checkpoint.CheckpointName, checkpoint.MetaName} {
			flipAt(t, filepath.Join(cfg.CheckpointDir, n), 70)
		}
	}
	for _, tc := range []struct {
		name   string
		backup bool
		damage func(t *testing.T, cfg Config)
	}{
		{"checkpoint_deleted", false, removeCheckpoint},
		{"checkpoint_garbled", false, garble},
		{"checkpoint_garbled_with_a_backup", true, garble},
		{"nothing_wrong", true, func(*testing.T, Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := closedChannel(t, tc.backup)
			tc.damage(t, cfg)
			rep, err := Rebuild(cfg, RebuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Events != 25 || rep.Puts != 30 || rep.Takes != 5 || rep.Capacity != cfg.Capacity ||
				rep.Corrupt != 0 || rep.DamagedTxs != 0 || rep.Records == 0 || rep.Bytes == 0 {
				t.Fatalf("report %+v", rep)
			}
			if tc.backup && !checkpoint.HasBackup(vfsOS(), cfg.BackupCheckpointDir) {
				t.Fatal("no complete backup after the rebuild")
			}
			vr, err := Verify(cfg)
			if err != nil || !vr.OK() || vr.RecoveredFrom != replay.FromCheckpoint {
				t.Fatalf("Verify after the rebuild: %v, %v, recovered from %q", vr, err, vr.RecoveredFrom)
			}
			c := mustOpen(t, cfg)
			defer c.Close()
			if s := c.Stats(); s.RecoveredFrom != "checkpoint" {
				t.Fatalf("recovered from %q", s.RecoveredFrom)
			}
			wantEvents(t, drain(t, c), bodies(5, 25))
		})
	}
}

func TestRebuildCapacity(t *testing.T) {
	t.Run("zero_keeps_the_checkpoints", func(t *testing.T) {
		cfg := closedChannel(t, false)
		cfg.Capacity, cfg.TransactionCapacity = 0, 0
		rep, err := Rebuild(cfg, RebuildOptions{})
		if err != nil || rep.Capacity != 1000 {
			t.Fatalf("rebuild: %+v, %v; want capacity 1000", rep, err)
		}
	})
	t.Run("zero_without_checkpoint_is_the_default", func(t *testing.T) {
		cfg := closedChannel(t, false)
		removeCheckpoint(t, cfg)
		expectProblems(t, replay.ProblemCheckpointMissing) // a dry run leaves it so
		cfg.Capacity, cfg.TransactionCapacity = 0, 0
		rep, err := Rebuild(cfg, RebuildOptions{DryRun: true})
		if err != nil || rep.Capacity != DefaultCapacity {
			t.Fatalf("rebuild: %+v, %v; want capacity %d", rep, err, DefaultCapacity)
		}
	})
	t.Run("too_small_changes_nothing", func(t *testing.T) {
		cfg := closedChannel(t, true)
		before := hashDirs(t, cfg)
		cfg.Capacity, cfg.TransactionCapacity = 10, 10
		for _, dry := range []bool{true, false} {
			_, err := Rebuild(cfg, RebuildOptions{DryRun: dry})
			var ce *replay.CapacityError
			if !errors.As(err, &ce) || ce.Needed != 25 || !strings.Contains(err.Error(), "Capacity >= 25") {
				t.Fatalf("dry run %v: %v, want a capacity error naming 25", dry, err)
			}
		}
		requireUnchanged(t, before, hashDirs(t, cfg))
	})
}

func TestRebuildDryRunChangesNothing(t *testing.T) {
	cfg := closedChannel(t, true)
	removeCheckpoint(t, cfg)
	before := hashDirs(t, cfg)
	dry, err := Rebuild(cfg, RebuildOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	requireUnchanged(t, before, hashDirs(t, cfg))
	rep, err := Rebuild(cfg, RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dry.Duration, rep.Duration = 0, 0
	if !reflect.DeepEqual(dry, rep) {
		t.Fatalf("dry run %+v, rebuild %+v", dry, rep)
	}
}

func TestRebuildReportsProgress(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.Capacity = 10000
	c := mustOpen(t, cfg)
	putN(t, c, 0, 9000, 100) // enough records for progress on the way
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		var got []replay.Progress
		_, err := Rebuild(cfg, RebuildOptions{DryRun: dry, ProgressEvery: time.Nanosecond,
			Progress: func(p replay.Progress) { got = append(got, p) }})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < 3 {
			t.Fatalf("dry run %v: %d calls", dry, len(got))
		}
		for i, p := range got {
			if p.Bytes > p.TotalBytes || (i > 0 && (p.Bytes < got[i-1].Bytes || p.Records < got[i-1].Records ||
				p.TotalBytes != got[i-1].TotalBytes)) {
				t.Fatalf("dry run %v: call %d %+v after %+v", dry, i, p, got[max(i-1, 0)])
			}
		}
		if last := got[len(got)-1]; last.Bytes != last.TotalBytes || last.Bytes == 0 {
			t.Fatalf("dry run %v: last call %+v", dry, last)
		}
	}
}

// TestOpenReportsReplayProgress: Config.ReplayProgress sees Open's replay.
func TestOpenReportsReplayProgress(t *testing.T) {
	cfg := closedChannel(t, false)
	removeCheckpoint(t, cfg)
	var got []replay.Progress
	cfg.ReplayProgress = func(p replay.Progress) { got = append(got, p) }
	c := mustOpen(t, cfg)
	defer c.Close()
	if len(got) != 1 || got[0].Bytes != got[0].TotalBytes || got[0].Records == 0 {
		t.Fatalf("progress %+v, want one call at the end", got)
	}
	if _, err := os.Stat(cfg.CheckpointDir); err != nil {
		t.Fatal(err)
	}
}

// TestRecordedCapacity: the capacity a closed channel's checkpoint records,
// whatever Config.Capacity says; the default for a channel never opened.
func TestRecordedCapacity(t *testing.T) {
	cfg := testConfig(t, 1)
	if n, from, err := RecordedCapacity(cfg); err != nil || n != DefaultCapacity || from != CapacityDefault {
		t.Fatalf("new channel: %d %v %v", n, from, err)
	}
	cfg.Capacity = 123
	c := mustOpen(t, cfg)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Capacity = 5000
	if n, from, err := RecordedCapacity(cfg); err != nil || n != 123 || from != CapacityFromCheckpoint {
		t.Fatalf("closed channel: %d %v %v", n, from, err)
	}
	cfg.CheckpointDir = ""
	if _, _, err := RecordedCapacity(cfg); err == nil {
		t.Fatal("no CheckpointDir: no error")
	}
}

// TestRebuildGroups: a rebuild rebuilds every consumer group (each ring in
// its group dir, and the catalog): each group then holds what a plain Open
// gives it, whether Rebuild gets the application's Config.Groups or none
// (fcreplay's: the groups the logs have are kept, and no unnamed group is
// added).
func TestRebuildGroups(t *testing.T) {
	for _, withGroups := range []bool{true, false} {
		t.Run(map[bool]string{true: "config_groups", false: "no_config_groups"}[withGroups], func(t *testing.T) {
			cfg, _ := closedGroupsChannel(t, true, GroupConfig{Name: "a"}, GroupConfig{Name: "b", Capacity: 500, WhenFull: DropOldest})
			want := groupEvents(t, cfg) // what a plain Open gives
			rcfg := cfg
			if !withGroups {
				rcfg.Groups, rcfg.Capacity, rcfg.TransactionCapacity = nil, 0, 0
			}
			for _, dry := range []bool{true, false} {
				rep, err := Rebuild(rcfg, RebuildOptions{DryRun: dry})
				if err != nil {
					t.Fatal(err)
				}
				wantRebuilt := []RebuildGroup{
					{ID: 1, Name: "a", Events: len(want["a"]), Capacity: cfg.Capacity, WhenFull: Block},
					{ID: 2, Name: "b", Events: len(want["b"]), Capacity: 500, WhenFull: DropOldest},
				}
				if !reflect.DeepEqual(rep.Groups, wantRebuilt) || rep.Events != max(len(want["a"]), len(want["b"])) {
					t.Errorf("dry run %v: events %d, groups %+v; want %+v", dry, rep.Events, rep.Groups, wantRebuilt)
				}
			}
			cat, err := checkpoint.ReadCatalog(vfsOS(), cfg.CheckpointDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(cat.Groups) != 2 || cat.Groups[0].Name != "a" || cat.Groups[1].Name != "b" {
				t.Errorf("catalog after the rebuild: %+v", cat)
			}
			if ids, err := checkpoint.ListGroupDirs(vfsOS(), cfg.CheckpointDir); err != nil || !slices.Equal(ids, []uint32{1, 2}) {
				t.Errorf("group dirs after the rebuild: %v, %v", ids, err)
			}
			vr, err := Verify(cfg)
			if err != nil || !vr.OK() || vr.RecoveredFrom != replay.FromCheckpoint || len(vr.Groups) != 2 {
				t.Fatalf("Verify after the rebuild: %v, %v, recovered from %q, groups %+v", vr, err, vr.RecoveredFrom, vr.Groups)
			}
			wantGroups(t, groupEvents(t, cfg), want)
		})
	}
}
