package channel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// The compatibility rule (docs/format.md, "Compatibility"): a file a newer
// release wrote is refused by Open, Verify, Repair and Rebuild with
// ErrUnsupportedFormat, which is not ErrCorrupt, and not a byte of any file
// changes.

// compatChannel makes a closed channel with a backup, events queued and
// some taken, and returns its config and every directory.
func compatChannel(t *testing.T) (Config, []string) {
	t.Helper()
	cfg := testConfig(t, 1)
	cfg.BackupCheckpointDir = filepath.Join(filepath.Dir(cfg.CheckpointDir), "backup")
	c := mustOpen(t, cfg)
	putN(t, c, 0, 30, 10)
	takeN(t, c, 10, 5)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg, []string{cfg.CheckpointDir, cfg.BackupCheckpointDir, cfg.DataDirs[0]}
}

// logPaths lists the log files of the channel's one data dir, by id.
func logPaths(t *testing.T, cfg Config) []string {
	t.Helper()
	ids, err := logfile.ListLogs(vfsOS(), cfg.DataDirs[0])
	if err != nil || len(ids) == 0 {
		t.Fatalf("list logs: %v %v", ids, err)
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids {
		out = append(out, filepath.Join(cfg.DataDirs[0], logfile.LogName(id)))
	}
	return out
}

// newerCase makes one file of the channel cfg a newer release's and returns
// the *FormatError every tool must report for it.
type newerCase struct {
	name  string
	patch func(t *testing.T, cfg Config) FormatError
}

var newerCases = []newerCase{
	{"log_file_version_11", func(t *testing.T, cfg Config) FormatError {
		p := logPaths(t, cfg)[0] // the file holding the events
		testutil.SetLogVersion(t, p, 11)
		return FormatError{File: p, Offset: 4, Version: 11, Supported: 10}
	}},
	{"log_record_of_type_18", func(t *testing.T, cfg Config) FormatError {
		logs := logPaths(t, cfg)
		p := logs[len(logs)-1] // after the checkpoint's position: Open reads it too
		off := testutil.AppendRecord(t, p, 18, 1<<40, []byte("a newer kind of record"))
		return FormatError{File: p, Offset: off, Version: 7, Supported: 10, RecordType: 18}
	}},
	// Not an unfinished create to delete: a newer release began it (its
	// header has the checksum of bytes 0..19 at 20..23, as every version
	// keeps; shorter, or without it, it is a torn one: unfinished).
	{"log_file_short_header_version_11", func(t *testing.T, cfg Config) FormatError {
		p := filepath.Join(cfg.DataDirs[0], logfile.LogName(1000))
		b := make([]byte, 24)
		copy(b, []byte{'F', 'C', 'L', 'G', 0, 11})
		binary.BigEndian.PutUint32(b[20:], crc32.Checksum(b[:20], crc32.MakeTable(crc32.Castagnoli)))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return FormatError{File: p, Offset: 4, Version: 11, Supported: 10}
	}},
	{"groups_catalog_version_6", func(t *testing.T, cfg Config) FormatError {
		p := filepath.Join(cfg.CheckpointDir, checkpoint.CatalogName)
		testutil.SetFileVersion(t, p, 6)
		return FormatError{File: p, Offset: 4, Version: 6, Supported: 5}
	}},
	{"checkpoint_version_2", func(t *testing.T, cfg Config) FormatError {
		p := filepath.Join(cfg.CheckpointDir, checkpoint.CheckpointName)
		testutil.SetCheckpointVersion(t, p, 2)
		return FormatError{File: p, Offset: 4, Version: 2, Supported: 1}
	}},
	{"checkpoint_meta_version_3", func(t *testing.T, cfg Config) FormatError {
		p := filepath.Join(cfg.CheckpointDir, checkpoint.MetaName)
		testutil.SetFileVersion(t, p, 3)
		return FormatError{File: p, Offset: 4, Version: 3, Supported: 2}
	}},
	{"inflighttakes_version_2", func(t *testing.T, cfg Config) FormatError {
		p := filepath.Join(cfg.CheckpointDir, checkpoint.InflightTakesName)
		testutil.SetFileVersion(t, p, 2)
		return FormatError{File: p, Offset: 4, Version: 2, Supported: 1}
	}},
	// The main checkpoint is fine: the next checkpoint would overwrite the
	// backup.
	{"backup_checkpoint_meta_version_3", func(t *testing.T, cfg Config) FormatError {
		p := filepath.Join(cfg.BackupCheckpointDir, checkpoint.MetaName)
		testutil.SetFileVersion(t, p, 3)
		return FormatError{File: p, Offset: 4, Version: 3, Supported: 2}
	}},
	// Read before anything else: Open's step 4b.
	{"data_dir_channel_id_version_2", func(t *testing.T, cfg Config) FormatError {
		p := filepath.Join(cfg.DataDirs[0], logfile.OwnerName)
		testutil.SetFileVersion(t, p, 2)
		return FormatError{File: p, Offset: 4, Version: 2, Supported: 1}
	}},
	{"backup_channel_id_version_2", func(t *testing.T, cfg Config) FormatError {
		p := filepath.Join(cfg.BackupCheckpointDir, checkpoint.OwnerName)
		testutil.SetFileVersion(t, p, 2)
		return FormatError{File: p, Offset: 4, Version: 2, Supported: 1}
	}},
	// A newer release may have crashed writing its backup.
	{"backup_checkpoint_version_2_incomplete", func(t *testing.T, cfg Config) FormatError {
		if err := os.Remove(filepath.Join(cfg.BackupCheckpointDir, checkpoint.BackupCompleteName)); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(cfg.BackupCheckpointDir, checkpoint.CheckpointName)
		testutil.SetCheckpointVersion(t, p, 2)
		return FormatError{File: p, Offset: 4, Version: 2, Supported: 1}
	}},
}

var compatOps = []struct {
	name string
	run  func(cfg Config) error
}{
	{"Open", func(cfg Config) error {
		c, err := Open(cfg)
		if err == nil {
			c.Close()
		}
		return err
	}},
	{"Verify", func(cfg Config) error { _, err := Verify(cfg); return err }},
	{"Repair", func(cfg Config) error { _, err := Repair(cfg, RepairOptions{}); return err }},
	{"Repair_dry_run", func(cfg Config) error { _, err := Repair(cfg, RepairOptions{DryRun: true}); return err }},
	{"Rebuild", func(cfg Config) error { _, err := Rebuild(cfg, RebuildOptions{}); return err }},
	{"Rebuild_dry_run", func(cfg Config) error { _, err := Rebuild(cfg, RebuildOptions{DryRun: true}); return err }},
}

func TestNewerFilesAreRefused(t *testing.T) {
	for _, nc := range newerCases {
		for _, op := range compatOps {
			t.Run(nc.name+"/"+op.name, func(t *testing.T) {
				expectUnsupported(t)
				cfg, dirs := compatChannel(t)
				want := nc.patch(t, cfg)
				before := testutil.Snapshot(t, dirs...)
				err := op.run(cfg)
				requireUnsupported(t, err, want)
				testutil.RequireUnchanged(t, before, dirs...)
			})
		}
	}
}

// requireUnsupported checks err matches ErrUnsupportedFormat and not
// ErrCorrupt, and carries want.
func requireUnsupported(t *testing.T, err error, want FormatError) {
	t.Helper()
	var fe *FormatError
	switch {
	case !errors.Is(err, ErrUnsupportedFormat) || !errors.As(err, &fe):
		t.Fatalf("got %v, want ErrUnsupportedFormat", err)
	case errors.Is(err, ErrCorrupt):
		t.Fatalf("%v matches ErrCorrupt: a newer file is not damage", err)
	case *fe != want:
		t.Fatalf("got %+v, want %+v (%v)", *fe, want, err)
	}
}

// TestTakeOfNewerRecordFails: a queued event whose record a newer release
// rewrote (Open's replay does not read it: it lies before the checkpoint's
// position) is not skipped as damage: the take fails and the event stays.
func TestTakeOfNewerRecordFails(t *testing.T) {
	expectUnsupported(t)
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	p := logPaths(t, cfg)[0]
	off := firstPut(t, p) // after the groups record every log file starts with
	testutil.SetRecordType(t, p, off, 18)
	before, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	for range 2 {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = tx.Take()
		requireUnsupported(t, err, FormatError{File: p, Offset: off, Version: 7, Supported: 10, RecordType: 18})
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if c.Len() != 3 || c.Stats().CorruptSkipped != 0 {
			t.Fatalf("after the failed take: %d events, %d skipped as damaged; want 3, 0", c.Len(), c.Stats().CorruptSkipped)
		}
	}
	if after, err := os.ReadFile(p); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("%s changed (%v)", p, err)
	}
}

