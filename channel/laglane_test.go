package channel

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// takeEvent takes one event in tx and fails if none is free.
func takeEvent(t *testing.T, tx *Transaction) Event {
	t.Helper()
	ev, ok, err := tx.Take()
	if err != nil || !ok {
		t.Fatalf("take: ok %v, err %v", ok, err)
	}
	return ev
}

// A keyed group's lag counts the events parked behind a stuck key (issue
// 32): while transaction A holds key k, the later events of k that
// another taker parked are the oldest undelivered ones, older than the
// ring's head; Oldest (Group.Stats, Stats) and the age metric are theirs,
// with the ring empty too. Once A commits and they are taken, the lag
// follows the ring's head again.
func TestGroupLagCountsParkedEvents(t *testing.T) {
	c, a, reg := openKeyedMetered(t)
	defer c.Close()
	age := func() float64 {
		t.Helper()
		v, ok := metricValue(t, reg, "filechannel_group_oldest_event_age_seconds", map[string]string{"group": "a"})
		if !ok {
			t.Fatal("no group_oldest_event_age_seconds for a")
		}
		return v
	}
	wantOldest := func(what string, want time.Time) {
		t.Helper()
		if o := a.Stats().Oldest; !o.Equal(want) {
			t.Fatalf("%s: Group.Stats Oldest %v, want %v", what, o, want)
		}
		for _, gs := range c.Stats().Groups {
			if gs.Name == "a" && !gs.Oldest.Equal(want) {
				t.Fatalf("%s: Stats Oldest %v, want %v", what, gs.Oldest, want)
			}
		}
		if since := time.Since(want).Seconds(); age() < since {
			t.Fatalf("%s: oldest_event_age_seconds %v, want at least %v", what, age(), since)
		}
	}

	putKeyed(t, c, 0, "k")
	time.Sleep(30 * time.Millisecond)
	putKeyed(t, c, 1, "k", "k")
	time.Sleep(30 * time.Millisecond)
	putKeyed(t, c, 3, "", "")

	txA := mustBegin(t, a)
	e0 := takeEvent(t, txA) // A holds k
	txB := mustBegin(t, a)
	e3 := takeEvent(t, txB) // parks 1:k and 2:k
	if string(e0.Body) != "0:k" || string(e3.Body) != "3:" || a.Stats().Parked != 2 {
		t.Fatalf("took %q and %q, %d parked; want 0:k, 3: and 2", e0.Body, e3.Body, a.Stats().Parked)
	}
	parked := a.Stats().Oldest // 1:k's commit; the ring's head is 4:, 30ms newer
	if !parked.After(e0.Time) || e3.Time.Sub(parked) < 20*time.Millisecond {
		t.Fatalf("Oldest %v: not the parked 1:k's commit (after %v, 20ms before the ring head's %v)", parked, e0.Time, e3.Time)
	}
	wantOldest("parked events older than the ring's head", parked)

	takeEvent(t, txB) // 4: the ring is empty, 1:k and 2:k still parked
	wantOldest("only parked events", parked)
	time.Sleep(30 * time.Millisecond)
	putKeyed(t, c, 5, "")
	wantOldest("parked events older than a new ring head", parked)

	for _, tx := range []*Transaction{txB, txA} {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	txC := mustBegin(t, a)
	if e1 := takeEvent(t, txC); string(e1.Body) != "1:k" || !e1.Time.Equal(parked) {
		t.Fatalf("after A's commit took %q of %v, want 1:k of %v", e1.Body, e1.Time, parked)
	}
	takeEvent(t, txC)
	if err := txC.Commit(); err != nil {
		t.Fatal(err)
	}
	head := a.Stats().Oldest
	if !head.After(parked.Add(20 * time.Millisecond)) {
		t.Fatalf("after the parked events were taken, Oldest %v; want 5:'s commit, 30ms after %v", head, parked)
	}
	wantOldest("the ring's head again", head)
	a.g.head.mu.Lock()
	n := len(a.g.head.lanes)
	a.g.head.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d lane heads cached with no event parked", n)
	}
	txD := mustBegin(t, a)
	if e5 := takeEvent(t, txD); string(e5.Body) != "5:" || !e5.Time.Equal(head) {
		t.Fatalf("took %q of %v, want 5: of %v", e5.Body, e5.Time, head)
	}
	if err := txD.Commit(); err != nil {
		t.Fatal(err)
	}
	if o, v := a.Stats().Oldest, age(); !o.IsZero() || v != 0 {
		t.Fatalf("nothing queued: Oldest %v, age %v", o, v)
	}
}

// openKeyedMetered opens a channel of orderConfig with a metrics
// registry: it returns the channel, its group "a" and the registry.
func openKeyedMetered(t *testing.T) (*FileChannel, *Group, *prometheus.Registry) {
	t.Helper()
	cfg := orderConfig(t)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	c := mustOpen(t, cfg)
	return c, mustGroup(t, c, "a"), reg
}

// scrapeLag reads g's lag (Group.Stats, Stats, the metric from reg) in a
// loop until the returned stop is called: for tests of concurrent takes.
func scrapeLag(t *testing.T, c *FileChannel, g *Group, reg prometheus.Gatherer) (stop func()) {
	done, scraped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(scraped)
		for {
			select {
			case <-done:
				return
			default:
			}
			_, _ = g.Stats().Oldest, c.Stats()
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return func() { close(done); <-scraped }
}
