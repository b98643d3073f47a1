package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flumego/filechannel/channel"
)

// fcConfig is the default durable configuration in dir (without the free
// space check, which would refuse a nearly full temporary disk).
func fcConfig(dir string) channel.Config {
	return channel.Config{
		CheckpointDir:        filepath.Join(dir, "checkpoint"),
		DataDirs:             []string{filepath.Join(dir, "data")},
		MinimumRequiredSpace: -1,
	}
}

// putTx commits one put transaction of n copies of ev, begun by begin (a
// FileChannel's or a kafka.Channel's Begin).
func putTx[T channel.Tx](begin func() (T, error), ev channel.Event, n int) error {
	tx, err := begin()
	if err != nil {
		return err
	}
	for range n {
		if err := tx.Put(ev); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// takeTx commits one take transaction of up to n events and returns how
// many it took.
func takeTx(c *channel.FileChannel, n int) (int, error) { return takeTxOf(c.Begin, n, nil) }

// takeTxOf is takeTx of the transaction begin starts (a group's). If
// commitTime is not nil, the time Commit took is added to it.
func takeTxOf(begin func() (*channel.Transaction, error), n int, commitTime *time.Duration) (int, error) {
	tx, err := begin()
	if err != nil {
		return 0, err
	}
	k := 0
	for k < n {
		_, ok, err := tx.Take()
		if err != nil {
			return k, errors.Join(err, tx.Rollback())
		}
		if !ok {
			break
		}
		k++
	}
	if commitTime == nil {
		return k, tx.Commit()
	}
	start := time.Now()
	err = tx.Commit()
	*commitTime += time.Since(start)
	return k, err
}

// fill puts n events of body in transactions of batch events.
func fill(c *channel.FileChannel, body []byte, n, batch int) error {
	ev := channel.Event{Body: body}
	for i := 0; i < n; i += batch {
		if err := putTx(c.Begin, ev, min(batch, n-i)); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
	}
	return nil
}

// fresh returns an empty directory named name under the run's root.
func (b *bench) fresh(name string) (string, error) {
	dir := filepath.Join(b.root, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// puts measures the disk baselines (append at each batch size, overwrite
// at overwriteBatches), put commits of one producer at each batch size, and
// the peers' puts, interleaved.
func (b *bench) puts() error {
	var ms []*meter
	var closers []func() error
	err := func() error {
		for _, batch := range batches {
			base, err := b.diskMeter(&closers, false, batch, "")
			if err != nil {
				return err
			}
			ms = append(ms, base)
			if slices.Contains(overwriteBatches, batch) {
				over, err := b.diskMeter(&closers, true, batch, "")
				if err != nil {
					return err
				}
				ms = append(ms, over)
			}
			c, closeC, err := b.openChannel(fmt.Sprintf("put-%d", batch), nil)
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			m := b.putMeter(c, batch, 1)
			m.res.ID = fmt.Sprintf("filechannel/put/batch=%d", batch)
			if batch == 100 {
				m.run = b.countAllocs("filechannel put (batch 100)", m.run)
			}
			ms = append(ms, withRounds(m))
			if batch == 100 {
				// The same puts with every commit appending (no zeros laid
				// out ahead, Config.Preallocate < 0): what laying out buys.
				c, closeC, err := b.openChannel("put-100-appending", func(cfg *channel.Config) { cfg.Preallocate = -1 })
				if err != nil {
					return err
				}
				closers = append(closers, closeC)
				m := b.putMeter(c, batch, 1)
				m.res.ID = "filechannel/put/batch=100/appending"
				ms = append(ms, withRounds(m))
				// The same puts encrypted (Config.Keys): every put's body
				// sealed with AES-256-GCM.
				c, closeC, err = b.openChannel("put-100-encrypted", func(cfg *channel.Config) {
					cfg.Keys = channel.StaticKeys("bench", map[string][]byte{"bench": make([]byte, channel.KeySize)})
				})
				if err != nil {
					return err
				}
				closers = append(closers, closeC)
				m = b.putMeter(c, batch, 1)
				m.res.ID = "filechannel/put/batch=100/encrypted"
				ms = append(ms, withRounds(m))
			}
		}
		peers, pc, err := b.peerPutMeters()
		closers = append(closers, pc...)
		if err != nil {
			return err
		}
		return b.interleave(b.sz.rounds, b.sz.dur, append(ms, peers...))
	}()
	b.reportAllocs()
	return errors.Join(err, closeAll(closers))
}

// overwriteBatches are the batch sizes of the overwrite baseline beside the
// puts (the producers step adds batch groupCommitBatch).
var overwriteBatches = []int{10, 100, 1000}

// groupCommitBatch is the batch of the overwrite baseline the group commit
// of 8 producers at batch 10 is compared with: what one fsync covers when
// it serves all 8.
const groupCommitBatch = 80

// diskMeter returns a disk baseline meter at batch (an overwriter's if
// overwrite, else an appender's), capped at maxEvents and recording its
// rounds, with its file closed and removed by a function added to
// closers. A non-empty beside ("producers") goes into its ID and op.
func (b *bench) diskMeter(closers *[]func() error, overwrite bool, batch int, beside string) (*meter, error) {
	return b.diskMeterTimed(closers, overwrite, batch, beside, nil)
}

// diskMeterTimed is diskMeter that also appends how long each fdatasync
// took to syncs, if it is not nil.
func (b *bench) diskMeterTimed(closers *[]func() error, overwrite bool, batch int, beside string, syncs *[]time.Duration) (*meter, error) {
	path := filepath.Join(b.root, fmt.Sprintf("baseline-%d", batch))
	if overwrite {
		path += "-overwrite"
	}
	if beside != "" {
		path += "-" + beside
	}
	var w *diskWriter
	var err error
	if overwrite {
		w, err = newOverwriter(path, batch, b.sz.overwrite)
	} else {
		w, err = newAppender(path, batch)
	}
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, w.close)
	w.syncs = syncs
	m := w.meter()
	m.max = b.sz.maxEvents
	if beside != "" {
		m.res.ID += "/beside-" + beside
		m.res.Op += " (beside " + beside + ")"
	}
	return withRounds(m), nil
}

// producers measures 1, 2, 4 and 8 producers committing batches of 10,
// interleaved with the disk baseline at batch 10 (one write+fdatasync
// stream, for the chart) and the overwrite baseline at batch
// groupCommitBatch (for the group commit target).
func (b *bench) producers() error {
	var ms []*meter
	var closers []func() error
	err := func() error {
		for _, base := range []struct {
			overwrite bool
			batch     int
		}{{false, 10}, {true, groupCommitBatch}} {
			m, err := b.diskMeter(&closers, base.overwrite, base.batch, "producers")
			if err != nil {
				return err
			}
			ms = append(ms, m)
		}
		for _, producers := range []int{1, 2, 4, 8} {
			c, closeC, err := b.openChannel(fmt.Sprintf("producers-%d", producers), nil)
			if err != nil {
				return err
			}
			closers = append(closers, closeC)
			m := b.putMeter(c, 10, producers)
			m.res.ID = fmt.Sprintf("filechannel/put/producers=%d/batch=10", producers)
			ms = append(ms, withRounds(m))
		}
		return b.interleave(b.sz.rounds, b.sz.dur, ms)
	}()
	return errors.Join(err, closeAll(closers))
}

func closeAll(closers []func() error) error {
	var errs []error
	for _, f := range closers {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// putMeter commits batches of 1 KiB events from producers goroutines.
func (b *bench) putMeter(c *channel.FileChannel, batch, producers int) *meter {
	ev := channel.Event{Body: b.body}
	return &meter{
		res: Result{System: "filechannel", Op: "put commit", Batch: batch, Producers: producers},
		max: b.sz.maxEvents,
		run: func(budget time.Duration, max int64) (int64, error) {
			return concurrentPuts(c, ev, producers, batch, budget, max)
		},
	}
}

// concurrentPuts runs producers goroutines committing batch events each
// until budget passes or about max events are committed.
func concurrentPuts(c *channel.FileChannel, ev channel.Event, producers, batch int, budget time.Duration, max int64) (int64, error) {
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, producers)
	start := time.Now()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for until(start, budget, n.Load(), int64(batch), max) {
				if err := putTx(c.Begin, ev, batch); err != nil {
					errs[p] = err
					return
				}
				n.Add(int64(batch))
			}
		}()
	}
	wg.Wait()
	return n.Load(), errors.Join(errs...)
}

// openChannel opens a channel in a fresh directory (edit, if not nil,
// changes the default config) and returns it with a function that closes
// it and removes its files.
func (b *bench) openChannel(name string, edit func(*channel.Config)) (*channel.FileChannel, func() error, error) {
	dir, err := b.fresh(name)
	if err != nil {
		return nil, nil, err
	}
	cfg := fcConfig(dir)
	if edit != nil {
		edit(&cfg)
	}
	c, err := channel.Open(cfg)
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	return c, func() error { return errors.Join(c.Close(), os.RemoveAll(dir)) }, nil
}

// withChannel runs fn on a channel opened by openChannel, then closes it.
func (b *bench) withChannel(name string, edit func(*channel.Config), fn func(*channel.FileChannel) error) error {
	c, closeC, err := b.openChannel(name, edit)
	if err != nil {
		return err
	}
	return errors.Join(fn(c), closeC())
}

// takes measures take commits of batch 100 and go-diskqueue's reads
// (SyncEvery=100), interleaved, each from takeEvents 1 KiB events queued
// just before (so read from the page cache).
func (b *bench) takes() error {
	c, closeC, err := b.openChannel("take", nil)
	if err != nil {
		return err
	}
	dir, err := b.fresh("diskqueue-read")
	if err != nil {
		return errors.Join(err, closeC())
	}
	dq := newDiskQueue(dir, 100)
	err = func() error {
		if err := fill(c, b.body, b.sz.takeEvents, 1000); err != nil {
			return err
		}
		for range b.sz.takeEvents {
			if err := dq.Put(b.body); err != nil {
				return err
			}
		}
		n := int64(b.sz.takeEvents)
		take := &meter{
			res: Result{ID: "filechannel/take/batch=100", System: "filechannel", Op: "take commit", Batch: 100,
				Producers: 1, Note: "takes read the log from the page cache"},
			max: n,
			run: b.countAllocs("filechannel take (batch 100)", drain(c, 100, nil)),
		}
		read := &meter{
			res: Result{ID: "go-diskqueue/read/syncevery=100", System: "go-diskqueue", Op: "read, SyncEvery=100",
				Batch: 100, Producers: 1,
				Note: "reads are not acknowledged; the read position is fsync'd every 100 reads; page cache"},
			max: n,
			run: func(_ time.Duration, max int64) (int64, error) {
				for i := range max {
					if msg := <-dq.ReadChan(); len(msg) != len(b.body) {
						return i, fmt.Errorf("go-diskqueue read %d bytes", len(msg))
					}
				}
				return max, nil
			},
		}
		if err := b.interleave(b.sz.rounds, time.Hour, []*meter{take, read}); err != nil {
			return err
		}
		if take.res.Events != n || read.res.Events != n {
			return fmt.Errorf("took %d and read %d events of %d", take.res.Events, read.res.Events, n)
		}
		return nil
	}()
	b.reportAllocs()
	return errors.Join(err, dq.Close(), os.RemoveAll(dir), closeC())
}

// drain returns a meter's run that takes max events from c in take
// commits of batch (or fewer: it stops if c runs dry), adding the time
// the commits took to commitTime if it is not nil.
func drain(c *channel.FileChannel, batch int, commitTime *time.Duration) func(time.Duration, int64) (int64, error) {
	return func(_ time.Duration, max int64) (int64, error) {
		var n int64
		for n < max {
			k, err := takeTxOf(c.Begin, int(min(int64(batch), max-n)), commitTime)
			n += int64(k)
			if err != nil || k == 0 {
				return n, err
			}
		}
		return n, nil
	}
}

// countAllocs wraps run to count the allocations it makes (of the whole
// process: the channel's background work included) under op.
func (b *bench) countAllocs(op string, run func(time.Duration, int64) (int64, error)) func(time.Duration, int64) (int64, error) {
	return func(budget time.Duration, max int64) (int64, error) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		n, err := run(budget, max)
		runtime.ReadMemStats(&m1)
		a := b.pendingAllocs[op]
		a.Op = op
		a.Events += n
		a.mallocs += m1.Mallocs - m0.Mallocs
		a.bytes += m1.TotalAlloc - m0.TotalAlloc
		b.pendingAllocs[op] = a
		return n, err
	}
}

// reportAllocs adds the allocations counted by countAllocs to the report.
func (b *bench) reportAllocs() {
	for op, a := range b.pendingAllocs {
		if a.Events > 0 {
			a.PerEvent = float64(a.mallocs) / float64(a.Events)
			a.BytesPerEvt = float64(a.bytes) / float64(a.Events)
		}
		b.rep.Allocs = append(b.rep.Allocs, a.Allocs)
		b.logf("  %-44s %.2f allocs/event, %.0f B/event", op, a.PerEvent, a.BytesPerEvt)
		delete(b.pendingAllocs, op)
	}
}

// fcStall measures put commit latency (batch 100) on a channel of the
// default capacity (1,000,000 slots) holding stallFill events: stallTxs
// commits with no checkpoint running and stallTxs with a goroutine calling
// Checkpoint back to back, interleaved (rounds of stallTxs/rounds commits
// each, the checkpoint goroutine running through the slices of the second
// only; a slice ends once its last checkpoint has too). The periodic
// checkpoint is pushed out of the way (CheckpointInterval 1h) so the
// first has none.
func (b *bench) fcStall() error {
	edit := func(cfg *channel.Config) { cfg.CheckpointInterval = time.Hour }
	return b.withChannel("stall", edit, func(c *channel.FileChannel) error {
		if err := fill(c, b.body, b.sz.stallFill, 1000); err != nil {
			return err
		}
		ev := channel.Event{Body: b.body}
		var meters []*meter
		var lats []Latency
		var durs [][]time.Duration
		for i, withCkpt := range []bool{false, true} {
			l, id := Latency{ID: "without checkpoints", Checkpoints: withCkpt, Batch: 100}, "none"
			if withCkpt {
				l.ID, id = "with Checkpoint() in a loop", "loop"
			}
			lats, durs = append(lats, l), append(durs, nil)
			var ckptTime time.Duration
			meters = append(meters, &meter{
				res: Result{ID: "filechannel/put/batch=100/stall/checkpoints=" + id, System: "filechannel",
					Op: "checkpoint stall: put commit, " + l.ID, Batch: 100, Producers: 1,
					Note: "checkpoint stall: one commit at a time, timed one by one; with checkpoints, a slice also waits for its last checkpoint"},
				max: int64(b.sz.stallTxs) * 100,
				run: func(_ time.Duration, max int64) (int64, error) {
					stop := make(chan struct{})
					var ckptErr error
					var wg sync.WaitGroup
					if withCkpt {
						wg.Go(func() {
							for {
								select {
								case <-stop:
									return
								default:
								}
								t := time.Now()
								if err := c.Checkpoint(); err != nil {
									ckptErr = err
									return
								}
								ckptTime += time.Since(t)
								lats[i].Done++
							}
						})
					}
					var n int64
					var err error
					for n == 0 || n+100 <= max {
						t := time.Now()
						if err = putTx(c.Begin, ev, 100); err != nil {
							break
						}
						durs[i] = append(durs[i], time.Since(t))
						n += 100
					}
					close(stop)
					wg.Wait()
					if lats[i].Done > 0 {
						lats[i].CkptMillis = ms(ckptTime) / float64(lats[i].Done)
					}
					return n, errors.Join(err, ckptErr)
				},
			})
		}
		if err := b.interleave(b.sz.rounds, time.Hour, meters); err != nil {
			return err
		}
		for i, l := range lats {
			lat := durs[i]
			slices.Sort(lat)
			l.Commits = len(lat)
			l.P50, l.P99, l.Max = ms(pct(lat, 0.50)), ms(pct(lat, 0.99)), ms(lat[len(lat)-1])
			b.rep.Latency = append(b.rep.Latency, l)
			b.logf("  %-44s p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d checkpoints", l.ID, l.P50, l.P99, l.Max, l.Done)
		}
		return nil
	})
}

// pct returns the p-th quantile (nearest rank) of sorted.
func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
