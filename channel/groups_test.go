package channel

import (
	"errors"
	"path/filepath"

	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/replay"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
)

// groupsConfig is testConfig with named groups a and b (and no unnamed
// group).
func groupsConfig(t testing.TB, groups ...GroupConfig) Config {
	cfg := testConfig(t, 2)
	if len(groups) == 0 {
		groups = []GroupConfig{{Name: "a"}, {Name: "b"}}
	}
	cfg.Groups = groups
	return cfg
}

func mustGroup(t testing.TB, c *FileChannel, name string) *Group {
	t.Helper()
	g, err := c.Group(name)
	if err != nil {
		t.Fatalf("Group(%q): %v", name, err)
	}
	return g
}

// takeGroup takes and commits up to n events of g in batches.
func takeGroup(t testing.TB, g *Group, n, batch int) []string {
	t.Helper()
	return takeWith(t, g.Begin, n, batch)
}

// peekGroup returns g's events without taking them (peekAll for a group).
func peekGroup(t testing.TB, g *Group) []string {
	t.Helper()
	return peekWith(t, g.Begin, 10)
}

func drainGroup(t testing.TB, c *FileChannel, name string) []string {
	return takeGroup(t, mustGroup(t, c, name), 1<<30, 37)
}

func TestGroupsBroadcast(t *testing.T) {
	cfg := groupsConfig(t)
	c := mustOpen(t, cfg)
	if got := c.GroupNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("GroupNames %v", got)
	}
	putN(t, c, 0, 100, 10)
	if a, b := mustGroup(t, c, "a").Len(), mustGroup(t, c, "b").Len(); a != 100 || b != 100 {
		t.Fatalf("Len a=%d b=%d, want 100 each", a, b)
	}
	wantEvents(t, drainGroup(t, c, "a"), bodies(0, 100))
	if n := mustGroup(t, c, "b").Len(); n != 100 {
		t.Fatalf("b lost events to a's takes: Len %d", n)
	}
	wantEvents(t, drainGroup(t, c, "b"), bodies(0, 100))
	// No unnamed group: c.Begin() puts, but cannot take.
	tx, _ := c.Begin()
	if _, _, err := tx.Take(); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Take on c.Begin() without an unnamed group: %v, want ErrNoGroup", err)
	}
	tx.Rollback()
	if _, err := c.Group("nope"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Group(nope): %v", err)
	}
	gtx, _ := mustGroup(t, c, "a").Begin()
	if err := gtx.Put(Event{Body: []byte("x")}); !errors.Is(err, ErrMixedTransaction) {
		t.Fatalf("Put on a group's transaction: %v, want ErrMixedTransaction", err)
	}
	gtx.Rollback()
}

// TestGroupsNoGroupIsOneValue: a missing group is ErrNoGroup whoever tells
// it, the channel or the replay tools (fcreplay's ListEvents), so that
// errors.Is(err, ErrNoGroup) holds for both (channel/kafka's Group has its
// own test).
func TestGroupsNoGroupIsOneValue(t *testing.T) {
	cfg := groupsConfig(t)
	c := mustOpen(t, cfg)
	_, cerr := c.Group("nope")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	full, _ := cfg.withDefaults()
	_, rerr := replay.ListEvents(verifyOptions(full), "nope", 0, -1, func(replay.Event) error { return nil })
	for _, tc := range []struct {
		who string
		err error
	}{{"FileChannel.Group", cerr}, {"replay.ListEvents", rerr}} {
		if !errors.Is(tc.err, ErrNoGroup) || !errors.Is(tc.err, replay.ErrNoGroup) {
			t.Errorf("%s of a missing group: %v, want an error matching ErrNoGroup and replay.ErrNoGroup", tc.who, tc.err)
		}
	}
}

