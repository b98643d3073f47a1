package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
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

// fullDisk makes ffs fail, with ENOSPC, every write to deliveries.tmp (half
// of it written) and every write past byte size of any file: a disk with
// no room left but the blocks its files hold.
func fullDisk(ffs *vfs.FaultFS, size int64) {
	ffs.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpWrite, vfs.OpWriteAt, vfs.OpTruncate}, Name: JournalName + ".tmp", Err: syscall.ENOSPC, Short: vfs.ShortHalf},
		vfs.Rule{Ops: []vfs.Op{vfs.OpWrite, vfs.OpWriteAt}, Off: size, Err: syscall.ENOSPC})
}

// TestCreateJournalOnAFullDisk: a journal file already there is rewritten
// in place, at its size (Entries says which), so that a full disk does not
// stop a reopen; without one, ENOSPC, and no deliveries.tmp left behind.
func TestCreateJournalOnAFullDisk(t *testing.T) {
	old := []JournalEntry{{Pointer: 1, Group: 1, Count: 2}, {Pointer: 9, Group: 1, Count: 4}}
	live := []JournalEntry{{Pointer: 1, Group: 1, Count: 3}, {Pointer: 2, Group: 2, Count: 1}}
	for _, tc := range []struct {
		name          string
		oldN, n, want int // want: the entries of the journal made; 0 = ENOSPC
	}{
		{"same_size", 16, 16, 16},
		{"wanted_larger", 16, 64, 16},
		{"wanted_smaller", 64, 16, 64},
		{"no_journal", 0, 16, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t, "/cp")
			ffs := vfs.NewFaultFS(mem)
			if tc.oldN > 0 {
				j, err := CreateJournal(ffs, "/cp", tc.oldN, 1, old)
				if err != nil {
					t.Fatal(err)
				}
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
			}
			fullDisk(ffs, journalSize(tc.oldN))
			j, err := CreateJournal(ffs, "/cp", tc.n, 2, live)
			if _, serr := mem.Stat("/cp/" + JournalName + ".tmp"); !errors.Is(serr, fs.ErrNotExist) {
				t.Errorf("deliveries.tmp left behind: %v", serr)
			}
			if tc.want == 0 {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("CreateJournal on a full disk without a journal: %v, want ENOSPC", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateJournal on a full disk (log: %v): %v", ffs.Log(), err)
			}
			defer j.Close()
			if j.Entries() != tc.want {
				t.Fatalf("Entries %d, want %d", j.Entries(), tc.want)
			}
			if err := j.Add(JournalEntry{Pointer: 3, Group: 1, Count: 1}); err != nil {
				t.Fatal(err)
			}
			got, err := ReadJournal(ffs, "/cp")
			if want := append(slices.Clone(live), JournalEntry{Pointer: 3, Group: 1, Count: 1}); err != nil || !slices.Equal(got, want) {
				t.Fatalf("journal holds %v, %v; want %v (no entry of the old one)", got, err, want)
			}
		})
	}
}

// TestCreateJournalInPlaceCrash: a power loss at any point of a rewrite in
// place, sectors torn, leaves entries of the old journal or of the new one,
// nothing else; once CreateJournal returned, none of the old; once an
// Erase returned, not the entries it erased.
func TestCreateJournalInPlaceCrash(t *testing.T) {
	old := []JournalEntry{{Pointer: 1, Group: 1, Count: 2}, {Pointer: 9, Group: 1, Count: 4}}
	live := []JournalEntry{{Pointer: 1, Group: 1, Count: 3}, {Pointer: 2, Group: 2, Count: 1}}
	mem := newMem(t, "/cp")
	j, err := CreateJournal(mem, "/cp", 64, 1, old)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Erase(1, nil); err != nil { // makes the old journal durable
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	type image struct {
		fs    *vfs.MemFS
		stage int // 0: during CreateJournal; 1: after it; 2: after Erase
	}
	var images []image
	stage := 0
	mem.SetHook(func(p vfs.CrashPoint) {
		for seed := range int64(4) {
			images = append(images, image{p.Clone(seed > 0, p.Seq*4+seed), stage})
		}
	})
	j, err = CreateJournal(mem, "/cp", 64, 2, live)
	if err != nil {
		t.Fatal(err)
	}
	stage = 1
	if err := j.Add(JournalEntry{Pointer: 5, Group: 2, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := j.Erase(1, map[uint64]bool{1: true}); err != nil {
		t.Fatal(err)
	}
	stage = 2
	images = append(images, image{mem.CrashClone(true, 99), stage})
	mem.SetHook(nil)
	j.Close()
	allowed := [3][]JournalEntry{
		slices.Concat(old, live),
		append(slices.Clone(live), JournalEntry{Pointer: 5, Group: 2, Count: 1}),
		{{Pointer: 2, Group: 2, Count: 1}, {Pointer: 5, Group: 2, Count: 1}},
	}
	for i, im := range images {
		got, err := ReadJournal(im.fs, "/cp")
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		for _, e := range got {
			if !slices.Contains(allowed[im.stage], e) {
				t.Fatalf("image %d (stage %d) holds %v: want only entries of %v", i, im.stage, got, allowed[im.stage])
			}
		}
	}
	t.Logf("%d crash images", len(images))
}

// TestCreateJournalReplacesAFileItCannotRewrite: a journal file of the
// length wanted that cannot be opened for writing is replaced (through
// deliveries.tmp), not an error.
func TestCreateJournalReplacesAFileItCannotRewrite(t *testing.T) {
	mem := newMem(t, "/cp")
	ffs := vfs.NewFaultFS(mem)
	j, err := CreateJournal(ffs, "/cp", 16, 1, []JournalEntry{{Pointer: 9, Group: 1, Count: 4}})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	ffs.Add(vfs.Rule{Ops: []vfs.Op{vfs.OpOpen}, Name: JournalName, Err: syscall.EACCES, Times: 1})
	live := []JournalEntry{{Pointer: 2, Group: 1, Count: 1}}
	if j, err = CreateJournal(ffs, "/cp", 16, 2, live); err != nil {
		t.Fatalf("CreateJournal over a file it cannot open: %v", err)
	}
	defer j.Close()
	if got, err := ReadJournal(ffs, "/cp"); err != nil || !slices.Equal(got, live) {
		t.Fatalf("journal holds %v, %v; want %v", got, err, live)
	}
}
