package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var _ FS = (*FaultFS)(nil)

// faultScript is the workload TestFaultRules runs: twelve mutating steps
// over a MemFS holding /d/a and /d/b, both open read-write as a and b. Steps
// run whatever earlier ones returned.
var faultScript = []struct {
	log string // the step's FaultFS.Log line
	do  func(f *FaultFS, a, b File) error
}{
	{"write a", func(_ *FaultFS, a, _ File) error { _, err := a.Write([]byte("hello")); return err }},
	{"writeat b", func(_ *FaultFS, _, b File) error { _, err := b.WriteAt([]byte("x"), 600); return err }},
	{"sync a", func(_ *FaultFS, a, _ File) error { return a.Sync() }},
	{"truncate b", func(_ *FaultFS, _, b File) error { return b.Truncate(10) }},
	{"create new", func(f *FaultFS, _, _ File) error { _, err := f.Create("/d/new", 0o600); return err }},
	{"rename new renamed", func(f *FaultFS, _, _ File) error { return f.Rename("/d/new", "/d/renamed") }},
	{"syncdir d", func(f *FaultFS, _, _ File) error { return f.SyncDir("/d/") }},
	{"remove b", func(f *FaultFS, _, _ File) error { return f.Remove("/d/b") }},
	{"mkdir f", func(f *FaultFS, _, _ File) error { return f.MkdirAll("/e/f", 0o755) }},
	{"lock lock", func(f *FaultFS, _, _ File) error { _, err := f.Lock("/d/lock", 0o600); return err }},
	{"write a", func(_ *FaultFS, a, _ File) error { _, err := a.Write([]byte("world")); return err }},
	{"sync a", func(_ *FaultFS, a, _ File) error { return a.Sync() }},
}

// newFaultT returns a FaultFS over a MemFS holding /d/a and /d/b, those two
// files open read-write, and the Ops count before any script step.
func newFaultT(t *testing.T) (f *FaultFS, a, b File, base int64) {
	t.Helper()
	m := NewMem()
	h := memT{t, m}
	h.mkdir("/d")
	h.ok(h.create("/d/a", "", false).Close())
	h.ok(h.create("/d/b", "", false).Close())
	f = NewFaultFS(m)
	var err error
	a, err = f.OpenReadWrite("/d/a")
	h.ok(err)
	b, err = f.OpenReadWrite("/d/b")
	h.ok(err)
	return f, a, b, f.Ops()
}

