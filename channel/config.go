package channel

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// Defaults, the same as Apache Flume's FileChannel.
const (
	DefaultCapacity            = 1_000_000
	DefaultTransactionCapacity = 10_000
	// MaxTransactionCapacity is the largest TransactionCapacity: a take
	// commit writes one record listing the 8-byte pointer of every event
	// it took, and a record is at most 64 MiB.
	MaxTransactionCapacity      = (logfile.MaxPayloadSize - 64) / 8
	DefaultCheckpointInterval   = 30 * time.Second
	DefaultMaxFileSize          = 2_146_435_071
	DefaultMinimumRequiredSpace = 524_288_000
	DefaultKeepAlive            = 3 * time.Second

	// MinMaxFileSize is the smallest MaxFileSize accepted.
	MinMaxFileSize = 4096

	// DefaultMaxOpenLogFiles is how many data log files the channel keeps
	// open for takes when Config.MaxOpenLogFiles is 0.
	DefaultMaxOpenLogFiles = logfile.DefaultMaxOpenReaders
)

// Config configures a FileChannel. Zero values mean the default; Open never
// modifies the caller's Config.
type Config struct {
	CheckpointDir        string                // required
	BackupCheckpointDir  string                // optional; set = dual checkpoints
	DataDirs             []string              // required, one or more
	Capacity             int                   // 0 = 1_000_000 events
	TransactionCapacity  int                   // 0 = 10_000 events per transaction (at most Capacity)
	CheckpointInterval   time.Duration         // 0 = 30s
	MaxFileSize          int64                 // 0 = 2_146_435_071 bytes per log file
	MinimumRequiredSpace int64                 // 0 = 524_288_000 bytes; negative = no check
	KeepAlive            time.Duration         // 0 = 3s: how long Put waits for capacity; negative = no wait
	Name                 string                // label for metrics and logs
	Logger               *slog.Logger          // nil = discard
	Registerer           prometheus.Registerer // nil = no metrics (never the global registry)

	// NoCheckpointOnClose skips the checkpoint Close normally writes (then
	// the next Open replays the logs written since the last checkpoint).
	NoCheckpointOnClose bool
	// NoSync trades durability for speed: Commit returns without waiting for
	// fsync, so a power loss can lose recently committed events (a killed
	// process loses nothing). Checkpoints still sync. Default false.
	NoSync bool

	// ReplayProgress, if set, is called during Open's replay of the logs
	// about every ReplayProgressEvery, and once when it ends, on Open's
	// goroutine (a progress bar for a long recovery). nil = none.
	ReplayProgress func(replay.Progress)
	// ReplayProgressEvery is how often ReplayProgress is called; 0 = 1s.
	ReplayProgressEvery time.Duration

	// MaxOpenLogFiles bounds the data log files kept open for reading
	// (takes), least recently used closed first; 0 = 256
	// (DefaultMaxOpenLogFiles). The file each data dir writes is open
	// besides, and a file a take is reading stays open until the take has
	// read it. Replay (Open, Verify) holds about one file per data dir.
	MaxOpenLogFiles int

	// fs replaces the operating system's filesystem: the seam the crash,
	// power-loss and fault tests use (internal/vfs MemFS and FaultFS),
	// set by this package's tests only. nil = the OS's.
	fs vfs.FS
}

// DefaultReplayProgressEvery is how often Open calls Config.ReplayProgress.
const DefaultReplayProgressEvery = time.Second

// withDefaults validates cfg and returns a copy with defaults applied.
func (cfg Config) withDefaults() (Config, error) {
	errs := cfg.checkRanges()
	cfg.applyDefaults()
	if cfg.TransactionCapacity > cfg.Capacity && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("TransactionCapacity %d exceeds Capacity %d", cfg.TransactionCapacity, cfg.Capacity))
	}
	errs = append(errs, cfg.checkDirs()...)
	cfg.DataDirs = append([]string(nil), cfg.DataDirs...)
	if len(errs) > 0 {
		return cfg, fmt.Errorf("filechannel: invalid config: %w", errors.Join(errs...))
	}
	return cfg, nil
}

