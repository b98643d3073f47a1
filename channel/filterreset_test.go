package channel

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// Resets and StartAt of filtered groups: the queue a reset gives is the
// retained events the group's filter, as it is at the reset, matches.

// TestFilterResetEarliest: with retention on, every filtered group reset
// to Earliest holds exactly the committed events its filter matches, in
// commit order, whatever its takers had taken (plain and encrypted logs);
// PreviewReset on the closed channel finds as many.
func TestFilterResetEarliest(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		cfg := testConfig(t, 2)
		cfg.TransactionCapacity = cfg.Capacity
		cfg.MaxFileSize = 4 << 10 // several files, retained once taken
		cfg.Retention = Retention{MaxAge: time.Hour}
		cfg.Groups = filterGroups()
		if encrypted {
			cfg.Keys = StaticKeys("k1", map[string][]byte{"k1": testKey(0xa1)})
		}
		r := rand.New(rand.NewPCG(31, 2))
		m, seq := filterModel{}, 0
		c := mustOpen(t, cfg)
		for range 3 {
			putRandom(t, c, r, m, &seq)
		}
		all := filterModel{}
		for k, v := range m {
			all[k] = slices.Clone(v)
		}
		for _, name := range []string{"tags", "one", "all"} { // taken, then checkpointed: only retention keeps them
			takeWith(t, groupOf(t, c, name).Begin, len(m[name]), 10)
		}
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if s := c.Stats(); s.RetainedFiles < 2 {
			t.Fatalf("%d retained files; the test wants several", s.RetainedFiles)
		}
		for _, name := range []string{"tags", "one"} {
			if n, err := c.ResetGroup(name, Earliest()); err != nil || n != len(all[name]) {
				t.Fatalf("encrypted %v: ResetGroup(%s) = %d, %v; want %d", encrypted, name, n, err, len(all[name]))
			}
			if got := peekFiltered(t, c, name); !slices.Equal(got, all[name]) {
				t.Fatalf("encrypted %v: %s after the reset holds %s, want %s", encrypted, name, short(got), short(all[name]))
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"tags", "one", "all"} {
			pv, err := PreviewReset(cfg, name, Earliest())
			if err != nil || pv.Found != len(all[name]) {
				t.Fatalf("encrypted %v: PreviewReset(%s) = %+v, %v; want Found %d", encrypted, name, pv, err, len(all[name]))
			}
		}
		if encrypted { // a filter cannot read sealed headers without the keys
			noKeys := cfg
			noKeys.Keys = nil
			if _, err := PreviewReset(noKeys, "tags", Earliest()); !errors.Is(err, replay.ErrEncrypted) {
				t.Fatalf("PreviewReset of a filtered group without keys: %v, want ErrEncrypted", err)
			}
		}
		if n, err := ResetGroup(cfg, "one", Earliest()); err != nil || n != len(all["one"]) {
			t.Fatalf("encrypted %v: offline ResetGroup(one) = %d, %v; want %d", encrypted, n, err, len(all["one"]))
		}
	}
}