func TestGroupsClusteringTakersCompete(t *testing.T) {
	cfg := groupsConfig(t, GroupConfig{Name: "a"}, GroupConfig{Name: "b"})
	c := mustOpen(t, cfg)
	const n = 900
	putN(t, c, 0, n, 50)
	g := mustGroup(t, c, "a")
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				tx, err := g.Begin()
				if err != nil {
					t.Error(err)
					return
				}
				var mine []string
				for range 13 {
					ev, ok, err := tx.Take()
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						break
					}
					mine = append(mine, string(ev.Body))
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
				if len(mine) == 0 {
					return
				}
				mu.Lock()
				got = append(got, mine...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	want := bodies(0, n)
	slices.Sort(want)
	wantEvents(t, got, want) // disjoint and complete
	wantEvents(t, drainGroup(t, c, "b"), bodies(0, n))
}

func TestGroupsRollbackIsolation(t *testing.T) {
	c := mustOpen(t, groupsConfig(t))
	putN(t, c, 0, 20, 20)
	a, b := mustGroup(t, c, "a"), mustGroup(t, c, "b")
	tx, _ := a.Begin()
	for range 5 {
		if _, ok, err := tx.Take(); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	wantEvents(t, takeGroup(t, b, 3, 3), bodies(0, 3))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, drainGroup(t, c, "a"), bodies(0, 20))
	wantEvents(t, drainGroup(t, c, "b"), bodies(3, 17))
}

// TestGroupsRecover checks each group's queue after a clean close, a crash
// and a full replay (the checkpoint dir lost).
func TestGroupsRecover(t *testing.T) {
	for _, how := range []string{"close", "crash", "full-replay"} {
		t.Run(how, func(t *testing.T) {
			cfg := groupsConfig(t, GroupConfig{Name: "a"}, GroupConfig{Name: "b"}, GroupConfig{})
			c := mustOpen(t, cfg)
			putN(t, c, 0, 50, 10)
			wantEvents(t, takeGroup(t, mustGroup(t, c, "a"), 20, 7), bodies(0, 20))
			wantEvents(t, takeGroup(t, mustGroup(t, c, "b"), 5, 5), bodies(0, 5))
			wantEvents(t, takeN(t, c, 1, 1), bodies(0, 1))
			// A take in flight comes back, to its own group only.
			tx, _ := mustGroup(t, c, "b").Begin()
			tx.Take()
			if err := c.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			putN(t, c, 50, 10, 10)
			wantEvents(t, takeGroup(t, mustGroup(t, c, "a"), 2, 2), bodies(20, 2))
			switch how {
			case "close":
				tx.Rollback()
				c.Close()
			default:
				crash(t, c)
			}
			if how == "full-replay" {
				if err := os.RemoveAll(cfg.CheckpointDir); err != nil {
					t.Fatal(err)
				}
			}
			c = mustOpen(t, cfg)
			wantEvents(t, drainGroup(t, c, "a"), bodies(22, 38))
			wantEvents(t, drainGroup(t, c, "b"), bodies(5, 55))
			wantEvents(t, drain(t, c), bodies(1, 59))
		})
	}
}

func TestAddGroupAtRuntime(t *testing.T) {
	cfg := groupsConfig(t, GroupConfig{Name: "a"})
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 5)
	g, err := c.AddGroup(GroupConfig{Name: "late", Capacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddGroup(GroupConfig{Name: "late"}); err == nil {
		t.Fatal("AddGroup of an existing name succeeded")
	}
	if _, err := c.AddGroup(GroupConfig{Name: "Bad Name"}); err == nil {
		t.Fatal("AddGroup of a bad name succeeded")
	}
	putN(t, c, 10, 10, 5)
	if g.Len() != 10 || g.Cap() != 100 {
		t.Fatalf("late group Len %d Cap %d, want 10, 100", g.Len(), g.Cap())
	}
	// Durable when AddGroup returns: a crash before any checkpoint keeps
	// it, and Config (which does not list it) keeps it too.
	crash(t, c)
	c = mustOpen(t, cfg)
	if got := c.GroupNames(); !slices.Equal(got, []string{"a", "late"}) {
		t.Fatalf("GroupNames after a crash %v", got)
	}
	c.Close()
	if err := os.RemoveAll(cfg.CheckpointDir); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	wantEvents(t, drainGroup(t, c, "late"), bodies(10, 10))
	wantEvents(t, drainGroup(t, c, "a"), bodies(0, 20))
}

func TestRemoveGroup(t *testing.T) {
	cfg := groupsConfig(t)
	cfg.MaxFileSize = 4096
	c := mustOpen(t, cfg)
	putN(t, c, 0, 200, 10)
	drainGroup(t, c, "a")
	b := mustGroup(t, c, "b")
	tx, _ := b.Begin()
	tx.Take()
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	files := c.Stats().LogFiles
	if err := c.RemoveGroup("b"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveGroup("b"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("second RemoveGroup: %v", err)
	}
	if _, _, err := tx.Take(); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Take of a removed group: %v", err)
	}
	tx.Rollback()
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if after := c.Stats().LogFiles; after >= files {
		t.Fatalf("log files %d after removing the group that held them, %d before", after, files)
	}
	c.Close()
	c = mustOpen(t, cfg) // b is no longer in Config... but it is listed: it comes back, empty
	if got := c.GroupNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("GroupNames %v", got)
	}
	if n := mustGroup(t, c, "b").Len(); n != 0 {
		t.Fatalf("a removed group came back with %d events", n)
	}
}

func TestSlowGroupPinsLogFiles(t *testing.T) {
	cfg := groupsConfig(t)
	cfg.MaxFileSize = 4096
	c := mustOpen(t, cfg)
	putN(t, c, 0, 300, 10)
	drainGroup(t, c, "a")
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	pinned := c.Stats().LogFiles
	if pinned < 4 {
		t.Fatalf("only %d log files: the test needs more", pinned)
	}
	wantEvents(t, drainGroup(t, c, "b"), bodies(0, 300))
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().LogFiles; n >= pinned {
		t.Fatalf("%d log files after the slow group caught up, %d before", n, pinned)
	}
}

func TestGroupFullPolicies(t *testing.T) {
	cfg := groupsConfig(t,
		GroupConfig{Name: "big"},
		GroupConfig{Name: "block", Capacity: 10},
		GroupConfig{Name: "newest", Capacity: 10, WhenFull: DropNewest},
		GroupConfig{Name: "oldest", Capacity: 10, WhenFull: DropOldest})
	cfg.TransactionCapacity = 10
	c := mustOpen(t, cfg)
	putN(t, c, 0, 10, 10)
	// block is full: a Put is refused, naming the group, and reaches no
	// group.
	tx, _ := c.Begin()
	err := tx.Put(Event{Body: []byte("refused")})
	if !errors.Is(err, ErrChannelFull) || !strings.Contains(err.Error(), `"block"`) {
		t.Fatalf("Put into a full Block group: %v", err)
	}
	tx.Rollback()
	wantEvents(t, takeGroup(t, mustGroup(t, c, "block"), 5, 5), bodies(0, 5))
	putN(t, c, 10, 5, 5) // newest misses it; oldest drops 0..4
	check := func(c *FileChannel) {
		t.Helper()
		for _, w := range []struct {
			group string
			want  []string
		}{
			{"newest", bodies(0, 10)},
			{"oldest", bodies(5, 10)},
			{"block", bodies(5, 10)},
			{"big", bodies(0, 15)},
		} {
			got := peekGroup(t, mustGroup(t, c, w.group))
			if !slices.Equal(got, w.want) {
				t.Fatalf("group %s holds %s, want %s", w.group, short(got), short(w.want))
			}
		}
	}
	check(c)
	crash(t, c)
	c = mustOpen(t, cfg)
	check(c)
	c.Close()
	if err := os.RemoveAll(cfg.CheckpointDir); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	check(c)
}

func TestGroupsNilIsOneUnnamedGroup(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	if got := c.GroupNames(); !slices.Equal(got, []string{""}) {
		t.Fatalf("GroupNames %q", got)
	}
	putN(t, c, 0, 5, 5)
	g := mustGroup(t, c, "")
	if g.Len() != 5 || c.Len() != 5 {
		t.Fatalf("Len %d / %d", g.Len(), c.Len())
	}
	wantEvents(t, takeGroup(t, g, 5, 5), bodies(0, 5))
}

func TestGroupMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	cfg := groupsConfig(t, GroupConfig{Name: "a"}, GroupConfig{Name: "small", Capacity: 5, WhenFull: DropOldest},
		GroupConfig{Name: "skips", Capacity: 5, WhenFull: DropNewest})
	cfg.TransactionCapacity = 5
	cfg.Registerer, cfg.Name = reg, "m"
	c := mustOpen(t, cfg)
	putN(t, c, 0, 5, 5)
	putN(t, c, 5, 3, 3) // small drops 3 oldest; skips misses 3
	takeGroup(t, mustGroup(t, c, "a"), 4, 4)
	tx, _ := mustGroup(t, c, "a").Begin()
	tx.Take()
	tx.Rollback()
	tx, _ = mustGroup(t, c, "a").Begin()
	tx.Take() // in flight
	g := func(name string, extra ...string) map[string]string {
		l := map[string]string{"channel_name": "m", "group": name}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	wantMetric(t, reg, "filechannel_group_queue_events", g("a"), 3)
	wantMetric(t, reg, "filechannel_group_inflight_take_events", g("a"), 1)
	wantMetric(t, reg, "filechannel_group_take_success_total", g("a"), 4)
	wantMetric(t, reg, "filechannel_group_take_rollbacks_total", g("a"), 1)
	wantMetric(t, reg, "filechannel_group_capacity_events", g("small"), 5)
	wantMetric(t, reg, "filechannel_group_queue_events", g("small"), 5)
	wantMetric(t, reg, "filechannel_group_dropped_events_total", g("small", "reason", "drop_oldest"), 3)
	wantMetric(t, reg, "filechannel_group_dropped_events_total", g("skips", "reason", "full"), 3)
	wantMetric(t, reg, "filechannel_group_fill_ratio", g("skips"), 1)
	tx.Rollback()
	if err := c.RemoveGroup("skips"); err != nil {
		t.Fatal(err)
	}
	if _, ok := metricValue(t, reg, "filechannel_group_queue_events", g("skips")); ok {
		t.Fatal("a removed group's metrics are still exported")
	}
	problems, err := promtestutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}
}

