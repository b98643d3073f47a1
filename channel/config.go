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

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// Defaults, the same as Apache Flume's FileChannel.
const (
	DefaultCapacity            = 1_000_000
	DefaultTransactionCapacity = 10_000
	// MaxTransactionCapacity is the largest TransactionCapacity, 8,388,600:
	// a take commit writes one record listing the 8-byte pointer of every
	// event it took, and a record's payload is at most 64 MiB (64 bytes
	// are left for the record's other fields). docs/operations.md gives
	// this number (a test holds it to the constant).
	MaxTransactionCapacity      = (logfile.MaxPayloadSize - 64) / 8
	DefaultCheckpointInterval   = 30 * time.Second
	DefaultMaxFileSize          = 2_146_435_071
	DefaultMinimumRequiredSpace = 524_288_000
	DefaultKeepAlive            = 3 * time.Second

	// MinMaxFileSize is the smallest MaxFileSize accepted.
	MinMaxFileSize = 4096

	// DefaultPreallocate is how far ahead of its writes each active log
	// file is laid out unless Config.Preallocate says otherwise, and
	// MinPreallocate the smallest Preallocate accepted.
	DefaultPreallocate = 4 << 20
	MinPreallocate     = 16 << 10
	// MaxRecycleLogFiles is the largest RecycleLogFiles accepted.
	MaxRecycleLogFiles = 16

	// DefaultFileMode and DefaultDirMode are the permission bits of the
	// files and directories the channel creates unless Config.FileMode and
	// Config.DirMode say otherwise: the owner's only.
	DefaultFileMode fs.FileMode = 0o600
	DefaultDirMode  fs.FileMode = 0o700

	// The default SpaceReserve is MaxFileSize/64 within these bounds.
	MinDefaultSpaceReserve = 64 << 10
	MaxDefaultSpaceReserve = 32 << 20

	// MaxCapacity is the largest Capacity: 268,434,426 events. The
	// checkpoint file holds checkpoint.HeaderSlots + Capacity ring slots of
	// 8 bytes, every byte of it written when Open creates it; at this bound
	// it is just under 2 GiB, the largest length a signed 32-bit int holds,
	// so that one channel's files open on every platform (a 32-bit build
	// cannot map a larger file).
	MaxCapacity = math.MaxInt32/8 - checkpoint.HeaderSlots

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
	// TakeSyncDelay bounds how long a committed take may stay not durable.
	// 0 = every take commit is fsync'd before Commit returns (the default).
	// > 0: a take commit returns once its records are written; the next
	// fsync of their file (a put commit's, shared; a checkpoint's, a
	// roll's, Close's) makes them durable, and a timer within
	// TakeSyncDelay when none comes. A power loss within the bound can
	// bring those takes' events back (delivered again, never lost; a
	// MaxDeliveries count is then a lower bound); a killed process loses
	// nothing. Puts stay durable when Commit returns. Ignored with NoSync
	// (docs/operations.md, "Take commits durable within a bound").
	TakeSyncDelay time.Duration

	// SpaceReserve is the size of the space reserve file (space.reserve)
	// kept in each data dir so that a full disk can be drained: when a
	// write there fails for lack of space the file is removed, take
	// commits and checkpoints use the room, and puts to that dir fail with
	// ErrInsufficientSpace until a checkpoint has freed room for the
	// reserve again (docs/operations.md, "Disk space"). It should hold the
	// take records written until the oldest log file can go (about 8.5
	// bytes per event taken in batches of 100): MaxFileSize/64 does for
	// events of 1 KiB or more. 0 = MaxFileSize/64, at least 64 KiB and at
	// most 32 MiB; negative = none (and a reserve file left by an earlier
	// Open is removed). A reserve file already there is kept as it is: a
	// new size applies when the reserve is next written, after the disk
	// was full.
	SpaceReserve int64

	// Preallocate is how many bytes of each data dir's active log file
	// are kept laid out ahead of its writes: a background goroutine writes
	// zeros there, a quarter of it at a time, and fdatasyncs them, so that
	// a commit's fdatasync overwrites blocks that are already allocated
	// instead of growing the file (which also commits the new size
	// through the filesystem's journal): on ext4, durable commits of 100
	// KiB are about 1.3x as fast. The zeros cost disk bandwidth, off the
	// commit path, and at most Preallocate bytes of space per data dir; a
	// file is trimmed back to its records when the channel rolls away
	// from it. None is laid out where the free space would fall below
	// MinimumRequiredSpace plus SpaceReserve. On a copy-on-write
	// filesystem (btrfs, ZFS) an overwrite allocates new blocks anyway:
	// set it negative there. 0 = 4 MiB (DefaultPreallocate), or none with
	// NoSync (commits do not fsync, so there is nothing to gain); negative
	// = none (every commit appends); at least 16 KiB otherwise.
	Preallocate int64

	// RecycleLogFiles is how many consumed log files each data dir keeps
	// for reuse: a log file the channel would delete (its events all
	// taken) is renamed aside instead, and the next new log file of that
	// dir overwrites it, so that in steady state (puts and takes at the
	// same rate) every byte is written once, where Preallocate writes
	// zeros first. Only files of at most MaxFileSize bytes are kept: at
	// most RecycleLogFiles × MaxFileSize bytes of disk space per data dir.
	// A recycled file has format version 9 (10 when encrypted), which a
	// release before this one refuses (docs/format.md §3.9, §14): that is
	// why it is off by default. 0 = none (and the files kept by an earlier
	// Open are removed); at most MaxRecycleLogFiles.
	RecycleLogFiles int

	// Keys, if set, encrypts event data at rest: every new log file's put
	// records (event headers and bodies) are sealed with AES-256-GCM under
	// a key derived for that file from the active key and the channel's id
	// (docs/format.md §3.7; docs/operations.md, "Encryption at rest"). Files
	// written before keep the key they were written with (or none), so
	// every key a file still uses must stay available. Open fails with
	// ErrKey, changing nothing, if a file's key is missing or wrong, if
	// Keys is nil and a file is encrypted, or if a file is encrypted for
	// another channel (copied from one with the same key). nil = no
	// encryption.
	Keys KeyProvider

	// ReplayProgress, if set, is called during Open's replay of the logs
	// about every ReplayProgressEvery, and once when it ends, on Open's
	// goroutine (a progress bar for a long recovery). nil = none. A panic
	// in it goes up through Open, which first undoes and releases what it
	// did (files, directory locks) as for an error.
	ReplayProgress func(replay.Progress)
	// ReplayProgressEvery is how often ReplayProgress is called; 0 = 1s.
	ReplayProgressEvery time.Duration

	// FileMode is the permission bits of every file the channel creates:
	// data logs, .corrupt files, the checkpoint files, the backup's files
	// and backupComplete, in_use.lock, and the .tmp files they are
	// published through. 0 = 0600, readable by the owner only (as etcd's
	// files). Wider modes, such as 0640 for a group that backs the files
	// up, must keep the owner's read and write bits and may have no execute
	// bit. The umask still applies: it can narrow the mode, never widen it.
	// Files that exist keep their modes until the channel replaces them.
	FileMode fs.FileMode
	// DirMode is the permission bits of the directories Open creates (the
	// checkpoint, backup and data dirs and their missing parents). 0 = 0700;
	// others must keep the owner's rwx bits. The umask applies as for
	// FileMode; directories that exist are left as they are.
	DirMode fs.FileMode

	// MaxOpenLogFiles bounds the data log files kept open for reading
	// (takes), least recently used closed first; 0 = 256
	// (DefaultMaxOpenLogFiles). The file each data dir writes is open
	// besides, and a file a take is reading stays open until the take has
	// read it. Replay (Open, Verify) holds about one file per data dir.
	MaxOpenLogFiles int

	// Groups are the consumer groups (see GroupConfig): nil = one unnamed
	// group, exactly a channel without groups (listed with Config's
	// Capacity and no other option). A group listed that does not exist is
	// created at Open (empty: it receives what is committed from then on);
	// one that exists takes its whole config from here (Capacity,
	// WhenFull, MaxDeliveries, DeadLetter, Filter and the take options
	// OrderKey, RetryDelays, LeaseTimeout and ExpireAfter), and a change
	// is stored with the group (its groups record and the checkpoint's
	// catalog); one not listed is kept (and logged, unless it is a listed
	// group's dead-letter group), with the config stored with it, the
	// take options included, as AddGroup or the last Open that listed it
	// gave them: only RemoveGroup removes a group, so that a typo here
	// never drops data.
	Groups []GroupConfig

	// OnDeadLetter, if set, is called for every event moved to a
	// dead-letter group (or dropped by a full DropNewest one:
	// DeadLetter.Dropped), after the move, with no lock of the channel
	// held, on the goroutine whose Take, Rollback or Commit moved it: an
	// application can forward dead letters elsewhere (an alert, another
	// system). A queued dead letter stays in the dead-letter group
	// whatever it does. It must not use the transaction that moved the
	// event. It is called once the call that moved the event has done
	// everything else, so a panic in it goes up through that call and
	// leaves no lock held and nothing half done: the event is in the
	// dead-letter group only; a Take that panics returned no event and
	// leaves the transaction as it was before it; a Commit or Rollback
	// that panics has ended the transaction. The dead letters the same
	// call moved after that one are not reported.
	OnDeadLetter func(DeadLetter)

	// Dedup drops the events whose Dedup.Header value an event committed
	// within Dedup.Window had (idempotent puts; see Dedup and
	// docs/operations.md, "Idempotent puts"). The zero value drops none.
	Dedup Dedup

	// Retention keeps log files whose events every group has taken, so
	// that they can be replayed (see Retention; docs/operations.md,
	// "Retention and replay"). The zero value keeps none: such a file is
	// deleted at the first checkpoint that finds it unneeded.
	Retention Retention

	// fs replaces the operating system's filesystem: the seam the crash,
	// power-loss and fault tests use (internal/vfs MemFS and FaultFS),
	// set by this package's tests only. nil = the OS's.
	fs vfs.FS
	// noKeyCheck skips Open's step 4c: Rebuild's open only rewrites the
	// checkpoints, which needs no key (Repair and Rebuild run without one).
	noKeyCheck bool
	// checkKeyTags: a keyed Take that read an event without orderMu
	// checks the key tag it was claimed by against its headers, and
	// panics if they disagree (checkKeyTag; tests).
	checkKeyTags bool
	// keepGroups: Open keeps the groups the channel has, as they are,
	// whatever Groups says (the offline tools: Redrive).
	keepGroups bool
	// resetChunk, when set, is the pointers per take or move record of a
	// reset (resetPointersPerRecord otherwise): tests make it small.
	resetChunk int
	// resetRead, when set, runs in a reset once it has read the history
	// (tests: a put that wants room meanwhile).
	resetRead func()
	// now is the clock of Retention's ages (tests); nil = time.Now.
	now func() time.Time
	// clock is the wall clock of put commits in Unix nanoseconds (tests:
	// the deduplication window's edge); nil = time.Now.
	clock func() int64
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
	errs = append(errs, cfg.checkGroups()...)
	errs = append(errs, cfg.checkDedup()...)
	cfg.DataDirs = append([]string(nil), cfg.DataDirs...)
	if len(errs) > 0 {
		return cfg, fmt.Errorf("filechannel: invalid config: %w", errors.Join(errs...))
	}
	return cfg, nil
}

