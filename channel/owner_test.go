package channel

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
	"github.com/prometheus/client_golang/prometheus"
)

// Directories belong to one channel (docs/format.md §1.1): every directory
// records the channel's id and checkpoint dir in its channel.id, and Open,
// Repair and Rebuild refuse a directory of another channel before they
// change anything, while a channel that lost its checkpoint dir, or whose
// files an older release wrote, still opens.

// ownerOf returns what dir's channel.id records (failing t without one).
func ownerOf(t *testing.T, dir string) owner.Owner {
	t.Helper()
	o, ok, err := owner.Read(vfsOS(), dir)
	if err != nil || !ok {
		t.Fatalf("channel.id of %s: %v %v", dir, ok, err)
	}
	return o
}

// resolved is dir with its symlinks resolved (t.TempDir may sit below one).
func resolved(t *testing.T, dir string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// allDirs lists cfg's directories.
func allDirs(cfg Config) []string {
	dirs := append([]string{cfg.CheckpointDir}, cfg.DataDirs...)
	if cfg.BackupCheckpointDir != "" {
		dirs = append(dirs, cfg.BackupCheckpointDir)
	}
	return dirs
}

// ownedChannel makes a closed channel in its own temp dir with a backup dir
// and two data dirs, with events 0..59 committed and 0..19 taken, over
// several log files (some deleted).
func ownedChannel(t *testing.T) Config {
	t.Helper()
	cfg := testConfig(t, 2)
	cfg.BackupCheckpointDir = filepath.Join(filepath.Dir(cfg.CheckpointDir), "backup")
	cfg.MaxFileSize = MinMaxFileSize
	c := mustOpen(t, cfg)
	putN(t, c, 0, 60, 6)
	takeN(t, c, 20, 5)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// requireForeign fails t unless err is a *ForeignDirError for role dir of
// the channel whose checkpoint dir is ownerCkpt, seen from this channel
// (this: its id, "" for none) with checkpoint dir ckpt.
func requireForeign(t *testing.T, err error, role, dir, ownerCkpt, this, ckpt string) {
	t.Helper()
	var fe *ForeignDirError
	if !errors.Is(err, ErrForeignDir) || !errors.As(err, &fe) {
		t.Fatalf("error %v, want one matching ErrForeignDir", err)
	}
	want := ForeignDirError{Role: role, Dir: dir, File: filepath.Join(dir, "channel.id"),
		Owner: ownerOf(t, dir).ID.String(), OwnerCheckpointDir: resolved(t, ownerCkpt), Channel: this, CheckpointDir: ckpt}
	if *fe != want {
		t.Errorf("error %+v\nwant       %+v", *fe, want)
	}
	msg := err.Error()
	for _, w := range []string{"directory belongs to another channel", role + " " + dir, want.Owner, want.OwnerCheckpointDir,
		"delete " + want.File, "(nothing was changed)"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
	if errors.Is(err, ErrLocked) || errors.Is(err, ErrCorrupt) {
		t.Errorf("error %v also matches ErrLocked or ErrCorrupt", err)
	}
}

// TestSecondChannelCannotTakeOverDataDir is issue 13's item 5: a second
// channel, with its own checkpoint dir, opened on the data dir of a first
// one that is closed, took over its events and deleted its logs, and the
// first could never open again. Now Open refuses, changing nothing, and the
// first channel still has every event.
func TestSecondChannelCannotTakeOverDataDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lived: the second channel was opened before on a data dir of its
		// own, so its checkpoint dir has an id.
		lived bool
	}{{"new_second_channel", false}, {"second_channel_with_its_own_id", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg1 := ownedChannel(t)
			first := ownerOf(t, cfg1.CheckpointDir)
			base := filepath.Dir(cfg1.CheckpointDir)
			cfg2 := cfg1
			cfg2.CheckpointDir, cfg2.BackupCheckpointDir = filepath.Join(base, "checkpoint2"), ""
			cfg2.DataDirs = []string{cfg1.DataDirs[0]}
			this := ""
			if tc.lived {
				own := cfg2
				own.DataDirs = []string{filepath.Join(base, "data2")}
				if err := mustOpen(t, own).Close(); err != nil {
					t.Fatal(err)
				}
				this = ownerOf(t, cfg2.CheckpointDir).ID.String()
			}
			before := testutil.Snapshot(t, allDirs(cfg1)...)

			c, err := Open(cfg2)
			if err == nil {
				c.Close()
				t.Fatal("the second channel opened on the first one's data dir")
			}
			requireForeign(t, err, "DataDirs[0]", cfg1.DataDirs[0], cfg1.CheckpointDir, this, resolved(t, cfg2.CheckpointDir))
			testutil.RequireUnchanged(t, before, allDirs(cfg1)...)
			if _, ok, err := owner.Read(vfsOS(), cfg2.CheckpointDir); ok != tc.lived || err != nil {
				t.Errorf("the refused Open recorded an id in its checkpoint dir: %v %v", ok, err)
			}

			c = mustOpen(t, cfg1)
			wantEvents(t, drain(t, c), bodies(20, 40))
			if got := ownerOf(t, cfg1.DataDirs[0]); got != first {
				t.Errorf("data dir's owner %+v, want %+v", got, first)
			}
		})
	}
}

