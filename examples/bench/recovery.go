package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// fcReplay fills a channel with each of sz.replay events (1 KiB), closes it
// cleanly, and times Open: after the clean close (reopen), then with the
// checkpoint files removed (full replay), once with the log files in the
// page cache and once after dropping them from it, each beside a plain
// sequential read of the same log files in the same cache state.
func (b *bench) fcReplay() error {
	for _, n := range b.sz.replay {
		dir, err := b.fresh(fmt.Sprintf("replay-%d", n))
		if err != nil {
			return err
		}
		cfg := fcConfig(dir)
		cfg.Capacity = max(n, channel.DefaultCapacity)
		c, err := channel.Open(cfg)
		if err != nil {
			return err
		}
		if err := errors.Join(fill(c, b.body, n, 1000), c.Close()); err != nil {
			return err
		}
		rec, err := timedReopen(cfg, n)
		if err != nil {
			return err
		}
		b.addRecovery(rec)
		for _, cache := range []string{"page cache", "dropped"} {
			if err := b.readLogs(cfg.DataDirs[0], n, cache, "before"); err != nil {
				return err
			}
			if cache == "dropped" {
				if err := dropLogs(cfg.DataDirs[0]); err != nil {
					return err
				}
			}
			if err := removeCheckpoint(cfg.CheckpointDir); err != nil {
				return err
			}
			rec, err := timedOpen(cfg, n)
			if err != nil {
				return err
			}
			if rec.RecoveredFrom != "full replay" {
				return fmt.Errorf("open without checkpoint recovered from %q", rec.RecoveredFrom)
			}
			rec.Kind, rec.Cache = "full replay", cache
			rec.MBPerSec = float64(rec.LogBytes) / (rec.Millis / 1000) / 1e6
			b.addRecovery(rec)
			if err := b.readLogs(cfg.DataDirs[0], n, cache, "after"); err != nil {
				return err
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// readLogs reads the log files of dir with a plain sequential read, after
// dropping them from the page cache if cache is "dropped", and adds the
// result as disk/read/events=n/<cache>/<when> (before or after the replay
// it is compared with: on this VM a second read after a drop can be much
// faster than the first, so the comparison uses the faster of the two).
func (b *bench) readLogs(dir string, n int, cache, when string) error {
	if cache == "dropped" {
		if err := dropLogs(dir); err != nil {
			return err
		}
	}
	logs, err := logFiles(dir)
	if err != nil {
		return err
	}
	bytes, d, err := readFiles(logs)
	if err != nil {
		return err
	}
	b.add(Result{ID: fmt.Sprintf("disk/read/events=%d/%s/%s", n, cache, when), System: "disk",
		Op: fmt.Sprintf("read logs, %s, %s replay", cache, when), Producers: 1, Events: int64(n), Bytes: bytes,
		Seconds: d.Seconds(), Note: "log reads are plain sequential reads of the channel's log files, 1 MiB preads"})
	return nil
}

func dropLogs(dir string) error {
	logs, err := logFiles(dir)
	if err != nil {
		return err
	}
	return dropCache(logs)
}

// fcCrash times Open after a child process put sz.crash[i].before events,
// checkpointed, put .after more and was killed with SIGKILL after its last
// commit returned.
func (b *bench) fcCrash() error {
	for _, cc := range b.sz.crash {
		dir, err := b.fresh(fmt.Sprintf("crash-%d-%d", cc.before, cc.after))
		if err != nil {
			return err
		}
		if err := killedChild(childArgs{Mode: "crash", Dir: dir, Before: cc.before, After: cc.after}); err != nil {
			return err
		}
		rec, err := timedOpen(crashConfig(dir), cc.before+cc.after)
		if err != nil {
			return err
		}
		rec.Kind, rec.AfterCkpt = "crash replay", cc.after
		b.addRecovery(rec)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// crashConfig is the crash child's config: the default, with the periodic
// checkpoint out of the way so the child's explicit one is the last.
func crashConfig(dir string) channel.Config {
	cfg := fcConfig(dir)
	cfg.CheckpointInterval = time.Hour
	return cfg
}

// reopens is how many times timedReopen opens a cleanly closed channel:
// one Open takes milliseconds, and one sample on a shared machine is noise.
const reopens = 5

// timedReopen times Open of a cleanly closed channel holding want events
// reopens times and returns the median (Millis) and the range.
func timedReopen(cfg channel.Config, want int) (Recovery, error) {
	var rec Recovery
	var samples []float64
	for range reopens {
		r, err := timedOpen(cfg, want)
		if err != nil {
			return r, err
		}
		if r.RecoveredFrom != "checkpoint" || r.Records != 0 {
			return r, fmt.Errorf("clean reopen recovered from %q reading %d records", r.RecoveredFrom, r.Records)
		}
		rec = r
		samples = append(samples, r.Millis)
	}
	slices.Sort(samples)
	rec.Kind = "clean reopen"
	rec.Millis, rec.MinMs, rec.MaxMs = samples[len(samples)/2], samples[0], samples[len(samples)-1]
	return rec, nil
}

func (b *bench) addRecovery(r Recovery) {
	b.rep.Recovery = append(b.rep.Recovery, r)
	b.logf("  %-14s %-10s queued %8d, after ckpt %7d, log %6.0f MiB: %8.1f ms, %d records (%d skipped)",
		r.Kind, r.Cache, r.Queued, r.AfterCkpt, mib(r.LogBytes), r.Millis, r.Records, r.Skipped)
}

// timedOpen opens cfg, times it, checks it holds want events and closes it.
func timedOpen(cfg channel.Config, want int) (Recovery, error) { return timedOpenCheck(cfg, want, nil) }

// timedOpenCheck is timedOpen that also runs check (if not nil) on the
// opened channel, untimed, before closing it.
func timedOpenCheck(cfg channel.Config, want int, check func(*channel.FileChannel) error) (Recovery, error) {
	logs, err := logFiles(cfg.DataDirs[0])
	if err != nil {
		return Recovery{}, err
	}
	var logBytes int64
	for _, p := range logs {
		st, err := os.Stat(p)
		if err != nil {
			return Recovery{}, err
		}
		logBytes += st.Size()
	}
	start := time.Now()
	c, err := channel.Open(cfg)
	d := time.Since(start)
	if err != nil {
		return Recovery{}, err
	}
	st := c.Stats()
	r := Recovery{ID: fmt.Sprintf("open/%d", want), Queued: st.Queued, Capacity: st.Capacity, LogBytes: logBytes,
		Millis: ms(d), Records: st.ReplayRecords, Skipped: st.ReplaySkipped, RecoveredFrom: st.RecoveredFrom}
	if st.Queued != want {
		err = fmt.Errorf("open found %d events, want %d", st.Queued, want)
	} else if check != nil {
		err = check(c)
	}
	return r, errors.Join(err, c.Close())
}

// logFiles lists the log files of a data directory, in id order.
func logFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if _, ok := logfile.ParseLogName(e.Name()); ok {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(paths)
	return paths, nil
}

// removeCheckpoint deletes the checkpoint files (not the lock file), so the
// next Open must replay every log in full.
func removeCheckpoint(dir string) error {
	for _, name := range []string{checkpoint.CheckpointName, checkpoint.MetaName,
		checkpoint.InflightPutsName, checkpoint.InflightTakesName} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