// checkGroups validates Config.Groups and fills in their defaults (in a
// copy of the slice).
func (cfg *Config) checkGroups() []error {
	if cfg.Groups == nil {
		return nil
	}
	var errs []error
	seen := map[string]bool{}
	groups := make([]GroupConfig, 0, len(cfg.Groups))
	deadLetterTargets := map[string]bool{}
	for _, g := range cfg.Groups {
		if g, err := g.check(cfg.Capacity); err == nil && g.DeadLetter != "" {
			deadLetterTargets[g.DeadLetter] = true
		}
	}
	for _, g := range cfg.Groups {
		g, err := g.check(cfg.Capacity)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[g.Name] {
			errs = append(errs, fmt.Errorf("%s is listed twice in Groups", groupLabel(g.Name)))
		}
		seen[g.Name] = true
		if cfg.TransactionCapacity > g.Capacity && g.WhenFull == Block && !deadLetterTargets[g.Name] {
			errs = append(errs, fmt.Errorf("TransactionCapacity %d exceeds the Capacity %d of %s",
				cfg.TransactionCapacity, g.Capacity, groupLabel(g.Name)))
		}
		if deadLetterTargets[g.Name] && g.DeadLetter != "" {
			errs = append(errs, fmt.Errorf("%s is a dead-letter group: it cannot have MaxDeliveries or a DeadLetter of its own",
				groupLabel(g.Name)))
		}
		groups = append(groups, g)
	}
	cfg.Groups = groups
	return errs
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
	if cfg.Capacity > MaxCapacity {
		bad("Capacity %d exceeds MaxCapacity %d (the checkpoint file takes 8 bytes per event of Capacity, written in full at Open, and stays below 2 GiB)",
			cfg.Capacity, MaxCapacity)
	}
	if cfg.TransactionCapacity < 0 {
		bad("TransactionCapacity %d is negative", cfg.TransactionCapacity)
	}
	if cfg.CheckpointInterval < 0 {
		bad("CheckpointInterval %v is negative", cfg.CheckpointInterval)
	}
	if cfg.TakeSyncDelay < 0 {
		bad("TakeSyncDelay %v is negative (0 = every take commit synced before it returns)", cfg.TakeSyncDelay)
	}
	if cfg.Keys != nil {
		if err := checkActiveKey(cfg.Keys); err != nil {
			bad("Keys: %v", err)
		}
	}
	if cfg.MaxOpenLogFiles < 0 {
		bad("MaxOpenLogFiles %d is negative", cfg.MaxOpenLogFiles)
	}
	if cfg.Retention.MaxAge < 0 {
		bad("Retention.MaxAge %v is negative (0 = no age limit)", cfg.Retention.MaxAge)
	}
	if cfg.Retention.MaxBytes < 0 {
		bad("Retention.MaxBytes %d is negative (0 = no size limit)", cfg.Retention.MaxBytes)
	}
	if cfg.ReplayProgressEvery < 0 {
		bad("ReplayProgressEvery %v is negative", cfg.ReplayProgressEvery)
	}
	if cfg.MaxFileSize < 0 || (cfg.MaxFileSize > 0 && cfg.MaxFileSize < MinMaxFileSize) || cfg.MaxFileSize > math.MaxUint32 {
		bad("MaxFileSize %d is outside [%d, %d]", cfg.MaxFileSize, MinMaxFileSize, uint64(math.MaxUint32))
	}
	if cfg.RecycleLogFiles < 0 || cfg.RecycleLogFiles > MaxRecycleLogFiles {
		bad("RecycleLogFiles %d is outside [0, %d]", cfg.RecycleLogFiles, MaxRecycleLogFiles)
	}
	if cfg.Preallocate > 0 && cfg.Preallocate < MinPreallocate {
		bad("Preallocate %d is below %d (negative = none)", cfg.Preallocate, MinPreallocate)
	}
	if cfg.TransactionCapacity > MaxTransactionCapacity {
		bad("TransactionCapacity %d exceeds %d (a take commit's record lists every event it took and must fit %d bytes)",
			cfg.TransactionCapacity, MaxTransactionCapacity, logfile.MaxPayloadSize)
	}
	if cfg.Capacity > 0 && cfg.TransactionCapacity > cfg.Capacity {
		bad("TransactionCapacity %d exceeds Capacity %d", cfg.TransactionCapacity, cfg.Capacity)
	}
	if m := cfg.FileMode; m != 0 && (m&^fs.ModePerm != 0 || m&0o111 != 0 || m&0o600 != 0o600) {
		bad("FileMode %#o is not a file mode the channel can use (permission bits only, no execute bit, the owner's read and write bits set)", uint32(m))
	}
	if m := cfg.DirMode; m != 0 && (m&^fs.ModePerm != 0 || m&0o700 != 0o700) {
		bad("DirMode %#o is not a directory mode the channel can use (permission bits only, the owner's rwx bits set)", uint32(m))
	}
	return errs
}

