package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var _ FS = (*MemFS)(nil)

// memT wraps a MemFS so test steps read as one line each and fail the test
// on any error.
type memT struct {
	t *testing.T
	m *MemFS
}

func (h memT) ok(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h memT) mkdir(dir string)       { h.t.Helper(); h.ok(h.m.MkdirAll(dir, 0o755)) }
func (h memT) syncDir(dir string)     { h.t.Helper(); h.ok(h.m.SyncDir(dir)) }
func (h memT) remove(name string)     { h.t.Helper(); h.ok(h.m.Remove(name)) }
func (h memT) rename(old, new string) { h.t.Helper(); h.ok(h.m.Rename(old, new)) }

// create creates name holding data; sync also fsyncs it.
func (h memT) create(name, data string, sync bool) File {
	h.t.Helper()
	f, err := h.m.Create(name, 0o600)
	h.ok(err)
	_, err = f.Write([]byte(data))
	h.ok(err)
	if sync {
		h.ok(f.Sync())
	}
	return f
}

// durable creates name holding data and makes it and its entry durable.
func (h memT) durable(name, data string) {
	h.t.Helper()
	h.ok(h.create(name, data, true).Close())
	h.syncDir(dirOf(name))
}

func (h memT) openRW(name string) File {
	h.t.Helper()
	f, err := h.m.OpenReadWrite(name)
	h.ok(err)
	return f
}

func dirOf(name string) string {
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		return name[:i]
	}
	return "/"
}

// tree returns every path of m: directories as "dir/" -> "", files as
// contents.
func tree(t *testing.T, m *MemFS) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := m.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := strings.TrimSuffix(dir, "/") + "/" + n
			fi, err := m.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			b, err := ReadFile(m, p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = string(b)
		}
	}
	walk("/")
	return out
}

