package checkpoint

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

// This test pins down an fsync no other test needs: it fails if the fsync
// it names is removed (found by a mutation run over every Sync and SyncDir
// of the non-test code; see issue 3).

// A Backup that fails after it started replacing files must stay incomplete
// after a power loss: the channel goes on deleting the log files the old
// backup still points into. Fails without the SyncDir right after Backup
// removes backupComplete: the failed copy never reaches the next SyncDir, so
// the old marker comes back.
func TestFailedBackupStaysIncompleteAfterPowerLoss(t *testing.T) {
	mem := newMem(t, "/cp", "/backup")
	fsys := vfs.NewFaultFS(mem)
	c := mustCreate(t, fsys, "/cp", 100)
	commit(t, c, &State{Meta: Meta{WriteOrderID: 1, Capacity: 100}})
	if err := Backup(fsys, "/cp", "/backup"); err != nil {
		t.Fatal(err)
	}
	commit(t, c, &State{Meta: Meta{WriteOrderID: 2, Capacity: 100}})
	fsys.Add(vfs.Rule{Ops: []vfs.Op{"create"}, Name: MetaName + tmpSuffix}) // the second copy
	if err := Backup(fsys, "/cp", "/backup"); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Backup = %v, want the injected fault", err)
	}
	if HasBackup(mem.CrashClone(false, 0), "/backup") {
		t.Fatal("HasBackup true after a failed Backup and a power loss")
	}
}

// The tests below pin down fsyncs that order directory changes: a MemFS
// makes every change SyncDir covers durable at once, so a crash test cannot
// tell one SyncDir from two, but a real filesystem may persist unsynced
// entries in any order. Each checks, in the operations a call makes, that
// a SyncDir of the directory separates the changes that must not become
// durable out of order.

// recordOps returns the mutating operations f makes on mem, as "op path".
func recordOps(t *testing.T, mem *vfs.MemFS, f func() error) []string {
	t.Helper()
	var ops []string
	mem.SetHook(func(p vfs.CrashPoint) { ops = append(ops, p.Op+" "+p.Path) })
	err := f()
	mem.SetHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// requireBarrier fails t unless ops holds barrier after the last operation
// matching before and ahead of the first one matching after (both must
// exist).
func requireBarrier(t *testing.T, ops []string, before, after func(string) bool, barrier string) {
	t.Helper()
	last, first := -1, -1
	for i, op := range ops {
		if before(op) {
			last = i
		}
		if after(op) && first < 0 {
			first = i
		}
	}
	if last < 0 || first < 0 || last > first || !slices.Contains(ops[last:first], barrier) {
		t.Fatalf("no %q between operations %d and %d of %q", barrier, last, first, ops)
	}
}

func topLevelFile(dir string) func(string) bool {
	return func(op string) bool {
		_, p, _ := strings.Cut(op, " ")
		return filepath.Dir(p) == dir && slices.Contains(checkpointFiles[:], filepath.Base(p))
	}
}

func groupsEntry(dir string) func(string) bool {
	return func(op string) bool {
		_, p, _ := strings.Cut(op, " ")
		return filepath.Dir(p) == dir && strings.HasPrefix(filepath.Base(p), "group")
	}
}

// Remove makes the top level's removal durable before it removes the
// catalog: else a crash could leave the top-level checkpoint without it, an
// older release's one-group channel.
func TestRemoveSyncsTopLevelBeforeCatalog(t *testing.T) {
	mem := newMem(t, "/cp")
	newSet(t, mem, "/cp", 10, 1, 4).write(3)
	ops := recordOps(t, mem, func() error { return Remove(mem, "/cp") })
	requireBarrier(t, ops, topLevelFile("/cp"), groupsEntry("/cp"), "syncdir /cp")
}

// RestoreBackup makes the catalog and the group dirs durable before the
// top-level checkpoint that needs them appears.
func TestRestoreSyncsGroupsBeforeTopLevel(t *testing.T) {
	mem := newMem(t, "/cp", "/backup")
	newSet(t, mem, "/cp", 10, 1, 4).write(3)
	if err := Backup(mem, "/cp", "/backup"); err != nil {
		t.Fatal(err)
	}
	ops := recordOps(t, mem, func() error { return RestoreBackup(mem, "/backup", "/cp") })
	isRename := func(f func(string) bool) func(string) bool {
		return func(op string) bool { return strings.HasPrefix(op, "rename ") && f(op) }
	}
	requireBarrier(t, ops, groupsEntry("/cp"), isRename(topLevelFile("/cp")), "syncdir /cp")
}

// Backup makes every copy, new group dir and removal durable before it
// publishes backupComplete.
func TestBackupSyncsCopiesBeforeMarker(t *testing.T) {
	mem := newMem(t, "/cp", "/backup")
	s := newSet(t, mem, "/cp", 10, 1, 4)
	s.write(3)
	if err := Backup(mem, "/cp", "/backup"); err != nil {
		t.Fatal(err)
	}
	s.removeGroup(1)
	s.write(4)
	ops := recordOps(t, mem, func() error { return Backup(mem, "/cp", "/backup") })
	inBackup := func(op string) bool {
		kind, p, _ := strings.Cut(op, " ")
		return (kind == "rename" || kind == "remove" || kind == "mkdir") && filepath.Dir(p) == "/backup" &&
			!strings.HasPrefix(filepath.Base(p), BackupCompleteName)
	}
	marker := func(op string) bool { return op == "create "+path("/backup", BackupCompleteName+tmpSuffix) }
	requireBarrier(t, ops, inBackup, marker, "syncdir /backup")
}
