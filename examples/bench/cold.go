package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/flumego/filechannel/channel"
)

// coldTakes measures takes from cold log files against a plain read of the
// same bytes from cold: a channel filled with coldEvents events of 1 KiB
// (1 GiB in full mode; put commits of 1,000, checkpointed once) is drained
// in take commits of batch 100, interleaved with a plain sequential read of
// its log files (seqReader: 1 MiB preads). Before every slice of either
// side, every log file of the channel is dropped from the page cache
// (dropLogs: posix_fadvise DONTNEED, untimed), so each slice reads its
// share cold. Both sides cover the same share in the same round: the take
// the next events, the read the next bytes of the log (the log bytes the
// fill wrote, in proportion), so that the hypervisor's cache of the
// virtual disk, which the drop does not empty and which holds what the
// round's first side just read, favours each side in turn (interleave
// reverses the order in odd rounds). The channel's periodic checkpoint is
// off (CheckpointInterval 1h), so no log file is deleted under the read.
func (b *bench) coldTakes() error {
	n := b.sz.coldEvents
	name := "cold-takes"
	dataDir := fcConfig(filepath.Join(b.root, name)).DataDirs[0]
	c, closeC, err := b.openChannel(name, func(cfg *channel.Config) {
		cfg.Capacity = max(n, channel.DefaultCapacity)
		cfg.CheckpointInterval = time.Hour
	})
	if err != nil {
		return err
	}
	r := &seqReader{}
	err = func() error {
		if err := errors.Join(fill(c, b.body, n, 1000), c.Checkpoint()); err != nil {
			return err
		}
		logs, err := logFiles(dataDir)
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
		drop := func() error { return dropLogs(dataDir) }
		take := &meter{
			res: Result{ID: "filechannel/take/cold/batch=100", System: "filechannel", Op: "take commit, log dropped from the page cache",
				Batch: 100, Producers: 1, Note: "cold takes: before each slice the log files are dropped from the page cache " +
					"(posix_fadvise DONTNEED); the hypervisor may still cache the disk"},
			max:    int64(n),
			before: drop,
		}
		var commits time.Duration
		takes := drain(c, 100, &commits)
		take.run = func(budget time.Duration, max int64) (int64, error) {
			k, err := takes(budget, max)
			take.res.CommitSeconds = commits.Seconds()
			return k, err
		}
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
		if err := b.interleave(b.sz.rounds, time.Hour, []*meter{withCPU(withRounds(take)), withCPU(withRounds(plain))}); err != nil {
			return err
		}
		read := plain.res.Bytes
		if take.res.Events != int64(n) || read != logBytes {
			return fmt.Errorf("cold takes: took %d events of %d, read %d log bytes of %d", take.res.Events, n, read, logBytes)
		}
		return nil
	}()
	return errors.Join(err, r.close(), closeC())
}
