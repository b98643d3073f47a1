package channel

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// The take options (OrderKey, RetryDelays, LeaseTimeout, ExpireAfter) are
// stored with their group: a group AddGroup created keeps them across an
// Open that does not list it, whatever Open recovers from.

// optionGroups are the groups of the take-option tests, one option each.
func optionGroups(lease time.Duration) []GroupConfig {
	return []GroupConfig{
		{Name: "ordered", OrderKey: "k"},
		{Name: "retried", RetryDelays: []time.Duration{time.Hour, 2 * time.Hour}},
		{Name: "leased", LeaseTimeout: lease},
		{Name: "expiring", ExpireAfter: time.Hour},
	}
}

// optionsRestarts are the ways a channel comes back: from its checkpoint,
// from a full replay of its logs (the groups records), after Rebuild,
// Repair, or the offline ResetGroup of another group.
var optionsRestarts = map[string]func(t *testing.T, cfg Config){
	"checkpoint":  func(*testing.T, Config) {},
	"full_replay": func(t *testing.T, cfg Config) { removeCheckpoint(t, cfg) },
	"repair": func(t *testing.T, cfg Config) {
		if _, err := Repair(cfg, RepairOptions{}); err != nil {
			t.Fatal(err)
		}
	},
	"offline_reset": func(t *testing.T, cfg Config) {
		if _, err := ResetGroup(cfg, "", Latest()); err != nil {
			t.Fatal(err)
		}
	},
	"rebuild": func(t *testing.T, cfg Config) {
		rep, err := Rebuild(cfg, RebuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range optionGroups(0) {
			i := slices.IndexFunc(rep.Groups, func(r RebuildGroup) bool { return r.Name == g.Name })
			if i < 0 || !sameTakeOptions(rep.Groups[i].config(), withLease(g, rep.Groups[i].LeaseTimeout)) {
				t.Fatalf("Rebuild's report of %q: %+v", g.Name, rep.Groups)
			}
		}
	},
}

func withLease(g GroupConfig, d time.Duration) GroupConfig {
	if g.LeaseTimeout != 0 || g.Name == "leased" {
		g.LeaseTimeout = d
	}
	return g
}

// TestTakeOptionsStored: AddGroup with each take option, Close, then Open
// without Config.Groups (after a full replay or a Rebuild too): every
// option is in effect, and GroupStats shows it.
func TestTakeOptionsStored(t *testing.T) {
	const lease = 40 * time.Millisecond
	for name, restart := range optionsRestarts {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			clock := &testClock{now: time.Now()}
			cfg.now = clock.Now
			c := mustOpen(t, cfg)
			for _, g := range optionGroups(lease) {
				if _, err := c.AddGroup(g); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			restart(t, cfg)
			c = mustOpen(t, cfg)
			defer c.Close()
			wantTakeOptions(t, c, optionGroups(lease))
			checkOptionsApply(t, c, clock, lease)
		})
	}
}

// wantTakeOptions checks that c's groups have the take options of want,
// in their config and in their GroupStats.
func wantTakeOptions(t *testing.T, c *FileChannel, want []GroupConfig) {
	t.Helper()
	for _, w := range want {
		g := groupOf(t, c, w.Name)
		st := g.Stats()
		got := GroupConfig{OrderKey: st.OrderKey, RetryDelays: st.RetryDelays, LeaseTimeout: st.LeaseTimeout, ExpireAfter: st.ExpireAfter}
		if !sameTakeOptions(got, w) || !sameTakeOptions(g.g.cfg, w) {
			t.Fatalf("group %q: stats %+v, config %+v; want the take options of %+v", w.Name, got, g.g.cfg, w)
		}
	}
}

