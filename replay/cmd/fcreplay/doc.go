// Command fcreplay inspects, verifies, lists, repairs and rebuilds the files
// of a filechannel (github.com/flumego/filechannel/channel) from the shell,
// typically while recovering a channel that will not open or lost events,
// and moves a closed channel's dead letters back to their group.
//
//	go install ./replay/cmd/fcreplay   # from a clone, until the module is published
//
//	fcreplay inspect --checkpoint-dir DIR --data-dirs DIR[,DIR...] [--backup-checkpoint-dir DIR] [--json]
//	fcreplay verify  ...   every problem, with file, offset and the committed events it costs; exit 1 if any
//	fcreplay dump    ...   [--group NAME] [--skip N] [--limit N] [--max-body N]: a consumer group's queued events, in order
//	fcreplay repair  ...   [--dry-run] [--file-mode 0600] [--dir-mode 0700]: pad damaged records, cut torn tails (bytes kept in .corrupt files)
//	fcreplay replay  ...   [--dry-run] [--capacity N] [--file-mode 0600] [--dir-mode 0700]: rebuild the checkpoint from the logs
//	fcreplay redrive ...   --from DLQ --to GROUP [-n N] [--file-mode 0600] [--dir-mode 0700]: move a dead-letter group's events back
//	fcreplay version [--json]   the release it was built from and the format versions of the files it reads
//
// The directory flags, --file-mode and --dir-mode take the channel's Config
// values. docs/operations.md,
// "Recovering a channel with fcreplay", is the procedure and explains each
// command's output; it also says how to build the tool for a host and ship
// it with the application. version takes no directory flags: its format
// versions come from the constants of the packages that own the files
// (logfile, checkpoint, internal/owner), its release from the binary's
// build information (runtime/debug.ReadBuildInfo).
//
// # Commands and the library
//
// inspect and verify print replay.Verify's report (inspect the facts,
// verify the problems), consumer group by consumer group (inspect: with
// each group's dead-letter settings and delivery counts); dump prints
// replay.ListEvents (with each event's delivery count in a group with
// MaxDeliveries); repair and replay call channel.Repair and
// channel.Rebuild (which rebuild every group and keep the groups as the
// logs have them), and show the rebuild's progress on stderr (a progress
// bar when stderr is a terminal, else a line every 2 s). redrive checks
// its group names against replay.ListEvents' groups, then calls
// channel.Redrive (which opens the channel with the groups it has, moves
// the events and closes it), and shows the channel's recovery progress
// the same way.
//
// # Files and locks
//
// inspect, verify and dump write nothing. While they run they hold the
// channel's in_use.lock locks (when the files exist), so a channel cannot
// open and change the files under them; if the channel is already open they
// print a warning and read anyway. repair, replay and redrive change the
// files through the library (which writes .corrupt files, a new checkpoint
// and backup, and may start a new log file; redrive writes what the
// channel's open and close write, and its moves' log records) and refuse
// to run while the channel is open (channel.ErrLocked), dry runs included.
// Every command refuses files a newer release of filechannel wrote
// (channel.ErrUnsupportedFormat: a newer format version, or a log record of
// an unknown type): it prints one line naming the file and the version,
// changes nothing and exits 1. repair, replay and redrive also refuse, the
// same way, directories that belong to another channel
// (channel.ErrForeignDir: a data dir or backup dir whose channel.id names
// another channel); verify lists them as foreign-data-dir or
// foreign-backup-dir problems.
//
// # Output and exit codes
//
// Results go to stdout (text, or one JSON document with --json; dump --json
// writes one JSON object per line); errors, warnings, progress and dump's
// summary go to stderr. Exit codes: 0 done (verify: no problem), 1 problems
// found or the command failed, 2 a bad command line (unknown command or
// flag, missing or nonexistent directory, a consumer group the channel
// does not have).
//
// # Concurrency
//
// One command per process; nothing runs concurrently except the library's
// progress callback, which the progress reporter serialises.
package main
