package channel

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/testutil"
	"github.com/flumego/filechannel/internal/vfs"
)

// The consumer-group benchmarks. Run one at a time, each sub-benchmark is
// a separate channel in a fresh directory; their ratios (4 groups against
// 1, side by side in one run, interleaved) come from examples/bench's
// "groups" steps, which docs/benchmarks.md reports. Reproduce with
//
//	go test -run '^$' -bench 'Groups(Put|Take)' -benchtime 100000x -count 3 ./channel/
//	go test -run '^$' -bench 'GroupsTakeMaxDeliveries/.*/batch=100' -benchtime 200000x -count 3 ./channel/
//	go test -run '^$' -bench GroupsCheckpoint -benchtime 20x ./channel/
//	go test -run '^$' -bench GroupsReopen -benchtime 5x ./channel/
//
// and with -cpuprofile to see where the time goes. At -benchtime 1x (CI)
// they take a few seconds together.

// benchGroupConfigs returns n named groups, g0 to g(n-1); n = 0 is nil,
// the unnamed group alone (a channel without groups).
func benchGroupConfigs(n int) []GroupConfig {
	if n == 0 {
		return nil
	}
	gs := make([]GroupConfig, n)
	for i := range gs {
		gs[i].Name = fmt.Sprintf("g%d", i)
	}
	return gs
}

// groupsBenchConfig is benchConfig with n named groups (n = 0: the unnamed
// group alone) of capacity events each.
func groupsBenchConfig(b *testing.B, n, capacity int) Config {
	cfg := benchConfig(b)
	cfg.Capacity = capacity
	cfg.Groups = benchGroupConfigs(n)
	return cfg
}

// benchGroups returns c's groups: the named ones, or the unnamed group.
func benchGroups(b *testing.B, c *FileChannel) []*Group {
	b.Helper()
	var gs []*Group
	for _, name := range c.GroupNames() {
		gs = append(gs, mustGroup(b, c, name))
	}
	return gs
}

// groupsLabel names a sub-benchmark by its number of groups.
func groupsLabel(n int) string {
	if n == 0 {
		return "unnamed"
	}
	return fmt.Sprintf("groups=%d", n)
}

