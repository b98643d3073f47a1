package channel

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	dto "github.com/prometheus/client_model/go"
)

// fsyncs returns how many fsyncs of data log files c has issued (the
// count of its fsync_duration_seconds histogram).
func fsyncs(t testing.TB, c *FileChannel) uint64 {
	t.Helper()
	var m dto.Metric
	if err := c.metrics.fsyncSeconds.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// fsyncsOfProducers runs producers committing commits puts of batch events
// each on a real disk, with a drain taking at batch 100 beside them if
// drain, and returns the fsyncs of data log files they issued and the
// drain's take commits. The drain takes full batches from a backlog of
// 10,000 events put before and stops when a batch comes short.
func fsyncsOfProducers(t *testing.T, cfg Config, producers, commits, batch int, drain bool) (fs uint64, takes int) {
	c := mustOpen(t, cfg)
	defer c.Close()
	body := make([]byte, 1024)
	if drain { // a backlog for the drain, put before counting
		for range 100 {
			putKiB(t, c, body, 100)
		}
	}
	before := fsyncs(t, c)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range commits {
				putKiB(t, c, body, batch)
			}
		}()
	}
	var dw sync.WaitGroup
	if drain {
		dw.Add(1)
		go func() {
			defer dw.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				n := takeCommit(t, c, 100)
				if n > 0 {
					takes++
				}
				if n < 100 { // only full batches: the drain stops with the backlog
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	dw.Wait()
	return fsyncs(t, c) - before, takes
}

func putKiB(t testing.TB, c *FileChannel, body []byte, n int) {
	tx, err := c.Begin()
	if err != nil {
		t.Error(err)
		return
	}
	for range n {
		if err := tx.Put(Event{Body: body}); err != nil {
			t.Error(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Error(err)
	}
}

// takeCommit takes up to n events in one transaction and commits; it returns
// how many it took.
func takeCommit(t testing.TB, c *FileChannel, n int) int {
	tx, err := c.Begin()
	if err != nil {
		t.Error(err)
		return 0
	}
	k := 0
	for ; k < n; k++ {
		_, ok, err := tx.Take()
		if err != nil {
			t.Error(err)
		}
		if !ok {
			break
		}
	}
	if err := tx.Commit(); err != nil {
		t.Error(err)
	}
	return k
}

// TestDrainBesideProducersFsyncs measures, on the real disk, the fsyncs a
// drain at batch 100 adds to those of 4 producers committing batches of 10
// beside it in the same data dir: its take commits share the producers'
// group commits (Writer.SyncTo), and with TakeSyncDelay they lead none of
// their own while put commits keep coming. The counts depend on the disk's
// fsync time and the machine's load (a loaded CI machine measured 1.41x
// with the option), so they are logged; with FC_MEASURE_FSYNCS=1 the test
// also fails if the drain adds more than 10 % with the option (issue 33's
// target, a measurement for a quiet machine, not a unit test).
func TestDrainBesideProducersFsyncs(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement on the real disk")
	}
	strict := os.Getenv("FC_MEASURE_FSYNCS") == "1"
	for _, delay := range []time.Duration{0, 10 * time.Millisecond} {
		config := func() Config {
			cfg := testConfig(t, 1)
			cfg.Capacity, cfg.TransactionCapacity = 100_000, 1000
			cfg.Preallocate = -1
			cfg.KeepAlive = time.Second
			cfg.TakeSyncDelay = delay
			return cfg
		}
		alone, _ := fsyncsOfProducers(t, config(), 4, 200, 10, false)
		with, takes := fsyncsOfProducers(t, config(), 4, 200, 10, true)
		ratio := float64(with) / float64(alone)
		t.Logf("TakeSyncDelay %v: producers alone %d fsyncs; with a drain of %d take commits %d (%.2fx)",
			delay, alone, takes, with, ratio)
		if strict && delay > 0 && ratio > 1.10 {
			t.Errorf("TakeSyncDelay %v: the drain added %.0f %% fsyncs, want at most 10 %%", delay, 100*(ratio-1))
		}
	}
}

// takeSyncImage opens a power-loss image of fsys (no tear) and returns its
// events.
func takeSyncImage(t *testing.T, fsys *vfs.MemFS) []string {
	t.Helper()
	c := mustOpen(t, memConfig(fsys.CrashClone(false, 1), 1))
	defer c.Close()
	return drain(t, c)
}

// takeSyncConfig is a one-dir channel on fsys with TakeSyncDelay and no
// laid-out zeros (whose fdatasyncs would sync the take records too).
func takeSyncConfig(fsys *vfs.MemFS, delay time.Duration) Config {
	cfg := memConfig(fsys, 1)
	cfg.MaxFileSize = 1 << 20
	cfg.Preallocate = -1
	cfg.TakeSyncDelay = delay
	return cfg
}

func TestTakeSyncDelayTimerMakesTakesDurable(t *testing.T) {
	const delay = 20 * time.Millisecond
	fsys := vfs.NewMem()
	c := mustOpen(t, takeSyncConfig(fsys, delay))
	defer c.Close()
	putN(t, c, 0, 10, 10)
	start := time.Now()
	wantEvents(t, takeN(t, c, 4, 4), bodies(0, 4))
	if time.Since(start) < delay/2 { // else the timer may have run already
		// Written, not synced: a power loss now brings them back.
		wantEvents(t, takeSyncImage(t, fsys), bodies(0, 10))
	}
	time.Sleep(delay + 100*time.Millisecond) // no other commit comes: the timer syncs
	wantEvents(t, takeSyncImage(t, fsys), bodies(4, 6))
}

func TestTakeSyncDelayCloseMakesTakesDurable(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := takeSyncConfig(fsys, time.Hour)
	cfg.NoCheckpointOnClose = true
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 10)
	wantEvents(t, takeN(t, c, 4, 4), bodies(0, 4))
	wantEvents(t, takeSyncImage(t, fsys), bodies(0, 10))
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Close took %v: it waited for the take commits' timer", d)
	}
	wantEvents(t, takeSyncImage(t, fsys), bodies(4, 6))
}

func TestTakeSyncDelayPutCommitMakesTakesDurable(t *testing.T) {
	fsys := vfs.NewMem()
	c := mustOpen(t, takeSyncConfig(fsys, time.Hour))
	defer c.Close()
	putN(t, c, 0, 10, 10)
	wantEvents(t, takeN(t, c, 4, 4), bodies(0, 4))
	putN(t, c, 10, 1, 1) // its fsync covers the take commit written before it
	wantEvents(t, takeSyncImage(t, fsys), bodies(4, 7))
}

func TestTakeSyncDelayNegativeRefused(t *testing.T) {
	cfg := memConfig(vfs.NewMem(), 1)
	cfg.TakeSyncDelay = -time.Millisecond
	if c, err := Open(cfg); err == nil {
		c.Close()
		t.Fatal("Open accepted a negative TakeSyncDelay")
	}
}

// TestCrashStateEnumerationTakeSyncDelay is the crash-state enumeration
// with Config.TakeSyncDelay: no acknowledged put is lost and every event
// not taken comes back, while a take commit that returned may come back
// too (the model leaves it committing: present or not, never twice).
func TestCrashStateEnumerationTakeSyncDelay(t *testing.T) {
	t.Parallel()
	runCrashEnumeration(t, []crashCase{
		{name: "takesync/serial/1dir", dirs: 1, steps: 70, seeds: 6, every: 4, run: crashTakeSyncDelay(crashSerial)},
		{name: "takesync/concurrent/2dirs", dirs: 2, steps: 60, seeds: 4, every: 4, run: crashTakeSyncDelay(crashConcurrent)},
	})
}

// crashTakeSyncDelay is d with take commits made durable within 1 ms
// (Config.TakeSyncDelay): the timer's fsyncs run between the workload's.
func crashTakeSyncDelay(d crashDriver) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		r.cfg.TakeSyncDelay = time.Millisecond
		r.lazyTakes = true
		return d(r, seed, steps)
	}
}