// firstPut returns the offset of the first put record of log file p.
func firstPut(t *testing.T, p string) int64 {
	t.Helper()
	s, err := logfile.NewScanner(vfs.OS(), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Next() {
		if s.Record().Type == logfile.RecordPut {
			return s.Offset()
		}
	}
	t.Fatalf("%s has no put record (%v)", p, s.Err())
	return 0
}

// TestReadsVersion1LogFiles: this build writes version-7 log files and
// still reads the version-1 files an older release left: a full replay
// finds their events, takes read them back (a checkpoint then points into
// them), and new events go to version-7 files beside them.
func TestReadsVersion1LogFiles(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 20, 5)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range logPaths(t, cfg) {
		testutil.DowngradeLogToV1(t, p)
	}
	removeCheckpoint(t, cfg) // it points at version-7 offsets
	c = mustOpen(t, cfg)
	if got := takeN(t, c, 10, 5); !slices.Equal(got, bodies(0, 10)) {
		t.Fatalf("took %v", got)
	}
	putN(t, c, 20, 5, 5)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var versions []uint16
	for _, p := range logPaths(t, cfg) {
		r, err := logfile.OpenReader(vfs.OS(), p)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, r.Framing().Version())
		r.Close()
	}
	if versions[0] != 1 || versions[len(versions)-1] != logfile.FormatVersion {
		t.Fatalf("log file versions %v, want the old file at 1 and the new ones at %d", versions, logfile.FormatVersion)
	}
	c = mustOpen(t, cfg) // from the checkpoint: pointers into the version-1 file
	wantEvents(t, drain(t, c), bodies(10, 15))
}