// putBatch commits one put transaction of n copies of ev.
func putBatch(b *testing.B, c *FileChannel, ev Event, n int) {
	b.Helper()
	tx, err := c.Begin()
	if err != nil {
		b.Fatal(err)
	}
	for range n {
		if err := tx.Put(ev); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// takeBatch commits one take transaction of up to n events of g and
// returns how many it took.
func takeBatch(g *Group, n int) (int, error) {
	tx, err := g.Begin()
	if err != nil {
		return 0, err
	}
	k := 0
	for ; k < n; k++ {
		_, ok, err := tx.Take()
		if err != nil {
			tx.Rollback()
			return k, err
		}
		if !ok {
			break
		}
	}
	return k, tx.Commit()
}

// drainGroupsBench takes n events from every group in gs, in batches of
// 1,000.
func drainGroupsBench(b *testing.B, gs []*Group, n int) {
	b.Helper()
	for _, g := range gs {
		for left := n; left > 0; {
			k, err := takeBatch(g, min(left, 1000))
			if err != nil {
				b.Fatal(err)
			}
			if k == 0 {
				b.Fatalf("%s ran dry with %d events to take", groupLabel(g.Name()), left)
			}
			left -= k
		}
	}
}

// BenchmarkGroupsPut measures durable put commits of one producer, batch
// 100 × 1 KiB, to a channel with the unnamed group alone, with 1, 2 and 4
// named groups, and the fan-out that groups replace: 2 channels, each
// batch committed to one and then to the other (one op is one event put,
// into both). log_B/event is what the data dirs grew by per event put.
func BenchmarkGroupsPut(b *testing.B) {
	const batch = 100
	ev := Event{Body: make([]byte, 1024)}
	for _, n := range []int{0, 1, 2, 4} {
		b.Run(groupsLabel(n)+"/batch=100", func(b *testing.B) {
			cfg := groupsBenchConfig(b, n, 2_000_000)
			c := mustOpen(b, cfg)
			defer c.Close()
			gs := benchGroups(b, c)
			before := testutil.DirBytes(b, cfg.DataDirs...)
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			queued := 0
			for i := 0; i < b.N; i += batch {
				k := min(batch, b.N-i)
				putBatch(b, c, ev, k)
				if queued += k; queued > 1_500_000 {
					b.StopTimer()
					drainGroupsBench(b, gs, queued)
					queued = 0
					b.StartTimer()
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(testutil.DirBytes(b, cfg.DataDirs...)-before)/float64(b.N), "log_B/event")
		})
	}
	b.Run("fanout=2/batch=100", func(b *testing.B) {
		var cs []*FileChannel
		var dirs []string
		for range 2 {
			cfg := groupsBenchConfig(b, 0, 2_000_000)
			c := mustOpen(b, cfg)
			defer c.Close()
			cs = append(cs, c)
			dirs = append(dirs, cfg.DataDirs...)
		}
		before := testutil.DirBytes(b, dirs...)
		b.SetBytes(1024)
		b.ReportAllocs()
		b.ResetTimer()
		queued := 0
		for i := 0; i < b.N; i += batch {
			k := min(batch, b.N-i)
			for _, c := range cs {
				putBatch(b, c, ev, k)
			}
			if queued += k; queued > 1_500_000 {
				b.StopTimer()
				for _, c := range cs {
					drainGroupsBench(b, benchGroups(b, c), queued)
				}
				queued = 0
				b.StartTimer()
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(testutil.DirBytes(b, dirs...)-before)/float64(b.N), "log_B/event")
	})
}

// BenchmarkGroupsTake measures durable take commits, batch 100 × 1 KiB:
// one group draining alone, and 4 groups draining at once, each on its
// own goroutine (one op is one event taken, by any group; the events were
// put just before, so they are read from the page cache).
func BenchmarkGroupsTake(b *testing.B) {
	ev := Event{Body: make([]byte, 1024)}
	for _, n := range []int{1, 4} {
		b.Run(groupsLabel(n)+"/batch=100", func(b *testing.B) {
			per := (b.N + n - 1) / n
			c := mustOpen(b, groupsBenchConfig(b, n, max(per, 10_000)))
			defer c.Close()
			gs := benchGroups(b, c)
			for i := 0; i < per; i += 1000 {
				putBatch(b, c, ev, min(1000, per-i))
			}
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, g := range gs {
				wg.Go(func() {
					for left := per; left > 0; {
						k, err := takeBatch(g, min(left, 100))
						if err != nil {
							b.Error(err)
							return
						}
						if k == 0 {
							b.Errorf("%s ran dry with %d events to take", groupLabel(g.Name()), left)
							return
						}
						left -= k
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(per*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkGroupsTakeMaxDeliveries measures durable take commits, batch
// 1, 10 and 100 × 1 KiB (an fsync per commit), from one named group with
// MaxDeliveries 16, whose every Take writes a deliver record (one write,
// unsynced) before it returns the event, and from the same group without
// (maxdeliveries=0), which writes nothing per Take. One op is one event
// taken; the events were put just before, so they are read from the page
// cache. log_B/event is what the data dirs grew by per event taken: the
// take records, and with MaxDeliveries the deliver records.
// examples/bench's "groups: take with MaxDeliveries" step compares the two
// side by side.
func BenchmarkGroupsTakeMaxDeliveries(b *testing.B) {
	ev := Event{Body: make([]byte, 1024)}
	for _, batch := range []int{1, 10, 100} {
		for _, md := range []int{0, 16} {
			b.Run(fmt.Sprintf("maxdeliveries=%d/batch=%d", md, batch), func(b *testing.B) {
				cfg := groupsBenchConfig(b, 1, max(b.N, 10_000))
				cfg.Groups[0].MaxDeliveries = md
				c := mustOpen(b, cfg)
				defer c.Close()
				g := mustGroup(b, c, "g0")
				for i := 0; i < b.N; i += 1000 {
					putBatch(b, c, ev, min(1000, b.N-i))
				}
				before := testutil.DirBytes(b, cfg.DataDirs...)
				b.SetBytes(1024)
				b.ReportAllocs()
				b.ResetTimer()
				for left := b.N; left > 0; {
					k, err := takeBatch(g, min(left, batch))
					if err != nil {
						b.Fatal(err)
					}
					if k == 0 {
						b.Fatalf("%s ran dry with %d events to take", groupLabel(g.Name()), left)
					}
					left -= k
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(testutil.DirBytes(b, cfg.DataDirs...)-before)/float64(b.N), "log_B/event")
			})
		}
	}
}

// BenchmarkGroupsCheckpoint measures Checkpoint on a channel of capacity
// 1,000,000 per group holding a backlog of 100,000 events of 1 KiB, with
// the unnamed group alone and with 1, 2 and 4 named groups. Before each
// checkpoint (untimed) 10,000 events are put and every group takes
// 10,000, so the backlog stays and each checkpoint has pages to write.
// ckpt_B is the bytes in the checkpoint dir, ckpt_B/group those of one
// group's files (its group-N subdir; the unnamed group's are the dir's
// own): 8 per slot of capacity and a few small files. syncs/op counts the file and directory
// fsyncs of a checkpoint (through a FaultFS without rules, which only
// counts).
func BenchmarkGroupsCheckpoint(b *testing.B) {
	const backlog, churn = 100_000, 10_000
	ev := Event{Body: make([]byte, 1024)}
	for _, n := range []int{0, 1, 2, 4} {
		b.Run(groupsLabel(n), func(b *testing.B) {
			cfg := groupsBenchConfig(b, n, 1_000_000)
			ffs := vfs.NewFaultFS(vfs.OS())
			cfg.fs = ffs
			c := mustOpen(b, cfg)
			defer c.Close()
			gs := benchGroups(b, c)
			for i := 0; i < backlog; i += 1000 {
				putBatch(b, c, ev, 1000)
			}
			if err := c.Checkpoint(); err != nil {
				b.Fatal(err)
			}
			syncs := 0
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for i := 0; i < churn; i += 100 {
					putBatch(b, c, ev, 100)
				}
				drainGroupsBench(b, gs, churn)
				ops := ffs.Ops()
				b.StartTimer()
				if err := c.Checkpoint(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				syncs += countSyncs(b, ffs, ops)
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(syncs)/float64(b.N), "syncs/op")
			size, group := testutil.DirBytes(b, cfg.CheckpointDir), testutil.DirBytes(b, cfg.CheckpointDir)
			if n > 0 {
				group = testutil.DirBytes(b, filepath.Join(cfg.CheckpointDir, "group-1"))
			}
			b.ReportMetric(float64(size), "ckpt_B")
			b.ReportMetric(float64(group), "ckpt_B/group")
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N)/float64(len(gs)), "ms/group")
		})
	}
}

// countSyncs returns the fsyncs of files and directories in ffs's log
// since it had counted ops operations.
func countSyncs(b *testing.B, ffs *vfs.FaultFS, ops int64) int {
	b.Helper()
	n := int(ffs.Ops() - ops)
	log := ffs.Log()
	if n > len(log) {
		b.Fatalf("%d operations, more than FaultFS.Log keeps (%d)", n, len(log))
	}
	syncs := 0
	for _, line := range log[len(log)-n:] {
		op, _, _ := strings.Cut(line, " ")
		if op == string(vfs.OpSync) || op == string(vfs.OpSyncDir) {
			syncs++
		}
	}
	return syncs
}

// BenchmarkGroupsReopen measures Open after a clean Close of a channel
// holding queued events in each of 1 and 4 named groups (Capacity =
// queued: 8 bytes of checkpoint per slot per group). The bodies are 100
// bytes, to fill quickly: a clean reopen reads the checkpoints, not the
// log (examples/bench times it with 1 KiB events).
func BenchmarkGroupsReopen(b *testing.B) {
	ev := Event{Body: make([]byte, 100)}
	for _, queued := range []int{100_000, 1_000_000} {
		for _, n := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/queued=%d", groupsLabel(n), queued), func(b *testing.B) {
				cfg := groupsBenchConfig(b, n, queued)
				c := mustOpen(b, cfg)
				for i := 0; i < queued; i += 10_000 {
					putBatch(b, c, ev, min(10_000, queued-i))
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					c = mustOpen(b, cfg)
					d := time.Since(start)
					b.StopTimer()
					for _, g := range benchGroups(b, c) {
						if g.Len() != queued {
							b.Fatalf("after %v, %s holds %d events, want %d", d, groupLabel(g.Name()), g.Len(), queued)
						}
					}
					if err := c.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}