// TestFaultRules runs faultScript under each rule set and checks which
// steps (1-based) fail with an injected error, and that no other step fails.
func TestFaultRules(t *testing.T) {
	cases := []struct {
		name  string
		rules func(base int64) []Rule
		fail  []int
	}{
		{"no_rules_pass_everything", func(int64) []Rule { return nil }, nil},
		{"nth_op_only", func(base int64) []Rule { return []Rule{{Seq: base + 3}} }, []int{3}},
		{"nth_op_and_every_later_one", func(base int64) []Rule {
			return []Rule{{Seq: base + 3, FailAfter: true}}
		}, []int{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{"nth_op_of_the_wrong_kind_never_fails", func(base int64) []Rule {
			return []Rule{{Seq: base + 3, Ops: []Op{"write"}}}
		}, nil},
		{"first_match_then_every_later_op", func(int64) []Rule {
			return []Rule{{Ops: []Op{"truncate"}, FailAfter: true}}
		}, []int{4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{"every_op_of_a_kind", func(int64) []Rule { return []Rule{{Ops: []Op{"sync"}}} }, []int{3, 12}},
		{"several_kinds", func(int64) []Rule {
			return []Rule{{Ops: []Op{"create", "remove", "syncdir"}}}
		}, []int{5, 7, 8}},
		{"kind_and_base_name", func(int64) []Rule {
			return []Rule{{Ops: []Op{"write", "writeat"}, Name: "a"}}
		}, []int{1, 11}},
		{"glob_on_base_name_any_kind", func(int64) []Rule { return []Rule{{Name: "[ab]"}} }, []int{1, 2, 3, 4, 8, 11, 12}},
		{"rename_matches_its_new_name", func(int64) []Rule { return []Rule{{Name: "*named"}} }, []int{6}},
		{"rename_matches_its_old_name", func(int64) []Rule { return []Rule{{Ops: []Op{"rename"}, Name: "new"}} }, []int{6}},
		{"pattern_with_a_separator_matches_the_path", func(int64) []Rule {
			return []Rule{{Name: "/d/*"}, {Name: "/e/f"}}
		}, []int{1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12}},
		{"pattern_matches_the_cleaned_path", func(int64) []Rule { return []Rule{{Name: "/d"}} }, []int{7}},
		{"skip_first_matches", func(int64) []Rule { return []Rule{{Ops: []Op{"sync"}, Skip: 1}} }, []int{12}},
		{"skip_then_times", func(int64) []Rule {
			return []Rule{{Ops: []Op{"write", "writeat", "sync", "truncate"}, Skip: 1, Times: 2}}
		}, []int{2, 3}},
		{"times_once", func(int64) []Rule { return []Rule{{Times: 1}} }, []int{1}},
		{"spent_rule_passes_to_the_next", func(int64) []Rule {
			return []Rule{{Ops: []Op{"sync"}, Times: 1}, {Ops: []Op{"sync"}, Name: "a"}}
		}, []int{3, 12}},
		{"first_failing_rule_hides_the_op_from_later_ones", func(int64) []Rule {
			return []Rule{{Ops: []Op{"sync"}, Times: 1}, {Ops: []Op{"sync"}, Skip: 1}}
		}, []int{3}},
		{"read_kinds_do_not_touch_mutating_ops", func(int64) []Rule {
			return []Rule{{Ops: []Op{"open", "read", "readat", "list", "stat", "close", "freespace"}}}
		}, nil},
		{"off_limits_writes_to_those_reaching_past_it", func(int64) []Rule {
			return []Rule{{Off: 500}}
		}, []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 12}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, a, b, base := newFaultT(t)
			f.Add(tc.rules(base)...)
			var failed, wantLog []string
			for i, step := range faultScript {
				err := step.do(f, a, b)
				line := step.log
				switch {
				case errors.Is(err, ErrInjected):
					failed = append(failed, fmt.Sprint(i+1))
					line += " (injected)"
					if !errors.Is(err, syscall.EIO) {
						t.Errorf("step %d (%s): %v does not match EIO", i+1, step.log, err)
					}
				case err != nil && !errors.Is(err, fs.ErrNotExist):
					t.Errorf("step %d (%s): not injected: %v", i+1, step.log, err)
				}
				wantLog = append(wantLog, line)
			}
			want := make([]string, len(tc.fail))
			for i, n := range tc.fail {
				want[i] = fmt.Sprint(n)
			}
			if !slices.Equal(failed, want) {
				t.Errorf("failed steps %v, want %v", failed, want)
			}
			if got := f.Log()[base:]; !slices.Equal(got, wantLog) {
				t.Errorf("Log:\n got %q\nwant %q", got, wantLog)
			}
			if f.Ops() != base+int64(len(faultScript)) {
				t.Errorf("Ops = %d, want %d", f.Ops(), base+int64(len(faultScript)))
			}
			if f.Injected() != int64(len(tc.fail)) {
				t.Errorf("Injected = %d, want %d", f.Injected(), len(tc.fail))
			}
		})
	}
}

// TestFaultErrors checks what an injected error is and that a failed
// operation leaves the wrapped FS alone.
func TestFaultErrors(t *testing.T) {
	cases := []struct {
		name      string
		rule      Rule
		op        func(f *FaultFS) error
		is        []error
		isNot     []error
		pathOp    string // the *fs.PathError's Op, or "" for an *os.LinkError
		path      string
		unchanged func(m *MemFS) bool
	}{
		{"default_is_eio", Rule{Ops: []Op{"create"}},
			func(f *FaultFS) error { _, err := f.Create("/d/x", 0o600); return err },
			[]error{ErrInjected, syscall.EIO}, []error{syscall.ENOSPC}, "create", "/d/x",
			func(m *MemFS) bool { _, err := m.Stat("/d/x"); return errors.Is(err, fs.ErrNotExist) }},
		{"enospc", Rule{Ops: []Op{"mkdir"}, Err: syscall.ENOSPC},
			func(f *FaultFS) error { return f.MkdirAll("/d/x", 0o755) },
			[]error{ErrInjected, syscall.ENOSPC}, []error{syscall.EIO}, "mkdir", "/d/x",
			func(m *MemFS) bool { _, err := m.Stat("/d/x"); return errors.Is(err, fs.ErrNotExist) }},
		{"custom_cause", Rule{Ops: []Op{"remove"}, Err: fs.ErrPermission},
			func(f *FaultFS) error { return f.Remove("/d/a") },
			[]error{ErrInjected, fs.ErrPermission}, []error{syscall.EIO}, "remove", "/d/a",
			func(m *MemFS) bool { _, err := m.Stat("/d/a"); return err == nil }},
		{"rename_is_a_link_error", Rule{Ops: []Op{"rename"}},
			func(f *FaultFS) error { return f.Rename("/d/a", "/d/b") },
			[]error{ErrInjected, syscall.EIO}, nil, "", "",
			func(m *MemFS) bool { _, err := m.Stat("/d/a"); return err == nil }},
		{"failed_sync_does_not_sync", Rule{Ops: []Op{"sync"}},
			func(f *FaultFS) error {
				w, err := f.OpenReadWrite("/d/a")
				if err != nil {
					return err
				}
				if _, err := w.Write([]byte("new")); err != nil {
					return err
				}
				return w.Sync()
			},
			[]error{ErrInjected}, nil, "sync", "/d/a",
			func(m *MemFS) bool { b, _ := ReadFile(m.CrashClone(false, 0), "/d/a"); return string(b) == "old" }},
		{"failed_truncate_does_not_truncate", Rule{Ops: []Op{"truncate"}},
			func(f *FaultFS) error {
				w, err := f.OpenReadWrite("/d/a")
				if err != nil {
					return err
				}
				return w.Truncate(0)
			},
			[]error{ErrInjected}, nil, "truncate", "/d/a",
			func(m *MemFS) bool { b, _ := ReadFile(m, "/d/a"); return string(b) == "old" }},
		{"failed_syncdir_does_not_sync", Rule{Ops: []Op{"syncdir"}},
			func(f *FaultFS) error {
				if _, err := f.Create("/d/c", 0o600); err != nil {
					return err
				}
				return f.SyncDir("/d")
			},
			[]error{ErrInjected}, nil, "syncdir", "/d",
			func(m *MemFS) bool {
				_, err := m.CrashClone(false, 0).Stat("/d/c")
				return errors.Is(err, fs.ErrNotExist)
			}},
		{"failed_lock_takes_no_lock", Rule{Ops: []Op{"lock"}},
			func(f *FaultFS) error { _, err := f.Lock("/d/lock", 0o600); return err },
			[]error{ErrInjected}, nil, "lock", "/d/lock",
			func(m *MemFS) bool { l, err := m.Lock("/d/lock", 0o600); return err == nil && l.Close() == nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := memT{t, NewMem()}
			h.mkdir("/d")
			h.syncDir("/")
			h.durable("/d/a", "old")
			f := NewFaultFS(h.m)
			f.Add(tc.rule)
			err := tc.op(f)
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Errorf("%v does not match %v", err, target)
				}
			}
			for _, target := range tc.isNot {
				if errors.Is(err, target) {
					t.Errorf("%v matches %v", err, target)
				}
			}
			var pe *fs.PathError
			var le *os.LinkError
			switch {
			case tc.pathOp == "":
				if !errors.As(err, &le) || le.Op != "rename" || le.Old != "/d/a" || le.New != "/d/b" {
					t.Errorf("%#v is not the rename's *os.LinkError", err)
				}
			case !errors.As(err, &pe) || pe.Op != tc.pathOp || pe.Path != tc.path:
				t.Errorf("%#v is not a *fs.PathError{Op: %q, Path: %q}", err, tc.pathOp, tc.path)
			}
			if !tc.unchanged(h.m) {
				t.Error("the failed operation changed the wrapped FS")
			}
		})
	}
}

