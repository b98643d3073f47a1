package channel

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// The rule for damaged put records (issue 13, items 1 and 2): a put
// transaction whose commit record is intact is committed. Every one of its
// puts that reads back intact is delivered; only the damaged ones are lost.
// And what a replay recovers depends on the files alone.

// oneDamagedEvent makes a closed channel of 100 events committed in
// batches of 25 with the body of event 30 damaged on disk.
func oneDamagedEvent(t *testing.T) Config {
	t.Helper()
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	putN(t, c, 0, 100, 25)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	log1 := logPath(cfg, 1)
	flipAt(t, log1, putOffset(t, log1, 30)+logfile.FrameHeaderSize+20)
	expectProblems(t, replay.ProblemCorruptRecord)
	return cfg
}

// TestOneDamagedRecordCostsOneEvent: a flipped byte in one event costs that
// event, however the channel recovers: from the checkpoint (a take skips
// it), by a full replay (the checkpoint lost), or after a repair.
func TestOneDamagedRecordCostsOneEvent(t *testing.T) {
	want := append(bodies(0, 30), bodies(31, 69)...)
	t.Run("open", func(t *testing.T) {
		cfg := oneDamagedEvent(t)
		c := mustOpen(t, cfg)
		wantEvents(t, drain(t, c), want)
		if n := c.Stats().CorruptSkipped; n != 1 {
			t.Errorf("CorruptSkipped %d, want 1", n)
		}
	})
	t.Run("full_replay", func(t *testing.T) {
		cfg := oneDamagedEvent(t)
		removeCheckpoint(t, cfg)
		c := mustOpen(t, cfg)
		if s := c.Stats(); s.ReplayCorrupt != 1 || s.ReplayDamagedTxs != 1 {
			t.Errorf("ReplayCorrupt %d, ReplayDamagedTxs %d, want 1, 1", s.ReplayCorrupt, s.ReplayDamagedTxs)
		}
		wantEvents(t, drain(t, c), want)
	})
	t.Run("repair", func(t *testing.T) {
		cfg := oneDamagedEvent(t)
		rep := mustRepair(t, cfg, RepairOptions{})
		if rep.Before.LostFullReplay != 1 || len(rep.Actions) != 1 || rep.Actions[0].Lost != 1 {
			t.Errorf("repair: before %+v, actions %+v; want 1 event lost", rep.Before, rep.Actions)
		}
		requireRepaired(t, cfg, rep, want)
	})
}

// spilledDamage makes a closed channel whose put transaction 0 holds 12
// large events spilled over several log files, with the first of them
// damaged, followed by 10 small events. It returns the bodies the channel
// holds intact, in order.
func spilledDamage(t *testing.T) (Config, []string) {
	t.Helper()
	cfg := testConfig(t, 1)
	cfg.MaxFileSize = MinMaxFileSize // spills every ~1 KiB, rolls every 4 KiB
	c := mustOpen(t, cfg)
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 12 {
		b := bigBody(i)
		if err := tx.Put(Event{Body: b}); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			want = append(want, string(b))
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !tx.spilled {
		t.Fatal("the transaction did not spill")
	}
	putN(t, c, 100, 10, 5)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	damagePut(t, cfg, bigBody(0))
	expectProblems(t, replay.ProblemCorruptRecord, replay.ProblemTornTail)
	return cfg, append(want, bodies(100, 10)...)
}

func bigBody(i int) []byte {
	return append([]byte(fmt.Sprintf("big-%02d-", i)), bytes.Repeat([]byte{'x'}, 300)...)
}

// damagePut flips a byte in the body of the put record holding body.
func damagePut(t *testing.T, cfg Config, body []byte) {
	t.Helper()
	ids, err := logfile.ListLogs(vfs.OS(), cfg.DataDirs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		path := filepath.Join(cfg.DataDirs[0], logfile.LogName(id))
		s, err := logfile.NewScanner(vfs.OS(), path, 0)
		if err != nil {
			t.Fatal(err)
		}
		for s.Next() {
			if r := s.Record(); r.Type == logfile.RecordPut && bytes.Equal(r.Body, body) {
				off := s.Offset()
				s.Close()
				flipAt(t, path, off+logfile.FrameHeaderSize+20)
				return
			}
		}
		s.Close()
	}
	t.Fatalf("no put of %.10q", body)
}

// TestReplayIsAFunctionOfTheFiles: two full replays of the same logs give
// the same queue, also once the log deletion that follows the first has
// removed a file the damaged transaction spilled into; Repair followed by a
// rebuild gives what a plain Open delivers, and Verify then finds nothing.
func TestReplayIsAFunctionOfTheFiles(t *testing.T) {
	t.Run("full_replays", func(t *testing.T) {
		cfg, want := spilledDamage(t)
		removeCheckpoint(t, cfg)
		c := mustOpen(t, cfg)
		if n := c.Len(); n != len(want) {
			t.Fatalf("first full replay: %d events, want %d", n, len(want))
		}
		// Take the events of the first spill file, so that the
		// checkpoint deletes it.
		first := takeN(t, c, 2, 2)
		wantEvents(t, first, want[:2])
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		removeCheckpoint(t, cfg)
		c = mustOpen(t, cfg)
		wantEvents(t, drain(t, c), want[2:])
	})
	t.Run("repair_then_rebuild", func(t *testing.T) {
		cfg, want := spilledDamage(t)
		rep := mustRepair(t, cfg, RepairOptions{})
		if slices.ContainsFunc(rep.Problems, func(p replay.Problem) bool { return p.Kind == replay.ProblemCheckpointDisagrees }) {
			t.Errorf("Verify after the repair: %v", rep.Problems)
		}
		requireRepaired(t, cfg, rep, want)
	})
}

// zeroBody is the body of an event whose content holds whole zero sectors.
func zeroBody() []byte { return append([]byte("zeros:"), make([]byte, 2048)...) }

// TestRotInAZeroEventCostsOnlyThatEvent (issue 27, item 1): one flipped
// bit in an acknowledged event whose body holds zero sectors, in the last
// log file, costs that event and is reported as damage. The zero sectors
// are the event's content, not a torn write: the acknowledged events after
// it are all delivered, from a killed process's files and by a full
// replay after a clean Close, whether they were committed one by one or
// with the damaged event in one transaction.
func TestRotInAZeroEventCostsOnlyThatEvent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch int // events per commit after the zero event; 0: all in its commit
		kill  bool
	}{
		{"kill/one_commit_each", 1, true},
		{"kill/one_commit", 0, true},
		{"close_then_full_replay/one_commit_each", 1, false},
		{"close_then_full_replay/one_commit", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			c := mustOpen(t, cfg)
			tx, err := c.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Put(Event{Body: zeroBody()}); err != nil {
				t.Fatal(err)
			}
			if tc.batch == 0 {
				for i := range 20 {
					if err := tx.Put(Event{Body: body(i)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if tc.batch > 0 {
				putN(t, c, 0, 20, tc.batch)
			}
			if tc.kill {
				crash(t, c)
			} else if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			damagePut(t, cfg, zeroBody())
			if !tc.kill {
				removeCheckpoint(t, cfg)
			}
			expectProblems(t, replay.ProblemCorruptRecord)
			c = mustOpen(t, cfg)
			s := c.Stats()
			wantEvents(t, drain(t, c), bodies(0, 20))
			if s.ReplayCorrupt+s.CorruptSkipped == 0 {
				t.Errorf("the damage was not counted: %+v", s)
			}
		})
	}
}
