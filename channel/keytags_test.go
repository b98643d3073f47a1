package channel

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// queuedTags returns the key tags of g's queued events, in queue order.
func queuedTags(c *FileChannel, g *groupState) []uint64 {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	tags := make([]uint64, g.queue.Size())
	for i := range tags {
		tags[i] = g.queue.Tag(i)
	}
	return tags
}

// tagsOf returns the key tags, in g, of events whose keys are keys ("":
// none).
func tagsOf(g *groupState, keys ...string) []uint64 {
	var tags []uint64
	for _, k := range keys {
		tags = append(tags, g.keyTagOf(map[string]string{"k": k}))
	}
	return tags
}

// commitAndClose commits txs, then closes c.
func commitAndClose(t *testing.T, c *FileChannel, txs ...*Transaction) {
	t.Helper()
	for _, tx := range txs {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// rollBackHeldX rolls back holder, which holds x with 0:x (1:x parked
// behind it, the queue otherwise empty): both come back with x's tag and
// are taken in order. It commits other and that taker and closes c.
func rollBackHeldX(t *testing.T, c *FileChannel, g *Group, holder, other *Transaction) {
	t.Helper()
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantTags(t, "after the rollback", queuedTags(c, g.g), tagsOf(g.g, "x", "x"))
	tx := mustBegin(t, g)
	wantBodies(t, "after the rollback", takeAll(t, tx), "0:x", "1:x")
	commitAndClose(t, c, other, tx)
}

// wantTaken fails t unless tx's next Take returns the event of body want.
func wantTaken(t *testing.T, tx *Transaction, want string) {
	t.Helper()
	if ev, _, err := tx.Take(); err != nil || string(ev.Body) != want {
		t.Fatalf("Take: %q, %v; want %q", ev.Body, err, want)
	}
}

// firstThenSecond: a first transaction takes the event of body first and
// stays open; after between (if not nil) a second takes all it can, want;
// both commit and c closes.
func firstThenSecond(t *testing.T, c *FileChannel, g *Group, first string, between func(), what string, want ...string) {
	t.Helper()
	tx1 := mustBegin(t, g)
	wantTaken(t, tx1, first)
	if between != nil {
		between()
	}
	tx2 := mustBegin(t, g)
	wantBodies(t, what, takeAll(t, tx2), want...)
	commitAndClose(t, c, tx1, tx2)
}

func wantTags(t *testing.T, what string, got, want []uint64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: key tags %x, want %x", what, got, want)
	}
}

// A keyed Take that knows its event's key from its tag claims the key
// under orderMu, at the pop, and reads the event after: a second taker
// coming between the claim and the read finds the key held and parks the
// key's next event (unread) rather than take it ahead of the first. The
// test runs the first Take's steps by hand to stop between them; a claim
// made at the read (after orderMu) would let b take 1:x. The first
// taker's rollback puts 0:x back with its key's tag, and the unparked
// 1:x with its lane's: both are taken again without a read under
// orderMu.
func TestKeyTagClaimInPopOrder(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	gs := g.g
	putKeyed(t, c, 0, "x", "x", "y")
	wantTags(t, "queued", queuedTags(c, gs), tagsOf(gs, "x", "x", "y"))
	a := mustBegin(t, g)
	if err := a.use(txTake); err != nil {
		t.Fatal(err)
	}
	a.scratch()
	k, ok, err := a.popKeyed() // a's Take, stopped before its read
	if err != nil || !ok || k.how != popClaimed {
		t.Fatalf("popKeyed: %+v, %v, %v; want 0:x claimed unread", k, ok, err)
	}
	a.takes = append(a.takes, k.p)
	b := mustBegin(t, g)
	wantBodies(t, "while a reads 0:x", takeAll(t, b), "2:y")
	if st := g.Stats(); st.Parked != 1 {
		t.Fatalf("Parked %d, want 1 (1:x behind a's 0:x)", st.Parked)
	}
	if ev, err := c.readEvent(k.p); err != nil || string(ev.Body) != "0:x" {
		t.Fatalf("a's read: %q, %v", ev.Body, err)
	}
	rollBackHeldX(t, c, g, a, b)
}

// A checkpoint between a tag's claim and the read (no orderMu held then)
// lists the claimed event in flight under its taker, which holds its
// key: recovery keeps the key's order.
func TestKeyTagCheckpointBetweenClaimAndRead(t *testing.T) {
	cfg := orderConfig(t)
	c := mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "x", "x", "y")
	a := mustBegin(t, g)
	a.scratch()
	if k, ok, err := a.popKeyed(); err != nil || !ok || k.how != popClaimed {
		t.Fatalf("popKeyed: %+v, %v, %v", k, ok, err)
	}
	b := mustBegin(t, g)
	wantBodies(t, "while a reads 0:x", takeAll(t, b), "2:y")
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	crash(t, c)
	c = mustOpen(t, cfg)
	g = mustGroup(t, c, "a")
	wantTags(t, "recovered", queuedTags(c, g.g), []uint64{0, 0, 0})
	tx := mustBegin(t, g)
	wantBodies(t, "after the crash", takeAll(t, tx), "0:x", "2:y", "1:x")
	commitAndClose(t, c, tx)
}