// TestLostCheckpointStillRecovers: a checkpoint dir wiped (with or without
// the backup) is not a new channel: the data dirs record it, so Open adopts
// their id and recovers every event (a full replay, or the backup).
func TestLostCheckpointStillRecovers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		backup bool // the backup dir is wiped too
		from   string
	}{
		{"checkpoint_dir_wiped", false, replay.FromBackup},
		{"checkpoint_and_backup_dirs_wiped", true, replay.FromFullReplay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ownedChannel(t)
			id := ownerOf(t, cfg.CheckpointDir)
			wipe := []string{cfg.CheckpointDir}
			if tc.backup {
				wipe = append(wipe, cfg.BackupCheckpointDir)
			}
			for _, d := range wipe {
				if err := os.RemoveAll(d); err != nil {
					t.Fatal(err)
				}
			}
			c := mustOpen(t, cfg)
			if got := c.Stats().RecoveredFrom; got != tc.from {
				t.Errorf("recovered from %q, want %q", got, tc.from)
			}
			wantEvents(t, drain(t, c), bodies(20, 40))
			for _, d := range allDirs(cfg) {
				if got := ownerOf(t, d); got != id {
					t.Errorf("%s: owner %+v, want %+v", d, got, id)
				}
			}
		})
	}
}

// TestOlderReleaseDirsAreAdopted: directories an older release wrote have
// no channel.id; Open records one id in all of them and delivers every
// event.
func TestOlderReleaseDirsAreAdopted(t *testing.T) {
	cfg := ownedChannel(t)
	old := ownerOf(t, cfg.CheckpointDir)
	for _, d := range allDirs(cfg) {
		if err := os.Remove(filepath.Join(d, "channel.id")); err != nil {
			t.Fatal(err)
		}
	}
	c := mustOpen(t, cfg)
	if got := c.Stats().RecoveredFrom; got != replay.FromCheckpoint {
		t.Errorf("recovered from %q, want the checkpoint", got)
	}
	wantEvents(t, drain(t, c), bodies(20, 40))
	id := ownerOf(t, cfg.CheckpointDir)
	if id.ID == old.ID || id.CheckpointDir != resolved(t, cfg.CheckpointDir) {
		t.Errorf("recorded %+v (the removed one was %+v), want a new id and the checkpoint dir", id, old)
	}
	for _, d := range allDirs(cfg) {
		if got := ownerOf(t, d); got != id {
			t.Errorf("%s: owner %+v, want %+v", d, got, id)
		}
	}
}

