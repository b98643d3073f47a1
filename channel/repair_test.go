package channel

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// hashDirs returns the SHA-256 of every file in cfg's directories, by path.
func hashDirs(t *testing.T, cfg Config) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	dirs := append([]string{cfg.CheckpointDir, cfg.BackupCheckpointDir}, cfg.DataDirs...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		entries, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Join(d, e.Name())] = sha256.Sum256(b)
		}
	}
	return out
}

func requireUnchanged(t *testing.T, before, after map[string][32]byte) {
	t.Helper()
	for p, h := range before {
		if g, ok := after[p]; !ok || g != h {
			t.Errorf("%s changed or vanished", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared", p)
		}
	}
}

// putOffset returns the frame offset of the put record of event i in the
// log file at path.
func putOffset(t *testing.T, path string, i int) int64 {
	t.Helper()
	s, err := logfile.NewScanner(vfs.OS(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Next() {
		if r := s.Record(); r.Type == logfile.RecordPut && bytes.Equal(r.Body, body(i)) {
			return s.Offset()
		}
	}
	t.Fatalf("no put of event %d in %s", i, path)
	return 0
}

// writeLogFile writes a log file id in dir from chunks (records, encoded
// for the file, or raw bytes), the way damage would leave it.
func writeLogFile(t *testing.T, dir string, id uint32, chunks ...any) string {
	t.Helper()
	w, err := logfile.Create(vfs.OS(), dir, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		b, ok := c.([]byte)
		if r, isRec := c.(logfile.Record); isRec {
			if b, err = w.Framing().AppendRecord(nil, &r); err != nil {
				t.Fatal(err)
			}
		} else if !ok {
			t.Fatalf("chunk of type %T", c)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// damagedChannel is a closed channel whose log 1 holds events 0..29 in
// three put transactions of ten, damaged by damage.
func damagedChannel(t *testing.T, damage func(t *testing.T, cfg Config, log1 string)) Config {
	t.Helper()
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 30, 10)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, cfg, logPath(cfg, 1))
	return cfg
}

func mustRepair(t *testing.T, cfg Config, opts RepairOptions) *RepairReport {
	t.Helper()
	rep, err := Repair(cfg, opts)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	return rep
}

// requireRepaired opens the repaired channel, checks it holds exactly want,
// and that Verify finds nothing.
func requireRepaired(t *testing.T, cfg Config, rep *RepairReport, want []string) {
	t.Helper()
	if len(rep.Problems) != 0 {
		t.Fatalf("problems after the repair: %v", rep.Problems)
	}
	c := mustOpen(t, cfg)
	got := drain(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, got, want)
	vr, err := Verify(cfg)
	if err != nil || !vr.OK() {
		t.Fatalf("Verify after the repair: %v, %v", vr, err)
	}
}

func TestRepairEachKindOfDamage(t *testing.T) {
	garbage := []byte("\x00\x00\x01\x00half a frame, then the power went")
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, cfg Config, log1 string) (kind RepairKind, off, length int64, kept []byte)
		want   []string
	}{
		{
			name: "torn_tail",
			damage: func(t *testing.T, cfg Config, log1 string) (RepairKind, int64, int64, []byte) {
				fi, _ := os.Stat(log1)
				appendBytes(t, log1, garbage)
				return RepairCutTornTail, fi.Size(), int64(len(garbage)), garbage
			},
			want: bodies(0, 30),
		},
		{
			name: "damaged_record",
			damage: func(t *testing.T, cfg Config, log1 string) (RepairKind, int64, int64, []byte) {
				off, next := putOffset(t, log1, 15), putOffset(t, log1, 16)
				old, _ := os.ReadFile(log1)
				flipAt(t, log1, off+logfile.FrameHeaderSize+20)
				b, _ := os.ReadFile(log1)
				if bytes.Equal(old, b) {
					t.Fatal("no damage")
				}
				return RepairPadDamagedRegion, off, next - off, b[off:next]
			},
			// The damaged event alone is lost: its transaction's other
			// events are delivered.
			want: append(bodies(0, 15), bodies(16, 14)...),
		},
		{
			name: "damaged_header",
			damage: func(t *testing.T, cfg Config, log1 string) (RepairKind, int64, int64, []byte) {
				flipAt(t, log1, 1)
				b, _ := os.ReadFile(log1)
				return RepairRewriteHeader, 0, logfile.HeaderSize, b[:logfile.HeaderSize]
			},
			want: bodies(0, 30),
		},
		{
			name: "unfinished_create",
			damage: func(t *testing.T, cfg Config, log1 string) (RepairKind, int64, int64, []byte) {
				if err := os.WriteFile(logPath(cfg, 99), make([]byte, 7), 0o644); err != nil {
					t.Fatal(err)
				}
				return RepairRemoveEmptyLog, -1, 7, nil
			},
			want: bodies(0, 30),
		},
		{
			// Bytes inserted between two records: too few to pad.
			name: "region_too_short_to_pad",
			damage: func(t *testing.T, cfg Config, log1 string) (RepairKind, int64, int64, []byte) {
				a := logfile.Record{Type: logfile.RecordRollback, TxID: 1 << 40, WriteOrderID: 1 << 40}
				b := logfile.Record{Type: logfile.RecordRollback, TxID: 1<<40 + 1, WriteOrderID: 1<<40 + 1}
				writeLogFile(t, cfg.DataDirs[0], 50, a, []byte("ten bytes!"), b)
				return RepairCannotPad, logfile.HeaderSize + int64(a.EncodedSize()), 10, nil
			},
			want: bodies(0, 30),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kind RepairKind
			var off, length int64
			var kept []byte
			cfg := damagedChannel(t, func(t *testing.T, cfg Config, log1 string) {
				kind, off, length, kept = tc.damage(t, cfg, log1)
			})
			rep := mustRepair(t, cfg, RepairOptions{})
			if len(rep.Actions) != 1 {
				t.Fatalf("actions %+v, want one %s", rep.Actions, kind)
			}
			a := rep.Actions[0]
			if a.Kind != kind || a.Offset != off || a.Length != length || a.Detail == "" {
				t.Fatalf("action %+v, want %s at %d of %d bytes", a, kind, off, length)
			}
			if kept != nil {
				if b, err := os.ReadFile(a.KeptIn); err != nil || !bytes.Equal(b, kept) {
					t.Fatalf("%s holds %q, %v; want %q", a.KeptIn, b, err, kept)
				}
			} else if a.KeptIn != "" {
				t.Fatalf("KeptIn %q for %s", a.KeptIn, kind)
			}
			if rep.Rebuild == nil || rep.Rebuild.Events != len(tc.want) {
				t.Fatalf("rebuild %+v, want %d events", rep.Rebuild, len(tc.want))
			}
			requireRepaired(t, cfg, rep, tc.want)
			// Nothing is left to repair.
			if again := mustRepair(t, cfg, RepairOptions{}); len(again.Actions) != 0 || len(again.Problems) != 0 {
				t.Fatalf("second repair: %+v", again)
			}
		})
	}
}

// allDamage damages a channel every way Repair repairs.
func allDamage(t *testing.T, cfg Config, log1 string) {
	off := putOffset(t, log1, 15)
	flipAt(t, log1, off+logfile.FrameHeaderSize+20)
	flipAt(t, log1, 2)
	appendBytes(t, log1, []byte("torn"))
	if err := os.WriteFile(logPath(cfg, 99), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRepairDryRunChangesNothing(t *testing.T) {
	cfg := damagedChannel(t, allDamage)
	before := hashDirs(t, cfg)
	dry := mustRepair(t, cfg, RepairOptions{DryRun: true})
	requireUnchanged(t, before, hashDirs(t, cfg))
	var kinds []RepairKind
	for _, a := range dry.Actions {
		kinds = append(kinds, a.Kind)
	}
	want := []RepairKind{RepairRewriteHeader, RepairPadDamagedRegion, RepairCutTornTail, RepairRemoveEmptyLog}
	if !slices.Equal(kinds, want) {
		t.Fatalf("dry run actions %v, want %v", kinds, want)
	}
	if dry.Rebuild != nil || len(dry.Problems) == 0 {
		t.Fatalf("dry run: rebuild %+v, problems %v; want none and the damage as it is", dry.Rebuild, dry.Problems)
	}

	rep := mustRepair(t, cfg, RepairOptions{})
	if len(rep.Actions) != len(dry.Actions) {
		t.Fatalf("repair actions %+v, dry run %+v", rep.Actions, dry.Actions)
	}
	for i, a := range rep.Actions {
		if a != dry.Actions[i] {
			t.Errorf("action %d: %+v, the dry run said %+v", i, a, dry.Actions[i])
		}
	}
	requireRepaired(t, cfg, rep, append(bodies(0, 15), bodies(16, 14)...))
}

// TestRepairAgainAfterACrashBetweenCopyAndOverwrite: the first repair
// published the copy of the damaged region and died before overwriting it.
// Running it again reuses the copy and finishes.
func TestRepairAgainAfterACrashBetweenCopyAndOverwrite(t *testing.T) {
	var off, next int64
	cfg := damagedChannel(t, func(t *testing.T, cfg Config, log1 string) {
		off, next = putOffset(t, log1, 15), putOffset(t, log1, 16)
		flipAt(t, log1, off+logfile.FrameHeaderSize+20)
	})
	log1 := logPath(cfg, 1)
	b, _ := os.ReadFile(log1)
	region := bytes.Clone(b[off:next])
	copyPath := filepath.Join(cfg.DataDirs[0], logfile.CorruptName(1, off))
	if err := vfs.WriteFileAtomic(vfs.OS(), copyPath, region); err != nil {
		t.Fatal(err)
	}
	rep := mustRepair(t, cfg, RepairOptions{})
	if len(rep.Actions) != 1 || rep.Actions[0].KeptIn != copyPath {
		t.Fatalf("actions %+v, want the region kept in %s", rep.Actions, copyPath)
	}
	matches, _ := filepath.Glob(filepath.Join(cfg.DataDirs[0], "*.corrupt"))
	if len(matches) != 1 {
		t.Fatalf(".corrupt files %v, want only %s", matches, copyPath)
	}
	if kept, _ := os.ReadFile(copyPath); !bytes.Equal(kept, region) {
		t.Fatalf("the copy changed")
	}
	requireRepaired(t, cfg, rep, append(bodies(0, 15), bodies(16, 14)...))
}

// TestRepairDropsTheCheckpointsPointersToDamage: a checkpoint taken before
// the damage still queues the damaged event; after the repair the channel
// recovers (from its rebuilt checkpoint) every event but that one, with a
// backup rebuilt too.
func TestRepairDropsTheCheckpointsPointersToDamage(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.BackupCheckpointDir = filepath.Join(filepath.Dir(cfg.CheckpointDir), "backup")
	c := mustOpen(t, cfg)
	putN(t, c, 0, 40, 10) // transactions alternate between the two dirs
	wantEvents(t, takeN(t, c, 5, 5), bodies(0, 5))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var damaged string
	for _, d := range cfg.DataDirs {
		p := filepath.Join(d, logfile.LogName(1))
		if _, err := os.Stat(p); err != nil {
			p = filepath.Join(d, logfile.LogName(2))
		}
		s, _ := logfile.NewScanner(vfs.OS(), p, 0)
		for s.Next() {
			if r := s.Record(); r.Type == logfile.RecordPut && string(r.Body) == string(body(25)) {
				damaged = p
				flipAt(t, p, s.Offset()+logfile.FrameHeaderSize+20)
				break
			}
		}
		s.Close()
	}
	if damaged == "" {
		t.Fatal("event 25 not found")
	}
	if vr, err := Verify(cfg); err != nil || vr.OK() {
		t.Fatalf("Verify before the repair: %v, %v; want the damage", vr, err)
	}
	rep := mustRepair(t, cfg, RepairOptions{})
	if len(rep.Actions) != 1 || rep.Actions[0].Kind != RepairPadDamagedRegion || rep.Actions[0].File != damaged {
		t.Fatalf("actions %+v", rep.Actions)
	}
	requireRepaired(t, cfg, rep, append(bodies(5, 20), bodies(26, 14)...))
}

func TestOfflineToolsAreLockedOutWhileOpen(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Preallocate = -1 // the open channel's zero-fills would change its files under the hashes
	c := mustOpen(t, cfg)
	defer c.Close()
	before := hashDirs(t, cfg)
	for name, run := range map[string]func() error{
		"Verify":         func() error { _, err := Verify(cfg); return err },
		"Repair":         func() error { _, err := Repair(cfg, RepairOptions{}); return err },
		"Repair dry run": func() error { _, err := Repair(cfg, RepairOptions{DryRun: true}); return err },
		"Rebuild":        func() error { _, err := Rebuild(cfg, RebuildOptions{}); return err },
		"Rebuild dry run": func() error {
			_, err := Rebuild(cfg, RebuildOptions{DryRun: true})
			return err
		},
	} {
		if err := run(); !errors.Is(err, ErrLocked) {
			t.Errorf("%s while open: %v, want ErrLocked", name, err)
		}
	}
	requireUnchanged(t, before, hashDirs(t, cfg))
}

// TestEventsListsWhatTakesReturn: replay.ListEvents over a closed channel's
// files lists the events takes would return, in order.
func TestEventsListsWhatTakesReturn(t *testing.T) {
	cfg := testConfig(t, 2)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 50, 7)
	takeN(t, c, 9, 3)
	tx, _ := c.Begin() // a take in flight at the close: back at the head
	for range 4 {
		if _, _, err := tx.Take(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	full, _ := cfg.withDefaults()
	var listed []string
	l, err := replay.ListEvents(verifyOptions(full), "", 0, -1, func(e replay.Event) error {
		if e.Err != nil {
			return e.Err
		}
		if e.Headers["i"] != string(e.Body[len("event-"):]) {
			t.Errorf("event %d: headers %v, body %q", e.Index, e.Headers, e.Body)
		}
		listed = append(listed, string(e.Body))
		return nil
	})
	if err != nil || l.Queued != 41 {
		t.Fatalf("ListEvents: %d queued, %v", l.Queued, err)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	wantEvents(t, drain(t, c), listed)
	wantEvents(t, listed, bodies(9, 41))
}

// TestRepairGroups: a repair of a channel with consumer groups rebuilds
// every group, losing only the damaged event, and given no Config.Groups
// (as fcreplay runs it) it keeps the groups as they are.
func TestRepairGroups(t *testing.T) {
	cfg, want := closedGroupsChannel(t, true, GroupConfig{Name: "a"}, GroupConfig{Name: "b", Capacity: 500, WhenFull: DropOldest})
	damaged := string(body(42)) // put after the checkpoint
	found := false
	for _, dir := range cfg.DataDirs {
		names, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range names {
			path := filepath.Join(dir, e.Name())
			b, err := os.ReadFile(path)
			if _, isLog := logfile.ParseLogName(e.Name()); isLog && err == nil && bytes.Contains(b, []byte(damaged)) {
				i := bytes.Index(b, []byte(damaged))
				flipAt(t, path, int64(i+len(damaged)-1))
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no log holds %q", damaged)
	}
	rcfg := cfg
	rcfg.Groups, rcfg.Capacity, rcfg.TransactionCapacity = nil, 0, 0
	rep := mustRepair(t, rcfg, RepairOptions{})
	if len(rep.Problems) != 0 || len(rep.Actions) != 1 || rep.Actions[0].Kind != RepairPadDamagedRegion || rep.Rebuild == nil {
		t.Fatalf("repair: %+v", rep)
	}
	for name, evs := range want {
		want[name] = slices.DeleteFunc(evs, func(s string) bool { return s == damaged })
	}
	wantGroups(t, groupEvents(t, cfg), want)
	if names := rebuiltNames(rep.Rebuild.Groups); !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("rebuilt groups %q, want a and b", names)
	}
}

func rebuiltNames(gs []RebuildGroup) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Name)
	}
	return out
}
