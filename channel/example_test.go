package channel_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flumego/filechannel/channel"
)

// A source puts events in a transaction and commits them; a sink takes them
// in another transaction and commits once it has delivered them.
func Example() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := channel.Open(channel.Config{
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Source: one put transaction for the batch.
	tx, err := c.Begin()
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range []string{"first line", "second line"} {
		if err := tx.Put(channel.Event{Headers: map[string]string{"host": "web1"}, Body: []byte(line)}); err != nil {
			tx.Rollback()
			log.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil { // on disk (fsync'd) when it returns nil
		log.Fatal(err)
	}
	fmt.Println("queued:", c.Len())

	// Sink: take what is there, deliver it, then commit the take.
	tx, err = c.Begin()
	if err != nil {
		log.Fatal(err)
	}
	for {
		ev, ok, err := tx.Take()
		if err != nil {
			tx.Rollback()
			log.Fatal(err)
		}
		if !ok {
			break // empty right now
		}
		fmt.Printf("deliver %q from %s\n", ev.Body, ev.Headers["host"])
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("queued:", c.Len())
	// Output:
	// queued: 2
	// deliver "first line" from web1
	// deliver "second line" from web1
	// queued: 0
}

// Open creates the directories it needs, takes their locks and recovers
// what the last run committed.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := channel.Config{
		Name:                "orders", // in log lines and the metrics' channel_name label
		CheckpointDir:       filepath.Join(dir, "checkpoint"),
		BackupCheckpointDir: filepath.Join(dir, "backup"), // best on another disk
		DataDirs:            []string{filepath.Join(dir, "data")},
		Capacity:            100_000, // events; the checkpoint file is (100_000+1029)*8 bytes
		TransactionCapacity: 1_000,   // the largest batch
	}
	c, err := channel.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	// A first start finds no checkpoint: it "replays" the (absent) logs.
	fmt.Println("recovered from:", c.Stats().RecoveredFrom)

	// The directories are locked while the channel is open.
	if _, err := channel.Open(cfg); errors.Is(err, channel.ErrLocked) {
		fmt.Println("second Open: locked")
	}

	tx, err := c.Begin()
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Put(channel.Event{Body: []byte("order 1")}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	if err := c.Close(); err != nil { // writes a checkpoint
		log.Fatal(err)
	}

	c, err = channel.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("recovered from:", c.Stats().RecoveredFrom, "with", c.Len(), "event")
	// Output:
	// recovered from: full replay
	// second Open: locked
	// recovered from: checkpoint with 1 event
}

// A put transaction is all or nothing: commit the whole batch, or roll it
// back. When the channel stays full for KeepAlive, Put returns
// ErrChannelFull: the sinks are behind. Roll back, keep the batch, and
// send it again later; dropping it would lose events.
func ExampleTransaction_Put() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := channel.Open(channel.Config{
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
		Capacity:      3,
		KeepAlive:     -1, // fail at once when full (the default waits 3s for room)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	send := func(batch ...string) error {
		tx, err := c.Begin()
		if err != nil {
			return err
		}
		for _, body := range batch {
			if err := tx.Put(channel.Event{Body: []byte(body)}); err != nil {
				tx.Rollback() // none of the batch is kept
				return err
			}
		}
		return tx.Commit() // durable when it returns nil; if it fails, nothing became visible
	}

	fmt.Println("send a, b:", send("a", "b"))
	err = send("c", "d")
	if errors.Is(err, channel.ErrChannelFull) {
		fmt.Println("send c, d: channel full; queued:", c.Len())
		// A real source waits and retries (with a backoff, or after
		// PutContext with a longer deadline). Here a sink makes room.
		tx, _ := c.Begin()
		ev, _, _ := tx.Take()
		tx.Commit()
		fmt.Printf("sink took %s\n", ev.Body)
		err = send("c", "d")
	}
	fmt.Println("send c, d:", err)
	fmt.Println("queued:", c.Len())
	// Output:
	// send a, b: <nil>
	// send c, d: channel full; queued: 2
	// sink took a
	// send c, d: <nil>
	// queued: 3
}

// A sink that cannot deliver what it took rolls the transaction back: the
// events return to the head of the channel, in order, and the next take
// returns them again. This is what makes delivery at-least-once.
func ExampleTransaction_Rollback() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := channel.Open(channel.Config{
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	tx, _ := c.Begin()
	tx.Put(channel.Event{Body: []byte("e1")})
	tx.Put(channel.Event{Body: []byte("e2")})
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	deliver := func(attempt int, body []byte) error {
		if attempt == 1 {
			return errors.New("destination unavailable")
		}
		return nil
	}
	for attempt := 1; attempt <= 2; attempt++ {
		tx, err := c.Begin()
		if err != nil {
			log.Fatal(err)
		}
		ev, ok, err := tx.Take()
		if err != nil || !ok {
			log.Fatal(ok, err)
		}
		if err := deliver(attempt, ev.Body); err != nil {
			fmt.Printf("attempt %d: took %s, %v: roll back\n", attempt, ev.Body, err)
			tx.Rollback() // ev is back at the head
			continue
		}
		if err := tx.Commit(); err != nil { // only now is ev gone
			log.Fatal(err)
		}
		fmt.Printf("attempt %d: took %s, delivered\n", attempt, ev.Body)
	}
	fmt.Println("queued:", c.Len())
	// Output:
	// attempt 1: took e1, destination unavailable: roll back
	// attempt 2: took e1, delivered
	// queued: 1
}

// A sink's loop: TakeContext blocks until an event arrives for the first
// event of a batch, non-blocking Takes fill the batch with what is already
// there, and the loop ends when its context does (a shutdown signal, here
// a cancel).
func ExampleTransaction_TakeContext() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := channel.Open(channel.Config{
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	put := func(bodies ...string) {
		tx, _ := c.Begin()
		for _, b := range bodies {
			if err := tx.Put(channel.Event{Body: []byte(b)}); err != nil {
				log.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
	}
	put("e1", "e2", "e3", "e4", "e5")

	// In a program: ctx, stop := signal.NotifyContext(ctx, os.Interrupt).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caughtUp := make(chan struct{})
	go func() {
		<-caughtUp
		put("late") // the sink is waiting for it
		cancel()    // then shut down
	}()

	const batchSize = 3
	delivered := 0
	for {
		tx, err := c.Begin()
		if err != nil {
			log.Fatal(err)
		}
		ev, err := tx.TakeContext(ctx) // blocks until an event, ctx's end or Close
		if err != nil {
			tx.Rollback()
			fmt.Println("sink stopped:", err)
			break
		}
		batch := []string{string(ev.Body)}
		for len(batch) < batchSize {
			ev, ok, err := tx.Take()
			if err != nil {
				tx.Rollback()
				log.Fatal(err)
			}
			if !ok {
				break // deliver what we have rather than wait
			}
			batch = append(batch, string(ev.Body))
		}
		fmt.Println("deliver", strings.Join(batch, " "))
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
		if delivered += len(batch); delivered == 5 {
			close(caughtUp)
		}
	}
	fmt.Println("queued:", c.Len())
	// Output:
	// deliver e1 e2 e3
	// deliver e4 e5
	// deliver late
	// sink stopped: context canceled
	// queued: 0
}

// Health is nil while the channel works; an HTTP health check of the
// program embedding it should report its error (the filechannel_healthy
// gauge says the same).
func ExampleFileChannel_Health() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := channel.Open(channel.Config{
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
	})
	if err != nil {
		log.Fatal(err)
	}
	// In an HTTP handler:
	//	if err := c.Health(); err != nil {
	//		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	//		return
	//	}
	fmt.Println("open:", c.Health())
	c.Close()
	fmt.Println("closed:", c.Health())
	// Output:
	// open: <nil>
	// closed: filechannel: channel is closed
}

// With a Registerer the channel registers its metrics there, labelled
// channel_name. Serve the registry with promhttp.HandlerFor(reg,
// promhttp.HandlerOpts{}); here it is gathered directly.
func ExampleConfig_metrics() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	reg := prometheus.NewRegistry() // never the global registry
	c, err := channel.Open(channel.Config{
		Name:          "orders",
		Registerer:    reg,
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	tx, _ := c.Begin()
	for range 3 {
		tx.Put(channel.Event{Body: []byte("x")})
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "filechannel_put_success_total", "filechannel_queue_events", "filechannel_healthy":
			for _, m := range mf.GetMetric() {
				v := m.GetGauge().GetValue()
				if m.GetCounter() != nil {
					v = m.GetCounter().GetValue()
				}
				fmt.Printf("%s{%s=%q} %g\n", mf.GetName(), m.GetLabel()[0].GetName(), m.GetLabel()[0].GetValue(), v)
			}
		}
	}
	// Output:
	// filechannel_healthy{channel_name="orders"} 1
	// filechannel_put_success_total{channel_name="orders"} 3
	// filechannel_queue_events{channel_name="orders"} 3
}

// Stats is a snapshot of the channel's state and of what the last Open
// found.
func ExampleFileChannel_Stats() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := channel.Open(channel.Config{
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
		Capacity:      1000,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	tx, _ := c.Begin()
	for range 3 {
		tx.Put(channel.Event{Body: []byte("x")})
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	take, _ := c.Begin()
	if _, _, err := take.Take(); err != nil { // taken, not committed
		log.Fatal(err)
	}

	s := c.Stats()
	fmt.Printf("queued %d, taken in flight %d, capacity %d\n", s.Queued, s.InflightTakes, s.Capacity)
	fmt.Printf("log files %d; last Open: %s, %d records replayed, %d torn tails, %d damaged regions\n",
		s.LogFiles, s.RecoveredFrom, s.ReplayRecords, s.TornTails, s.ReplayCorrupt)
	take.Rollback()
	fmt.Println("after rollback: queued", c.Stats().Queued)
	// Output:
	// queued 2, taken in flight 1, capacity 1000
	// log files 1; last Open: full replay, 0 records replayed, 0 torn tails, 0 damaged regions
	// after rollback: queued 3
}

// A sink that cannot deliver one event of a batch rejects it and commits
// the rest; an event that keeps failing is moved to the dead-letter group
// after MaxDeliveries deliveries; Redrive moves dead letters back once the
// destination is fixed.
func ExampleTransaction_Reject() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c, err := channel.Open(channel.Config{
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
		// The unnamed group, with a retry limit; its dead letters go to
		// the group "dlq", created with it.
		Groups: []channel.GroupConfig{{MaxDeliveries: 3}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	tx, _ := c.Begin()
	for _, body := range []string{"ok 1", "malformed", "ok 2"} {
		if err := tx.Put(channel.Event{Body: []byte(body)}); err != nil {
			log.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	tx, _ = c.Begin()
	for {
		ev, ok, err := tx.Take()
		if err != nil {
			log.Fatal(err)
		}
		if !ok {
			break
		}
		if strings.HasPrefix(string(ev.Body), "ok") {
			fmt.Printf("delivered %q (delivery %d)\n", ev.Body, ev.Deliveries)
			continue
		}
		if err := tx.Reject(ev); err != nil { // a dead letter when tx commits
			log.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	dlq, _ := c.Group("dlq")
	fmt.Println("dead letters:", dlq.Len())

	n, err := c.Redrive("dlq", "", 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("redriven:", n, "queued again:", c.Len())
	// Output:
	// delivered "ok 1" (delivery 1)
	// delivered "ok 2" (delivery 1)
	// dead letters: 1
	// redriven: 1 queued again: 1
}

// A new sink that starts from the oldest event the logs retain, and a
// group sent back to a point in time.
func ExampleFileChannel_ResetGroup() {
	dir, err := os.MkdirTemp("", "filechannel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c, err := channel.Open(channel.Config{
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		DataDirs:      []string{filepath.Join(dir, "data")},
		Groups:        []channel.GroupConfig{{Name: "index"}},
		// Keep what every group has taken for a day, for replays.
		Retention: channel.Retention{MaxAge: 24 * time.Hour},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	put := func(body string) {
		tx, _ := c.Begin()
		if err := tx.Put(channel.Event{Body: []byte(body)}); err != nil {
			log.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
	}
	take := func(g *channel.Group) (bodies []string, events []channel.Event) {
		tx, _ := g.Begin()
		for {
			ev, ok, err := tx.Take()
			if err != nil {
				log.Fatal(err)
			}
			if !ok {
				break
			}
			bodies, events = append(bodies, string(ev.Body)), append(events, ev)
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
		return bodies, events
	}
	index, _ := c.Group("index")
	put("a")
	put("b")
	took, events := take(index)
	fmt.Println("index took", took)
	put("c")

	// A new sink, started at the oldest retained event.
	audit, err := c.AddGroup(channel.GroupConfig{Name: "audit", StartAt: channel.Earliest()})
	if err != nil {
		log.Fatal(err)
	}
	took, _ = take(audit)
	fmt.Println("audit took", took)

	// Send index back to what was committed from "b" on (Event.Time).
	n, err := c.ResetGroup("index", channel.AtTime(events[1].Time))
	if err != nil {
		log.Fatal(err)
	}
	took, _ = take(index)
	fmt.Println("index reset to", n, "events:", took)
	// Output:
	// index took [a b]
	// audit took [a b c]
	// index reset to 2 events: [b c]
}