// TestMovedChannelKeepsItsDirs: a channel whose directories were all moved
// opens (the ids match), records its new checkpoint dir everywhere, and a
// checkpoint lost at the new place still recovers.
func TestMovedChannelKeepsItsDirs(t *testing.T) {
	cfg := ownedChannel(t)
	id := ownerOf(t, cfg.CheckpointDir).ID
	moved := cfg
	base := filepath.Join(filepath.Dir(cfg.CheckpointDir), "moved")
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	rename := func(dir string) string {
		to := filepath.Join(base, filepath.Base(dir))
		if err := os.Rename(dir, to); err != nil {
			t.Fatal(err)
		}
		// Back for the Verify of ownedChannel's cleanup, after the moved
		// channel's own.
		t.Cleanup(func() {
			if err := os.Rename(to, dir); err != nil {
				t.Error(err)
			}
		})
		return to
	}
	moved.CheckpointDir, moved.BackupCheckpointDir = rename(cfg.CheckpointDir), rename(cfg.BackupCheckpointDir)
	moved.DataDirs = []string{rename(cfg.DataDirs[0]), rename(cfg.DataDirs[1])}
	c := mustOpen(t, moved)
	wantEvents(t, takeN(t, c, 10, 5), bodies(20, 10))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range allDirs(moved) {
		if got := ownerOf(t, d); got.ID != id || got.CheckpointDir != resolved(t, moved.CheckpointDir) {
			t.Errorf("%s: owner %+v, want %v at %s", d, got, id, moved.CheckpointDir)
		}
	}
	for _, d := range []string{moved.CheckpointDir, moved.BackupCheckpointDir} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	c = mustOpen(t, moved)
	wantEvents(t, drain(t, c), bodies(30, 30))
}

// TestDirsOfTwoChannelsRefused: a config mixing the directories of two
// channels is refused, naming the foreign one, and changes nothing; both
// channels still open with their events.
func TestDirsOfTwoChannelsRefused(t *testing.T) {
	a, b := ownedChannel(t), ownedChannel(t)
	idA, idB := ownerOf(t, a.CheckpointDir).ID.String(), ownerOf(t, b.CheckpointDir).ID.String()
	fresh := filepath.Join(t.TempDir(), "checkpoint")
	for _, tc := range []struct {
		name         string
		cfg          func() Config
		role, dir    string
		owner, this  string // the foreign dir's checkpoint dir; this channel's id
		checkpointOf string // this channel's checkpoint dir
	}{
		{"data_dir_of_b_in_a", func() Config { c := a; c.DataDirs = []string{a.DataDirs[0], b.DataDirs[1]}; return c },
			"DataDirs[1]", b.DataDirs[1], b.CheckpointDir, idA, a.CheckpointDir},
		{"data_dirs_of_a_and_b_in_a_new_channel", func() Config {
			c := a
			c.CheckpointDir, c.BackupCheckpointDir, c.DataDirs = fresh, "", []string{a.DataDirs[1], b.DataDirs[0]}
			return c
		}, "DataDirs[0]", a.DataDirs[1], a.CheckpointDir, "", fresh},
		{"backup_dir_of_a_in_b", func() Config { c := b; c.BackupCheckpointDir = a.BackupCheckpointDir; return c },
			"BackupCheckpointDir", a.BackupCheckpointDir, a.CheckpointDir, idB, b.CheckpointDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs := append(allDirs(a), allDirs(b)...)
			before := testutil.Snapshot(t, dirs...)
			c, err := Open(tc.cfg())
			if err == nil {
				c.Close()
				t.Fatal("opened")
			}
			requireForeign(t, err, tc.role, tc.dir, tc.owner, tc.this, resolved(t, tc.checkpointOf))
			testutil.RequireUnchanged(t, before, dirs...)
		})
	}
	for _, cfg := range []Config{a, b} {
		c := mustOpen(t, cfg)
		wantEvents(t, drain(t, c), bodies(20, 40))
	}
}