// TestNamedGroupsOnlyKeepNoFullSizeRing: without an unnamed group the
// checkpoint dir's own ring is one slot, not Config.Capacity.
func TestNamedGroupsOnlyKeepNoFullSizeRing(t *testing.T) {
	cfg := groupsConfig(t)
	cfg.Capacity = 100_000
	c := mustOpen(t, cfg)
	c.Close()
	fi, err := os.Stat(filepath.Join(cfg.CheckpointDir, checkpoint.CheckpointName))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(checkpoint.HeaderSlots+1) * 8; fi.Size() != want {
		t.Fatalf("checkpoint file of %d bytes, want %d (a one-slot ring)", fi.Size(), want)
	}
	c = mustOpen(t, cfg)
	putN(t, c, 0, 3, 3)
	st := c.Stats()
	if len(st.Groups) != 2 || st.Groups[0].Queued != 3 || st.Queued != 3 || st.Capacity != 100_000 {
		t.Fatalf("Stats %+v", st)
	}
	if gs := mustGroup(t, c, "b").Stats(); gs.Name != "b" || gs.Queued != 3 || gs.Capacity != 100_000 {
		t.Fatalf("Group.Stats %+v", gs)
	}
}

func TestParseFullPolicy(t *testing.T) {
	for _, p := range []FullPolicy{Block, DropOldest, DropNewest} {
		var q FullPolicy
		if err := q.UnmarshalText([]byte(p.String())); err != nil || q != p {
			t.Fatalf("%v: %v %v", p, q, err)
		}
	}
	if _, err := ParseFullPolicy("drop"); err == nil {
		t.Fatal("parsed an unknown policy")
	}
}