// checkRanges returns what is wrong with cfg's required fields and numbers.
func (cfg *Config) checkRanges() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cfg.CheckpointDir == "" {
		bad("CheckpointDir is required")
	}
	if len(cfg.DataDirs) == 0 {
		bad("DataDirs needs at least one directory")
	}
	if cfg.Capacity < 0 {
		bad("Capacity %d is negative", cfg.Capacity)
	}
	if cfg.TransactionCapacity < 0 {
		bad("TransactionCapacity %d is negative", cfg.TransactionCapacity)
	}
	if cfg.CheckpointInterval < 0 {
		bad("CheckpointInterval %v is negative", cfg.CheckpointInterval)
	}
	if cfg.MaxOpenLogFiles < 0 {
		bad("MaxOpenLogFiles %d is negative", cfg.MaxOpenLogFiles)
	}
	if cfg.ReplayProgressEvery < 0 {
		bad("ReplayProgressEvery %v is negative", cfg.ReplayProgressEvery)
	}
	if cfg.MaxFileSize < 0 || (cfg.MaxFileSize > 0 && cfg.MaxFileSize < MinMaxFileSize) || cfg.MaxFileSize > math.MaxUint32 {
		bad("MaxFileSize %d is outside [%d, %d]", cfg.MaxFileSize, MinMaxFileSize, uint64(math.MaxUint32))
	}
	if cfg.TransactionCapacity > MaxTransactionCapacity {
		bad("TransactionCapacity %d exceeds %d (a take commit's record lists every event it took and must fit %d bytes)",
			cfg.TransactionCapacity, MaxTransactionCapacity, logfile.MaxPayloadSize)
	}
	if cfg.Capacity > 0 && cfg.TransactionCapacity > cfg.Capacity {
		bad("TransactionCapacity %d exceeds Capacity %d", cfg.TransactionCapacity, cfg.Capacity)
	}
	return errs
}

// applyDefaults fills in every zero field that has a default.
func (cfg *Config) applyDefaults() {
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.TransactionCapacity == 0 {
		cfg.TransactionCapacity = min(DefaultTransactionCapacity, cfg.Capacity)
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = DefaultCheckpointInterval
	}
	if cfg.MaxFileSize == 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.MinimumRequiredSpace == 0 {
		cfg.MinimumRequiredSpace = DefaultMinimumRequiredSpace
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.MaxOpenLogFiles == 0 {
		cfg.MaxOpenLogFiles = DefaultMaxOpenLogFiles
	}
	if cfg.ReplayProgressEvery == 0 {
		cfg.ReplayProgressEvery = DefaultReplayProgressEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Name != "" {
		cfg.Logger = cfg.Logger.With("channel", cfg.Name)
	}
	if cfg.fs == nil {
		cfg.fs = vfs.OS()
	}
}

// checkDirs checks that every directory is given and distinct: two roles
// sharing a directory would share lock files and file names.
func (cfg *Config) checkDirs() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]string{}
	role := func(dir, what string) {
		if dir == "" {
			return
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			bad("%s %q: %v", what, dir, err)
			return
		}
		if other, dup := seen[abs]; dup {
			bad("%s %q is also used as %s", what, dir, other)
		}
		seen[abs] = what
	}
	role(cfg.CheckpointDir, "CheckpointDir")
	role(cfg.BackupCheckpointDir, "BackupCheckpointDir")
	for i, d := range cfg.DataDirs {
		if d == "" {
			bad("DataDirs[%d] is empty", i)
		}
		role(d, fmt.Sprintf("DataDirs[%d]", i))
	}
	return errs
}

// prepareDir creates dir if needed and checks that it is a directory.
// syncParents must follow, once every directory is made.
func prepareDir(fsys vfs.FS, dir, what string) error {
	if st, err := fsys.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("filechannel: invalid config: %s %q is not a directory", what, dir)
		}
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filechannel: %s %q: %w", what, dir, err)
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("filechannel: create %s %q: %w", what, dir, err)
	}
	return nil
}

// syncParents makes the entries of dirs durable: it syncs every directory
// from each one's parent up to the root, each once. Syncing only the
// parents of directories this Open created is not enough: an earlier Open
// may have created them and then failed (or crashed) before its parent's
// sync, and a retry would find them present and never sync them, losing
// them at the next power loss. An ancestor above a dir's parent that the
// process may not read is skipped (it cannot have created entries there).
func syncParents(fsys vfs.FS, dirs []string) error {
	synced := map[string]bool{}
	for _, dir := range dirs {
		dir = filepath.Clean(dir)
		for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
			parent := filepath.Dir(d)
			if synced[parent] {
				break // and so is everything above it
			}
			if err := fsys.SyncDir(parent); err != nil {
				if errors.Is(err, fs.ErrPermission) && parent != filepath.Dir(dir) {
					break
				}
				return fmt.Errorf("filechannel: sync the directory holding %q: %w", dir, err)
			}
			synced[parent] = true
		}
	}
	return nil
}
