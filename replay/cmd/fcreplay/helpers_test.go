package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// bin is the fcreplay binary TestMain builds.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "fcreplay-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "fcreplay")
	build := exec.Command(goTool(), "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fcreplay:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// The tests fail if a goroutine outlives them.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// goTool is the go command that runs the tests.
func goTool() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// fcreplay runs the binary with args.
func fcreplay(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run fcreplay %v: %v", args, err)
	}
	return r
}

// wantCode fails the test unless r exited with code.
func (r result) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// fixture is a channel's directories, made by the library.
type fixture struct {
	base   string // the temp dir holding everything ($DIR in golden files)
	ckpt   string
	backup string // "" = not passed to fcreplay
	data   string
	queued []int // the events a channel opened now delivers, in order (the unnamed group's)
	// groups is Config.Groups (nil: the unnamed group alone); groupQueued
	// each named group's events, as queued.
	groups      []channel.GroupConfig
	groupQueued map[string][]int
}

// args are the directory flags for fcreplay, followed by extra.
func (f *fixture) args(cmd string, extra ...string) []string {
	a := []string{cmd, "--checkpoint-dir", f.ckpt, "--data-dirs", f.data}
	if f.backup != "" {
		a = append(a, "--backup-checkpoint-dir", f.backup)
	}
	return append(a, extra...)
}

func (f *fixture) config() channel.Config {
	cfg := channel.Config{
		CheckpointDir:        f.ckpt,
		DataDirs:             []string{f.data},
		Capacity:             100,
		CheckpointInterval:   time.Hour,
		MinimumRequiredSpace: -1,
		KeepAlive:            -1,
		// No zero-fills: a test that holds the channel open compares the
		// files' hashes before and after a refused command.
		Preallocate: -1,
	}
	if f.backup != "" {
		cfg.BackupCheckpointDir = f.backup
	}
	cfg.Groups = f.groups
	return cfg
}

// body is event i's body: deterministic, of varied length (some longer
// than dump's text truncation), one with bytes that need quoting.
func body(i int) []byte {
	b := []byte(fmt.Sprintf("event-%03d ", i) + strings.Repeat(string(rune('a'+i%26)), 20+i*3))
	if i == 7 {
		b = append(b, 0, 0xff, '\n')
	}
	return b
}

func headers(i int) map[string]string {
	return map[string]string{"i": strconv.Itoa(i), "src": "test"}
}

// Fixture kinds.
const (
	clean        = "clean"        // a closed channel: 25 queued events, 2 of them taken in flight at the checkpoint
	damaged      = "damaged"      // clean with one byte flipped in the body of event 12, mid log file 1
	noCheckpoint = "nocheckpoint" // clean with the checkpoint files deleted, no backup passed
	incomplete   = "incomplete"   // clean with the checkpoint's marker set to INCOMPLETE: the backup is used
	// groups: the unnamed group and the named groups audit and mirror
	// (capacity 50, drop oldest); session 1 as clean's, then audit takes
	// 0..7 (the unnamed group 0..4); session 2 as clean's, with mirror's
	// take of 0 and 1 in flight at the close. The unnamed group holds
	// 5..29, audit 8..29, mirror 0..29.
	groups = "groups"
	// groupDamaged: groups with a byte of audit's checkpoint.meta flipped:
	// the checkpoint is unusable, the backup is used.
	groupDamaged = "groupdamaged"
)

// groupsOf is the Config.Groups of a fixture kind.
func groupsOf(kind string) []channel.GroupConfig {
	if kind != groups && kind != groupDamaged {
		return nil
	}
	return []channel.GroupConfig{{}, {Name: "audit"}, {Name: "mirror", Capacity: 50, WhenFull: channel.DropOldest}}
}

