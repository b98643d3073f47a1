package channel

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// These tests run the channel on an in-memory filesystem and take "power
// loss" images of it: what a crash at that instant would leave on disk (only
// fsync'd bytes and directory entries made durable by a directory fsync).
// Each image is opened and must hold exactly the committed state. Deleting
// any fsync on the commit path (the log's fsync, the directory fsync of a
// new log file) or on the checkpoint path makes them fail.

func memConfig(fsys vfs.FS, dirs int) Config {
	cfg := Config{
		CheckpointDir:        "/fc/checkpoint",
		Capacity:             500,
		TransactionCapacity:  50,
		CheckpointInterval:   1 << 62,        // checkpoints only where the test says
		MaxFileSize:          4096,           // roll often
		Preallocate:          MinPreallocate, // every file laid out: records overwrite zeros
		MinimumRequiredSpace: -1,
		SpaceReserve:         -1,
		KeepAlive:            -1,
		fs:                   fsys,
	}
	for i := range dirs {
		cfg.DataDirs = append(cfg.DataDirs, fmt.Sprintf("/fc/data%d", i))
	}
	return cfg
}

type image struct {
	fs   *vfs.MemFS
	want []string
	what string
}

// checkImage opens a power-loss image and compares its events with want.
func checkImage(t *testing.T, img image, dirs, recycle int) {
	t.Helper()
	c, err := Open(recycleConfig(memConfig(img.fs, dirs), recycle))
	if err != nil {
		t.Fatalf("%s: open after power loss: %v", img.what, err)
	}
	got := drain(t, c)
	if !slices.Equal(got, img.want) {
		t.Fatalf("%s: after power loss got %d events %s, want %d %s (recovered from %s)",
			img.what, len(got), short(got), len(img.want), short(img.want), c.Stats().RecoveredFrom)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("%s: close: %v", img.what, err)
	}
}

func TestPowerLossKeepsExactlyTheCommittedState(t *testing.T) {
	for _, dirs := range []int{1, 2} {
		for _, tear := range []bool{false, true} {
			t.Run(fmt.Sprintf("dirs=%d/tear=%v", dirs, tear), func(t *testing.T) {
				powerLossWorkload(t, dirs, tear, 1, 0)
			})
			// The same with the consumed log files recycled: a torn
			// overwrite lands in old records, not zeros.
			t.Run(fmt.Sprintf("dirs=%d/tear=%v/recycle", dirs, tear), func(t *testing.T) {
				powerLossWorkload(t, dirs, tear, 1, 2)
			})
		}
	}
}

// powerLossWorkload runs a random mix of put, take, rollback and checkpoint
// steps, with transactions left open across steps, and checks a power-loss
// image after every step; recycle is Config.RecycleLogFiles (with it, the
// log files must have been recycled by the end).
func powerLossWorkload(t *testing.T, dirs int, tear bool, seed int64, recycle int) {
	rng := rand.New(rand.NewSource(seed))
	fsys := vfs.NewMem()
	c := mustOpen(t, recycleConfig(memConfig(fsys, dirs), recycle))
	var model []string // committed, not taken, in order
	next := 0
	var images []image
	snap := func(what string) {
		images = append(images, image{fs: fsys.CrashClone(tear, rng.Int63()), want: append([]string(nil), model...), what: what})
	}
	var openPut *Transaction // a put transaction left open (its events must never appear)
	var openTake *Transaction
	var openTaken []string
	for step := range 60 {
		switch op := rng.Intn(10); {
		case op < 4: // put batch
			n := 1 + rng.Intn(20)
			tx, _ := c.Begin()
			var batch []string
			for range n {
				b := string(body(next))
				next++
				if err := tx.Put(Event{Body: []byte(b)}); err != nil {
					t.Fatal(err)
				}
				batch = append(batch, b)
			}
			if rng.Intn(5) == 0 {
				tx.Rollback()
			} else {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				model = append(model, batch...)
			}
		case op < 7: // take batch, commit or roll back
			if openTake != nil {
				continue
			}
			tx, _ := c.Begin()
			n := 0
			for range 1 + rng.Intn(15) {
				if _, ok, err := tx.Take(); err != nil {
					t.Fatal(err)
				} else if !ok {
					break
				}
				n++
			}
			if rng.Intn(4) == 0 {
				tx.Rollback()
			} else {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				model = model[n:]
			}
		case op == 7:
			if err := c.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		case op == 8: // open or finish a long-lived put transaction
			if openPut == nil {
				openPut, _ = c.Begin()
				for range 5 {
					openPut.Put(Event{Body: []byte(fmt.Sprintf("uncommitted-%d", step))})
				}
			} else {
				openPut.Rollback()
				openPut = nil
			}
		case op == 9: // open or commit a long-lived take transaction
			if openTake == nil {
				openTake, _ = c.Begin()
				openTaken = nil
				for range 3 {
					ev, ok, err := openTake.Take()
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						openTaken = append(openTaken, string(ev.Body))
					}
				}
			} else {
				if err := openTake.Commit(); err != nil {
					t.Fatal(err)
				}
				model = model[len(openTaken):]
				openTake = nil
			}
		}
		snap(fmt.Sprintf("step %d", step))
	}
	if recycle > 0 {
		if openTake != nil {
			if err := openTake.Commit(); err != nil {
				t.Fatal(err)
			}
			model = model[len(openTaken):]
		}
		model = powerLossSteady(t, c, model, &next, func(what string, m []string) { model = m; snap(what) })
	}
	if recycle > 0 && c.Stats().LogFilesRecycled == 0 {
		t.Fatalf("no log file was recycled: the workload tests nothing: %+v", c.Stats())
	}
	c.Close()
	snap("after close")
	for _, img := range images {
		checkImage(t, img, dirs, recycle)
	}
}