// Dedup configures idempotent puts (Config.Dedup). An event whose header
// Header equals that of an event committed within Window is dropped by its
// put commit: the commit succeeds, no group receives the event, and it is
// counted (Stats.Duplicates). Events without the header, or with an empty
// value, are never dropped. The window survives Close, a crash and a full
// replay: it is rebuilt from the logs and a snapshot file (docs/format.md,
// "Deduplication snapshot"); with Keys, the recovery opens each encrypted
// put it replays to read its header.
type Dedup struct {
	Header string        // "" = no deduplication
	Window time.Duration // 0 = 2 minutes
	MaxIDs int           // ids remembered at most (oldest forgotten first); 0 = 1,000,000
}

// Defaults of Dedup.
const (
	DefaultDedupWindow = 2 * time.Minute
	DefaultDedupMaxIDs = 1_000_000
)

// checkDedup returns what is wrong with cfg.Dedup, and fills in its
// defaults.
func (cfg *Config) checkDedup() []error {
	var errs []error
	d := &cfg.Dedup
	if d.Window < 0 {
		errs = append(errs, fmt.Errorf("Dedup.Window %v is negative (0 = %v)", d.Window, DefaultDedupWindow))
	}
	if d.MaxIDs < 0 {
		errs = append(errs, fmt.Errorf("Dedup.MaxIDs %d is negative (0 = %d)", d.MaxIDs, DefaultDedupMaxIDs))
	}
	if d.Header == "" && (d.Window != 0 || d.MaxIDs != 0) {
		errs = append(errs, errors.New("Dedup.Window or Dedup.MaxIDs is set without Dedup.Header: name the header that holds the events' ids"))
	}
	if d.Header != "" {
		if d.Window == 0 {
			d.Window = DefaultDedupWindow
		}
		if d.MaxIDs == 0 {
			d.MaxIDs = DefaultDedupMaxIDs
		}
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
	if cfg.SpaceReserve == 0 {
		cfg.SpaceReserve = min(max(cfg.MaxFileSize/64, MinDefaultSpaceReserve), MaxDefaultSpaceReserve)
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	switch {
	case cfg.Preallocate == 0 && cfg.NoSync:
		cfg.Preallocate = -1 // no commit fsyncs: nothing to gain, the zeros' writes to pay
	case cfg.Preallocate == 0:
		cfg.Preallocate = DefaultPreallocate
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
	if cfg.FileMode == 0 {
		cfg.FileMode = DefaultFileMode
	}
	if cfg.DirMode == 0 {
		cfg.DirMode = DefaultDirMode
	}
	if cfg.fs == nil {
		cfg.fs = vfs.OS()
	}
	// Every package creates its files with vfs.FileMode(fs) and
	// vfs.DirMode(fs): the modes travel with the filesystem.
	cfg.fs = vfs.WithModes(cfg.fs, cfg.FileMode, cfg.DirMode)
}

// checkDirs checks that every directory is given and distinct: two roles
// sharing a directory would share lock files and file names. Two names of
// one directory through a symlink are the same directory (vfs.Resolve).
func (cfg *Config) checkDirs() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]string{}
	resolved := map[string]string{} // resolved path -> role and dir as given
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
			return
		}
		seen[abs] = what
		real, err := vfs.Resolve(abs)
		if err != nil {
			bad("%s %q: %v", what, dir, err)
			return
		}
		if other, dup := resolved[real]; dup {
			bad("%s %s is %s (through a symlink)", what, dir, other)
			return
		}
		resolved[real] = what + " " + dir
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

// prepareDir creates dir if needed, with its missing parents, with the
// permission bits vfs.DirMode(fsys), and checks that it is a directory (a
// link to one is fine). syncParents must follow, once every directory is
// made.
func prepareDir(fsys vfs.FS, dir, what string) error {
	if st, err := fsys.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("filechannel: invalid config: %s %q is not a directory", what, dir)
		}
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filechannel: %s %q: %w", what, dir, err)
	}
	if err := fsys.MkdirAll(dir, vfs.DirMode(fsys)); err != nil {
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
