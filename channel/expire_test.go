package channel

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/vfs"
)

// expireSetup opens a channel whose group "a" expires events after an
// hour, on a test clock, with cfgEdit applied first; it puts old events
// [0, nOld) and then, a moment later, new ones [nOld, nOld+nNew), and sets
// the clock so that exactly the old ones have expired.
func expireSetup(t *testing.T, nOld, nNew int, cfgEdit func(*Config)) (*FileChannel, Config, *testClock) {
	t.Helper()
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "a", ExpireAfter: time.Hour}}
	clock := &testClock{now: time.Now()}
	cfg.now = clock.Now
	if cfgEdit != nil {
		cfgEdit(&cfg)
	}
	c := mustOpen(t, cfg)
	putN(t, c, 0, nOld, 10)
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()
	time.Sleep(2 * time.Millisecond)
	putN(t, c, nOld, nNew, 10)
	clock.mu.Lock()
	clock.now = cut.Add(time.Hour)
	clock.mu.Unlock()
	return c, cfg, clock
}

// deadLetters collects what Config.OnDeadLetter is told.
type deadLetters struct {
	mu  sync.Mutex
	got []DeadLetter
}

func (d *deadLetters) add(dl DeadLetter) { d.mu.Lock(); defer d.mu.Unlock(); d.got = append(d.got, dl) }

func (d *deadLetters) bodies(reason string, dropped bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, dl := range d.got {
		if dl.Reason == reason && dl.Dropped == dropped {
			out = append(out, string(dl.Event.Body))
		}
	}
	return out
}

func TestExpireAfterDropsOnlyTheOldEventsAtTake(t *testing.T) {
	var dl deadLetters
	c, cfg, _ := expireSetup(t, 7, 5, func(cfg *Config) { cfg.OnDeadLetter = dl.add })
	a := groupOf(t, c, "a")
	wantEvents(t, takeWith(t, a.Begin, 100, 4), bodies(7, 5))
	if s := a.Stats(); s.Expired != 7 || s.ExpiredDeadLettered != 0 || s.Taken != 5 {
		t.Fatalf("Expired %d, ExpiredDeadLettered %d, Taken %d; want 7, 0, 5", s.Expired, s.ExpiredDeadLettered, s.Taken)
	}
	wantEvents(t, dl.bodies(deadReasonExpired, true), bodies(0, 7))
	// The drops are in the log: a crash and a full replay drop them again
	// or find them dropped; nothing comes back.
	crash(t, c)
	c = mustOpen(t, cfg)
	if n := groupOf(t, c, "a").Len(); n != 0 {
		t.Fatalf("%d events back after a crash", n)
	}
}

func TestExpireAfterMovesToTheDeadLetterGroup(t *testing.T) {
	var dl deadLetters
	c, _, _ := expireSetup(t, 6, 4, func(cfg *Config) {
		cfg.Groups[0].DeadLetter = "a.dlq"
		cfg.OnDeadLetter = dl.add
	})
	a := groupOf(t, c, "a")
	wantEvents(t, takeWith(t, a.Begin, 100, 3), bodies(6, 4))
	wantEvents(t, dl.bodies(deadReasonExpired, false), bodies(0, 6))
	if s := a.Stats(); s.Expired != 6 || s.ExpiredDeadLettered != 6 {
		t.Fatalf("Expired %d, ExpiredDeadLettered %d; want 6 and 6", s.Expired, s.ExpiredDeadLettered)
	}
	// The dead-letter group has no ExpireAfter of its own: they wait there.
	wantEvents(t, takeWith(t, groupOf(t, c, "a.dlq").Begin, 100, 4), bodies(0, 6))
}