// TestFaultShortWrite: a write rule with Short writes part of the buffer,
// then fails; the file offset moves past what was written.
func TestFaultShortWrite(t *testing.T) {
	cases := []struct {
		name  string
		at    bool // WriteAt at offset 2 instead of Write after "xy"
		short int
		wantN int
	}{
		{"write_nothing", false, 0, 0},
		{"write_first_bytes", false, 3, 3},
		{"write_half", false, ShortHalf, 5},
		{"write_all_then_fail", false, 100, 10},
		{"writeat_nothing", true, 0, 0},
		{"writeat_first_bytes", true, 4, 4},
		{"writeat_half", true, ShortHalf, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := memT{t, NewMem()}
			f := NewFaultFS(h.m)
			w, err := f.Create("/f", 0o600)
			h.ok(err)
			_, err = w.Write([]byte("xy"))
			h.ok(err)
			f.Add(Rule{Ops: []Op{"write", "writeat"}, Short: tc.short, Err: syscall.ENOSPC, Times: 1})
			p := []byte("0123456789")
			var n int
			if tc.at {
				n, err = w.WriteAt(p, 2)
			} else {
				n, err = w.Write(p)
			}
			if n != tc.wantN || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrInjected) {
				t.Fatalf("short write = %d, %v; want %d, injected ENOSPC", n, err, tc.wantN)
			}
			if !tc.at {
				_, err = w.Write([]byte("!")) // continues after the short write
				h.ok(err)
			}
			want := "xy" + string(p[:tc.wantN])
			if !tc.at {
				want += "!"
			}
			if b, _ := ReadFile(h.m, "/f"); string(b) != want {
				t.Fatalf("file holds %q, want %q", b, want)
			}
		})
	}
}