// newFixture makes a channel's files:
//
//	session 1: put events 0..19 (4 commits of 5), take and commit 0..4, close;
//	session 2: put 20..29 (2 commits), take 5 and 6 without committing, close.
//
// A channel opened afterwards holds 5..29 (5 and 6 back at the head).
func newFixture(t *testing.T, kind string) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), backup: filepath.Join(base, "backup"),
		data: filepath.Join(base, "data"), groups: groupsOf(kind)}
	c := mustOpen(t, f.config())
	putN(t, c, 0, 20, 5)
	takeN(t, c, 5, true)
	if f.groups != nil {
		takeGroup(t, c, "audit", 8)
	}
	mustClose(t, c)

	c = mustOpen(t, f.config())
	putN(t, c, 20, 10, 5)
	begin := c.Begin
	if f.groups != nil {
		g, err := c.Group("mirror")
		if err != nil {
			t.Fatal(err)
		}
		begin = g.Begin
		f.groupQueued = map[string][]int{"audit": seq(8, 30), "mirror": seq(0, 30)}
	}
	tx, err := begin()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, ok, err := tx.Take(); err != nil || !ok {
			t.Fatalf("take: %v %v", ok, err)
		}
	}
	mustClose(t, c) // the take stays in flight in the close checkpoint
	for i := 5; i < 30; i++ {
		f.queued = append(f.queued, i)
	}

	switch kind {
	case clean:
	case damaged:
		flipByteIn(t, filepath.Join(f.data, "log-0000000001"), string(body(12)))
	case incomplete:
		// Slot 4 (byte 32) of the checkpoint file is the marker (checkpoint/format.go).
		setBytes(t, filepath.Join(f.ckpt, "checkpoint"), 32, []byte("INCOMPLT"))
	case noCheckpoint:
		if err := checkpoint.Remove(vfs.OS(), f.ckpt); err != nil {
			t.Fatal(err)
		}
		f.backup = ""
	case groups:
	case groupDamaged:
		setBytes(t, filepath.Join(checkpoint.GroupDir(f.ckpt, 1), checkpoint.MetaName), 20, []byte{0xff})
	default:
		t.Fatalf("unknown fixture %q", kind)
	}
	return f
}

func mustOpen(t *testing.T, cfg channel.Config) *channel.FileChannel {
	t.Helper()
	c, err := channel.Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return c
}

func mustClose(t *testing.T, c *channel.FileChannel) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// putN commits events from..from+n-1 in transactions of batch.
func putN(t *testing.T, c *channel.FileChannel, from, n, batch int) {
	t.Helper()
	for i := from; i < from+n; {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < batch && i < from+n; j, i = j+1, i+1 {
			if err := tx.Put(channel.Event{Headers: headers(i), Body: body(i)}); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
}

// takeN takes n events in one transaction and commits it (or rolls back).
func takeN(t *testing.T, c *channel.FileChannel, n int, commit bool) []channel.Event {
	t.Helper()
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var evs []channel.Event
	for range n {
		ev, ok, err := tx.Take()
		if err != nil || !ok {
			t.Fatalf("take: %v %v", ok, err)
		}
		evs = append(evs, ev)
	}
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// takeGroup takes n events of the named group in one transaction and
// commits it.
func takeGroup(t *testing.T, c *channel.FileChannel, name string, n int) {
	t.Helper()
	g, err := c.Group(name)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, ok, err := tx.Take(); err != nil || !ok {
			t.Fatalf("take from %s: %v %v", name, ok, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// seq is from, from+1, ..., to-1.
func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// flipByteIn flips a byte in the middle of the first occurrence of s in
// the file: inside a put record, so its checksum fails.
func flipByteIn(t *testing.T, path, s string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(s))
	if i < 0 {
		t.Fatalf("%q not found in %s", s, path)
	}
	b[i+len(s)/2] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// setBytes overwrites the bytes at off in the file at path with b.
func setBytes(t *testing.T, path string, off int, b []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copy(data[off:], b)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileHashes reads every file under dir (path → content), to check that
// a command changed nothing.
func fileHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	// How long ago an event committed (inspect's lag).
	agoRE = regexp.MustCompile(`\([0-9hms.]+ ago\)`)
	// Stored and computed frame checksums: they include each log file's
	// random salt.
	checksumRE = regexp.MustCompile(`(stored|computed) 0x[0-9a-f]{8}`)
)

// normalize replaces the fixture's temp dir with $DIR, times with $TIME and
// frame checksums (salted, so different in every run) with $CRC.
func (f *fixture) normalize(s string) string {
	s = strings.ReplaceAll(s, f.base, "$DIR")
	s = checksumRE.ReplaceAllString(s, "$1 $$CRC")
	s = agoRE.ReplaceAllString(s, "($$AGO ago)")
	return timeRE.ReplaceAllString(s, "$$TIME")
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run 'go test -update' to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run 'go test -update' if the change is intended)\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}