// TestCrashStateEnumerationDeadLettersTakeSyncDelay is the dead-letter
// workload with Config.TakeSyncDelay: a take commit that returned may be
// undone by a crash, except one that moved events to the dead-letter group
// (synced at once: the dead-letter group's take of them, in the other data
// dir, must never survive the move).
func TestCrashStateEnumerationDeadLettersTakeSyncDelay(t *testing.T) {
	t.Parallel()
	runCrashEnumeration(t, []crashCase{
		{name: "takesync/deadletters/2dirs", dirs: 2, steps: 40, every: 8, longSteps: 120, seeds: 2,
			run: crashTakeSyncDelay(crashDeadLetters)},
	})
}

// TestTakeSyncDelayKeepsTheLastTakeOfEachDir: take commits reach syncTake
// in any order, not their appends'; the timer must sync to the last one
// appended (a put commit's fsync between two of them would otherwise leave
// the later one unsynced).
func TestTakeSyncDelayKeepsTheLastTakeOfEachDir(t *testing.T) {
	c := mustOpen(t, takeSyncConfig(vfs.NewMem(), time.Hour))
	defer c.Close()
	putN(t, c, 0, 1, 1) // the dir's first writer
	w1 := c.logs.Active(0)
	if err := c.logs.Roll(0); err != nil {
		t.Fatal(err)
	}
	w2 := c.logs.Active(0)
	for _, order := range [][2]logfile.Appended{
		{{W: w1, End: 200}, {W: w1, End: 100}}, // same file, later first
		{{W: w2, End: 10}, {W: w1, End: 300}},  // newer file first
	} {
		for _, a := range order {
			if err := c.syncTake(0, a, false); err != nil {
				t.Fatal(err)
			}
		}
		c.takeSyncs.mu.Lock()
		got := c.takeSyncs.pending[0]
		c.takeSyncs.pending = nil
		c.takeSyncs.mu.Unlock()
		if got.W != order[0].W || got.End != order[0].End {
			t.Errorf("after take commits ending at %d then %d: the timer would sync to %d (file %d), want %d (file %d)",
				order[0].End, order[1].End, got.End, got.W.ID(), order[0].End, order[0].W.ID())
		}
	}
}

// TestTakeSyncDelayCommitDuringClose: a take commit that saw the channel
// open reaches syncTake after Close stopped the timer; it must not arm
// another, which Close would wait for.
func TestTakeSyncDelayCommitDuringClose(t *testing.T) {
	const delay = 5 * time.Second
	c := mustOpen(t, takeSyncConfig(vfs.NewMem(), delay))
	putN(t, c, 0, 1, 1)
	a := logfile.Appended{W: c.logs.Active(0), End: 1} // synced long ago: a no-op
	c.commitMu.RLock()                                 // the commit in flight
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for !c.closed.Load() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // Close stops the timer, then waits for commitMu
	err := c.syncTake(0, a, false)
	c.commitMu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > delay/2 {
		t.Fatalf("Close took %v: it waited for a timer armed after it began", d)
	}
}