// TestFaultReadRules: non-mutating operations fail only when a rule names
// their kind; they are not counted.
func TestFaultReadRules(t *testing.T) {
	cases := []struct {
		name string
		rule Rule
		op   func(f *FaultFS, r File) error
		fail bool
	}{
		{"readat", Rule{Ops: []Op{"readat"}},
			func(_ *FaultFS, r File) error { _, err := r.ReadAt(make([]byte, 2), 0); return err }, true},
		{"read", Rule{Ops: []Op{"read"}},
			func(_ *FaultFS, r File) error { _, err := r.Read(make([]byte, 2)); return err }, true},
		{"readall_through_read", Rule{Ops: []Op{"read"}, Name: "f"},
			func(f *FaultFS, _ File) error { _, err := ReadFile(f, "/d/f"); return err }, true},
		{"readat_of_another_file", Rule{Ops: []Op{"readat"}, Name: "g"},
			func(_ *FaultFS, r File) error { _, err := r.ReadAt(make([]byte, 2), 0); return err }, false},
		{"readat_before_off", Rule{Ops: []Op{"readat"}, Off: 4},
			func(_ *FaultFS, r File) error { _, err := r.ReadAt(make([]byte, 4), 0); return err }, false},
		{"readat_reaching_past_off", Rule{Ops: []Op{"readat"}, Off: 4},
			func(_ *FaultFS, r File) error { _, err := r.ReadAt(make([]byte, 2), 3); return err }, true},
		{"read_reaching_past_off", Rule{Ops: []Op{"read"}, Off: 4},
			func(_ *FaultFS, r File) error {
				if _, err := r.Read(make([]byte, 4)); err != nil {
					return fmt.Errorf("read before off: %w", err)
				}
				_, err := r.Read(make([]byte, 1))
				return err
			}, true},
		{"readat_skip_first", Rule{Ops: []Op{"readat"}, Skip: 1},
			func(_ *FaultFS, r File) error {
				if _, err := r.ReadAt(make([]byte, 1), 0); err != nil {
					return fmt.Errorf("first read: %w", err)
				}
				_, err := r.ReadAt(make([]byte, 1), 0)
				return err
			}, true},
		{"list_of_dir", Rule{Ops: []Op{"list"}, Name: "/d"},
			func(f *FaultFS, _ File) error { _, err := f.List("/d"); return err }, true},
		{"list_of_other_dir", Rule{Ops: []Op{"list"}, Name: "/d"},
			func(f *FaultFS, _ File) error { _, err := f.List("/"); return err }, false},
		{"open", Rule{Ops: []Op{"open"}},
			func(f *FaultFS, _ File) error { _, err := f.OpenReadWrite("/d/f"); return err }, true},
		{"stat", Rule{Ops: []Op{"stat"}},
			func(f *FaultFS, _ File) error { _, err := f.Stat("/d/f"); return err }, true},
		{"file_stat", Rule{Ops: []Op{"stat"}},
			func(_ *FaultFS, r File) error { _, err := r.Stat(); return err }, true},
		{"freespace", Rule{Ops: []Op{"freespace"}},
			func(f *FaultFS, _ File) error { _, err := f.FreeSpace("/d"); return err }, true},
		{"close_still_closes", Rule{Ops: []Op{"close"}},
			func(_ *FaultFS, r File) error {
				err := r.Close()
				if _, rerr := r.ReadAt(make([]byte, 1), 0); !errors.Is(rerr, fs.ErrClosed) {
					return fmt.Errorf("read after failed close = %v, want fs.ErrClosed", rerr)
				}
				return err
			}, true},
		{"empty_ops_means_mutating_only", Rule{},
			func(f *FaultFS, r File) error {
				if _, err := r.ReadAt(make([]byte, 2), 0); err != nil {
					return err
				}
				_, err := f.List("/d")
				return err
			}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := memT{t, NewMem()}
			h.mkdir("/d")
			h.ok(h.create("/d/f", "0123456789", false).Close())
			f := NewFaultFS(h.m)
			r, err := f.Open("/d/f")
			h.ok(err)
			f.Add(tc.rule)
			err = tc.op(f, r)
			if got := errors.Is(err, ErrInjected) && errors.Is(err, syscall.EIO); got != tc.fail || (!tc.fail && err != nil) {
				t.Fatalf("got %v, want injected EIO: %v", err, tc.fail)
			}
			if f.Ops() != 0 {
				t.Fatalf("Ops = %d: reads counted", f.Ops())
			}
		})
	}
}

