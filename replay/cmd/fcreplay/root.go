package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/replay"
)

// Exit codes. Part of the tool's interface; never renumber.
const (
	exitOK     = 0 // done; verify found no problem
	exitFailed = 1 // verify or repair found problems, or the command failed
	exitUsage  = 2 // bad command line: unknown command or flag, missing or bad directory
)

// exitError ends a command with code; err (if not nil) is printed as one
// line on stderr. Every error a command's RunE returns is one.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is an error in the command line (exit 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// problemsFound ends a command that reported problems already (exit 1).
var problemsFound = &exitError{code: exitFailed}

// options are the flags every command shares, and where output goes.
type options struct {
	checkpointDir string
	backupDir     string
	dataDirs      []string
	json          bool
	verbose       bool
	// The channel's Config.FileMode and DirMode, for the files and
	// directories repair and replay create (--file-mode, --dir-mode).
	fileMode, dirMode fs.FileMode

	fs             vfs.FS
	stdout, stderr io.Writer
	stderrTTY      bool // stderr is a terminal: draw progress bars
}

const rootExample = `  # The recovery procedure (docs/operations.md, "Recovering a channel with fcreplay"):
  fcreplay inspect --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data
  fcreplay verify  --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data
  fcreplay repair  --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data --dry-run`

// newRootCmd builds the command tree.
func newRootCmd(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:   "fcreplay",
		Short: "Inspect, verify, dump, repair and rebuild a filechannel's files, redrive its dead letters, reset its groups",
		Long: `fcreplay works on the files of a filechannel (github.com/flumego/filechannel):
its checkpoint directory, its data directories and its backup checkpoint directory,
given with the same values as the channel's Config.

inspect, verify and dump only read the files. repair, replay, redrive and reset
change them and refuse to run while the channel is open.

Exit codes: 0 done (verify: no problem), 1 problems found or the command failed,
2 bad command line.`,
		Example:       rootExample,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without Args, cobra reports an unknown command (with suggestions).
		RunE: func(*cobra.Command, []string) error { return usageErrorf("no command given") },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	// The root runs only to report a missing command: its help shows
	// "fcreplay [command]", not "fcreplay [flags]".
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(),
		"{{if .Runnable}}\n  {{.UseLine}}{{end}}", "{{if and .Runnable .HasParent}}\n  {{.UseLine}}{{end}}", 1))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&o.checkpointDir, "checkpoint-dir", "", "the channel's CheckpointDir (required)")
	pf.StringSliceVar(&o.dataDirs, "data-dirs", nil, "the channel's DataDirs, comma-separated or repeated (required)")
	pf.StringVar(&o.backupDir, "backup-checkpoint-dir", "", "the channel's BackupCheckpointDir, if it has one")
	pf.BoolVar(&o.json, "json", false, "print machine-readable JSON instead of text")
	pf.BoolVarP(&o.verbose, "verbose", "v", false, "print the library's log lines on stderr")
	root.AddCommand(newInspectCmd(o), newVerifyCmd(o), newDumpCmd(o), newRepairCmd(o), newReplayCmd(o), newRedriveCmd(o), newResetCmd(o), newVersionCmd(o))
	return root
}

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	o := &options{fs: vfs.OS(), stdout: stdout, stderr: stderr}
	if f, ok := stderr.(*os.File); ok {
		o.stderrTTY = term.IsTerminal(int(f.Fd()))
	}
	root := newRootCmd(o)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.code != exitUsage {
		if ee.err != nil {
			fmt.Fprintf(stderr, "fcreplay: %v\n", ee.err)
		}
		return ee.code
	}
	// A usage error: ours, or cobra's (unknown command, bad arguments).
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(stderr, "%s: %s; run '%s --help'\n", cmd.CommandPath(), oneLine(err.Error()), cmd.CommandPath())
	return exitUsage
}

// oneLine folds cobra's multi-line messages ("Did you mean this?") into one.
func oneLine(s string) string {
	first, rest, ok := strings.Cut(s, "\n\nDid you mean this?\n")
	if !ok {
		return strings.Join(strings.Fields(s), " ")
	}
	return first + " (did you mean " + strings.Join(strings.Fields(rest), " or ") + "?)"
}

// nothingChanged ends the line of a command that refused to run.
const nothingChanged = "(nothing was changed)"

// runner adapts a command body: its errors end the command with exit 1
// unless they are already an *exitError.
func runner(o *options, fn func(cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := o.checkDirs(); err != nil {
			return err
		}
		err := fn(cmd)
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		if errors.Is(err, channel.ErrUnsupportedFormat) && !strings.HasSuffix(err.Error(), nothingChanged) {
			// Files a newer release wrote: every command refuses them
			// before it changes anything (Rebuild's error says so already).
			err = fmt.Errorf("%w %s", err, nothingChanged)
		}
		return &exitError{code: exitFailed, err: err}
	}
}

// dirs returns every directory of the channel: the checkpoint dir, the
// backup dir if given, then the data dirs.
func (o *options) dirs() []string {
	dirs := []string{o.checkpointDir}
	if o.backupDir != "" {
		dirs = append(dirs, o.backupDir)
	}
	return append(dirs, o.dataDirs...)
}