// TestOfflineToolsAndForeignDirs: Verify reports a data dir of another
// channel (foreign-data-dir); Repair and Rebuild, dry runs included, refuse
// it as Open does and change nothing.
func TestOfflineToolsAndForeignDirs(t *testing.T) {
	cfg1 := ownedChannel(t)
	cfg2 := Config{CheckpointDir: filepath.Join(filepath.Dir(cfg1.CheckpointDir), "checkpoint2"),
		DataDirs: []string{cfg1.DataDirs[1]}, MinimumRequiredSpace: -1}
	if err := os.Mkdir(cfg2.CheckpointDir, 0o700); err != nil { // Verify needs the dirs
		t.Fatal(err)
	}
	before := testutil.Snapshot(t, allDirs(cfg1)...)

	rep, err := Verify(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range rep.Problems {
		if p.Kind == replay.ProblemForeignDataDir && p.File == filepath.Join(cfg1.DataDirs[1], "channel.id") &&
			strings.Contains(p.Detail, "DataDirs[0] "+cfg1.DataDirs[1]+" belongs to channel "+ownerOf(t, cfg1.DataDirs[1]).ID.String()) {
			found = true
		}
	}
	if !found || rep.OK() {
		t.Errorf("Verify of the second channel: no foreign-data-dir problem for %s:\n%v", cfg1.DataDirs[1], rep)
	}

	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"repair", func() error { _, err := Repair(cfg2, RepairOptions{}); return err }},
		{"repair", func() error { _, err := Repair(cfg2, RepairOptions{DryRun: true}); return err }},
		{"rebuild", func() error { _, err := Rebuild(cfg2, RebuildOptions{}); return err }},
		{"rebuild", func() error { _, err := Rebuild(cfg2, RebuildOptions{DryRun: true}); return err }},
	} {
		err := tc.run()
		requireForeign(t, err, "DataDirs[0]", cfg1.DataDirs[1], cfg1.CheckpointDir, "", resolved(t, cfg2.CheckpointDir))
		if !strings.HasPrefix(err.Error(), "filechannel: "+tc.name+": ") {
			t.Errorf("error %q does not start with %q", err, "filechannel: "+tc.name+": ")
		}
	}
	testutil.RequireUnchanged(t, before, allDirs(cfg1)...)
	// The first channel's own Verify (mustOpen's cleanup) is clean.
}

// TestDamagedChannelIDIsRefused: a channel.id that does not decode is
// damage: Open, Repair and Rebuild refuse it (ErrCorrupt, naming the file
// and saying to delete it), Verify reports channel-id-corrupt; once the file
// is deleted, Open records it again.
func TestDamagedChannelIDIsRefused(t *testing.T) {
	cfg := ownedChannel(t)
	id := ownerOf(t, cfg.CheckpointDir)
	file := filepath.Join(cfg.DataDirs[1], logfile.OwnerName)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[10] ^= 0x40
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := testutil.Snapshot(t, allDirs(cfg)...)
	for _, run := range []func() error{
		func() error {
			c, err := Open(cfg)
			if err == nil {
				c.Close()
			}
			return err
		},
		func() error { _, err := Repair(cfg, RepairOptions{}); return err },
		func() error { _, err := Rebuild(cfg, RebuildOptions{}); return err },
	} {
		err := run()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "delete the file") {
			t.Errorf("error %v, want the corruption of %s", err, file)
		}
	}
	rep, err := Verify(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].Kind != replay.ProblemChannelIDCorrupt || rep.Problems[0].File != file {
		t.Errorf("Verify: %v, want one channel-id-corrupt problem for %s", rep, file)
	}
	testutil.RequireUnchanged(t, before, allDirs(cfg)...)

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, cfg)
	wantEvents(t, drain(t, c), bodies(20, 40))
	if got := ownerOf(t, cfg.DataDirs[1]); got != id {
		t.Errorf("recorded again: %+v, want %+v", got, id)
	}
}

// TestChannelIDsAreWrittenAtFirstOpen: a new channel's directories each
// get the same channel.id, recording the resolved checkpoint dir, through
// its owner package, before the checkpoint (step 4b).
func TestChannelIDsAreWrittenAtFirstOpen(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.BackupCheckpointDir = filepath.Join(filepath.Dir(cfg.CheckpointDir), "backup")
	c := mustOpen(t, cfg)
	defer c.Close()
	o, ok, err := checkpoint.ReadOwner(vfsOS(), cfg.CheckpointDir)
	if err != nil || !ok || o.ID.IsZero() || o.CheckpointDir != resolved(t, cfg.CheckpointDir) {
		t.Fatalf("checkpoint dir's channel.id: %+v %v %v", o, ok, err)
	}
	for _, d := range allDirs(cfg) {
		if got := ownerOf(t, d); got != o {
			t.Errorf("%s: %+v, want %+v", d, got, o)
		}
	}
}