// After a reopen (from a checkpoint) the ring's tags are unknown: a Take
// reads each event under orderMu to learn its key, as before tags, and
// keeps the order (a Take that took unknown as keyless would take 1:x
// past the holder of x). The keys it learns go back with a rollback.
func TestKeyTagUnknownAfterReopen(t *testing.T) {
	cfg := orderConfig(t)
	c := mustOpen(t, cfg)
	putKeyed(t, c, 0, "x", "x", "y")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, cfg)
	g := mustGroup(t, c, "a")
	gs := g.g
	wantTags(t, "reopened", queuedTags(c, gs), []uint64{0, 0, 0})
	if n := gs.queue.TagBytes(); n != 0 {
		t.Fatalf("reopened: the ring keeps %d bytes of tags, want 0", n)
	}
	holder := mustBegin(t, g)
	wantTaken(t, holder, "0:x")
	other := mustBegin(t, g)
	wantBodies(t, "past held x", takeAll(t, other), "2:y")
	rollBackHeldX(t, c, g, holder, other)
}

// A put transaction that spilled its puts to the log before its commit
// queues them with their tags (computed at each Put), and a keyed group
// added after some of a transaction's Puts queues those with unknown
// tags, the later ones with theirs.
func TestKeyTagSpilledAndLateGroup(t *testing.T) {
	cfg := orderConfig(t)
	cfg.MaxFileSize = MinMaxFileSize // spills every ~1 KiB
	c := mustOpen(t, cfg)
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"x", "", "y", "x", "z", "y"}
	for i, k := range keys {
		if i == 4 {
			if _, err := c.AddGroup(GroupConfig{Name: "late", OrderKey: "k"}); err != nil {
				t.Fatal(err)
			}
		}
		h := map[string]string{"k": k}
		if err := tx.Put(Event{Headers: h, Body: append([]byte(strconv.Itoa(i)+":"+k+":"), make([]byte, 700)...)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !tx.spilled {
		t.Fatal("the transaction did not spill")
	}
	a, late := mustGroup(t, c, "a").g, mustGroup(t, c, "late").g
	wantTags(t, "a", queuedTags(c, a), tagsOf(a, keys...))
	wantTags(t, "late", queuedTags(c, late), append([]uint64{0, 0, 0, 0}, tagsOf(late, keys[4:]...)...))
	for _, name := range []string{"a", "late"} {
		tx := mustBegin(t, mustGroup(t, c, name))
		if got := takeAll(t, tx); len(got) != len(keys) {
			t.Fatalf("%s: took %d events, want %d", name, len(got), len(keys))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A rollback keeps the tags of its keyed takes (a keyless take goes back
// unknown), whatever keyless takes come between them.
func TestKeyTagKeptAcrossRollback(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	gs := g.g
	putKeyed(t, c, 0, "x", "", "y", "")
	tx := mustBegin(t, g)
	wantBodies(t, "all", takeAll(t, tx), "0:x", "1:", "2:y", "3:")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	x, y := tagsOf(gs, "x")[0], tagsOf(gs, "y")[0]
	wantTags(t, "after the rollback", queuedTags(c, gs), []uint64{x, 0, y, 0})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Keyless events are free, whoever holds others: their tag is no key.
func TestKeyTagKeylessFree(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	putKeyed(t, c, 0, "", "")
	firstThenSecond(t, c, g, "0:", nil, "keyless", "1:")
}

// A damaged event claimed by its tag holds no key once its read fails,
// as one read under orderMu never claimed it: the key's next event is
// free for another taker while the first transaction is open.
func TestKeyTagDamagedEventHoldsNoKey(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	path := c.logs.Active(0).Path()
	first := c.logs.Active(0).Size()
	putKeyed(t, c, 0, "x")
	putKeyed(t, c, 1, "y")
	flipAt(t, path, first+logfile.FrameHeaderSize+20)
	expectProblems(t, replay.ProblemCorruptRecord)
	firstThenSecond(t, c, g, "1:y", func() { putKeyed(t, c, 2, "x") }, "x free", "2:x")
}

// With Config.checkKeyTags (every test's config), a Take whose event's
// tag disagrees with its headers panics: here the tag at the head is
// made wrong by hand. Without it (production) the Take trusts the tag and
// hashes nothing.
func TestKeyTagMismatchPanics(t *testing.T) {
	c := mustOpen(t, orderConfig(t))
	g := mustGroup(t, c, "a")
	gs := g.g
	putKeyed(t, c, 0, "x")
	c.queueMu.Lock()
	p, tag, _ := gs.queue.RemoveHeadTagged()
	err := gs.queue.AddHeadTagged(p, tag^0x100)
	c.queueMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c.cfg.checkKeyTags = false
	tx := mustBegin(t, g)
	wantTaken(t, tx, "0:x")
	if err := tx.Rollback(); err != nil { // it keeps the wrong tag
		t.Fatal(err)
	}
	c.cfg.checkKeyTags = true
	tx = mustBegin(t, g)
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "key tag") {
				t.Fatalf("Take of a wrongly tagged event: recovered %v, want a key tag panic", r)
			}
		}()
		tx.Take()
	}()
	crash(t, c)
}

// Unkeyed groups pay nothing: a put notes no tag for them, their rings
// keep none, a rollback of theirs makes none; a keyed group's ring
// keeps 8 bytes per slot; a warm transaction notes tags with no
// allocation.
func TestKeyTagsCost(t *testing.T) {
	cfg := orderConfig(t)
	cfg.Groups = append(cfg.Groups, GroupConfig{Name: "plain"})
	c := mustOpen(t, cfg)
	a, plain := mustGroup(t, c, "a").g, mustGroup(t, c, "plain").g
	tx, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Put(Event{Headers: map[string]string{"k": "x"}}); err != nil {
		t.Fatal(err)
	}
	if n := len(tx.s.kmarks); n != 1 || tx.s.kmarks[0].g != a {
		t.Fatalf("a put noted tags for %d groups, want 1 (a)", n)
	}
	if tags := tx.keyTagsOf(plain); tags != nil {
		t.Fatalf("the commit queues tags %x in the unkeyed group, want none", tags)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := plain.queue.TagBytes(); n != 0 {
		t.Fatalf("unkeyed group: %d bytes of tags, want 0", n)
	}
	if n, want := a.queue.TagBytes(), 8*cfg.Capacity; n != want {
		t.Fatalf("keyed group: %d bytes of tags, want %d", n, want)
	}
	if tags := plain.takeTags(7, []eventqueue.Pointer{1, 2, 3}); tags != nil {
		t.Fatalf("a rollback in the unkeyed group makes tags %x, want none", tags)
	}
	gs, h := c.currentGroups(), map[string]string{"k": "x"}
	tx2, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	tx2.markKeys(gs, h, 0)
	tx2.clearKeyMarks()
	if n := testing.AllocsPerRun(10, func() {
		tx2.markKeys(gs, h, 0)
		tx2.markKeys(gs, h, 1)
		tx2.clearKeyMarks()
	}); n != 0 {
		t.Fatalf("markKeys on a warm scratch: %v allocations, want 0", n)
	}
	if err := tx2.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A key whose hash is 0 or 1 (tagUnknown, tagNoKey) is tagged unknown.
func TestKeyTagOfReservedHashes(t *testing.T) {
	for k, want := range map[uint64]uint64{0: tagUnknown, 1: tagUnknown, 2: 2, 1 << 63: 1 << 63} {
		if got := keyTag(k); got != want {
			t.Errorf("keyTag(%#x) = %#x, want %#x", k, got, want)
		}
	}
}