func TestFaultFreeSpace(t *testing.T) {
	f := NewFaultFS(NewMem())
	if n, err := f.FreeSpace("/"); err != nil || n != defaultFreeSpace {
		t.Fatalf("FreeSpace = %d, %v; want the wrapped FS's %d", n, err, int64(defaultFreeSpace))
	}
	f.SetFreeSpace(4096)
	if n, err := f.FreeSpace("/"); err != nil || n != 4096 {
		t.Fatalf("FreeSpace = %d, %v; want 4096", n, err)
	}
	if _, err := f.FreeSpace("/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("FreeSpace of a missing dir = %v, want fs.ErrNotExist", err)
	}
	f.SetFreeSpace(0)
	if n, _ := f.FreeSpace("/"); n != 0 {
		t.Fatalf("FreeSpace = %d, want 0", n)
	}
	f.SetFreeSpace(-1)
	if n, _ := f.FreeSpace("/"); n != defaultFreeSpace {
		t.Fatalf("FreeSpace after reset = %d", n)
	}
}

// TestFaultClearRevives: Clear removes the rules and ends a FailAfter
// failure; Ops and the log go on.
func TestFaultClearRevives(t *testing.T) {
	h := memT{t, NewMem()}
	f := NewFaultFS(h.m)
	f.Add(Rule{Ops: []Op{"create"}, Name: "x", FailAfter: true})
	if _, err := f.Create("/x", 0o600); !errors.Is(err, ErrInjected) {
		t.Fatalf("Create = %v", err)
	}
	if err := f.MkdirAll("/d", 0o755); !errors.Is(err, ErrInjected) {
		t.Fatalf("mkdir after FailAfter = %v, want injected", err)
	}
	if _, err := f.List("/"); err != nil {
		t.Fatalf("a read after FailAfter failed: %v", err)
	}
	f.Clear()
	if err := f.MkdirAll("/d", 0o755); err != nil {
		t.Fatalf("mkdir after Clear: %v", err)
	}
	want := []string{"create x (injected)", "mkdir d (injected)", "mkdir d"}
	if got := f.Log(); !slices.Equal(got, want) || f.Ops() != 3 {
		t.Fatalf("Log = %q, Ops = %d; want %q, 3", got, f.Ops(), want)
	}
}

// TestFaultLogKeepsTheLatest: the log is bounded; Ops is not.
func TestFaultLogKeepsTheLatest(t *testing.T) {
	h := memT{t, NewMem()}
	f := NewFaultFS(h.m)
	w, err := f.Create("/f", 0o600)
	h.ok(err)
	for range faultLogLen + 10 {
		h.ok(w.Sync())
	}
	h.ok(w.Truncate(0))
	log := f.Log()
	if len(log) != faultLogLen || log[0] != "sync f" || log[len(log)-1] != "truncate f" {
		t.Fatalf("Log has %d lines, %q ... %q", len(log), log[0], log[len(log)-1])
	}
	if f.Ops() != faultLogLen+12 {
		t.Fatalf("Ops = %d", f.Ops())
	}
}

