package channel

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// openFDs returns the number of descriptors the process has open.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // ReadDir's own
}

// TestManyLogFilesUnderRlimitNofile is TestManyLogFilesKeepOpenFilesBounded
// on the OS filesystem (replay maps the files) under a real RLIMIT_NOFILE: a
// child process lowers its limit to a little above MaxOpenLogFiles and runs
// a channel with several times as many log files, counting its descriptors
// in /proc/self/fd. Before the reader cache, commits failed with EMFILE
// once the channel had about as many files as the limit.
func TestManyLogFilesUnderRlimitNofile(t *testing.T) {
	const childEnv = "FILECHANNEL_RLIMIT_CHILD"
	if os.Getenv(childEnv) == "" {
		if testing.Short() {
			t.Skip("spawns a process")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestManyLogFilesUnderRlimitNofile$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	base := openFDs(t)
	limit := uint64(base + DefaultMaxOpenLogFiles + 32)
	if old.Cur < limit {
		t.Skipf("RLIMIT_NOFILE is %d already, below the %d this test sets", old.Cur, limit)
	}
	lowered := syscall.Rlimit{Cur: limit, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restore RLIMIT_NOFILE: %v", err)
		}
	}()

	const events = 4 * 2 * DefaultMaxOpenLogFiles // four to a file: twice as many files as readers
	cfg := testConfig(t, 2)
	cfg.Capacity, cfg.TransactionCapacity = events, 50
	cfg.MaxFileSize = MinMaxFileSize
	cfg.NoSync = true // rolls still fsync
	peak := 0
	sample := func() { peak = max(peak, openFDs(t)) }
	c := mustOpen(t, cfg)
	for i := 0; i < events; i += 64 {
		putBig(t, c, i, min(64, events-i))
		sample()
	}
	files := c.Stats().LogFiles
	if err := c.Health(); err != nil {
		t.Fatalf("Health with %d log files: %v", files, err)
	}
	for got := 0; got < events/2; got += 32 {
		wantEvents(t, takeN(t, c, 32, 32), bigEvents(got, 32))
		sample()
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("RLIMIT_NOFILE %d, %d descriptors at the start; %d log files: at most %d descriptors open (sampled)",
		limit, base, files, peak)

	c = mustOpen(t, cfg)
	sample()
	wantEvents(t, drain(t, c), bigEvents(events/2, events/2))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, cfg)
	if peak > int(limit) {
		t.Fatalf("%d descriptors open, above the limit %d", peak, limit)
	}
}