// TestExpireAfterSweepsAnIdleGroup: nobody takes; a checkpoint moves the
// expired events out and their log files go.
func TestExpireAfterSweepsAnIdleGroup(t *testing.T) {
	for _, dlq := range []bool{false, true} {
		c, cfg, _ := expireSetup(t, 300, 10, func(cfg *Config) {
			cfg.MaxFileSize = 4096
			cfg.Groups = append(cfg.Groups, GroupConfig{Name: "b"})
			if dlq {
				cfg.Groups[0].DeadLetter = "a.dlq"
			}
		})
		// b takes everything: only a holds the old files.
		wantEvents(t, takeWith(t, groupOf(t, c, "b").Begin, 1000, 50), bodies(0, 310))
		before := c.Stats().LogFiles
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		a := groupOf(t, c, "a")
		if a.Len() != 10 || a.Stats().Expired != 300 {
			t.Fatalf("dlq %v: after the sweep a holds %d, expired %d; want 10 and 300", dlq, a.Len(), a.Stats().Expired)
		}
		if dlq {
			if n := groupOf(t, c, "a.dlq").Len(); n != 300 {
				t.Fatalf("the dead-letter group holds %d, want 300", n)
			}
		} else if after := c.Stats().LogFiles; after >= before-3 {
			t.Fatalf("%d log files after the sweep, %d before: the expired events' files were kept", after, before)
		}
		// Across Close and Open: the times are in the log.
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = mustOpen(t, cfg)
		wantEvents(t, takeWith(t, groupOf(t, c, "a").Begin, 100, 7), bodies(300, 10))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExpireAfterAppliesAfterReopen: events expire by their commit time
// in the log, whatever happened to the process.
func TestExpireAfterAppliesAfterReopen(t *testing.T) {
	c, cfg, _ := expireSetup(t, 5, 5, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	wantEvents(t, takeWith(t, groupOf(t, c, "a").Begin, 100, 3), bodies(5, 5))
}

// TestExpireAfterSweepCrash: a crash (of the process, or a power loss
// that loses what was not synced) at every write of a sweep and its
// checkpoint finds the move or the drop whole or not at all.
func TestExpireAfterSweepCrash(t *testing.T) {
	for _, dlq := range []bool{false, true} {
		mem := vfs.NewMem()
		c, cfg, clock := expireSetup(t, 40, 5, func(cfg *Config) {
			cfg.fs = mem
			if dlq {
				cfg.Groups[0].DeadLetter = "a.dlq"
			}
		})
		var images []*vfs.MemFS
		mem.SetHook(func(p vfs.CrashPoint) {
			images = append(images, p.Clone(false, 0), p.Clone(true, p.Seq))
		})
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		mem.SetHook(nil)
		if len(images) < 4 {
			t.Fatalf("only %d crash images", len(images))
		}
		for i, img := range images {
			cfg := cfg
			cfg.fs, cfg.now = img, clock.Now
			cfg.Groups = slices.Clone(cfg.Groups)
			cfg.Groups[0].ExpireAfter = 0 // what the image holds, not a new expiry
			ci, err := Open(cfg)
			if err != nil {
				t.Fatalf("dlq %v, image %d: %v", dlq, i, err)
			}
			n, dn := groupOf(t, ci, "a").Len(), 0
			if dlq {
				dn = groupOf(t, ci, "a.dlq").Len()
			}
			if (n != 45 && n != 5) || (dlq && n+dn != 45) {
				t.Fatalf("dlq %v, image %d: a holds %d, its dead-letter group %d; want 45 and 0, or 5 and 40", dlq, i, n, dn)
			}
			if err := ci.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExpireAfterNegativeIsRefused(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "a", ExpireAfter: -time.Minute}}
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "ExpireAfter") {
		t.Fatalf("Open with a negative ExpireAfter: %v", err)
	}
	c := mustOpen(t, testConfig(t, 1))
	if _, err := c.AddGroup(GroupConfig{Name: "x", ExpireAfter: -1}); err == nil || !strings.Contains(err.Error(), "ExpireAfter") {
		t.Fatalf("AddGroup with a negative ExpireAfter: %v", err)
	}
	if slices.Contains(c.GroupNames(), "x") {
		t.Fatal("AddGroup created the group it refused")
	}
}

// TestExpireAfterSweepRunsOnTheCheckpointTimer: with nothing written, the
// periodic tick still sweeps.
func TestExpireAfterSweepRunsOnTheCheckpointTimer(t *testing.T) {
	c, _, _ := expireSetup(t, 20, 5, func(cfg *Config) { cfg.CheckpointInterval = 10 * time.Millisecond })
	a := groupOf(t, c, "a")
	waitLen(t, a, 5, 5*time.Second)
	// The queue changes before the counter: wait for it too.
	for start := time.Now(); a.Stats().Expired != 20; time.Sleep(time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("Expired %d, want 20", a.Stats().Expired)
		}
	}
}

// TestExpireAfterFullDeadLetterGroup: a full Block dead-letter group
// refuses expired events: they are delivered (counted as refused), in
// order, and neither lost nor taken twice.
func TestExpireAfterFullDeadLetterGroup(t *testing.T) {
	c, _, _ := expireSetup(t, 6, 3, func(cfg *Config) {
		cfg.TransactionCapacity = 10
		cfg.Groups[0].DeadLetter = "a.dlq"
		cfg.Groups = append(cfg.Groups, GroupConfig{Name: "a.dlq", Capacity: 2})
	})
	if err := c.Checkpoint(); err != nil { // the sweep moves 2, returns 4
		t.Fatal(err)
	}
	a := groupOf(t, c, "a")
	wantEvents(t, takeWith(t, a.Begin, 100, 4), bodies(2, 7))
	wantEvents(t, takeWith(t, groupOf(t, c, "a.dlq").Begin, 100, 4), bodies(0, 2))
	if s := a.Stats(); s.Expired != 2 || s.DeadLetterRefused == 0 {
		t.Fatalf("Expired %d, DeadLetterRefused %d; want 2 and some", s.Expired, s.DeadLetterRefused)
	}
}

// TestExpiredPrefixUsesTheFileIndex: a log file whose index says its
// latest commit expired holds only expired events: none is read.
func TestExpiredPrefixUsesTheFileIndex(t *testing.T) {
	c, _, clock := expireSetup(t, 3, 0, nil)
	a := groupOf(t, c, "a")
	head := c.headPointers(a.g, 10)
	if len(head) != 3 {
		t.Fatalf("%d events at the head, want 3", len(head))
	}
	// Pointers into the same file that no record is at: a read fails.
	bogus := []eventqueue.Pointer{eventqueue.NewPointer(head[0].FileID(), 1<<30), head[1]}
	if n := c.expiredPrefix(a.g, bogus); n != 2 {
		t.Fatalf("expiredPrefix = %d, want 2: the file's index says every event there expired", n)
	}
	clock.mu.Lock()
	clock.now = time.Now() // nothing expired: the index does not say all, the read fails
	clock.mu.Unlock()
	if n := c.expiredPrefix(a.g, bogus); n != 0 {
		t.Fatalf("expiredPrefix = %d, want 0", n)
	}
	// The head moved: the sweep takes nothing it did not check.
	if got := c.takeExpiredHead(a.g, 1<<40, head[1:]); len(got) != 0 {
		t.Fatalf("took %d events that are not at the head", len(got))
	}
}

// TestExpireAfterSparesEventsWithoutATime: events of log files older than
// format version 7 (testdata/v5channel) have no commit time: they never
// expire, while the events committed since do.
func TestExpireAfterSparesEventsWithoutATime(t *testing.T) {
	cfg := v5ChannelConfig(t)
	cfg.Groups = []GroupConfig{{ExpireAfter: time.Minute}}
	cfg.now = func() time.Time { return time.Now().Add(time.Hour) }
	c := mustOpen(t, cfg)
	putN(t, c, 25, 2, 2)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, drain(t, c), bodies(5, 20))
	if s := c.Stats().Groups[0]; s.Expired != 2 {
		t.Fatalf("Expired %d, want 2 (the new events)", s.Expired)
	}
}

// TestExpireAfterWithLeases: takers whose leases expire while their Take
// drops an expired event: each old event is dropped once and never
// delivered, each new one consumed once.
func TestExpireAfterWithLeases(t *testing.T) {
	var dl deadLetters
	const n = 600
	c, _, _ := expireSetup(t, n, n, func(cfg *Config) {
		cfg.Capacity, cfg.TransactionCapacity = 5000, 10
		cfg.Groups[0].LeaseTimeout = 200 * time.Microsecond
		cfg.OnDeadLetter = dl.add
	})
	a := groupOf(t, c, "a")
	var mu sync.Mutex
	consumed := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 400 {
				tx, err := a.Begin()
				if err != nil {
					t.Error(err)
					return
				}
				var got []string
				for range 3 {
					ev, ok, err := tx.Take()
					if err != nil || !ok {
						break
					}
					got = append(got, string(ev.Body))
				}
				time.Sleep(time.Duration(i%3) * 150 * time.Microsecond)
				if err := tx.Commit(); err == nil {
					mu.Lock()
					for _, b := range got {
						consumed[b]++
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, b := range takeWith(t, a.Begin, 2*n, 10) {
		consumed[b]++
	}
	dropped := map[string]int{}
	for _, b := range dl.bodies(deadReasonExpired, true) {
		dropped[b]++
	}
	for i, b := range bodies(0, 2*n) {
		if want := i >= n; consumed[b] != btoi(want) || dropped[b] != btoi(!want) {
			t.Fatalf("%s: consumed %d times, dropped %d times", b, consumed[b], dropped[b])
		}
	}
	if a.Stats().LeasesExpired == 0 {
		t.Fatal("no lease expired: the race was not exercised")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestExpireAfterSweepRacesTakers: sweeps (checkpoints) while takers take
// and roll back: each old event leaves once, by the sweep or a Take, and
// is never delivered; each new one is consumed once.
func TestExpireAfterSweepRacesTakers(t *testing.T) {
	for _, dlq := range []bool{false, true} {
		var dl deadLetters
		const n = 400
		c, _, _ := expireSetup(t, n, n, func(cfg *Config) {
			cfg.Capacity, cfg.TransactionCapacity = 5000, 10
			cfg.OnDeadLetter = dl.add
			if dlq {
				cfg.Groups[0].DeadLetter = "a.dlq"
			}
		})
		a := groupOf(t, c, "a")
		var mu sync.Mutex
		consumed := map[string]int{}
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for i := range 150 {
					tx, err := a.Begin()
					if err != nil {
						t.Error(err)
						return
					}
					var got []string
					for range 4 {
						ev, ok, err := tx.Take()
						if err != nil || !ok {
							break
						}
						got = append(got, string(ev.Body))
					}
					if (i+w)%3 == 0 {
						tx.Rollback()
						continue
					}
					if err := tx.Commit(); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, b := range got {
						consumed[b]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Go(func() {
			for range 20 {
				if err := c.Checkpoint(); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Wait()
		for _, b := range takeWith(t, a.Begin, 2*n, 10) {
			consumed[b]++
		}
		left := map[string]int{}
		for _, b := range dl.bodies(deadReasonExpired, !dlq) {
			left[b]++
		}
		for i, b := range bodies(0, 2*n) {
			if isNew := i >= n; consumed[b] != btoi(isNew) || left[b] != btoi(!isNew) {
				t.Fatalf("dlq %v: %s consumed %d times, expired %d times", dlq, b, consumed[b], left[b])
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExpireSweepWithAPanickingOnDeadLetter: an OnDeadLetter that panics
// on the checkpoint goroutine's sweep is recovered and logged there: the
// sweep's moves stand, the loop goes on, and the channel keeps working.
func TestExpireSweepWithAPanickingOnDeadLetter(t *testing.T) {
	var calls atomic.Int64
	c, _, _ := expireSetup(t, 20, 5, func(cfg *Config) {
		cfg.CheckpointInterval = 5 * time.Millisecond
		cfg.OnDeadLetter = func(DeadLetter) { calls.Add(1); panic("sink bug") }
	})
	defer c.Close()
	a := groupOf(t, c, "a")
	deadline := time.Now().Add(5 * time.Second)
	for a.Stats().Expired < 20 || calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("expired %d, OnDeadLetter called %d times: the background sweep did not run", a.Stats().Expired, calls.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	putN(t, c, 25, 5, 5)
	wantEvents(t, takeWith(t, a.Begin, 100, 7), bodies(20, 10))
	if err := c.Health(); err != nil {
		t.Fatalf("Health after the recovered panic: %v", err)
	}
}