// TestOpensPreviousFormatAsOneGroup opens a channel the previous release
// (log format 2, no consumer groups) wrote — testdata/v2channel: 40 events
// put, 8 taken, 2 in flight at the checkpoint, 10 put after it, then a
// crash — as one unnamed group, from its checkpoint and by a full replay,
// and then with named groups added.
func TestOpensPreviousFormatAsOneGroup(t *testing.T) {
	want := bodies(8, 32)
	for _, how := range []string{"checkpoint", "full-replay", "add-groups"} {
		t.Run(how, func(t *testing.T) {
			base := t.TempDir()
			if err := os.CopyFS(base, os.DirFS("testdata/v2channel")); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(t, 1)
			cfg.CheckpointDir, cfg.DataDirs = filepath.Join(base, "checkpoint"), []string{filepath.Join(base, "data")}
			cfg.Capacity, cfg.TransactionCapacity = 100, 20
			switch how {
			case "full-replay":
				removeCheckpoint(t, cfg)
			case "add-groups":
				cfg.Groups = []GroupConfig{{Capacity: 100}, {Name: "new", Capacity: 100}}
			}
			c := mustOpen(t, cfg)
			wantGroups := []string{""}
			if how == "add-groups" {
				wantGroups = []string{"", "new"}
			}
			if got := c.GroupNames(); !slices.Equal(got, wantGroups) {
				t.Fatalf("GroupNames %q, want %q", got, wantGroups)
			}
			if c.Stats().RecoveredFrom == "" {
				t.Fatal("no recovery source")
			}
			putN(t, c, 40, 2, 2)
			if how == "add-groups" {
				// The new group has what was committed after it existed.
				wantEvents(t, drainGroup(t, c, "new"), bodies(40, 2))
			}
			c.Close()
			c = mustOpen(t, cfg)
			wantEvents(t, drain(t, c), append(want, bodies(40, 2)...))
		})
	}
}

// v5ChannelConfig returns the config of a copy of testdata/v5channel (see
// TestOpensPreviousEncryptedFormat).
func v5ChannelConfig(t *testing.T) Config {
	t.Helper()
	base := t.TempDir()
	if err := os.CopyFS(base, os.DirFS("testdata/v5channel")); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, 1)
	cfg.CheckpointDir, cfg.DataDirs = filepath.Join(base, "checkpoint"), []string{filepath.Join(base, "data")}
	cfg.Capacity, cfg.TransactionCapacity = 100, 20
	cfg.Keys = StaticKeys("k1", map[string][]byte{"k1": testKey(0xa1)})
	return cfg
}

// TestOpensPreviousEncryptedFormat opens an encrypted channel the previous
// release (log format 5: files bound to no channel) wrote —
// testdata/v5channel, key "k1" (testKey(0xa1)): 25 events put in two log
// files, 5 of them taken — from its checkpoint and by a full replay. Its
// files read as they are; the files it writes from then on are version 8,
// bound to the channel's id; both kinds read back after a reopen.
func TestOpensPreviousEncryptedFormat(t *testing.T) {
	for _, how := range []string{"checkpoint", "full-replay"} {
		t.Run(how, func(t *testing.T) {
			cfg := v5ChannelConfig(t)
			if how == "full-replay" {
				removeCheckpoint(t, cfg)
			}
			c := mustOpen(t, cfg)
			wantEvents(t, takeN(t, c, 3, 3), bodies(5, 3))
			putN(t, c, 25, 2, 2)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			versions := map[uint16]int{}
			for _, p := range logPaths(t, cfg) {
				r, err := logfile.OpenReader(vfsOS(), p)
				if err != nil {
					t.Fatal(err)
				}
				versions[r.Framing().Version()]++
				if r.Framing().Version() == logfile.TimedBoundVersion && r.Framing().ChannelID() != channelIDOf(t, cfg) {
					t.Errorf("%s is bound to channel %x, not to the channel's %x", p, r.Framing().ChannelID(), channelIDOf(t, cfg))
				}
				r.Close()
			}
			if versions[logfile.EncryptedVersion] != 2 || versions[logfile.TimedBoundVersion] == 0 {
				t.Fatalf("log file versions %v: want the two old files at %d and new ones at %d", versions, logfile.EncryptedVersion, logfile.TimedBoundVersion)
			}
			c = mustOpen(t, cfg)
			wantEvents(t, drain(t, c), bodies(8, 19))
		})
	}
}
