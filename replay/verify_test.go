package replay

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

const (
	vCkptDir   = "/ckpt"
	vBackupDir = "/backup"
)

// verifyChannel is a small channel built from the primitives the way the
// channel leaves its files: two data dirs, a checkpoint (and its backup) at
// write-order id W holding a wrapped ring and a take in flight, and records
// after W that commit that take, put more events and roll a put back.
//
//	file 1 (d0): put a0 a1 a2, commit | take a0, commit | after W: put c0 c1, commit
//	file 2 (d1): put b0 b1, commit    | after W: take a1 (in flight at W), commit,
//	                                    put r0, rollback, put d0, commit
//
// The channel holds a2 b0 b1 c0 c1 d0.
type verifyChannel struct {
	t     *testing.T
	mem   *vfs.MemFS
	fault *vfs.FaultFS // over mem; every file operation goes through it
	l     *logSet

	a, b, c, d []ptr
	commit1    ptr   // the commit record of a's transaction
	rollback   int64 // offset of the rollback record in file 2
	take4      int64 // offset of tx 4's take record in file 2
	st         *checkpoint.State
	ring       []ptr
}

func newVerifyChannel(t *testing.T) *verifyChannel {
	t.Helper()
	mem := vfs.NewMem()
	fault := vfs.NewFaultFS(mem)
	v := &verifyChannel{t: t, mem: mem, fault: fault, l: newLogSetOn(t, fault, "/data", 2)}
	l := v.l
	l.create(0, 1)
	l.create(1, 2)
	v.a = l.puts(1, 1, 3)
	v.commit1 = eventqueue.NewPointer(1, uint32(l.size(1)))
	l.commitPut(1, 1)
	v.b = l.putCommitted(2, 2, 2)
	l.takeCommitted(1, 3, v.a[0])

	v.ring = []ptr{v.a[2], v.b[0], v.b[1]}
	v.st = l.state(l.woid, v.ring)
	v.st.Capacity, v.st.Head = 8, 6 // the ring wraps
	v.st.MaxTxID = 4
	v.st.InflightTakes = []eventqueue.InflightTx{{Tx: 4, Pointers: []ptr{v.a[1]}}}

	v.take4 = l.size(2)
	l.takeCommitted(2, 4, v.a[1])
	v.c = l.putCommitted(1, 5, 2)
	l.put(2, 6)
	v.rollback = l.size(2)
	l.rollback(2, 6)
	v.d = l.putCommitted(2, 7, 1)
	for _, d := range []string{vCkptDir, vBackupDir} {
		if err := fault.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// setRing replaces the checkpoint's ring, keeping its refs consistent.
func (v *verifyChannel) setRing(ring ...ptr) {
	v.ring = ring
	v.st.Size = len(ring)
	refs := map[uint32]int{}
	for _, p := range ring {
		refs[p.FileID()]++
	}
	for i := range v.st.Logs {
		v.st.Logs[i].Refs = refs[v.st.Logs[i].FileID]
	}
}

// writeCheckpoint writes v.st with v.ring as the checkpoint and backs it up.
func (v *verifyChannel) writeCheckpoint() {
	v.t.Helper()
	writeCheckpoint(v.t, v.fault, vCkptDir, v.st, v.ring)
	if err := checkpoint.Backup(v.fault, vCkptDir, vBackupDir); err != nil {
		v.t.Fatal(err)
	}
}

// writeCheckpoint writes st with ring (from ring position st.Head) as the
// checkpoint in dir, as the channel does.
func writeCheckpoint(tb testingT, fsys vfs.FS, dir string, st *checkpoint.State, ring []ptr) {
	tb.Helper()
	ck, err := checkpoint.Create(fsys, dir, st.Capacity)
	if err != nil {
		tb.Fatal(err)
	}
	q, err := eventqueue.New(ck, st.Capacity, st.Head, 0, map[uint32]int{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range ring {
		if err := q.AddTail(p); err != nil {
			tb.Fatal(err)
		}
	}
	ck.Freeze()
	err = ck.Write(st)
	ck.Thaw(err == nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := ck.Close(); err != nil {
		tb.Fatal(err)
	}
}

func (v *verifyChannel) opts() VerifyOptions {
	return VerifyOptions{FS: v.fault, CheckpointDir: vCkptDir, BackupCheckpointDir: vBackupDir, DataDirs: v.l.dirs}
}

// verify runs Verify and checks that it changed nothing: no mutating
// operation, the same files with the same bytes.
func (v *verifyChannel) verify(opts VerifyOptions) *Report {
	t := v.t
	t.Helper()
	before, ops := hashTree(t, v.mem), v.fault.Ops()
	rep, err := Verify(opts)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if n := v.fault.Ops() - ops; n != 0 {
		t.Errorf("Verify made %d mutating operations: %v", n, v.fault.Log()[len(v.fault.Log())-int(n):])
	}
	if after := hashTree(t, v.mem); !maps.Equal(before, after) {
		t.Errorf("Verify changed the files:\n before %v\n after  %v", before, after)
	}
	return rep
}

// hashTree returns the SHA-256 of every file under the root of m, by path
// (directories map to the zero hash).
func hashTree(t *testing.T, m *vfs.MemFS) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := m.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := filepath.Join(dir, n)
			fi, err := m.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out[p] = [32]byte{}
				walk(p)
				continue
			}
			b, err := vfs.ReadFile(m, p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = sha256.Sum256(b)
		}
	}
	walk("/")
	return out
}

// edit helpers.

func (v *verifyChannel) readFile(path string) []byte {
	v.t.Helper()
	b, err := vfs.ReadFile(v.mem, path)
	if err != nil {
		v.t.Fatal(err)
	}
	return b
}

func (v *verifyChannel) writeFile(path string, b []byte) {
	v.t.Helper()
	f, err := v.mem.OpenReadWrite(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = v.mem.Create(path, 0o600)
	}
	if err != nil {
		v.t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		v.t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		v.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		v.t.Fatal(err)
	}
}

// writeOwner writes o as dir's channel.id.
func (v *verifyChannel) writeOwner(dir string, o owner.Owner) {
	v.t.Helper()
	if err := owner.Write(v.mem, dir, o); err != nil {
		v.t.Fatal(err)
	}
}

func (v *verifyChannel) flip(path string, off int64) {
	b := v.readFile(path)
	b[off] ^= 0x5A
	v.writeFile(path, b)
}

func (v *verifyChannel) remove(paths ...string) {
	for _, p := range paths {
		if err := v.mem.Remove(p); err != nil {
			v.t.Fatal(err)
		}
	}
}

// setSlot overwrites checkpoint slot i of the checkpoint file in dir.
func (v *verifyChannel) setSlot(dir string, i int, x uint64) {
	path := filepath.Join(dir, checkpoint.CheckpointName)
	b := v.readFile(path)
	binary.BigEndian.PutUint64(b[i*8:], x)
	v.writeFile(path, b)
}

func (v *verifyChannel) logState(id uint32) *checkpoint.LogState { return logState(v.st, id) }

func kinds(ps []Problem) []ProblemKind {
	var ks []ProblemKind
	for _, p := range ps {
		ks = append(ks, p.Kind)
	}
	slices.Sort(ks)
	return slices.Compact(ks)
}

// TestVerifyCleanChannel: a channel in good order verifies OK, and the
// report describes it: where recovery starts, what the channel holds, every
// log file with its records.
func TestVerifyCleanChannel(t *testing.T) {
	v := newVerifyChannel(t)
	v.writeCheckpoint()
	rep := v.verify(v.opts())
	if !rep.OK() || len(rep.Notes) != 0 {
		t.Fatalf("problems:\n%v\nnotes: %v", rep, rep.Notes)
	}
	if rep.RecoveredFrom != FromCheckpoint || rep.Queued != 6 || rep.FullReplayQueued != 6 {
		t.Errorf("recovered from %q, queued %d, full replay %d; want checkpoint, 6, 6", rep.RecoveredFrom, rep.Queued, rep.FullReplayQueued)
	}
	if rep.InflightTakes != 1 || rep.InflightPuts != 0 || rep.PointersChecked != 7 {
		t.Errorf("inflight takes %d, puts %d, pointers checked %d; want 1, 0, 7", rep.InflightTakes, rep.InflightPuts, rep.PointersChecked)
	}
	for _, c := range []CheckpointInfo{rep.Checkpoint, rep.Backup} {
		if c.State != StateComplete || c.Err != nil || c.WriteOrderID != v.st.WriteOrderID || c.Capacity != 8 || c.Head != 6 || c.Size != 3 || c.LogStates != 2 {
			t.Errorf("checkpoint info %+v", c)
		}
	}
	type counts struct {
		records, puts, takes, rollbacks, commits int64
		first, last                              uint64
	}
	want := []counts{
		{records: 9, puts: 5, takes: 1, commits: 3, first: 1, last: 14},
		{records: 9, puts: 4, takes: 1, rollbacks: 1, commits: 3, first: 5, last: 18},
	}
	if len(rep.Logs) != 2 {
		t.Fatalf("logs %+v", rep.Logs)
	}
	for i, l := range rep.Logs {
		got := counts{l.Records, l.Puts, l.Takes, l.Rollbacks, l.Commits, l.FirstWOID, l.LastWOID}
		if got != want[i] || l.ID != uint32(i+1) || l.Dir != v.l.dirs[i] || l.Size != l.End || l.Size != v.l.size(l.ID) || l.Tail != logfile.TailClean {
			t.Errorf("log %d: %+v, counts %+v, want %+v", i, l, got, want[i])
		}
	}

	// Without a backup dir the backup is "none" and not a problem.
	opts := v.opts()
	opts.BackupCheckpointDir = ""
	if rep := v.verify(opts); !rep.OK() || rep.Backup.State != StateNone {
		t.Errorf("no backup: %v, backup %+v", rep, rep.Backup)
	}
}

// TestVerifyFindsEachProblem: each kind of damage gives its problem kind
// (and, where it is about a place, its file and offset), recovery falls back
// as the channel's would, and Verify changes no byte.
func TestVerifyFindsEachProblem(t *testing.T) {
	ckpt := func(name string) string { return filepath.Join(vCkptDir, name) }
	bak := func(name string) string { return filepath.Join(vBackupDir, name) }
	for _, tc := range []struct {
		name   string
		edit   func(v *verifyChannel) // the checkpoint state, before it is written
		damage func(v *verifyChannel) // the files, after
		kinds  []ProblemKind
		from   string
		queued int // -1: the recovery fails
		// at, if set, names a problem that must be reported.
		at    func(v *verifyChannel) Problem
		notes []ProblemKind
	}{
		{
			name: "checkpoint_missing",
			damage: func(v *verifyChannel) {
				v.remove(ckpt("checkpoint"), ckpt("checkpoint.meta"), ckpt("inflightputs"), ckpt("inflighttakes"))
			},
			kinds: []ProblemKind{ProblemCheckpointMissing}, from: FromBackup, queued: 6,
		},
		{
			name: "checkpoint_and_backup_missing",
			damage: func(v *verifyChannel) {
				v.remove(ckpt("checkpoint"), ckpt("checkpoint.meta"), ckpt("inflightputs"), ckpt("inflighttakes"), bak("backupComplete"))
			},
			kinds: []ProblemKind{ProblemBackupMissing, ProblemCheckpointMissing}, from: FromFullReplay, queued: 6,
		},
		{
			name:   "checkpoint_incomplete",
			damage: func(v *verifyChannel) { v.setSlot(vCkptDir, 4, 0x494E434F4D504C54) },
			kinds:  []ProblemKind{ProblemCheckpointIncomplete}, from: FromBackup, queued: 6,
		},
		{
			name:   "checkpoint_meta_damaged",
			damage: func(v *verifyChannel) { v.flip(ckpt("checkpoint.meta"), 9) },
			kinds:  []ProblemKind{ProblemCheckpointCorrupt}, from: FromBackup, queued: 6,
		},
		{
			name:   "checkpoint_ring_slot_garbled",
			damage: func(v *verifyChannel) { v.setSlot(vCkptDir, checkpoint.HeaderSlots+7, 0xdead) },
			kinds:  []ProblemKind{ProblemCheckpointCorrupt}, from: FromBackup, queued: 6,
			// The ring starts at position 6: the checksum names its first slot.
			at: func(v *verifyChannel) Problem {
				return Problem{Kind: ProblemCheckpointCorrupt, File: ckpt("checkpoint"), Offset: (checkpoint.HeaderSlots + 6) * 8}
			},
		},
		{
			name:   "checkpoint_inflight_file_missing",
			damage: func(v *verifyChannel) { v.remove(ckpt("inflighttakes")) },
			kinds:  []ProblemKind{ProblemCheckpointCorrupt}, from: FromBackup, queued: 6,
		},
		{
			name:   "backup_incomplete",
			damage: func(v *verifyChannel) { v.setSlot(vBackupDir, 4, 0) },
			kinds:  []ProblemKind{ProblemBackupIncomplete}, from: FromCheckpoint, queued: 6,
		},
		{
			name:   "backup_damaged",
			damage: func(v *verifyChannel) { v.flip(bak("inflighttakes"), 21) },
			kinds:  []ProblemKind{ProblemBackupCorrupt}, from: FromCheckpoint, queued: 6,
		},
		{
			name:   "backup_unfinished",
			damage: func(v *verifyChannel) { v.remove(bak("backupComplete")) },
			kinds:  []ProblemKind{ProblemBackupMissing}, from: FromCheckpoint, queued: 6,
		},
		{
			name:   "log_header_damaged",
			damage: func(v *verifyChannel) { v.flip(v.l.path(1), 13) },
			kinds:  []ProblemKind{ProblemBadHeader}, from: FromCheckpoint, queued: 6,
			at: func(v *verifyChannel) Problem { return Problem{Kind: ProblemBadHeader, File: v.l.path(1), Offset: 0} },
		},
		{
			name: "log_header_names_another_file",
			damage: func(v *verifyChannel) {
				b := v.readFile(v.l.path(2))
				copy(b, logfile.AppendFileHeader(nil, 9))
				v.writeFile(v.l.path(2), b)
			},
			// The replays refuse the file; its pointers cannot be read, and
			// the bad header's cost counts them (no bad-pointer of their own).
			kinds: []ProblemKind{ProblemBadHeader, ProblemRecoveryFailed}, from: FromCheckpoint, queued: -1,
		},
		{
			name:   "log_record_damaged",
			damage: func(v *verifyChannel) { v.flip(v.l.path(2), v.rollback+logfile.FrameHeaderSize+3) },
			kinds:  []ProblemKind{ProblemCorruptRecord}, from: FromCheckpoint, queued: 6,
			at: func(v *verifyChannel) Problem {
				return Problem{Kind: ProblemCorruptRecord, File: v.l.path(2), Offset: v.rollback}
			},
		},
		{
			name:   "log_torn_tail",
			damage: func(v *verifyChannel) { v.writeFile(v.l.path(1), append(v.readFile(v.l.path(1)), 1, 2, 3, 4, 5)) },
			kinds:  []ProblemKind{ProblemTornTail}, from: FromCheckpoint, queued: 6,
			at: func(v *verifyChannel) Problem {
				return Problem{Kind: ProblemTornTail, File: v.l.path(1), Offset: v.l.size(1)}
			},
		},
		{
			name:   "log_unfinished_create",
			damage: func(v *verifyChannel) { v.writeFile(filepath.Join(v.l.dirs[1], logfile.LogName(9)), make([]byte, 7)) },
			kinds:  []ProblemKind{ProblemUnfinishedCreate}, from: FromCheckpoint, queued: 6,
		},
		{
			name: "log_in_two_dirs",
			damage: func(v *verifyChannel) {
				v.writeFile(filepath.Join(v.l.dirs[0], logfile.LogName(2)), v.readFile(v.l.path(2)))
			},
			kinds: []ProblemKind{ProblemDuplicateLog, ProblemRecoveryFailed}, from: FromCheckpoint, queued: -1,
		},
		{
			name: "log_write_order_backwards",
			damage: func(v *verifyChannel) {
				v.l.write(2, logfile.Record{Type: logfile.RecordRollback, TxID: 99, WriteOrderID: 3})
			},
			kinds: []ProblemKind{ProblemWriteOrder}, from: FromCheckpoint, queued: 6,
		},
		{
			name:  "ring_loses_an_event",
			edit:  func(v *verifyChannel) { v.setRing(v.b[0], v.b[1]) },
			kinds: []ProblemKind{ProblemCheckpointDisagrees}, from: FromCheckpoint, queued: 5,
		},
		{
			name:  "ring_resurrects_a_taken_event",
			edit:  func(v *verifyChannel) { v.setRing(v.a[0], v.a[2], v.b[0], v.b[1]) },
			kinds: []ProblemKind{ProblemCheckpointDisagrees}, from: FromCheckpoint, queued: 7,
		},
		{
			name:  "ring_reordered",
			edit:  func(v *verifyChannel) { v.setRing(v.b[0], v.a[2], v.b[1]) },
			kinds: nil, notes: []ProblemKind{NoteOrderDiffers}, from: FromCheckpoint, queued: 6,
		},
		{
			name:  "ring_points_between_records",
			edit:  func(v *verifyChannel) { v.setRing(v.a[2], eventqueue.NewPointer(1, 20), v.b[0], v.b[1]) },
			kinds: []ProblemKind{ProblemBadPointer, ProblemCheckpointDisagrees}, from: FromCheckpoint, queued: 7,
			at: func(v *verifyChannel) Problem { return Problem{Kind: ProblemBadPointer, File: v.l.path(1), Offset: 20} },
		},
		{
			name:  "ring_points_at_a_commit",
			edit:  func(v *verifyChannel) { v.setRing(v.a[2], v.commit1, v.b[0], v.b[1]) },
			kinds: []ProblemKind{ProblemBadPointer, ProblemCheckpointDisagrees}, from: FromCheckpoint, queued: 7,
			at: func(v *verifyChannel) Problem {
				return Problem{Kind: ProblemBadPointer, File: v.l.path(1), Offset: int64(v.commit1.Offset())}
			},
		},
		{
			name:  "ring_holds_an_event_twice",
			edit:  func(v *verifyChannel) { v.setRing(v.a[2], v.b[0], v.a[2], v.b[1]) },
			kinds: []ProblemKind{ProblemCheckpointDisagrees, ProblemDuplicatePointer}, from: FromCheckpoint, queued: 7,
		},
		{
			name: "ring_points_into_a_missing_log",
			edit: func(v *verifyChannel) {
				v.st.Logs = append(v.st.Logs, checkpoint.LogState{FileID: 7, Position: logfile.HeaderSize})
				v.setRing(v.a[2], v.b[0], v.b[1], eventqueue.NewPointer(7, logfile.HeaderSize))
			},
			// The channel would refuse to open: a file with queued events is gone.
			kinds: []ProblemKind{ProblemMissingLog, ProblemRecoveryFailed}, from: FromCheckpoint, queued: -1,
			at: func(v *verifyChannel) Problem {
				return Problem{Kind: ProblemMissingLog, File: logfile.LogName(7), Offset: -1}
			},
		},
		{
			name:  "refs_disagree_with_ring",
			edit:  func(v *verifyChannel) { v.logState(1).Refs = 3 },
			kinds: []ProblemKind{ProblemRefcountMismatch}, from: FromCheckpoint, queued: 6,
		},
		{
			name: "no_log_state_for_a_queued_file",
			edit: func(v *verifyChannel) {
				v.st.Logs = slices.DeleteFunc(v.st.Logs, func(l checkpoint.LogState) bool { return l.FileID == 2 })
			},
			kinds: []ProblemKind{ProblemMissingLogState}, from: FromCheckpoint, queued: 6,
		},
		{
			name: "data_dir_of_another_channel",
			damage: func(v *verifyChannel) {
				v.writeOwner(v.l.dirs[1], owner.Owner{ID: owner.NewID(), CheckpointDir: "/other/ckpt"})
			},
			kinds: []ProblemKind{ProblemForeignDataDir}, from: FromCheckpoint, queued: 6,
			at: func(v *verifyChannel) Problem {
				return Problem{Kind: ProblemForeignDataDir, File: filepath.Join(v.l.dirs[1], owner.FileName), Offset: -1}
			},
		},
		{
			name: "backup_of_another_channel",
			damage: func(v *verifyChannel) {
				v.writeOwner(vCkptDir, owner.Owner{ID: owner.NewID(), CheckpointDir: vCkptDir})
				v.writeOwner(vBackupDir, owner.Owner{ID: owner.NewID(), CheckpointDir: "/other/ckpt"})
			},
			kinds: []ProblemKind{ProblemForeignBackupDir}, from: FromCheckpoint, queued: 6,
			at: func(v *verifyChannel) Problem {
				return Problem{Kind: ProblemForeignBackupDir, File: filepath.Join(vBackupDir, owner.FileName), Offset: -1}
			},
		},
		{
			name: "channel_id_damaged",
			damage: func(v *verifyChannel) {
				v.writeFile(filepath.Join(v.l.dirs[0], owner.FileName), []byte("FCID\x00\x01"))
			},
			kinds: []ProblemKind{ProblemChannelIDCorrupt}, from: FromCheckpoint, queued: 6,
		},
		{
			name: "inflight_put_points_between_records",
			edit: func(v *verifyChannel) {
				v.st.InflightPuts = []eventqueue.InflightTx{{Tx: 8, Pointers: []ptr{eventqueue.NewPointer(2, 21)}}}
			},
			kinds: []ProblemKind{ProblemBadPointer}, from: FromCheckpoint, queued: 6,
			at: func(v *verifyChannel) Problem { return Problem{Kind: ProblemBadPointer, File: v.l.path(2), Offset: 21} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifyChannel(t)
			if tc.edit != nil {
				tc.edit(v)
			}
			v.writeCheckpoint()
			if tc.damage != nil {
				tc.damage(v)
			}
			rep := v.verify(v.opts())
			if got := kinds(rep.Problems); !slices.Equal(got, tc.kinds) {
				t.Errorf("problem kinds %q, want %q; problems:\n%v", got, tc.kinds, rep)
			}
			if got := kinds(rep.Notes); !slices.Equal(got, tc.notes) {
				t.Errorf("note kinds %q, want %q", got, tc.notes)
			}
			if rep.RecoveredFrom != tc.from || rep.Queued != tc.queued {
				t.Errorf("recovered from %q with %d queued, want %q with %d", rep.RecoveredFrom, rep.Queued, tc.from, tc.queued)
			}
			if rep.OK() != (len(tc.kinds) == 0) {
				t.Errorf("OK() = %v with problems %v", rep.OK(), rep.Problems)
			}
			if tc.at != nil {
				want := tc.at(v)
				if !slices.ContainsFunc(rep.Problems, func(p Problem) bool {
					return p.Kind == want.Kind && p.File == want.File && p.Offset == want.Offset && p.Detail != ""
				}) {
					t.Errorf("no %s problem for %s at %d in:\n%v", want.Kind, want.File, want.Offset, rep)
				}
			}
		})
	}
}

// TestVerifyDescribesTheDisagreement: the events only one side holds are
// listed, and named in the problem.
func TestVerifyDescribesTheDisagreement(t *testing.T) {
	v := newVerifyChannel(t)
	v.setRing(v.a[0], v.b[0], v.b[1]) // a0 was taken, a2 was not
	v.writeCheckpoint()
	rep := v.verify(v.opts())
	d := rep.Diff
	if !slices.Equal(d.OnlyRecovered, []ptr{v.a[0]}) || !slices.Equal(d.OnlyReplayed, []ptr{v.a[2]}) || d.Reordered {
		t.Fatalf("diff %+v, want only recovered %v, only replayed %v", d, v.a[0], v.a[2])
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Detail, v.a[0].String()) || !strings.Contains(rep.Problems[0].Detail, v.a[2].String()) {
		t.Errorf("problem does not name the events: %v", rep.Problems)
	}
}

// TestVerifyBoundsProblemsPerKind: thousands of bad pointers are listed up
// to a bound, then counted.
func TestVerifyBoundsProblemsPerKind(t *testing.T) {
	const bad = maxProblemsPerKind + 50
	v := newVerifyChannel(t)
	ring := []ptr{v.a[2], v.b[0], v.b[1]}
	for i := range bad {
		ring = append(ring, eventqueue.NewPointer(1, uint32(1000+i))) // past its end
	}
	v.st.Capacity = 1024
	v.setRing(ring...)
	v.writeCheckpoint()
	rep := v.verify(v.opts())
	var listed int
	var summary *Problem
	for i, p := range rep.Problems {
		if p.Kind == ProblemBadPointer {
			if p.Offset < 0 {
				summary = &rep.Problems[i]
			} else {
				listed++
			}
		}
	}
	if listed != maxProblemsPerKind || summary == nil || !strings.HasPrefix(summary.Detail, "50 more") {
		t.Errorf("%d bad pointers listed, summary %v", listed, summary)
	}
}

// TestVerifyErrors: bad options and I/O errors are errors, not problems.
func TestVerifyErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(v *verifyChannel, o *VerifyOptions)
		want error
	}{
		{"no_fs", func(v *verifyChannel, o *VerifyOptions) { o.FS = nil }, nil},
		{"no_checkpoint_dir", func(v *verifyChannel, o *VerifyOptions) { o.CheckpointDir = "" }, nil},
		{"no_data_dirs", func(v *verifyChannel, o *VerifyOptions) { o.DataDirs = nil }, nil},
		{"backup_is_checkpoint", func(v *verifyChannel, o *VerifyOptions) { o.BackupCheckpointDir = vCkptDir + "/" }, nil},
		{"log_read_fails", func(v *verifyChannel, o *VerifyOptions) {
			v.fault.Add(vfs.Rule{Ops: []vfs.Op{"readat"}, Name: logfile.LogName(2), Off: 100})
		}, vfs.ErrInjected},
		{"data_dir_list_fails", func(v *verifyChannel, o *VerifyOptions) {
			v.fault.Add(vfs.Rule{Ops: []vfs.Op{"list"}, Name: "d1"})
		}, vfs.ErrInjected},
		{"checkpoint_read_fails", func(v *verifyChannel, o *VerifyOptions) {
			v.fault.Add(vfs.Rule{Ops: []vfs.Op{"readat"}, Name: checkpoint.MetaName})
		}, vfs.ErrInjected},
		{"replay_read_fails", func(v *verifyChannel, o *VerifyOptions) {
			// The first scan passes; a replay's read fails.
			v.fault.Add(vfs.Rule{Ops: []vfs.Op{"readat"}, Name: logfile.LogName(1), Skip: 4})
		}, vfs.ErrInjected},
		{"pointer_read_fails", func(v *verifyChannel, o *VerifyOptions) {
			// Only the read of a queued event starts at its offset.
			o.FS = failReadAt{o.FS, v.l.path(1), int64(v.a[2].Offset())}
		}, errReadAt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifyChannel(t)
			v.writeCheckpoint()
			o := v.opts()
			tc.edit(v, &o)
			rep, err := Verify(o)
			if err == nil || rep != nil {
				t.Fatalf("Verify = %v, %v; want an error", rep, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

var errReadAt = errors.New("read failed")

// failReadAt fails every ReadAt of the file path that starts at off.
type failReadAt struct {
	vfs.FS
	path string
	off  int64
}

func (f failReadAt) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil || name != f.path {
		return file, err
	}
	return failReadAtFile{file, f.off}, nil
}

type failReadAtFile struct {
	vfs.File
	off int64
}

func (f failReadAtFile) ReadAt(p []byte, off int64) (int, error) {
	if off == f.off {
		return 0, &fs.PathError{Op: "readat", Path: f.Name(), Err: errReadAt}
	}
	return f.File.ReadAt(p, off)
}

// BenchmarkVerify measures Verify of a channel holding 100k events in 100
// log files on a MemFS:
//
//	go test -run - -bench Verify -benchmem ./replay/
func BenchmarkVerify(b *testing.B) {
	const files, perFile = 100, 1000
	mem := vfs.NewMem()
	l := newLogSetOn(b, mem, "/data", 2)
	var ring []ptr
	tx := uint64(0)
	for id := uint32(1); id <= files; id++ {
		l.create(int(id)%2, id)
		for range perFile / 100 {
			tx++
			ring = append(ring, l.putCommitted(id, tx, 100)...)
		}
	}
	st := l.state(l.woid, ring)
	st.Capacity, st.MaxTxID = len(ring), tx
	if err := mem.MkdirAll(vCkptDir, 0o755); err != nil {
		b.Fatal(err)
	}
	writeCheckpoint(b, mem, vCkptDir, st, ring)
	b.ResetTimer()
	for range b.N {
		rep, err := Verify(VerifyOptions{FS: mem, CheckpointDir: vCkptDir, DataDirs: l.dirs})
		if err != nil || !rep.OK() || rep.Queued != len(ring) {
			b.Fatalf("Verify: %v, %v", rep, err)
		}
	}
}