// TestRemoveTheLastGroup: a channel whose only group was removed opens
// again (with no group) and gets groups back when Config lists them.
func TestRemoveTheLastGroup(t *testing.T) {
	cfg := groupsConfig(t, GroupConfig{Name: "a"})
	c := mustOpen(t, cfg)
	putN(t, c, 0, 5, 5)
	if err := c.RemoveGroup("a"); err != nil {
		t.Fatal(err)
	}
	putN(t, c, 5, 5, 5) // reaches no group
	c.Close()
	cfg.Groups = []GroupConfig{}
	for _, how := range []string{"checkpoint", "full replay"} {
		if how == "full replay" {
			removeCheckpoint(t, cfg)
		}
		c = mustOpen(t, cfg)
		if got := c.GroupNames(); len(got) != 0 {
			t.Fatalf("%s: GroupNames %q, want none", how, got)
		}
		if !strings.HasPrefix(c.Stats().RecoveredFrom, how) || strings.Contains(c.Stats().RecoveredFrom, "changed") {
			t.Fatalf("recovered from %q", c.Stats().RecoveredFrom)
		}
		c.Close()
	}
	cfg.Groups = []GroupConfig{{Name: "a"}}
	c = mustOpen(t, cfg)
	if n := mustGroup(t, c, "a").Len(); n != 0 {
		t.Fatalf("a recreated group holds %d events", n)
	}
}

