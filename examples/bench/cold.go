package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/flumego/filechannel/channel"
)

// coldTakeSyncDelay is the Config.TakeSyncDelay of the second cold drain:
// its take commits are made durable within it, not each by an fsync.
const coldTakeSyncDelay = 100 * time.Millisecond

// coldTakes measures takes from cold log files against a plain read of the
// same bytes from cold: two channels filled alike with coldEvents events of
// 1 KiB (1 GiB in full mode; put commits of 1,000, checkpointed once) are
// drained in take commits of batch 100, one with every take commit synced
// (the default), one with Config.TakeSyncDelay coldTakeSyncDelay,
// interleaved with a plain sequential read of the first one's log files
// (seqReader: 1 MiB preads). Before every slice of any side, every log
// file of both channels is dropped from the page cache (dropLogs:
// posix_fadvise DONTNEED, untimed), so each slice reads its share cold.
// The sides cover the same share in the same round: the takes the next
// events, the read the next bytes of the log (the log bytes the fill
// wrote, in proportion), so that the hypervisor's cache of the virtual
// disk, which the drop does not empty and which holds what the round's
// first side just read, favours each side in turn (interleave reverses
// the order in odd rounds). The channels' periodic checkpoint is off
// (CheckpointInterval 1h), so no log file is deleted under the read.
func (b *bench) coldTakes() error {
	n := b.sz.coldEvents
	var dirs []string
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for _, f := range closers {
			errs = append(errs, f())
		}
		return errors.Join(errs...)
	}
	var chans []*channel.FileChannel
	for _, x := range []struct {
		name  string
		delay time.Duration
	}{{"cold-takes", 0}, {"cold-takes-delayed", coldTakeSyncDelay}} {
		c, closeC, err := b.openChannel(x.name, func(cfg *channel.Config) {
			cfg.Capacity = max(n, channel.DefaultCapacity)
			cfg.CheckpointInterval = time.Hour
			cfg.TakeSyncDelay = x.delay
		})
		if err != nil {
			return errors.Join(err, closeAll())
		}
		closers = append(closers, closeC)
		chans = append(chans, c)
		dirs = append(dirs, fcConfig(filepath.Join(b.root, x.name)).DataDirs[0])
		if err := errors.Join(fill(c, b.body, n, 1000), c.Checkpoint()); err != nil {
			return errors.Join(err, closeAll())
		}
	}
	r := &seqReader{}
	err := b.coldRun(n, chans, dirs, r)
	return errors.Join(err, r.close(), closeAll())
}

// coldRun is coldTakes on its filled channels and their data dirs.
func (b *bench) coldRun(n int, chans []*channel.FileChannel, dirs []string, r *seqReader) error {
	logs, err := logFiles(dirs[0])
	if err != nil {
		return err
	}
	var logBytes int64
	for _, p := range logs {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		logBytes += st.Size()
	}
	r.paths = logs
	drop := func() error {
		var errs []error
		for _, d := range dirs {
			errs = append(errs, dropLogs(d))
		}
		return errors.Join(errs...)
	}
	take := coldDrain(chans[0], n, drop, "filechannel/take/cold/batch=100", "take commit, log dropped from the page cache")
	delayed := coldDrain(chans[1], n, drop, "filechannel/take/cold/batch=100/takesyncdelay",
		fmt.Sprintf("take commit, TakeSyncDelay %v, log dropped from the page cache", coldTakeSyncDelay))
	plain := &meter{
		res: Result{ID: "disk/read/cold-takes", System: "disk", Op: "read logs, dropped, beside the cold takes",
			Producers: 1, Note: "log reads are plain sequential reads of the channel's log files, 1 MiB preads"},
		max:    int64(n),
		before: drop,
	}
	var events int64 // the read's events so far: the log bytes it read, in proportion
	plain.run = func(_ time.Duration, max int64) (int64, error) {
		events += max
		k, err := r.read(events*logBytes/int64(n) - plain.res.Bytes)
		plain.res.Bytes += k
		return max, err
	}
	meters := []*meter{withCPU(withRounds(take)), withCPU(withRounds(delayed)), withCPU(withRounds(plain))}
	if err := b.interleave(b.sz.rounds, time.Hour, meters); err != nil {
		return err
	}
	read := plain.res.Bytes
	if take.res.Events != int64(n) || delayed.res.Events != int64(n) || read != logBytes {
		return fmt.Errorf("cold takes: took %d and %d events of %d, read %d log bytes of %d",
			take.res.Events, delayed.res.Events, n, read, logBytes)
	}
	return nil
}

// coldDrain is the meter of c's cold drain at batch 100, which drops the
// log files from the page cache before each slice.
func coldDrain(c *channel.FileChannel, n int, drop func() error, id, op string) *meter {
	m := &meter{
		res: Result{ID: id, System: "filechannel", Op: op, Batch: 100, Producers: 1,
			Note: "cold takes: before each slice the log files are dropped from the page cache " +
				"(posix_fadvise DONTNEED); the hypervisor may still cache the disk"},
		max:    int64(n),
		before: drop,
	}
	var commits time.Duration
	takes := drain(c, 100, &commits)
	m.run = func(budget time.Duration, max int64) (int64, error) {
		k, err := takes(budget, max)
		m.res.CommitSeconds = commits.Seconds()
		return k, err
	}
	return m
}
