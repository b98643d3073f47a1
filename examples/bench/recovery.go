package main

import (
	"cmp"
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
// page cache beside a plain sequential read of the same log files read
// just before and just after it, and then cold (coldReplay): full replays
// and plain reads of the log files dropped from the page cache,
// interleaved.
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
		const cache = "page cache"
		if err := b.readLogs(cfg.DataDirs[0], n, cache, "before"); err != nil {
			return err
		}
		rec, err = fullReplay(cfg, n)
		if err != nil {
			return err
		}
		rec.Cache = cache
		b.addRecovery(rec)
		if err := b.readLogs(cfg.DataDirs[0], n, cache, "after"); err != nil {
			return err
		}
		if err := b.coldReplay(cfg, n); err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// fullReplay removes the checkpoint of cfg's channel, which holds want
// events, and times the Open that then replays every log file.
func fullReplay(cfg channel.Config, want int) (Recovery, error) {
	if err := removeCheckpoint(cfg.CheckpointDir); err != nil {
		return Recovery{}, err
	}
	rec, err := timedOpen(cfg, want)
	if err != nil {
		return rec, err
	}
	if rec.RecoveredFrom != "full replay" {
		return rec, fmt.Errorf("open without checkpoint recovered from %q", rec.RecoveredFrom)
	}
	rec.Kind = "full replay"
	rec.MBPerSec = float64(rec.LogBytes) / (rec.Millis / 1000) / 1e6
	return rec, nil
}

// coldReplay measures the full replay of cfg's channel (n events, closed)
// from cold log files against a plain sequential read of the same log
// files from cold (issue 33, target 4): sz.rounds rounds, each a whole
// replay (checkpoint removed, Open timed, Close untimed) and a whole read
// (seqReader: 1 MiB preads), interleaved, the order reversed every other
// round. Before each, untimed, every log file is synced and dropped from
// the guest's page cache (dropLogs: posix_fadvise DONTNEED). The
// hypervisor's cache of the virtual disk, which the drop does not empty,
// then holds what the other side just read, for each side in turn. One
// untimed read, dropped the same way, comes first: the first read after
// the fill ran 3-5x slower than every later one here (the host had not
// cached the log yet), which would fall on whichever side went first.
func (b *bench) coldReplay(cfg channel.Config, n int) error {
	dir := cfg.DataDirs[0]
	drop := func() error { return dropLogs(dir) }
	logs, err := logFiles(dir)
	if err == nil {
		err = drop()
	}
	if err == nil {
		_, _, err = readFiles(logs)
	}
	if err != nil {
		return err
	}
	note := "cold full replay: before each round's replay and read, the log files are dropped from the page cache " +
		"(posix_fadvise DONTNEED); the hypervisor may still cache the disk"
	var recs []Recovery
	replay := &meter{before: drop, res: Result{ID: coldReplayID(n, "replay"), System: "filechannel",
		Op: "full replay, log dropped from the page cache", Producers: 1, Note: note}}
	replay.run = func(time.Duration, int64) (int64, error) {
		rec, err := fullReplay(cfg, n)
		replay.res.Bytes += rec.LogBytes
		recs = append(recs, rec)
		return int64(n), err
	}
	read := &meter{before: drop, res: Result{ID: coldReplayID(n, "read"), System: "disk",
		Op: "read logs, dropped, beside the cold full replay", Producers: 1, Note: note}}
	read.run = func(time.Duration, int64) (int64, error) {
		logs, err := logFiles(dir)
		if err != nil {
			return 0, err
		}
		k, _, err := readFiles(logs)
		read.res.Bytes += k
		return int64(n), err
	}
	ms := []*meter{withCPU(withRounds(replay)), withCPU(withRounds(read))}
	if err := b.interleave(b.sz.rounds, time.Hour, ms); err != nil {
		return err
	}
	b.addRecovery(medianRecovery(recs, "dropped, interleaved"))
	return nil
}

// coldReplayID is the result id of side (replay or read) of the cold full
// replay of n events.
func coldReplayID(n int, side string) string {
	if side == "read" {
		return fmt.Sprintf("disk/read/events=%d/cold-replay", n)
	}
	return fmt.Sprintf("filechannel/full-replay/events=%d/cold", n)
}

// medianRecovery returns the Open of recs that took the median time, with
// the range of all of them, as of cache.
func medianRecovery(recs []Recovery, cache string) Recovery {
	slices.SortFunc(recs, func(a, b Recovery) int { return cmp.Compare(a.Millis, b.Millis) })
	rec := recs[len(recs)/2]
	rec.Cache, rec.MinMs, rec.MaxMs = cache, recs[0].Millis, recs[len(recs)-1].Millis
	return rec
}

// readLogs reads the log files of dir with a plain sequential read from
// the page cache and adds the result as disk/read/events=n/<cache>/<when>
// (before or after the replay it is compared with; the comparison uses
// the faster of the two).
func (b *bench) readLogs(dir string, n int, cache, when string) error {
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