// damageChannelID damages dir's channel.id the way how says: a flipped
// bit, cut short, zeroed, or emptied.
func damageChannelID(t *testing.T, dir, how string) {
	t.Helper()
	file := filepath.Join(dir, owner.FileName)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "flip_a_bit":
		b[len(b)/2] ^= 0x10
	case "truncate":
		b = b[:len(b)-5]
	case "zero":
		clear(b)
	case "empty":
		b = nil
	default:
		t.Fatalf("no damage %q", how)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedCheckpointChannelIDHeals is issue 27's item 14: a damaged
// channel.id in the checkpoint dir (or the backup dir) made Open refuse
// until someone deleted it by hand, though every data dir's channel.id,
// intact, said which channel it was. Now Verify reports it, saying the
// next Open writes it again, and Open writes it again from the data dirs'
// (logged, counted in Stats and the channel_ids_healed metric), and opens
// with every event.
func TestDamagedCheckpointChannelIDHeals(t *testing.T) {
	for _, how := range []string{"flip_a_bit", "truncate", "zero", "empty"} {
		for _, where := range []string{"checkpoint_dir", "backup_dir", "both"} {
			t.Run(how+"/"+where, func(t *testing.T) {
				cfg := ownedChannel(t)
				id := ownerOf(t, cfg.CheckpointDir)
				var damaged []string
				if where != "backup_dir" {
					damaged = append(damaged, cfg.CheckpointDir)
				}
				if where != "checkpoint_dir" {
					damaged = append(damaged, cfg.BackupCheckpointDir)
				}
				for _, d := range damaged {
					damageChannelID(t, d, how)
				}

				rep, err := Verify(cfg)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range damaged {
					file := filepath.Join(d, owner.FileName)
					if !hasProblem(rep, replay.ProblemChannelIDCorrupt, file) {
						t.Errorf("Verify: no %s problem for %s: %v", replay.ProblemChannelIDCorrupt, file, rep.Problems)
					}
				}
				for _, p := range rep.Problems {
					if p.Kind == replay.ProblemChannelIDCorrupt && !strings.Contains(p.Detail, "the channel's next Open writes it again") {
						t.Errorf("Verify: %s does not say the next Open heals it", p)
					}
				}

				rec := &logRecorder{}
				reg := prometheus.NewRegistry()
				cfg.Logger, cfg.Registerer = slog.New(rec), reg
				c := mustOpen(t, cfg)
				if got := c.Stats().ChannelIDsHealed; got != int64(len(damaged)) {
					t.Errorf("Stats().ChannelIDsHealed = %d, want %d", got, len(damaged))
				}
				if v, ok := metricValue(t, reg, "filechannel_channel_ids_healed", nil); !ok || v != float64(len(damaged)) {
					t.Errorf("filechannel_channel_ids_healed = %v (%v), want %d", v, ok, len(damaged))
				}
				logged := map[string]bool{}
				for _, r := range rec.find("healed a damaged channel.id") {
					if r.Level != slog.LevelWarn {
						t.Errorf("logged at %v, want a warning", r.Level)
					}
					r.Attrs(func(a slog.Attr) bool {
						if a.Key == "dir" {
							logged[a.Value.String()] = true
						}
						return true
					})
				}
				for _, d := range damaged {
					if !logged[d] {
						t.Errorf("no warning for %s (logged %v)", d, logged)
					}
				}
				wantEvents(t, drain(t, c), bodies(20, 40))
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				for _, d := range allDirs(cfg) {
					if got := ownerOf(t, d); got != id {
						t.Errorf("%s: owner %+v, want %+v", d, got, id)
					}
					if _, err := os.Lstat(filepath.Join(d, owner.FileName+".tmp")); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s: a channel.id.tmp is left: %v", d, err)
					}
				}
				// Healed once: the next Open has nothing to heal.
				c = mustOpen(t, cfg)
				if got := c.Stats().ChannelIDsHealed; got != 0 {
					t.Errorf("the next Open healed %d", got)
				}
			})
		}
	}
}