// TestFilterResetAppliesTheNewFilter: a filter changed at Open applies to
// a reset: the group's queue becomes the retained events the new filter
// matches, those committed under the old one included.
func TestFilterResetAppliesTheNewFilter(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "g", Filter: `headers["k"] == "a"`}}
	c := mustOpen(t, cfg)
	putKeys(t, c, 0, "a", "b", "a", "b")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Groups[0].Filter = `headers["k"] == "b"`
	c = mustOpen(t, cfg)
	putKeys(t, c, 4, "a", "b")
	if got, want := peekFiltered(t, c, "g"), []string{"a0", "a2", "b5"}; !slices.Equal(got, want) {
		t.Fatalf("before the reset: %v, want %v", got, want)
	}
	if _, err := c.ResetGroup("g", Earliest()); err != nil {
		t.Fatal(err)
	}
	if got, want := peekFiltered(t, c, "g"), []string{"b1", "b3", "b5"}; !slices.Equal(got, want) {
		t.Fatalf("after the reset: %v, want %v", got, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFilterStartAtEarliest: a new filtered group that starts at Earliest
// (AddGroup, or Config.Groups at Open) holds the retained events its
// filter matches.
func TestFilterStartAtEarliest(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "all"}}
	c := mustOpen(t, cfg)
	putKeys(t, c, 0, "a", "b", "c", "b")
	g, err := c.AddGroup(GroupConfig{Name: "b", Filter: `headers["k"] == "b"`, StartAt: Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := peekFiltered(t, c, g.Name()), []string{"b1", "b3"}; !slices.Equal(got, want) {
		t.Fatalf("AddGroup with StartAt Earliest: %v, want %v", got, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Groups = append(cfg.Groups, GroupConfig{Name: "b", Filter: `headers["k"] == "b"`},
		GroupConfig{Name: "ac", Filter: TagFilter("k", "a", "c"), StartAt: Earliest()})
	c = mustOpen(t, cfg)
	if got, want := peekFiltered(t, c, "ac"), []string{"a0", "c2"}; !slices.Equal(got, want) {
		t.Fatalf("Open with StartAt Earliest: %v, want %v", got, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// putKeys commits one event per value v of vs, with header k = v and body
// v followed by its index, counted from from.
func putKeys(t *testing.T, c *FileChannel, from int, vs ...string) {
	t.Helper()
	for i, v := range vs {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Put(Event{Headers: map[string]string{"k": v}, Body: []byte(v + strconv.Itoa(from+i))}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFilterChangedAtOpenIsCheckpointed: a filter Config.Groups changes at
// Open, and nothing else, is a change of the groups as a capacity's is:
// Open writes a checkpoint whose catalog holds the new filter (the
// checkpoint never lags the groups Open settled), and Stats says so.
func TestFilterChangedAtOpenIsCheckpointed(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "g", Filter: `headers["k"] == "a"`}}
	c := mustOpen(t, cfg)
	putKeys(t, c, 0, "a", "b")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Groups[0].Filter = `headers["k"] == "b"`
	c = mustOpen(t, cfg)
	defer c.Close()
	if got := c.Stats().RecoveredFrom; got != "checkpoint, groups changed" {
		t.Fatalf("RecoveredFrom %q after a filter changed at Open", got)
	}
	cat, err := checkpoint.ReadCatalog(vfs.OS(), cfg.CheckpointDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Groups) != 1 || cat.Groups[0].Filter != cfg.Groups[0].Filter {
		t.Fatalf("the checkpoint's catalog after Open: %+v; want g with filter %q", cat.Groups, cfg.Groups[0].Filter)
	}
}

// TestStoredFilterThatDoesNotCompile: a group added at run time whose
// filter, read back from the catalog, this build refuses (a newer CEL, or
// a changed file: crafted here) makes Open fail with ErrBadFilter naming
// the group and the way out, changing nothing, unless Config.Groups
// redefines the group; its events are still there.
func TestStoredFilterThatDoesNotCompile(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "all"}}
	c := mustOpen(t, cfg)
	if _, err := c.AddGroup(GroupConfig{Name: "late", Filter: `headers["k"] == "b"`}); err != nil {
		t.Fatal(err)
	}
	putKeys(t, c, 0, "a", "b")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cat, err := checkpoint.ReadCatalog(vfs.OS(), cfg.CheckpointDir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cat.Groups {
		if cat.Groups[i].Name == "late" {
			cat.Groups[i].Filter = `headers["k"] ==` // does not compile
		}
	}
	if err := checkpoint.WriteCatalog(vfs.OS(), cfg.CheckpointDir, cat); err != nil {
		t.Fatal(err)
	}
	_, err = Open(cfg)
	if !errors.Is(err, ErrBadFilter) || !strings.Contains(err.Error(), `"late"`) || !strings.Contains(err.Error(), "Config.Groups") {
		t.Fatalf("Open with a stored filter this build refuses: %v; want ErrBadFilter naming late and Config.Groups", err)
	}
	cfg.Groups = append(cfg.Groups, GroupConfig{Name: "late", Filter: `headers["k"] != "a"`})
	c = mustOpen(t, cfg)
	defer c.Close()
	if got, want := peekFiltered(t, c, "late"), []string{"b1"}; !slices.Equal(got, want) {
		t.Fatalf("late holds %v after Open redefined it; want %v", got, want)
	}
	if f := groupOf(t, c, "late").Stats().Filter; f != `headers["k"] != "a"` {
		t.Fatalf("late's filter %q", f)
	}
}

// TestFilterFullReplayAfterSpilledFilesDeleted: a put transaction that
// spilled across log files, with a filtered group that misses some of its
// events; once every group has taken the events of its first spilled
// puts' file, that file stays as long as the commit's file does (its
// filter skip record names the events by their index in the whole
// transaction), across a restart from the checkpoint: a full replay then
// gives the filtered group the same queue. Without the pin, the replay
// applied the indices to the puts it found, and the group got the events
// its filter does not match. Once the groups took everything, the files go.
func TestFilterFullReplayAfterSpilledFilesDeleted(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "all"}, {Name: "f", Filter: `headers["k"] == "b"`}}
	spilledFilesPinned(t, cfg, "f", func(i int) map[string]string {
		return map[string]string{"k": []string{"a", "b"}[i%2]}
	}, map[string]int{"all": 20, "f": 5})
}

// TestDedupFullReplayAfterSpilledFilesDeleted: a duplicate record names
// puts by their index in the whole transaction too (puts 30..39 repeat
// the ids of 0..9).
func TestDedupFullReplayAfterSpilledFilesDeleted(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Dedup = Dedup{Header: "id"}
	cfg.Groups = []GroupConfig{{Name: "all"}}
	spilledFilesPinned(t, cfg, "all", func(i int) map[string]string {
		return map[string]string{"id": strconv.Itoa(i % 30)}
	}, map[string]int{"all": 20})
}

// spilledFilesPinned puts 40 events (headers h(i)) in one transaction
// that spills to several files, takes taken[g] from each group g, and
// checks that the first file, whose spilled puts every group took, stays
// while the commit's file does (the commit's skip or duplicate records
// index into all of its puts), and that a full replay gives group peek
// the same queue.
func spilledFilesPinned(t *testing.T, cfg Config, peek string, h func(i int) map[string]string, taken map[string]int) {
	cfg.MaxFileSize = 4096 // spills every 1 KiB, rolls every 4 KiB
	c := mustOpen(t, cfg)
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := tx.Put(Event{Headers: h(i), Body: []byte(strconv.Itoa(i) + strings.Repeat(".", 300))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for g, n := range taken {
		takeWith(t, groupOf(t, c, g).Begin, n, n)
	}
	first := c.logs.LiveFiles()[0].ID // its first spilled puts' file
	kept := func(when string) {
		t.Helper()
		if !slices.ContainsFunc(c.logs.LiveFiles(), func(f logfile.File) bool { return f.ID == first }) {
			t.Fatalf("after %s: log file %d went, which holds spilled puts of a commit with skip or duplicate records whose file stays", when, first)
		}
	}
	for _, step := range []string{"checkpoint", "reopen"} {
		if step == "reopen" {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = mustOpen(t, cfg)
		}
		if err := c.Checkpoint(); err != nil { // would delete the first file
			t.Fatal(err)
		}
		kept(step)
	}
	before := peekFiltered(t, c, peek)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cfg.CheckpointDir); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	if after := peekFiltered(t, c, peek); !slices.Equal(before, after) {
		t.Fatalf("%s before the full replay: %d events %s\nafter: %d %s", peek, len(before), short(before), len(after), short(after))
	}
	for range 2 { // the full replay found the pin again
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	kept("a full replay and checkpoints")
	for g := range taken {
		takeWith(t, groupOf(t, c, g).Begin, 100, 100)
	}
	for range 2 { // the first checkpoint after the full replay's may still hold the files
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Stats().LogFiles; n > 2 {
		t.Fatalf("%d log files once every group took every event", n)
	}
}
