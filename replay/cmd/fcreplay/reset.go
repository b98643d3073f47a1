package main

import (
	"bufio"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flumego/filechannel/channel"
)

// resetFlags are reset's own flags.
type resetFlags struct {
	group, to string
	dryRun    bool
}

func newResetCmd(o *options) *cobra.Command {
	var rf resetFlags
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Move a consumer group to another position in the retained logs",
		Long: `reset moves a consumer group (--group; "" is the unnamed group) to a position
(--to): its queue becomes every event the logs retain that was committed from
that position on, in commit order, with delivery counts of zero
(channel.ResetGroup). Positions:

  earliest   the oldest event the logs retain (Config.Retention keeps events
             after every group took them)
  latest     no event: only those committed from now on
  TIME       an RFC 3339 time (2026-12-04T10:00:00Z): the first event, in commit
             order, whose put committed at or after it, and all after it
             (events of files older than format version 7 have no time: they
             are older than any TIME)
  EVENT-ID   after:ID (or ID): the events committed after the event of that id
             (Event.ID)

Events the group's dead-letter group holds stay there. When more events would
be queued than the group's capacity, its full policy decides: Block refuses
the reset (nothing is changed), DropOldest keeps the newest, DropNewest the
oldest. A dead-letter group cannot be reset (use redrive).

--dry-run reads the files only and prints what the reset would do. Otherwise
reset opens the channel with the groups it has (its recovery runs, and it
writes a checkpoint when it closes), resets the group in one durable step and
closes it.

reset refuses to run while the channel is open (FileChannel.ResetGroup resets
a group in a running application). Exit code: 0 when done, 1 when it failed,
2 on a bad command line.`,
		Example: `  fcreplay reset --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data --group audit --to earliest --dry-run
  fcreplay reset --checkpoint-dir ckpt --data-dirs data --group audit --to 2026-12-04T10:00:00Z --json
  fcreplay reset --checkpoint-dir ckpt --data-dirs data --group "" --to after:4711`,
		Args: cobra.NoArgs,
		RunE: runner(o, func(*cobra.Command) error { return runReset(o, rf) }),
	}
	f := cmd.Flags()
	f.StringVar(&rf.group, "group", "", `the consumer group to reset (required; "" is the unnamed group)`)
	f.StringVar(&rf.to, "to", "", "where its queue starts: earliest, latest, an RFC 3339 time or after:EVENT-ID (required)")
	f.BoolVar(&rf.dryRun, "dry-run", false, "print what the reset would do; change nothing")
	for _, name := range []string{"group", "to"} {
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic(err) // the flag is defined above
		}
	}
	o.addModeFlags(cmd)
	return cmd
}

// resetJSON is reset's output (--json prints it as is).
type resetJSON struct {
	Group  string `json:"group"` // "" for the unnamed group
	To     string `json:"to"`
	DryRun bool   `json:"dry_run"`
	// Held is what the group held before; Found the retained events from
	// the position on; Queued what it holds after (would hold: dry run).
	Held     int    `json:"held"`
	Found    int    `json:"found"`
	Queued   int    `json:"queued"`
	Capacity int    `json:"capacity"`
	Policy   string `json:"policy"`
	// Refused: a Block group has no room for Found; nothing changes.
	Refused        bool `json:"refused"`
	DamagedRegions int  `json:"damaged_regions"`
}

func runReset(o *options, rf resetFlags) error {
	p, err := channel.ParsePosition(rf.to)
	if err != nil {
		return usageErrorf("--to %q: %v", rf.to, err)
	}
	cfg := o.config()
	pv, err := channel.PreviewReset(cfg, rf.group, p)
	if err != nil {
		return lockedError(err)
	}
	out := resetJSON{Group: rf.group, To: p.String(), DryRun: rf.dryRun, Held: pv.Held, Found: pv.Found, Queued: pv.Queued,
		Capacity: pv.Capacity, Policy: pv.Policy.String(), Refused: pv.Refused, DamagedRegions: pv.DamagedRegions}
	if !rf.dryRun && !pv.Refused {
		prog := newProgress(o.stderr, o.stderrTTY)
		cfg.ReplayProgress, cfg.ReplayProgressEvery = prog.callback(), prog.interval()
		n, err := channel.ResetGroup(cfg, rf.group, p)
		prog.finish()
		if err != nil {
			return lockedError(err)
		}
		out.Queued = n
	}
	var perr error
	if o.json {
		perr = o.printJSON(out)
	} else {
		perr = printReset(o.stdout, &out)
	}
	if pv.Refused && !rf.dryRun {
		return &exitError{code: exitFailed, err: fmt.Errorf("reset refused: %s has room for %d events and its policy is %s (nothing was changed)",
			groupLabel(rf.group), pv.Capacity, pv.Policy)}
	}
	return perr
}

// printReset writes reset's text output.
func printReset(w io.Writer, r *resetJSON) error {
	bw := bufio.NewWriter(w)
	g := groupLabel(r.Group)
	verb := "holds"
	if r.DryRun {
		verb = "would hold"
	}
	fmt.Fprintf(bw, "%s held %s; the logs retain %s from %s on\n", g, plural(int64(r.Held), "event"), plural(int64(r.Found), "event"), r.To)
	switch {
	case r.Refused:
		fmt.Fprintf(bw, "the reset is refused: the group has room for %d (capacity %d, policy %s); nothing is changed\n",
			r.Capacity, r.Capacity, r.Policy)
	default:
		fmt.Fprintf(bw, "%s %s %s after the reset", g, verb, plural(int64(r.Queued), "event"))
		if r.Queued < r.Found {
			fmt.Fprintf(bw, " (its %s policy drops %d of them)", r.Policy, r.Found-r.Queued)
		}
		fmt.Fprintln(bw)
	}
	if r.DamagedRegions > 0 {
		fmt.Fprintf(bw, "%s of the logs stepped over: their events are not in it (run fcreplay verify)\n", plural(int64(r.DamagedRegions), "damaged region"))
	}
	return bw.Flush()
}