// TestDamagedCheckpointChannelIDWithoutVouchersIsRefused: when a data dir
// does not vouch for the channel (its channel.id missing, damaged too, or
// recording another channel or another checkpoint dir), or the backup dir
// names another channel, a damaged channel.id of the checkpoint dir is
// refused as before (ErrCorrupt naming the file), with the reason it was
// not healed, and nothing is changed.
func TestDamagedCheckpointChannelIDWithoutVouchersIsRefused(t *testing.T) {
	rewrite := func(t *testing.T, dir string, o owner.Owner) {
		if err := owner.Write(vfsOS(), dir, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, cfg Config, id owner.Owner)
		why   func(cfg Config) string // after "not rewritten by itself, as "
	}{
		{"data_dir_id_missing", func(t *testing.T, cfg Config, _ owner.Owner) {
			if err := os.Remove(filepath.Join(cfg.DataDirs[1], owner.FileName)); err != nil {
				t.Fatal(err)
			}
		}, func(cfg Config) string {
			return "DataDirs[1] " + cfg.DataDirs[1] + " has no intact channel.id to vouch for it"
		}},
		{"data_dir_id_damaged", func(t *testing.T, cfg Config, _ owner.Owner) { damageChannelID(t, cfg.DataDirs[1], "flip_a_bit") },
			func(cfg Config) string {
				return "DataDirs[1] " + cfg.DataDirs[1] + " has no intact channel.id to vouch for it"
			}},
		{"data_dir_of_another_channel", func(t *testing.T, cfg Config, id owner.Owner) {
			id.ID = owner.NewID()
			rewrite(t, cfg.DataDirs[1], id)
		}, func(cfg Config) string { return "DataDirs[1] " + cfg.DataDirs[1] + " records channel " }},
		{"data_dir_of_another_checkpoint_dir", func(t *testing.T, cfg Config, id owner.Owner) {
			id.CheckpointDir = "/somewhere/else"
			rewrite(t, cfg.DataDirs[1], id)
		}, func(cfg Config) string {
			return "DataDirs[1] " + cfg.DataDirs[1] + " records checkpoint dir /somewhere/else, not " + resolved(t, cfg.CheckpointDir)
		}},
		{"backup_dir_of_another_channel", func(t *testing.T, cfg Config, id owner.Owner) {
			id.ID = owner.NewID()
			rewrite(t, cfg.BackupCheckpointDir, id)
		}, func(cfg Config) string { return "BackupCheckpointDir " + cfg.BackupCheckpointDir + " records channel " }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ownedChannel(t)
			id := ownerOf(t, cfg.CheckpointDir)
			damageChannelID(t, cfg.CheckpointDir, "zero")
			tc.spoil(t, cfg, id)
			expectProblems(t, replay.ProblemChannelIDCorrupt, replay.ProblemForeignDataDir, replay.ProblemForeignBackupDir)
			before := testutil.Snapshot(t, allDirs(cfg)...)

			file := filepath.Join(cfg.CheckpointDir, owner.FileName)
			for _, run := range []struct {
				op string
				do func() error
			}{
				{"Open", func() error {
					c, err := Open(cfg)
					if err == nil {
						c.Close()
					}
					return err
				}},
				{"Repair", func() error { _, err := Repair(cfg, RepairOptions{}); return err }},
				{"Rebuild", func() error { _, err := Rebuild(cfg, RebuildOptions{}); return err }},
			} {
				err := run.do()
				msg := fmt.Sprint(err)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(msg, "CheckpointDir "+cfg.CheckpointDir+": ") ||
					!strings.Contains(msg, file) || !strings.Contains(msg, "delete the file") {
					t.Errorf("%s: err %v, want the damage of %s", run.op, err, file)
				}
				if w := "not rewritten by itself, as " + tc.why(cfg); !strings.Contains(msg, w) {
					t.Errorf("%s: error %q does not say %q", run.op, msg, w)
				}
			}
			testutil.RequireUnchanged(t, before, allDirs(cfg)...)
		})
	}
}