// TestFaultOSFile: files of the OS keep implementing OSFile through the
// wrapper, and rules still apply to them; MemFS files do not.
func TestFaultOSFile(t *testing.T) {
	dir := t.TempDir()
	f := NewFaultFS(OS())
	name := filepath.Join(dir, "f")
	w, err := f.Create(name, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, open := range []func() (File, error){
		func() (File, error) { return w, nil },
		func() (File, error) { return f.Open(name) },
		func() (File, error) { return f.OpenReadWrite(name) },
	} {
		file, err := open()
		if err != nil {
			t.Fatal(err)
		}
		osf, ok := file.(OSFile)
		if !ok || osf.OSFile() == nil || osf.OSFile().Name() != name {
			t.Fatalf("%T does not pass OSFile through", file)
		}
	}
	f.Add(Rule{Ops: []Op{"write"}, Err: syscall.ENOSPC, Short: 2})
	if n, err := w.Write([]byte("abcd")); n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if b, _ := os.ReadFile(name); string(b) != "ab" {
		t.Fatalf("OS file holds %q", b)
	}
	mf, err := NewFaultFS(NewMem()).Create("/f", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mf.(OSFile); ok {
		t.Fatal("a MemFS file implements OSFile through FaultFS")
	}
}

func TestFaultAddRejectsBadRules(t *testing.T) {
	for _, r := range []Rule{{Ops: []Op{"fsync"}}, {Name: "[a"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%+v) did not panic", r)
				}
			}()
			NewFaultFS(NewMem()).Add(r)
		}()
	}
}

// TestFaultConcurrent adds and clears rules while files are written; it is
// meant for -race.
func TestFaultConcurrent(t *testing.T) {
	f := NewFaultFS(NewMem())
	const writers, writes = 4, 100
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			w, err := f.Create(fmt.Sprintf("/g%d", g), 0o600)
			if err != nil {
				t.Error(err)
				return
			}
			for range writes - 1 {
				w.Write([]byte("x"))
				w.ReadAt(make([]byte, 1), 0)
			}
			w.Close()
		})
	}
	wg.Go(func() {
		for i := range 50 {
			f.Add(Rule{Ops: []Op{"write"}, Times: 1}, Rule{Ops: []Op{"readat"}, Skip: i})
			f.Log()
			f.Clear()
		}
	})
	wg.Wait()
	if f.Ops() != writers*writes {
		t.Fatalf("Ops = %d, want %d", f.Ops(), writers*writes)
	}
	if n := strings.Count(strings.Join(f.Log(), "\n"), "(injected)"); int64(n) > f.Injected() {
		t.Fatalf("log shows %d injected writes, Injected = %d", n, f.Injected())
	}
}

// SetOpenLimit fails opens with EMFILE while the limit's worth of files is
// open; OpenFiles and PeakOpenFiles count what is open (a second Close
// counts once).
func TestFaultOpenLimit(t *testing.T) {
	f, a, b, _ := newFaultT(t)
	if n := f.OpenFiles(); n != 2 {
		t.Fatalf("OpenFiles() = %d, want 2", n)
	}
	f.SetOpenLimit(3)
	c, err := f.Open("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func() (File, error){
		"open":          func() (File, error) { return f.Open("/d/a") },
		"openreadwrite": func() (File, error) { return f.OpenReadWrite("/d/b") },
		"create":        func() (File, error) { return f.Create("/d/c", 0o600) },
	} {
		if _, err := open(); !errors.Is(err, syscall.EMFILE) || !errors.Is(err, ErrInjected) {
			t.Errorf("%s at the limit: %v, want an injected EMFILE", name, err)
		}
	}
	if _, err := f.Stat("/d/c"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a create refused at the limit made the file: %v", err)
	}
	for _, file := range []File{c, c, b} {
		file.Close()
	}
	if n, peak := f.OpenFiles(), f.PeakOpenFiles(); n != 1 || peak != 3 {
		t.Fatalf("OpenFiles() = %d, PeakOpenFiles() = %d; want 1, 3", n, peak)
	}
	f.ResetPeakOpenFiles()
	if peak := f.PeakOpenFiles(); peak != 1 {
		t.Fatalf("PeakOpenFiles() after ResetPeakOpenFiles = %d, want 1", peak)
	}
	f.SetOpenLimit(0)
	for range 4 {
		if _, err := f.Open("/d/a"); err != nil {
			t.Fatalf("open with no limit: %v", err)
		}
	}
	a.Close()
}