// TestGroupChangeRecordOutlivesOtherDirsActiveFiles: the file holding
// AddGroup's groups record must outlive the other data dirs' files that
// were active then, whose later records it governs. Here dir 1's active
// file gets an event for the new group right after AddGroup, dir 0 rolls
// past the record's file, every event of that file is taken, and the
// checkpoint dir is lost: a full replay must still give the new group the
// event in dir 1.
func TestGroupChangeRecordOutlivesOtherDirsActiveFiles(t *testing.T) {
	cfg := groupsConfig(t, GroupConfig{Name: "a"})
	cfg.MaxFileSize = 8192
	c := mustOpen(t, cfg)
	// commitIn commits one event in a transaction of data dir d (the
	// transactions of the other dir are rolled back, writing nothing).
	commitIn := func(d int, i int) {
		t.Helper()
		for {
			tx, _ := c.Begin()
			if tx.dir != d {
				tx.Rollback()
				continue
			}
			if err := tx.Put(Event{Body: body(i)}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	if _, err := c.AddGroup(GroupConfig{Name: "late"}); err != nil {
		t.Fatal(err)
	}
	recordFile := c.logs.Active(0).ID()
	commitIn(1, 0) // in dir 1's file, which was active at the change
	n := 1
	for c.logs.Active(0).ID() < recordFile+2 { // dir 0 rolls past the record's file
		commitIn(0, n)
		n++
	}
	drainGroup(t, c, "a")
	late := mustGroup(t, c, "late")
	held, _ := late.Begin() // holds event 0 (dir 1) in flight
	if _, ok, err := held.Take(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	wantEvents(t, takeGroup(t, late, n-1, 50), bodies(1, n-1))
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	crash(t, c)
	removeCheckpoint(t, cfg)
	c = mustOpen(t, cfg)
	wantEvents(t, drainGroup(t, c, "late"), bodies(0, 1))
}

// Errors name a group as groupLabel does, once: "the unnamed group" or
// `group "x"`, never "consumer the unnamed group" or `consumer group "x"`.
func TestGroupErrorsNameTheGroupOnce(t *testing.T) {
	check := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil {
			t.Fatalf("no error, want one with %q", want)
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "consumer ") {
			t.Errorf("error %q: want %q, and no \"consumer \"", err, want)
		}
	}
	t.Run("change_capacity", func(t *testing.T) {
		cfg := testConfig(t, 1)
		c := mustOpen(t, cfg)
		putN(t, c, 0, 50, 10)
		c.Close()
		cfg.Capacity, cfg.TransactionCapacity = 10, 10
		c2, err := Open(cfg)
		if err == nil {
			c2.Close()
		}
		check(t, err, "the unnamed group: change capacity from 1000 to 10")
	})
	t.Run("listed_twice", func(t *testing.T) {
		_, err := Open(groupsConfig(t, GroupConfig{Name: "a"}, GroupConfig{Name: "a"}))
		check(t, err, `group "a" is listed twice in Groups`)
	})
	t.Run("full", func(t *testing.T) {
		cfg := groupsConfig(t, GroupConfig{Name: "a"}, GroupConfig{Name: "b", Capacity: 10})
		cfg.TransactionCapacity = 10
		c := mustOpen(t, cfg)
		putN(t, c, 0, 10, 10)
		tx, _ := c.Begin()
		defer tx.Rollback()
		check(t, tx.Put(Event{Body: []byte("refused")}), `group "b": capacity 10 reached`)
	})
	t.Run("not_a_dead_letter_group", func(t *testing.T) {
		c := mustOpen(t, groupsConfig(t))
		_, err := c.Redrive("a", "b", 1)
		check(t, err, `Redrive: group "a" is not a dead-letter group`)
	})
}