// TestMemCrashKeepsOnlyDurable runs each case on a MemFS holding the durable
// directory /d, then checks the whole tree of a crash clone.
func TestMemCrashKeepsOnlyDurable(t *testing.T) {
	cases := []struct {
		name string
		do   func(h memT)
		want map[string]string
	}{
		{"created_synced_file_without_syncdir_disappears", func(h memT) {
			h.create("/d/f", "data", true)
		}, map[string]string{}},
		{"created_file_with_syncdir_but_no_sync_is_empty", func(h memT) {
			h.create("/d/f", "data", false)
			h.syncDir("/d")
		}, map[string]string{"/d/f": ""}},
		{"created_synced_file_with_syncdir_survives", func(h memT) {
			h.durable("/d/f", "data")
		}, map[string]string{"/d/f": "data"}},
		{"unsynced_append_is_lost", func(h memT) {
			h.durable("/d/f", "old")
			f := h.openRW("/d/f")
			h.ok(f.Truncate(0))
			_, err := f.WriteAt([]byte("old+new"), 0)
			h.ok(err)
		}, map[string]string{"/d/f": "old"}},
		{"unsynced_overwrite_is_lost", func(h memT) {
			h.durable("/d/f", "aaaa")
			_, err := h.openRW("/d/f").WriteAt([]byte("bb"), 1)
			h.ok(err)
		}, map[string]string{"/d/f": "aaaa"}},
		{"synced_overwrite_survives", func(h memT) {
			h.durable("/d/f", "aaaa")
			f := h.openRW("/d/f")
			_, err := f.WriteAt([]byte("bb"), 1)
			h.ok(err)
			h.ok(f.Sync())
		}, map[string]string{"/d/f": "abba"}},
		{"only_bytes_synced_before_a_later_write_survive", func(h memT) {
			f := h.create("/d/f", "one", true)
			h.syncDir("/d")
			_, err := f.Write([]byte("two"))
			h.ok(err)
		}, map[string]string{"/d/f": "one"}},
		{"sync_through_read_only_handle_is_durable", func(h memT) {
			h.durable("/d/f", "old")
			_, err := h.openRW("/d/f").WriteAt([]byte("new"), 0)
			h.ok(err)
			r, err := h.m.Open("/d/f")
			h.ok(err)
			h.ok(r.Sync())
		}, map[string]string{"/d/f": "new"}},
		{"unsynced_truncate_is_lost", func(h memT) {
			h.durable("/d/f", "abcdef")
			h.ok(h.openRW("/d/f").Truncate(2))
		}, map[string]string{"/d/f": "abcdef"}},
		{"synced_truncate_survives", func(h memT) {
			h.durable("/d/f", "abcdef")
			f := h.openRW("/d/f")
			h.ok(f.Truncate(2))
			h.ok(f.Sync())
		}, map[string]string{"/d/f": "ab"}},
		{"synced_shrink_then_grow_reads_zeros", func(h memT) {
			h.durable("/d/f", "abcdef")
			f := h.openRW("/d/f")
			h.ok(f.Truncate(2))
			h.ok(f.Truncate(4))
			_, err := f.WriteAt([]byte("Z"), 5)
			h.ok(err)
			h.ok(f.Sync())
		}, map[string]string{"/d/f": "ab\x00\x00\x00Z"}},
		{"rename_without_syncdir_reverts_to_old_names", func(h memT) {
			h.durable("/d/a", "A")
			h.durable("/d/b", "B")
			h.rename("/d/a", "/d/b")
		}, map[string]string{"/d/a": "A", "/d/b": "B"}},
		{"rename_with_syncdir_survives", func(h memT) {
			h.durable("/d/a", "A")
			h.durable("/d/b", "B")
			h.rename("/d/a", "/d/b")
			h.syncDir("/d")
		}, map[string]string{"/d/b": "A"}},
		// A recycled log file: renamed into the pool, then overwritten
		// and synced before its next rename. The data follows the file
		// (one inode), the names only a dir fsync.
		{"recycle_overwrite_synced_rename_not_synced_keeps_the_old_name", func(h memT) {
			h.durable("/d/log-1", "old header, old records")
			h.rename("/d/log-1", "/d/recycle-1")
			h.syncDir("/d")
			f := h.openRW("/d/recycle-1")
			_, err := f.WriteAt([]byte("NEW HEADER"), 0)
			h.ok(err)
			h.ok(f.Sync())
			h.rename("/d/recycle-1", "/d/log-2")
		}, map[string]string{"/d/recycle-1": "NEW HEADER, old records"}},
		{"recycle_rename_synced_before_the_overwrite_is_keeps_the_old_bytes", func(h memT) {
			h.durable("/d/recycle-1", "old header, old records")
			f := h.openRW("/d/recycle-1")
			_, err := f.WriteAt([]byte("NEW HEADER"), 0)
			h.ok(err)
			h.rename("/d/recycle-1", "/d/log-2")
			h.syncDir("/d")
		}, map[string]string{"/d/log-2": "old header, old records"}},
		{"write_file_atomic_survives", func(h memT) {
			h.durable("/d/meta", "old")
			h.ok(WriteFileAtomic(h.m, "/d/meta", []byte("new")))
		}, map[string]string{"/d/meta": "new"}},
		{"cross_dir_rename_synced_only_at_target_leaves_both", func(h memT) {
			h.mkdir("/e")
			h.syncDir("/")
			h.durable("/d/a", "A")
			h.rename("/d/a", "/e/a")
			h.syncDir("/e")
		}, map[string]string{"/e/": "", "/d/a": "A", "/e/a": "A"}},
		{"remove_without_syncdir_resurrects_synced_contents", func(h memT) {
			h.durable("/d/f", "synced")
			_, err := h.openRW("/d/f").WriteAt([]byte("lost"), 0)
			h.ok(err)
			h.remove("/d/f")
		}, map[string]string{"/d/f": "synced"}},
		{"remove_with_syncdir_is_gone", func(h memT) {
			h.durable("/d/f", "synced")
			h.remove("/d/f")
			h.syncDir("/d")
		}, map[string]string{}},
		{"mkdir_without_parent_syncdir_disappears", func(h memT) {
			h.mkdir("/x/y")
			h.syncDir("/x")
			h.durable("/x/y/f", "data")
		}, map[string]string{}},
		{"mkdir_with_every_parent_synced_survives", func(h memT) {
			h.mkdir("/x/y")
			h.syncDir("/")
			h.syncDir("/x")
			h.durable("/x/y/f", "data")
		}, map[string]string{"/x/": "", "/x/y/": "", "/x/y/f": "data"}},
		{"removed_dir_without_syncdir_resurrects", func(h memT) {
			h.remove("/d")
		}, map[string]string{}},
		{"lock_file_is_a_create", func(h memT) {
			l, err := h.m.Lock("/d/lock", 0o600)
			h.ok(err)
			defer l.Close()
		}, map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := memT{t, NewMem()}
			h.mkdir("/d")
			h.syncDir("/")
			tc.do(h)
			want := map[string]string{"/d/": ""}
			maps.Copy(want, tc.want)
			if got := tree(t, h.m.CrashClone(false, 0)); !maps.Equal(got, want) {
				t.Fatalf("after crash:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestMemCrashCloneIsIndependent: the crashed process keeps using the old
// instance; the clone neither sees that nor leaks into it, and holds no locks.
func TestMemCrashCloneIsIndependent(t *testing.T) {
	h := memT{t, NewMem()}
	h.mkdir("/d")
	h.syncDir("/")
	f := h.create("/d/f", "one", true)
	h.syncDir("/d")
	l, err := h.m.Lock("/d/lock", 0o600)
	h.ok(err)
	h.m.SetFreeSpace(123)

	c := h.m.CrashClone(false, 0)
	_, err = f.Write([]byte("two"))
	h.ok(err)
	h.ok(f.Sync())
	h.durable("/d/g", "g")
	if got := tree(t, c); !maps.Equal(got, map[string]string{"/d/": "", "/d/f": "one"}) {
		t.Fatalf("clone saw writes to the old instance: %q", got)
	}
	cf, err := c.OpenReadWrite("/d/f")
	h.ok(err)
	_, err = cf.WriteAt([]byte("XXX"), 0)
	h.ok(err)
	if b, _ := ReadFile(h.m, "/d/f"); string(b) != "onetwo" {
		t.Fatalf("old instance sees %q, want onetwo", b)
	}
	cl, err := c.Lock("/d/lock", 0o600)
	if err != nil {
		t.Fatalf("lock carried over to the clone: %v", err)
	}
	h.ok(cl.Close())
	h.ok(l.Close())
	if free, err := c.FreeSpace("/d"); err != nil || free != 123 {
		t.Fatalf("clone FreeSpace = %d, %v; want 123", free, err)
	}
	if c.Ops() != 2 {
		t.Fatalf("clone Ops = %d, want 2 (its own write and lock file create)", c.Ops())
	}
}

// TestMemCrashTear checks the documented tear model over many seeds: the
// synced bytes, or the sector overwritten since (all of it); then a prefix of
// the unsynced tail whose last at most maxTornBytes bytes may be damaged;
// deterministic per seed.
func TestMemCrashTear(t *testing.T) {
	synced := bytes.Repeat([]byte("s"), 100)
	overwritten := append([]byte("SS"), synced[2:]...)
	tail := make([]byte, 6000)
	for i := range tail {
		tail[i] = byte('a' + i%26)
	}
	h := memT{t, NewMem()}
	h.durable("/f", string(synced))
	h.durable("/clean", "all synced")
	f := h.openRW("/f")
	_, err := f.WriteAt(tail, int64(len(synced)))
	h.ok(err)
	_, err = f.WriteAt([]byte("SS"), 0) // unsynced overwrite below the synced length
	h.ok(err)

	if b, _ := ReadFile(h.m.CrashClone(false, 1), "/f"); !bytes.Equal(b, synced) {
		t.Fatalf("tear=false kept %d bytes, want the %d synced", len(b), len(synced))
	}
	var sawIntact, sawZeroed, sawGarbage, sawOld, sawNew bool
	for seed := range int64(300) {
		c := h.m.CrashClone(true, seed)
		b, err := ReadFile(c, "/f")
		h.ok(err)
		if again, _ := ReadFile(h.m.CrashClone(true, seed), "/f"); !bytes.Equal(again, b) {
			t.Fatalf("seed %d: two clones differ", seed)
		}
		if clean, _ := ReadFile(c, "/clean"); string(clean) != "all synced" {
			t.Fatalf("seed %d: a fully synced file changed: %q", seed, clean)
		}
		switch {
		case len(b) < len(synced):
			t.Fatalf("seed %d: %d bytes, shorter than the synced %d", seed, len(b), len(synced))
		case bytes.Equal(b[:len(synced)], synced):
			sawOld = true
		case bytes.Equal(b[:len(synced)], overwritten):
			sawNew = true
		default:
			t.Fatalf("seed %d: synced bytes changed to %q", seed, b[:len(synced)])
		}
		kept := b[len(synced):]
		k := len(kept)
		if k > len(tail) {
			t.Fatalf("seed %d: kept %d unsynced bytes of %d", seed, k, len(tail))
		}
		intactTo := max(0, k-maxTornBytes)
		if !bytes.Equal(kept[:intactTo], tail[:intactTo]) {
			t.Fatalf("seed %d: damage before the last %d bytes", seed, maxTornBytes)
		}
		switch {
		case bytes.Equal(kept, tail[:k]):
			sawIntact = true
		case kept[k-1] == 0:
			sawZeroed = true
		default:
			sawGarbage = true
		}
	}
	if !sawIntact || !sawZeroed || !sawGarbage {
		t.Fatalf("tear modes not all seen: intact=%v zeroed=%v garbage=%v", sawIntact, sawZeroed, sawGarbage)
	}
	if !sawOld || !sawNew {
		t.Fatalf("overwritten sector not seen both ways: old=%v new=%v", sawOld, sawNew)
	}
}

// TestMemCrashTearSectors checks the tearing of in-place overwrites over many
// seeds: below the durable length, every aligned 512-byte sector holds
// either its durable or its live bytes, never a mix; sectors are chosen
// independently (some clone mixes old and new sectors); beyond min(S, L) the
// durable bytes stay.
func TestMemCrashTearSectors(t *testing.T) {
	fill := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	writeAt := func(h memT, f File, s string, off int64) { _, err := f.WriteAt([]byte(s), off); h.ok(err) }
	cases := []struct {
		name  string
		do    func(h memT, f File) // on /f, durable since setup
		durab string               // its durable contents, made durable before do
		mixed bool                 // some clone must mix old and new sectors
		torn  bool                 // some clone must differ from the durable contents
	}{
		{"overwrite_inside_one_sector", func(h memT, f File) {
			writeAt(h, f, fill('n', 10), 10)
		}, fill('o', 1024), false, true},
		{"overwrite_across_unaligned_sectors", func(h memT, f File) {
			writeAt(h, f, fill('n', 2800), 100)
		}, fill('o', 3000), true, true},
		{"two_overwrites_far_apart", func(h memT, f File) {
			writeAt(h, f, fill('n', 10), 0)
			writeAt(h, f, fill('n', 10), 2000)
		}, fill('o', 2048), true, true},
		{"overwrite_and_append", func(h memT, f File) {
			writeAt(h, f, fill('n', 1000), 0)
			writeAt(h, f, fill('a', 1000), 1000)
		}, fill('o', 1000), true, true},
		{"more_sectors_than_one_draw_covers", func(h memT, f File) {
			writeAt(h, f, fill('n', 40<<10), 0)
		}, fill('o', 40<<10), true, true},
		{"truncate_shorter_then_overwrite", func(h memT, f File) {
			h.ok(f.Truncate(1000))
			writeAt(h, f, fill('n', 600), 0)
		}, fill('o', 2048), true, true},
		{"truncate_shorter_then_grow_zeroes", func(h memT, f File) {
			h.ok(f.Truncate(50))
			h.ok(f.Truncate(100))
		}, fill('o', 100), false, true},
		{"synced_overwrite_does_not_tear", func(h memT, f File) {
			writeAt(h, f, fill('n', 2000), 0)
			h.ok(f.Sync())
		}, fill('o', 2048), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := memT{t, NewMem()}
			h.durable("/f", tc.durab)
			tc.do(h, h.openRW("/f"))
			durable, err := ReadFile(h.m.CrashClone(false, 0), "/f")
			h.ok(err)
			live, err := ReadFile(h.m, "/f")
			h.ok(err)
			s, top := len(durable), min(len(durable), len(live))
			var sawMixed, sawTorn bool
			sawOld, sawNew := map[int]bool{}, map[int]bool{} // sector offset -> seen so
			for seed := range int64(200) {
				b, err := ReadFile(h.m.CrashClone(true, seed), "/f")
				h.ok(err)
				if again, _ := ReadFile(h.m.CrashClone(true, seed), "/f"); !bytes.Equal(again, b) {
					t.Fatalf("seed %d: two clones differ", seed)
				}
				if len(b) < s || len(b) > max(s, len(live)) {
					t.Fatalf("seed %d: length %d, want in [%d, %d]", seed, len(b), s, max(s, len(live)))
				}
				if !bytes.Equal(b[top:s], durable[top:s]) {
					t.Fatalf("seed %d: durable bytes beyond the live length changed", seed)
				}
				var old, new bool
				for lo := 0; lo < top; lo += sectorSize {
					hi := min(lo+sectorSize, top)
					isOld, isNew := bytes.Equal(b[lo:hi], durable[lo:hi]), bytes.Equal(b[lo:hi], live[lo:hi])
					switch {
					case !isOld && !isNew:
						t.Fatalf("seed %d: sector at %d mixes durable and live bytes", seed, lo)
					case isOld && !isNew:
						old, sawOld[lo] = true, true
					case isNew && !isOld:
						new, sawNew[lo] = true, true
					}
				}
				sawMixed = sawMixed || (old && new)
				sawTorn = sawTorn || !bytes.Equal(b[:s], durable)
			}
			for lo := range sawOld {
				if tc.torn && !sawNew[lo] {
					t.Errorf("sector at %d was never torn in %d seeds", lo, 200)
				}
			}
			for lo := range sawNew {
				if !sawOld[lo] {
					t.Errorf("sector at %d always took its live bytes", lo)
				}
			}
			if sawMixed != tc.mixed || sawTorn != tc.torn {
				t.Fatalf("saw a clone mixing old and new sectors: %v (want %v); saw a torn clone: %v (want %v)",
					sawMixed, tc.mixed, sawTorn, tc.torn)
			}
		})
	}
}

// TestMemCrashTearOverwriteKeepsTailDraws: the sector draws come after the
// tail's, so an in-place overwrite does not change how the tail tears.
func TestMemCrashTearOverwriteKeepsTailDraws(t *testing.T) {
	build := func(overwrite bool) *MemFS {
		h := memT{t, NewMem()}
		h.durable("/f", strings.Repeat("o", 1000))
		f := h.openRW("/f")
		_, err := f.WriteAt(bytes.Repeat([]byte("tail"), 2000), 1000)
		h.ok(err)
		if overwrite {
			_, err := f.WriteAt(bytes.Repeat([]byte("n"), 1000), 0)
			h.ok(err)
		}
		return h.m
	}
	plain, over := build(false), build(true)
	for seed := range int64(50) {
		a, _ := ReadFile(plain.CrashClone(true, seed), "/f")
		b, _ := ReadFile(over.CrashClone(true, seed), "/f")
		if !bytes.Equal(a[1000:], b[1000:]) {
			t.Fatalf("seed %d: the overwrite changed the torn tail", seed)
		}
	}
}

func TestMemErrors(t *testing.T) {
	cases := []struct {
		name string
		op   func(m *MemFS) error
		want error
	}{
		{"create_existing", func(m *MemFS) error { _, err := m.Create("/d/f", 0o600); return err }, fs.ErrExist},
		{"create_existing_dir", func(m *MemFS) error { _, err := m.Create("/d", 0o600); return err }, fs.ErrExist},
		{"create_in_missing_dir", func(m *MemFS) error { _, err := m.Create("/nope/f", 0o600); return err }, fs.ErrNotExist},
		{"create_under_a_file", func(m *MemFS) error { _, err := m.Create("/d/f/g", 0o600); return err }, syscall.ENOTDIR},
		{"open_missing", func(m *MemFS) error { _, err := m.Open("/d/nope"); return err }, fs.ErrNotExist},
		{"open_read_write_missing", func(m *MemFS) error { _, err := m.OpenReadWrite("/d/nope"); return err }, fs.ErrNotExist},
		{"open_dir", func(m *MemFS) error { _, err := m.Open("/d"); return err }, ErrNotRegular},
		{"remove_missing", func(m *MemFS) error { return m.Remove("/d/nope") }, fs.ErrNotExist},
		{"remove_non_empty_dir", func(m *MemFS) error { return m.Remove("/d") }, syscall.ENOTEMPTY},
		{"rename_missing", func(m *MemFS) error { return m.Rename("/d/nope", "/d/x") }, fs.ErrNotExist},
		{"rename_into_missing_dir", func(m *MemFS) error { return m.Rename("/d/f", "/nope/f") }, fs.ErrNotExist},
		{"rename_file_over_dir", func(m *MemFS) error { return m.Rename("/d/f", "/d") }, syscall.EISDIR},
		{"rename_dir_into_itself", func(m *MemFS) error { return m.Rename("/d", "/d/sub") }, syscall.EINVAL},
		{"mkdir_over_a_file", func(m *MemFS) error { return m.MkdirAll("/d/f/g", 0o755) }, syscall.ENOTDIR},
		{"list_missing", func(m *MemFS) error { _, err := m.List("/nope"); return err }, fs.ErrNotExist},
		{"list_a_file", func(m *MemFS) error { _, err := m.List("/d/f"); return err }, syscall.ENOTDIR},
		{"stat_missing", func(m *MemFS) error { _, err := m.Stat("/d/nope"); return err }, fs.ErrNotExist},
		{"syncdir_missing", func(m *MemFS) error { return m.SyncDir("/nope") }, fs.ErrNotExist},
		{"freespace_missing", func(m *MemFS) error { _, err := m.FreeSpace("/nope"); return err }, fs.ErrNotExist},
		{"lock_in_missing_dir", func(m *MemFS) error { _, err := m.Lock("/nope/lock", 0o600); return err }, fs.ErrNotExist},
		{"lock_a_dir", func(m *MemFS) error { _, err := m.Lock("/d", 0o600); return err }, ErrNotRegular},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := memT{t, NewMem()}
			h.mkdir("/d")
			h.ok(h.create("/d/f", "x", false).Close())
			ops := h.m.Ops()
			if err := tc.op(h.m); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if h.m.Ops() != ops {
				t.Fatalf("a failed operation counted in Ops")
			}
		})
	}
}

func TestMemFileErrors(t *testing.T) {
	cases := []struct {
		name string
		op   func(ro, closed File) error
		want error
	}{
		{"write_read_only", func(ro, _ File) error { _, err := ro.Write([]byte("x")); return err }, syscall.EBADF},
		{"writeat_read_only", func(ro, _ File) error { _, err := ro.WriteAt([]byte("x"), 0); return err }, syscall.EBADF},
		{"truncate_read_only", func(ro, _ File) error { return ro.Truncate(0) }, syscall.EBADF},
		{"readat_negative", func(ro, _ File) error { _, err := ro.ReadAt(make([]byte, 1), -1); return err }, syscall.EINVAL},
		{"read_closed", func(_, c File) error { _, err := c.Read(make([]byte, 1)); return err }, fs.ErrClosed},
		{"write_closed", func(_, c File) error { _, err := c.Write([]byte("x")); return err }, fs.ErrClosed},
		{"sync_closed", func(_, c File) error { return c.Sync() }, fs.ErrClosed},
		{"stat_closed", func(_, c File) error { _, err := c.Stat(); return err }, fs.ErrClosed},
		{"close_twice", func(_, c File) error { return c.Close() }, fs.ErrClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := memT{t, NewMem()}
			h.ok(h.create("/f", "data", false).Close())
			ro, err := h.m.Open("/f")
			h.ok(err)
			closed := h.openRW("/f")
			h.ok(closed.Close())
			if err := tc.op(ro, closed); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestMemFileIO(t *testing.T) {
	h := memT{t, NewMem()}
	f := h.create("/f", "hello", false)
	if _, ok := f.(OSFile); ok {
		t.Fatal("MemFS file implements OSFile")
	}
	if f.Name() != "/f" {
		t.Fatalf("Name = %q", f.Name())
	}
	_, err := f.WriteAt([]byte("!"), 7) // a hole of zeros
	h.ok(err)
	_, err = f.Write([]byte(" w")) // continues at the file offset, not the end
	h.ok(err)
	if b, _ := ReadFile(h.m, "/f"); string(b) != "hello w!" {
		t.Fatalf("contents %q", b)
	}
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 6); n != 2 || err != io.EOF || string(buf[:n]) != "w!" {
		t.Fatalf("ReadAt past the end = %d, %v", n, err)
	}
	if n, err := f.ReadAt(buf, 2); n != 4 || err != nil || string(buf) != "llo " {
		t.Fatalf("ReadAt = %d %q, %v", n, buf, err)
	}
	fi, err := f.Stat()
	h.ok(err)
	if fi.Size() != 8 || fi.Name() != "f" || fi.IsDir() {
		t.Fatalf("Stat = %v %d %v", fi.Name(), fi.Size(), fi.IsDir())
	}
	h.ok(f.Truncate(3))
	h.ok(f.Truncate(5))
	if b, _ := ReadFile(h.m, "/f"); string(b) != "hel\x00\x00" {
		t.Fatalf("shrink then grow: %q, want zeros after the cut", b)
	}
	r, err := h.m.Open("/f")
	h.ok(err)
	if b, err := io.ReadAll(r); err != nil || len(b) != 5 {
		t.Fatalf("ReadAll = %q, %v", b, err)
	}
	h.remove("/f")
	if _, err := f.Write([]byte("still open")); err != nil {
		t.Fatalf("write to a removed file's handle: %v", err)
	}
	h.mkdir("/a/b")
	if fi, err := h.m.Stat("/a/b/"); err != nil || !fi.IsDir() || fi.Name() != "b" {
		t.Fatalf("Stat dir = %v, %v", fi, err)
	}
}

func TestMemListSorted(t *testing.T) {
	h := memT{t, NewMem()}
	h.mkdir("/d")
	for _, n := range []string{"/d/c", "/d/a", "/d/b"} {
		h.ok(h.create(n, "", false).Close())
	}
	h.mkdir("/d/0dir/nested")
	names, err := h.m.List("/d")
	h.ok(err)
	if want := []string{"0dir", "a", "b", "c"}; !slices.Equal(names, want) {
		t.Fatalf("List = %v, want %v", names, want)
	}
	if names, err := h.m.List("/"); err != nil || !slices.Equal(names, []string{"d"}) {
		t.Fatalf("List(/) = %v, %v", names, err)
	}
}

func TestMemPathsResolveFromOneRoot(t *testing.T) {
	h := memT{t, NewMem()}
	h.mkdir("a")
	h.ok(h.create("a/b", "x", false).Close())
	for _, name := range []string{"/a/b", "a/b", "/a/./b", "//a/b", "/a/c/../b"} {
		if b, err := ReadFile(h.m, name); err != nil || string(b) != "x" {
			t.Fatalf("ReadFile(%q) = %q, %v", name, b, err)
		}
	}
}

func TestMemLock(t *testing.T) {
	h := memT{t, NewMem()}
	l1, err := h.m.Lock("/in_use.lock", 0o600)
	h.ok(err)
	if _, err := h.m.Stat("/in_use.lock"); err != nil {
		t.Fatalf("Lock did not create the file: %v", err)
	}
	if _, err := h.m.Lock("in_use.lock", 0o600); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock = %v, want ErrLocked", err)
	}
	l2, err := h.m.Lock("/other.lock", 0o600)
	h.ok(err)
	h.ok(l1.Close())
	if err := l1.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close = %v, want fs.ErrClosed", err)
	}
	l3, err := h.m.Lock("/in_use.lock", 0o600)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := l1.Close(); err == nil {
		t.Fatal("a stale Close released the new holder")
	}
	if _, err := h.m.Lock("/in_use.lock", 0o600); !errors.Is(err, ErrLocked) {
		t.Fatalf("lock after stale Close = %v, want ErrLocked", err)
	}
	h.ok(l3.Close())
	h.ok(l2.Close())
}

func TestMemOpsCountsMutations(t *testing.T) {
	cases := []struct {
		name string
		op   func(h memT, f File)
		want int64
	}{
		{"write", func(h memT, f File) { _, err := f.Write([]byte("x")); h.ok(err) }, 1},
		{"writeat", func(h memT, f File) { _, err := f.WriteAt([]byte("x"), 9); h.ok(err) }, 1},
		{"truncate", func(h memT, f File) { h.ok(f.Truncate(0)) }, 1},
		{"sync", func(h memT, f File) { h.ok(f.Sync()) }, 1},
		{"create", func(h memT, _ File) { _, err := h.m.Create("/g", 0o600); h.ok(err) }, 1},
		{"create_write_sync", func(h memT, _ File) { h.create("/g", "x", true) }, 3},
		{"rename", func(h memT, _ File) { h.rename("/f", "/g") }, 1},
		{"remove", func(h memT, _ File) { h.remove("/f") }, 1},
		{"syncdir", func(h memT, _ File) { h.syncDir("/") }, 1},
		{"mkdirall_per_new_dir", func(h memT, _ File) { h.mkdir("/a/b/c") }, 3},
		{"mkdirall_existing", func(h memT, _ File) { h.mkdir("/") }, 0},
		{"lock_creating_file", func(h memT, _ File) { _, err := h.m.Lock("/l", 0o600); h.ok(err) }, 1},
		{"lock_existing_file", func(h memT, _ File) { _, err := h.m.Lock("/f", 0o600); h.ok(err) }, 0},
		{"reads", func(h memT, f File) {
			_, err := f.ReadAt(make([]byte, 1), 0)
			h.ok(err)
			_, err = h.m.List("/")
			h.ok(err)
			_, err = h.m.Stat("/f")
			h.ok(err)
			_, err = h.m.Open("/f")
			h.ok(err)
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := memT{t, NewMem()}
			f := h.create("/f", "x", false)
			before := h.m.Ops()
			tc.op(h, f)
			if got := h.m.Ops() - before; got != tc.want {
				t.Fatalf("Ops grew by %d, want %d", got, tc.want)
			}
		})
	}
}

// TestMemHook: the hook sees every counted operation once, in order, with
// its Seq, kind and path; failed operations and reads call nothing.
func TestMemHook(t *testing.T) {
	h := memT{t, NewMem()}
	h.ok(h.create("/before", "", false).Close())
	base := h.m.Ops()
	var got []string
	h.m.SetHook(func(p CrashPoint) { got = append(got, fmt.Sprintf("%d %s %s", p.Seq-base, p.Op, p.Path)) })
	h.mkdir("/a/b")
	h.syncDir("/")
	f := h.create("/a/f", "one", true)
	_, err := f.WriteAt([]byte("x"), 9)
	h.ok(err)
	h.ok(f.Truncate(2))
	h.rename("/a/f", "/a/g")
	h.remove("/a/g")
	l, err := h.m.Lock("/a/lock", 0o600)
	h.ok(err)
	h.ok(l.Close())
	l, err = h.m.Lock("/a/lock", 0o600) // exists: not counted
	h.ok(err)
	h.ok(l.Close())
	if _, err := h.m.Create("/a/b", 0o600); err == nil {
		t.Fatal("Create over a directory succeeded")
	}
	_, err = h.m.List("/a")
	h.ok(err)
	_, err = f.ReadAt(make([]byte, 1), 0)
	h.ok(err)
	h.m.SetHook(nil)
	h.syncDir("/a")
	want := []string{
		"1 mkdir /a", "2 mkdir /a/b", "3 syncdir /", "4 create /a/f", "5 write /a/f", "6 sync /a/f",
		"7 writeat /a/f", "8 truncate /a/f", "9 rename /a/g", "10 remove /a/g", "11 lock /a/lock",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("hook saw\n%q\nwant\n%q", got, want)
	}
	if h.m.Ops()-base != int64(len(want))+1 {
		t.Fatalf("Ops grew by %d, want %d", h.m.Ops()-base, len(want)+1)
	}
}

// TestMemHookClones takes a clone at every operation: each holds what a
// crash at that instant leaves, and stays so whatever happens later to the
// MemFS or to the other clones.
func TestMemHookClones(t *testing.T) {
	h := memT{t, NewMem()}
	h.mkdir("/d")
	h.syncDir("/")
	type point struct {
		what  string
		clone *MemFS
	}
	var points []point
	h.m.SetHook(func(p CrashPoint) {
		points = append(points, point{p.Op + " " + p.Path, p.Clone(false, 0)})
		p.Clone(true, p.Seq) // a torn clone in the hook works too
	})
	f := h.create("/d/f", "one", false) // create, write
	h.syncDir("/d")
	h.ok(f.Sync())
	_, err := f.Write([]byte("two"))
	h.ok(err)
	h.ok(f.Sync())
	h.remove("/d/f")
	h.m.SetHook(nil)
	h.syncDir("/d")

	want := []struct {
		what string
		tree map[string]string
	}{
		{"create /d/f", map[string]string{"/d/": ""}},
		{"write /d/f", map[string]string{"/d/": ""}},
		{"syncdir /d", map[string]string{"/d/": "", "/d/f": ""}},
		{"sync /d/f", map[string]string{"/d/": "", "/d/f": "one"}},
		{"write /d/f", map[string]string{"/d/": "", "/d/f": "one"}},
		{"sync /d/f", map[string]string{"/d/": "", "/d/f": "onetwo"}},
		{"remove /d/f", map[string]string{"/d/": "", "/d/f": "onetwo"}},
	}
	if len(points) != len(want) {
		t.Fatalf("%d crash points, want %d", len(points), len(want))
	}
	// Damage one clone: no other clone and not the MemFS may see it.
	g, err := points[3].clone.OpenReadWrite("/d/f")
	h.ok(err)
	_, err = g.WriteAt([]byte("XXX"), 0)
	h.ok(err)
	h.ok(g.Sync())
	want[3].tree = map[string]string{"/d/": "", "/d/f": "XXX"}
	for i, w := range want {
		if points[i].what != w.what {
			t.Fatalf("point %d is %q, want %q", i, points[i].what, w.what)
		}
		if got := tree(t, points[i].clone); !maps.Equal(got, w.tree) {
			t.Fatalf("clone at %d (%s): %q, want %q", i, w.what, got, w.tree)
		}
	}
	if got := tree(t, h.m); !maps.Equal(got, map[string]string{"/d/": ""}) {
		t.Fatalf("MemFS after the clones: %q", got)
	}
}

func TestMemHookCloneAfterTheHookPanics(t *testing.T) {
	h := memT{t, NewMem()}
	var saved CrashPoint
	h.m.SetHook(func(p CrashPoint) { saved = p })
	h.mkdir("/d")
	defer func() {
		if recover() == nil {
			t.Fatal("Clone after the hook returned did not panic")
		}
	}()
	saved.Clone(false, 0)
}

func TestMemFreeSpace(t *testing.T) {
	m := NewMem()
	if free, err := m.FreeSpace("/"); err != nil || free != 1<<40 {
		t.Fatalf("default FreeSpace = %d, %v", free, err)
	}
	m.SetFreeSpace(42)
	if free, err := m.FreeSpace("/"); err != nil || free != 42 {
		t.Fatalf("FreeSpace = %d, %v; want 42", free, err)
	}
}

// TestMemConcurrent exercises files, namespace and clones from several
// goroutines; it is meant for -race.
func TestMemConcurrent(t *testing.T) {
	h := memT{t, NewMem()}
	var hooked int64
	h.m.SetHook(func(p CrashPoint) {
		hooked++
		if p.Seq%50 == 0 {
			p.Clone(true, p.Seq)
		}
	})
	shared := h.create("/shared", "", false)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			name := fmt.Sprintf("/g%d", g)
			f, err := h.m.Create(name, 0o600)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range 50 {
				f.Write([]byte("x"))
				shared.WriteAt([]byte{byte(g)}, int64(i))
				shared.ReadAt(make([]byte, 8), 0)
				f.Sync()
				h.m.SyncDir("/")
				h.m.List("/")
				h.m.Ops()
				if i%10 == 0 {
					h.m.CrashClone(i%20 == 0, int64(i))
				}
			}
			f.Close()
		})
	}
	wg.Wait()
	if hooked != h.m.Ops() {
		t.Fatalf("hook ran %d times for %d operations", hooked, h.m.Ops())
	}
	if got := tree(t, h.m.CrashClone(false, 0)); len(got) != 5 || got["/g0"] != strings.Repeat("x", 50) {
		t.Fatalf("after concurrent use: %q", got)
	}
}

// BenchmarkMemAppendSync measures the log pattern: append a batch, Sync,
// starting a new file every 64 MiB as a log rolls. Sync copies only what
// changed, so the cost per batch must not grow with the file. Reproduce with:
//
//	go test -run '^$' -bench MemAppendSync -benchmem ./internal/vfs
func BenchmarkMemAppendSync(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			m := NewMem()
			batch := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var f File
			written := 0
			for b.Loop() {
				if f == nil || written >= 64<<20 {
					if f != nil {
						f.Close()
						m.Remove("/log")
					}
					var err error
					if f, err = m.Create("/log", 0o600); err != nil {
						b.Fatal(err)
					}
					written = 0
				}
				written += size
				if _, err := f.Write(batch); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