// checkDirs checks the directory flags: given, existing, distinct.
func (o *options) checkDirs() error {
	switch {
	case o.checkpointDir == "" && len(o.dataDirs) == 0:
		return usageErrorf("--checkpoint-dir and --data-dirs are required")
	case o.checkpointDir == "":
		return usageErrorf("--checkpoint-dir is required")
	case len(o.dataDirs) == 0:
		return usageErrorf("--data-dirs is required")
	}
	seen := map[string]bool{}
	for _, d := range o.dirs() {
		if d == "" {
			return usageErrorf("--data-dirs holds an empty directory name")
		}
		st, err := o.fs.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return usageErrorf("directory %s does not exist", d)
		case err != nil:
			return &exitError{code: exitFailed, err: err}
		case !st.IsDir():
			return usageErrorf("%s is not a directory", d)
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		if seen[abs] {
			return usageErrorf("directory %s is given twice; each directory has one role", d)
		}
		seen[abs] = true
	}
	return nil
}

// logger is the library's logger: stderr with --verbose, else nil (discard).
func (o *options) logger() *slog.Logger {
	if !o.verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(o.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// config is the channel configuration the flags describe.
func (o *options) config() channel.Config {
	return channel.Config{
		CheckpointDir:       o.checkpointDir,
		BackupCheckpointDir: o.backupDir,
		DataDirs:            o.dataDirs,
		Logger:              o.logger(),
		FileMode:            o.fileMode,
		DirMode:             o.dirMode,
	}
}

// addModeFlags adds --file-mode and --dir-mode to cmd, a command that
// creates files (repair, replay).
func (o *options) addModeFlags(cmd *cobra.Command) {
	o.fileMode, o.dirMode = channel.DefaultFileMode, channel.DefaultDirMode
	f := cmd.Flags()
	f.Var(modeValue{&o.fileMode}, "file-mode", "permission bits, in octal, of the files it creates: the channel's Config.FileMode (the umask applies)")
	f.Var(modeValue{&o.dirMode}, "dir-mode", "permission bits, in octal, of the directories it creates: the channel's Config.DirMode (the umask applies)")
}

// modeValue is the value of a --file-mode or --dir-mode flag: permission
// bits in octal, such as 0640. The channel checks that they suit it.
type modeValue struct{ m *fs.FileMode }

func (v modeValue) String() string {
	if v.m == nil {
		return ""
	}
	return fmt.Sprintf("%04o", uint32(*v.m))
}

func (v modeValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > uint64(fs.ModePerm) {
		return fmt.Errorf("%q is not permission bits in octal, such as 0640", s)
	}
	*v.m = fs.FileMode(n)
	return nil
}

func (v modeValue) Type() string { return "octal" }

// verifyOptions are the replay package's options for the same files.
func (o *options) verifyOptions() replay.VerifyOptions {
	return replay.VerifyOptions{
		FS:                  o.fs,
		CheckpointDir:       o.checkpointDir,
		BackupCheckpointDir: o.backupDir,
		DataDirs:            o.dataDirs,
		Logger:              o.logger(),
	}
}

// lockForRead takes the channel's locks for a read-only command so that
// the channel cannot open (and change the files) while they are read. If
// the channel is open, it warns that the files may change and goes on
// without locks. It creates no file: a directory without in_use.lock has
// no channel open on it. The returned function releases the locks.
func (o *options) lockForRead() (release func()) {
	release, err := o.tryLocks()
	var le *lockedDirError
	switch {
	case errors.As(err, &le):
		o.warnf("the channel is in use (%s is locked by another process): its files may change while they are read, so what follows may be inconsistent", le.dir)
	case err != nil:
		o.warnf("cannot tell whether the channel is in use (%v): if it is, its files may change while they are read", err)
	}
	return release
}

// tryLocks takes the locks of the channel's directories that have an
// in_use.lock file, creating none. It stops at a lock another process
// holds (a *lockedDirError) or fails to take, having released those it
// took. The returned function releases the locks it holds.
func (o *options) tryLocks() (release func(), err error) {
	var held []io.Closer
	release = func() {
		for _, l := range held {
			l.Close() // a lock's close error changes nothing for a reader
		}
		held = nil
	}
	for _, d := range o.dirs() {
		name := filepath.Join(d, channel.LockFileName)
		if _, err := o.fs.Stat(name); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		l, err := o.fs.Lock(name, vfs.FileMode(o.fs))
		if errors.Is(err, vfs.ErrLocked) {
			release()
			return release, &lockedDirError{dir: d}
		}
		if err != nil {
			release()
			return release, err
		}
		held = append(held, l)
	}
	return release, nil
}

// lockedDirError is tryLocks' error for a directory whose lock another
// process holds: the channel is open. It unwraps to channel.ErrLocked.
type lockedDirError struct{ dir string }

func (e *lockedDirError) Error() string { return fmt.Sprintf("%v: %s", channel.ErrLocked, e.dir) }

func (e *lockedDirError) Unwrap() error { return channel.ErrLocked }

// lockedError turns the error of a write command into the one line it
// prints when the channel is open; other errors pass unchanged.
func lockedError(err error) error {
	if !errors.Is(err, channel.ErrLocked) {
		return err
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return &exitError{code: exitFailed, err: fmt.Errorf("the channel is open; stop it and run this again (nothing was changed): %s", first)}
}

// warnf prints a warning line on stderr.
func (o *options) warnf(format string, args ...any) {
	fmt.Fprintf(o.stderr, "fcreplay: warning: "+format+"\n", args...)
}

// printJSON writes v to stdout as one indented JSON document.
func (o *options) printJSON(v any) error {
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// offsetPtr is an offset for JSON: nil (omitted) when it is -1.
func offsetPtr(off int64) *int64 {
	if off < 0 {
		return nil
	}
	return &off
}

// errString is err's text, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