// powerLossSteady runs powerLossWorkload's steady state: the consumer
// catches up, so files are consumed, reclaimed at the checkpoints and
// recycled by the next rolls. It returns the model after it.
func powerLossSteady(t *testing.T, c *FileChannel, model []string, next *int, snap func(what string, model []string)) []string {
	for step := range 40 {
		tx, _ := c.Begin()
		n := 0
		for range 40 {
			if _, ok, err := tx.Take(); err != nil {
				t.Fatal(err)
			} else if !ok {
				break
			}
			n++
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		model = model[n:]
		for range 2 {
			tx, _ = c.Begin()
			for range 10 {
				b := string(body(*next))
				*next++
				if err := tx.Put(Event{Body: []byte(b)}); err != nil {
					t.Fatal(err)
				}
				model = append(model, b)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			snap(fmt.Sprintf("steady step %d", step), model)
		}
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		snap(fmt.Sprintf("steady step %d, checkpointed", step), model)
	}
	return model
}

// recycleConfig is cfg with RecycleLogFiles recycle.
func recycleConfig(cfg Config, recycle int) Config {
	if recycle > 0 {
		cfg.RecycleLogFiles = recycle
	}
	return cfg
}

// With NoSync, commits are not fsync'd, but a checkpoint makes everything
// it covers durable: its ring must never point at bytes a power loss can
// take away.
func TestNoSyncCheckpointMakesCoveredEventsDurable(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := memConfig(fsys, 1)
	cfg.NoSync = true
	c := mustOpen(t, cfg)
	putN(t, c, 0, 30, 10)
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	putN(t, c, 30, 10, 10) // not covered: may be lost
	img := fsys.CrashClone(true, 7)
	c.Close()
	c = mustOpen(t, memConfig(img, 1))
	defer c.Close()
	got := drain(t, c)
	if len(got) < 30 || !slices.Equal(got[:30], bodies(0, 30)) {
		t.Fatalf("after power loss got %s, want at least the 30 checkpointed events", short(got))
	}
}

// TestRecycledLeftoversAreNotDamage: after a power loss, the active log
// file, a recycled one, holds its records and then the old file's bytes.
// Verify reports no problem (its tail is leftover, not torn), and Open cuts
// nothing into a .corrupt file.
func TestRecycledLeftoversAreNotDamage(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := recycleConfig(memConfig(fsys, 1), 2)
	cfg.MaxFileSize = 16 << 10 // old bytes past the 4 KiB a recycled header zeroes
	reg := prometheus.NewRegistry()
	cfg.Name, cfg.Registerer = "r", reg
	c := mustOpen(t, cfg)
	next := 0
	for c.Stats().LogFilesRecycled == 0 {
		putN(t, c, next, 200, 50)
		next += 200
		drain(t, c)
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	recycled, _ := metricValue(t, reg, "filechannel_log_files_recycled_total", nil)
	pooled, _ := metricValue(t, reg, "filechannel_log_files_pooled", nil)
	if recycled != float64(st.LogFilesRecycled) || pooled != float64(st.LogFilesPooled) {
		t.Fatalf("metrics recycled %v, pooled %v; Stats %d, %d", recycled, pooled, st.LogFilesRecycled, st.LogFilesPooled)
	}
	cfg.Registerer = nil
	putN(t, c, next, 5, 5) // into the recycled file, before its old bytes
	img := fsys.CrashClone(false, 1)
	c.Close()
	cfg.fs = img
	rep, err := Verify(cfg)
	if err != nil {
		t.Fatal(err)
	}
	leftover := 0
	for _, l := range rep.Logs {
		if l.Tail == logfile.TailLeftover {
			leftover++
		}
	}
	if len(rep.Problems) != 0 || leftover == 0 {
		t.Fatalf("verify: problems %v, %d files with a leftover tail; want none and at least one", rep.Problems, leftover)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	if got := drain(t, c); !slices.Equal(got, bodies(next, 5)) {
		t.Fatalf("after the power loss: %s, want the 5 events put last", short(got))
	}
	names, _ := img.List(cfg.DataDirs[0])
	if st := c.Stats(); st.TornTails != 0 || slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".corrupt") }) {
		t.Fatalf("torn tails %d, files %v: leftovers cut as a torn tail", st.TornTails, names)
	}
}