// checkOptionsApply checks that the groups of optionGroups(lease) behave
// as their options say: a held key parks its events, a rolled-back event
// waits, a lease expires, an old event expires.
func checkOptionsApply(t *testing.T, c *FileChannel, clock *testClock, lease time.Duration) {
	t.Helper()
	putKeyed(t, c, 0, "x", "x", "y")
	// OrderKey: while tx1 holds x, tx2 takes y only; 1:x is parked.
	ordered := groupOf(t, c, "ordered")
	tx1 := mustBegin(t, ordered)
	if ev, _, err := tx1.Take(); err != nil || string(ev.Body) != "0:x" {
		t.Fatalf("ordered: first take %q, %v", ev.Body, err)
	}
	tx2 := mustBegin(t, ordered)
	wantBodies(t, "ordered, past the held key", takeAll(t, tx2), "2:y")
	if st := ordered.Stats(); st.Parked != 1 {
		t.Fatalf("ordered: %d parked, want 1", st.Parked)
	}
	for _, tx := range []*Transaction{tx1, tx2} {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	// RetryDelays: a rolled-back event waits an hour.
	retried := groupOf(t, c, "retried")
	wantTake(t, "retried, first delivery", retried, false, "0:x", 1)
	wantTake(t, "retried, while 0:x waits", retried, true, "1:x", 1)
	if st := retried.Stats(); st.Waiting != 1 {
		t.Fatalf("retried: %d waiting, want 1", st.Waiting)
	}
	// LeaseTimeout: a transaction that holds its events too long loses
	// them.
	leased := groupOf(t, c, "leased")
	tx, _ := takeSome(t, leased, 3)
	waitLen(t, leased, 3, 50*lease)
	if st := leased.Stats(); st.LeasesExpired != 1 {
		t.Fatalf("leased: %d leases expired, want 1", st.LeasesExpired)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// ExpireAfter: two hours on, the events are never delivered.
	clock.Add(2 * time.Hour)
	expiring := groupOf(t, c, "expiring")
	wantTake(t, "expiring, two hours on", expiring, true, "", 0)
	if st := expiring.Stats(); st.Expired != 3 {
		t.Fatalf("expiring: %d expired, want 3", st.Expired)
	}
}

// TestTakeOptionsChangedAtOpen: Config.Groups changes the take options of
// an existing group: the new ones apply, and a later Open without
// Config.Groups keeps them (they were stored), from the checkpoint or a
// full replay; an option Config.Groups clears stays cleared.
func TestTakeOptionsChangedAtOpen(t *testing.T) {
	for _, name := range []string{"checkpoint", "full_replay"} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			c := mustOpen(t, cfg)
			if _, err := c.AddGroup(GroupConfig{Name: "a", OrderKey: "k", LeaseTimeout: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			changed := GroupConfig{Name: "a", OrderKey: "customer", ExpireAfter: time.Minute}
			with := cfg
			with.Groups = []GroupConfig{{}, changed}
			c = mustOpen(t, with)
			wantTakeOptions(t, c, []GroupConfig{changed})
			if from := c.Stats().RecoveredFrom; !strings.Contains(from, "groups changed") {
				t.Fatalf("RecoveredFrom %q: a changed take option is a change to the groups", from)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			optionsRestarts[name](t, cfg)
			c = mustOpen(t, cfg)
			defer c.Close()
			wantTakeOptions(t, c, []GroupConfig{changed})
		})
	}
}

// TestTakeOptionsOlderFormats: a channel whose groups use no take option
// writes groups records of type 7 (14 with a filter) and a catalog of
// version 4 at most, which older builds read; one with an option writes
// type 17 and catalog version 5.
func TestTakeOptionsOlderFormats(t *testing.T) {
	for _, tc := range []struct {
		name        string
		groups      []GroupConfig
		recordType  byte
		catalogVers uint16
	}{
		{"plain", []GroupConfig{{Name: "a", MaxDeliveries: 3}}, 7, 2},
		{"filter", []GroupConfig{{Name: "a", Filter: `headers["k"] == "x"`}}, 14, 3},
		{"options", []GroupConfig{{Name: "a", Filter: `headers["k"] == "x"`}, {Name: "b", ExpireAfter: time.Hour}}, 17, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			c := mustOpen(t, cfg)
			for _, g := range tc.groups {
				if _, err := c.AddGroup(g); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			types := groupsRecordTypes(t, cfg)
			if len(types) == 0 || types[len(types)-1] != tc.recordType {
				t.Fatalf("groups records of types %v, want the last %d", types, tc.recordType)
			}
			b, err := os.ReadFile(filepath.Join(cfg.CheckpointDir, checkpoint.CatalogName))
			if err != nil {
				t.Fatal(err)
			}
			if v := binary.BigEndian.Uint16(b[4:]); v != tc.catalogVers {
				t.Fatalf("catalog version %d, want %d", v, tc.catalogVers)
			}
		})
	}
}

// groupsRecordTypes returns the on-disk types of the groups records of
// cfg's log files, in order.
func groupsRecordTypes(t *testing.T, cfg Config) []byte {
	t.Helper()
	var types []byte
	for _, dir := range cfg.DataDirs {
		names, err := filepath.Glob(filepath.Join(dir, "log-*"))
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			s, err := logfile.NewScanner(vfsOS(), name, 0)
			if err != nil {
				t.Fatal(err)
			}
			for s.Next() {
				if s.Record().Type == logfile.RecordGroups {
					types = append(types, b[s.Offset()+int64(s.Framing().FrameHeaderSize())])
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return types
}

// TestTakeOptionsRefused: an OrderKey longer than the groups record holds
// is refused by AddGroup and Open.
func TestTakeOptionsRefused(t *testing.T) {
	cfg := testConfig(t, 1)
	long := GroupConfig{Name: "a", OrderKey: string(make([]byte, logfile.MaxOrderKeyLen+1))}
	c := mustOpen(t, cfg)
	defer c.Close()
	if _, err := c.AddGroup(long); err == nil || !strings.Contains(err.Error(), "OrderKey of 257 bytes") {
		t.Fatalf("AddGroup of an OrderKey over the limit: %v", err)
	}
	with := cfg
	with.CheckpointDir, with.DataDirs = t.TempDir(), []string{t.TempDir()}
	with.Groups = []GroupConfig{long}
	if _, err := Open(with); err == nil || !strings.Contains(err.Error(), "OrderKey of 257 bytes") {
		t.Fatalf("Open with an OrderKey over the limit: %v", err)
	}
	long.OrderKey = long.OrderKey[1:]
	if _, err := c.AddGroup(long); err != nil {
		t.Fatalf("AddGroup of an OrderKey at the limit: %v", err)
	}
}

// TestPseudoTxIDs: the channel's pseudo transactions are those the
// checkpoint package (and fcreplay inspect) name.
func TestPseudoTxIDs(t *testing.T) {
	if waitingTx != checkpoint.WaitingTx || parkedTx != checkpoint.ParkedTx {
		t.Fatalf("waitingTx %#x, parkedTx %#x; checkpoint's %#x, %#x", uint64(waitingTx), uint64(parkedTx), checkpoint.WaitingTx, checkpoint.ParkedTx)
	}
}

// TestTakeOptionsJournalRead: a group's stored RetryDelays make it count
// deliveries, so Open reads the delivery journal for it even when
// Config.Groups does not list it: an event whose taker crashed comes back
// with its delivery counted.
func TestTakeOptionsJournalRead(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	if _, err := c.AddGroup(GroupConfig{Name: "r", RetryDelays: []time.Duration{time.Hour}}); err != nil {
		t.Fatal(err)
	}
	putN(t, c, 0, 1, 1)
	if _, n := takeHeld(t, groupOf(t, c, "r")); n != 1 {
		t.Fatalf("first delivery %d", n)
	}
	crash(t, c)
	c = mustOpen(t, cfg)
	defer c.Close()
	wantTake(t, "after the crash", groupOf(t, c, "r"), true, "event-0", 2)
}

// takeHeld takes one event of g in a transaction it leaves open: its body
// and delivery count.
func takeHeld(t *testing.T, g *Group) (string, int) {
	t.Helper()
	tx := mustBegin(t, g)
	ev, ok, err := tx.Take()
	if err != nil || !ok {
		t.Fatalf("take: %v, %v", ok, err)
	}
	return string(ev.Body), ev.Deliveries
}

// TestTakeOptionsCopied: a group keeps its own copy of RetryDelays: the
// caller changing its slice after AddGroup changes neither what the group
// does nor what it stores.
func TestTakeOptionsCopied(t *testing.T) {
	cfg := testConfig(t, 1)
	c := mustOpen(t, cfg)
	delays := []time.Duration{time.Hour}
	if _, err := c.AddGroup(GroupConfig{Name: "r", RetryDelays: delays}); err != nil {
		t.Fatal(err)
	}
	delays[0] = time.Second
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	defer c.Close()
	wantTakeOptions(t, c, []GroupConfig{{Name: "r", RetryDelays: []time.Duration{time.Hour}}})
}
