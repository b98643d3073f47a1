package channel

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// benchConfig is a durable channel sized for benchmarks.
func benchConfig(b *testing.B) Config {
	cfg := testConfig(b, 1)
	cfg.Capacity = 2_000_000
	cfg.TransactionCapacity = 10_000
	cfg.MaxFileSize = 256 << 20
	cfg.KeepAlive = time.Minute
	return cfg
}

// BenchmarkPut measures durable put commits: one producer, batch × 1 KiB,
// fsync per commit.
func BenchmarkPut(b *testing.B) {
	for _, batch := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c := mustOpen(b, benchConfig(b))
			defer c.Close()
			benchPuts(b, c, Event{Headers: map[string]string{"k": "v"}, Body: make([]byte, 1024)}, batch)
		})
	}
}

// benchPuts commits b.N copies of ev in transactions of batch, taking
// them all (untimed) when the channel holds 1,500,000.
func benchPuts(b *testing.B, c *FileChannel, ev Event, batch int) {
	benchPutsEach(b, c, ev, batch, nil)
}

// benchPutsEach is benchPuts that calls each (if set) with the index of
// each put before it (to change ev's headers).
func benchPutsEach(b *testing.B, c *FileChannel, ev Event, batch int, each func(i int)) {
	b.SetBytes(int64(len(ev.Body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		tx, _ := c.Begin()
		for j := 0; j < batch && i < b.N; j, i = j+1, i+1 {
			if each != nil {
				each(i)
			}
			if err := tx.Put(ev); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		if c.Len() > 1_500_000 {
			b.StopTimer()
			takeN(b, c, c.Len(), 10_000)
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.StopTimer() // the caller's Close is not a put
}

// BenchmarkConcurrentPut measures group commit: producers × batch 10.
func BenchmarkConcurrentPut(b *testing.B) {
	for _, producers := range []int{1, 8} {
		b.Run(fmt.Sprintf("producers=%d/batch=10", producers), func(b *testing.B) {
			c := mustOpen(b, benchConfig(b))
			defer c.Close()
			ev := Event{Body: make([]byte, 1024)}
			b.SetBytes(1024)
			b.ReportAllocs()
			per := b.N/producers + 1
			b.ResetTimer()
			var wg sync.WaitGroup
			for range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i += 10 {
						tx, _ := c.Begin()
						for range 10 {
							if err := tx.Put(ev); err != nil {
								b.Error(err)
								return
							}
						}
						if err := tx.Commit(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*producers)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkTake measures durable take commits of batch 100 × 1 KiB.
func BenchmarkTake(b *testing.B) {
	c := mustOpen(b, benchConfig(b))
	defer c.Close()
	ev := Event{Body: make([]byte, 1024)}
	fill := func(n int) {
		for i := 0; i < n; i += 1000 {
			tx, _ := c.Begin()
			for range 1000 {
				tx.Put(ev)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.SetBytes(1024)
	b.ReportAllocs()
	for i := 0; i < b.N; {
		if c.Len() < 100 {
			b.StopTimer()
			fill(min(b.N-i+100, 200_000))
			b.StartTimer()
		}
		tx, _ := c.Begin()
		for j := 0; j < 100 && i < b.N; j, i = j+1, i+1 {
			if _, ok, err := tx.Take(); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCheckpoint measures a checkpoint after 100k puts.
func BenchmarkCheckpoint(b *testing.B) {
	c := mustOpen(b, benchConfig(b))
	defer c.Close()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		putN(b, c, 0, 100_000, 1000)
		takeN(b, c, 100_000, 10_000)
		b.StartTimer()
		if err := c.Checkpoint(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReopen measures Open after a clean Close with queued events.
func BenchmarkReopen(b *testing.B) {
	for _, queued := range []int{10_000, 200_000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			cfg := benchConfig(b)
			c := mustOpen(b, cfg)
			putN(b, c, 0, queued, 1000)
			c.Close()
			b.ResetTimer()
			for range b.N {
				c = mustOpen(b, cfg)
				b.StopTimer()
				if c.Len() != queued {
					b.Fatalf("Len %d", c.Len())
				}
				c.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkTakeManyFiles measures takes (batch 100 × 256 B, NoSync)
// of events spread over many small log files (ten events each, two data
// dirs), with a reader cache far smaller than the number of files and one
// larger than it: side by side, the cost of the bound. Takes read in queue
// order, so each file's reader is opened once either way; the small cache
// also closes each when it is evicted. The files are filled with a 4 KiB
// MaxFileSize, then the channel is reopened with a large one, so that the
// takes' own records do not roll (a roll fsyncs). On Linux the files go to
// /dev/shm (a tmpfs) when it exists: real descriptors and page-cache reads,
// no fsync. Reproduce with
//
//	go test -run '^$' -bench TakeManyFiles -benchtime 200000x -count 5 ./channel/
func BenchmarkTakeManyFiles(b *testing.B) {
	for _, maxOpen := range []int{8, 1 << 20} {
		b.Run(fmt.Sprintf("max_open=%d", maxOpen), func(b *testing.B) {
			cfg := benchConfig(b)
			if dir, err := os.MkdirTemp("/dev/shm", "fcbench"); err == nil {
				b.Cleanup(func() { os.RemoveAll(dir) })
				cfg.CheckpointDir = filepath.Join(dir, "checkpoint")
				cfg.DataDirs = []string{filepath.Join(dir, "data0")}
			}
			cfg.DataDirs = append(cfg.DataDirs, cfg.DataDirs[0]+"-2")
			cfg.MaxFileSize = MinMaxFileSize
			cfg.NoSync = true
			cfg.MaxOpenLogFiles = maxOpen
			c := mustOpen(b, cfg)
			ev := Event{Body: make([]byte, 256)}
			for i := 0; i < b.N+100; i += 10 {
				tx, _ := c.Begin()
				for range 10 {
					tx.Put(ev)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
			cfg.MaxFileSize = 256 << 20
			c = mustOpen(b, cfg)
			defer c.Close()
			files := c.Stats().LogFiles
			b.SetBytes(256)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; {
				tx, _ := c.Begin()
				for j := 0; j < 100 && i < b.N; j, i = j+1, i+1 {
					if _, ok, err := tx.Take(); err != nil || !ok {
						b.Fatal(ok, err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(files), "log_files")
		})
	}
}

// BenchmarkPutRetention measures put commits of batch 100 × 1 KiB with
// Retention{MaxAge: 1h} and without, side by side, NoSync (so the fsync's
// noise does not hide the put path's cost: what retention adds is a look
// at the data dir's retained files before the space checks). Each channel
// first took a fill of 4 files' worth of events and checkpointed: the
// first retains those files, the second deleted them.
//
//	go test -run '^$' -bench PutRetention -count 6 ./channel/
func BenchmarkPutRetention(b *testing.B) {
	for _, r := range []Retention{{}, {MaxAge: time.Hour}} {
		b.Run(fmt.Sprintf("maxage=%v", r.MaxAge), func(b *testing.B) {
			cfg := benchConfig(b)
			cfg.NoSync, cfg.MaxFileSize, cfg.MinimumRequiredSpace = true, 4<<20, 1<<20
			cfg.Retention = r
			c := mustOpen(b, cfg)
			defer c.Close()
			ev := Event{Body: make([]byte, 1024)}
			fillN := int(4 * cfg.MaxFileSize / 1100)
			for range fillN / 1000 {
				tx, _ := c.Begin()
				for range 1000 {
					if err := tx.Put(ev); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			takeN(b, c, c.Len(), 1000)
			if err := c.Checkpoint(); err != nil {
				b.Fatal(err)
			}
			if got := c.Stats().RetainedFiles; (got > 0) != (r.MaxAge > 0) {
				b.Fatalf("%d retained files", got)
			}
			benchPuts(b, c, ev, 100)
		})
	}
}
