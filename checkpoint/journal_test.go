package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
)

func TestJournalRoundTrip(t *testing.T) {
	for name, fsys := range map[string]vfs.FS{"os": vfs.OS(), "mem": vfs.NewMem()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if name == "mem" {
				dir = "/cp"
				if err := fsys.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			live := []JournalEntry{{Pointer: 1<<32 | 36, Group: 0, Count: 3}, {Pointer: 7, Group: 5, Count: 1}}
			j, err := CreateJournal(fsys, dir, 16, 0xfeed, live)
			if err != nil {
				t.Fatal(err)
			}
			if j.Mapped() != (name == "os") {
				t.Fatalf("Mapped %v on %s", j.Mapped(), name)
			}
			for i := range 20 { // wraps: 2 live + 20 > 16
				if err := j.Add(JournalEntry{Pointer: uint64(100 + i), Group: 1, Count: uint32(i + 1)}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadJournal(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			// The ring keeps the last 16 entries: after the two live ones,
			// 100..113 filled slots 2..15, and 114..119 overwrote slots
			// 0..5 (the live ones and 100..103).
			var want []JournalEntry
			for _, i := range slices.Concat([]int{14, 15, 16, 17, 18, 19}, []int{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}) {
				want = append(want, JournalEntry{Pointer: uint64(100 + i), Group: 1, Count: uint32(i + 1)})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("read %v\nwant %v", got, want)
			}
			if err := j.Erase(1, map[uint64]bool{105: true, 117: true}); err != nil {
				t.Fatal(err)
			}
			got, _ = ReadJournal(fsys, dir)
			if len(got) != 14 || slices.ContainsFunc(got, func(e JournalEntry) bool { return e.Pointer == 105 || e.Pointer == 117 }) {
				t.Fatalf("after Erase: %v", got)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			// A new journal (new salt) over the old file: none of the old
			// entries count.
			j, err = CreateJournal(fsys, dir, 16, 0xbeef, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if got, _ := ReadJournal(fsys, dir); len(got) != 0 {
				t.Fatalf("a new journal has %v", got)
			}
		})
	}
}

// TestJournalDamage: a damaged header means no journal; a damaged entry is
// skipped; a missing file is no journal.
func TestJournalDamage(t *testing.T) {
	dir := t.TempDir()
	if got, err := ReadJournal(vfs.OS(), dir); err != nil || got != nil {
		t.Fatalf("no journal: %v, %v", got, err)
	}
	j, err := CreateJournal(vfs.OS(), dir, 16, 1, []JournalEntry{{Pointer: 1, Count: 1}, {Pointer: 2, Count: 2}})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	p := filepath.Join(dir, JournalName)
	b, _ := os.ReadFile(p)
	b[journalHeaderLen+3] ^= 1 // the first entry's pointer
	os.WriteFile(p, b, 0o600)
	if got, _ := ReadJournal(vfs.OS(), dir); !slices.Equal(got, []JournalEntry{{Pointer: 2, Count: 2}}) {
		t.Fatalf("with a damaged entry: %v", got)
	}
	b[9] ^= 1 // the entry count, under the header CRC
	os.WriteFile(p, b, 0o600)
	if got, err := ReadJournal(vfs.OS(), dir); err != nil || got != nil {
		t.Fatalf("with a damaged header: %v, %v", got, err)
	}
}

// TestJournalMappingFault: a store through the mapping that faults (here:
// the file was truncated under it, as a full copy-on-write filesystem
// would refuse the page) is no crash: the journal goes on with WriteAt.
func TestJournalMappingFault(t *testing.T) {
	dir := t.TempDir()
	j, err := CreateJournal(vfs.OS(), dir, 1024, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if !j.Mapped() {
		t.Skip("no mapping here")
	}
	if err := os.Truncate(filepath.Join(dir, JournalName), 0); err != nil {
		t.Fatal(err)
	}
	if err := j.Add(JournalEntry{Pointer: 5, Count: 1}); err != nil {
		t.Fatalf("Add after the fault: %v", err)
	}
	if j.Mapped() || j.Fault() == nil {
		t.Fatalf("after a fault: mapped %v, fault %v", j.Mapped(), j.Fault())
	}
	if err := j.Add(JournalEntry{Pointer: 6, Count: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestJournalNewerVersionRefused: a newer release's journal is an error,
// not a journal to overwrite; CheckFormat says so too.
func TestJournalNewerVersionRefused(t *testing.T) {
	dir := t.TempDir()
	j, err := CreateJournal(vfs.OS(), dir, 16, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	p := filepath.Join(dir, JournalName)
	b, _ := os.ReadFile(p)
	b[5] = journalVersion + 1
	os.WriteFile(p, b, 0o600)
	requireNewerThan(t, func() error { _, err := ReadJournal(vfs.OS(), dir); return err }(), p, journalVersion+1, journalVersion)
}

// TestJournalEraseFailureSticks: once a sync of Erase failed, every later
// Erase fails: a later sync that succeeds says nothing of the lost pages.
func TestJournalEraseFailureSticks(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaultFS(mem)
	if err := ffs.MkdirAll("/cp", 0o700); err != nil {
		t.Fatal(err)
	}
	j, err := CreateJournal(ffs, "/cp", 16, 3, []JournalEntry{{Pointer: 1, Group: 1, Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ffs.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, Name: JournalName + "*", Times: 1})
	if err := j.Erase(1, map[uint64]bool{1: true}); err == nil {
		t.Fatal("Erase with a failing sync succeeded")
	}
	if err := j.Erase(1, map[uint64]bool{2: true}); err == nil {
		t.Fatal("Erase after a failed sync succeeded")
	}
}
