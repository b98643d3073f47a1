package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// redriveFlags are redrive's own flags.
type redriveFlags struct {
	from, to string
	limit    int
}

func newRedriveCmd(o *options) *cobra.Command {
	var rf redriveFlags
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "Move the events of a dead-letter group back to a consumer group",
		Long: `redrive moves the events of a dead-letter group (--from) to the tail of a consumer
group (--to; --to "" is the unnamed group), oldest first and in their order: at
most -n of them, all by default. Their delivery counts start again at zero: a
group with MaxDeliveries delivers each that many times more before it is
dead-lettered again. A group without room for them all takes what fits (none of
its events is dropped to make room); the others stay in the dead-letter group.
--to must be the group whose dead-letter group --from is: its events left that
group only, and every other group may still hold them (the consumer groups
share their events), so a redrive elsewhere is refused.
'fcreplay inspect' lists the groups and which are dead-letter groups; 'fcreplay
dump --group NAME' lists a group's events.

It first reads the files as the channel would recover them and checks the
names: a group the channel does not have, a --from that is not a dead-letter
group, or the same group twice, is a bad command line, and nothing is changed.
Then it opens the channel with the groups it has (channel.Redrive: the
channel's recovery runs, and it writes a checkpoint when it closes), moves the
events in durable batches and closes it. It prints how many events it moved.

redrive refuses to run while the channel is open (FileChannel.Redrive moves
events in a running application). Exit code: 0 when done, 1 when it failed
(after printing how many events it had moved), 2 on a bad command line.`,
		Example: `  fcreplay redrive --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data --from orders.dlq --to orders
  fcreplay redrive --checkpoint-dir ckpt --data-dirs data --from dlq --to "" -n 100 --json`,
		Args: cobra.NoArgs,
		RunE: runner(o, func(*cobra.Command) error { return runRedrive(o, rf) }),
	}
	f := cmd.Flags()
	f.StringVar(&rf.from, "from", "", "the dead-letter group whose events to move (required)")
	f.StringVar(&rf.to, "to", "", `the consumer group to move them to (required; "" is the unnamed group)`)
	f.IntVarP(&rf.limit, "limit", "n", -1, "move at most N events (-1: all)")
	for _, name := range []string{"from", "to"} {
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic(err) // the flag is defined above
		}
	}
	o.addModeFlags(cmd)
	return cmd
}

// redriveJSON is redrive's output (--json prints it as is).
type redriveJSON struct {
	From  string `json:"from"`
	To    string `json:"to"` // "" for the unnamed group
	Limit int    `json:"limit"`
	// Queued is the number of events in the dead-letter group before the
	// redrive; Moved how many it moved, Left how many stay.
	Queued int `json:"queued"`
	Moved  int `json:"moved"`
	Left   int `json:"left"`
	// MaxDeliveries is the --to group's (0: it counts no deliveries).
	MaxDeliveries uint32 `json:"max_deliveries"`
}

func runRedrive(o *options, rf redriveFlags) error {
	switch {
	case rf.limit < -1:
		return usageErrorf("-n %d: use -1 for all", rf.limit)
	case rf.limit == 0:
		return usageErrorf("-n 0 moves nothing; use -1 for all")
	case rf.from == rf.to:
		return usageErrorf("--from and --to are both %s: move the events of a dead-letter group to another group", groupLabel(rf.from))
	}
	l, err := o.redriveGroups(rf)
	if err != nil {
		return err
	}
	cfg := o.config()
	p := newProgress(o.stderr, o.stderrTTY)
	cfg.ReplayProgress, cfg.ReplayProgressEvery = p.callback(), p.interval()
	n := rf.limit
	if n < 0 {
		n = math.MaxInt
	}
	moved, err := channel.Redrive(cfg, rf.from, rf.to, n)
	p.finish()
	if err != nil && moved == 0 {
		return lockedError(err)
	}
	out := redriveJSON{From: rf.from, To: rf.to, Limit: rf.limit, Queued: l.Queued, Moved: moved, Left: max(l.Queued-moved, 0)}
	for _, g := range l.Groups {
		if g.Name == rf.to {
			out.MaxDeliveries = g.MaxDeliveries
		}
	}
	var perr error
	if o.json {
		perr = o.printJSON(out)
	} else {
		perr = printRedrive(o.stdout, &out)
	}
	if err != nil {
		return fmt.Errorf("redrive failed after moving %s: %w", plural(int64(moved), "event"), err) // printed above
	}
	return perr
}

// redriveGroups checks redrive's group names against the groups the
// channel would recover, read under the channel's locks (refused, as
// lockedError words it, while the channel is open), and returns what it
// read of them: a group the channel does not have, or a --from that is not
// a dead-letter group, is a usage error.
func (o *options) redriveGroups(rf redriveFlags) (replay.Listing, error) {
	release, err := o.tryLocks()
	defer release()
	if err != nil {
		return replay.Listing{}, lockedError(err)
	}
	l, err := replay.ListEvents(o.verifyOptions(), rf.from, 0, 0, func(replay.Event) error { return nil })
	var ne *replay.NoGroupError
	switch {
	case errors.As(err, &ne):
		return l, usageErrorf("--from %q: the channel has no consumer group of that name (%s)", rf.from, deadLetterGroups(l.Groups))
	case err != nil:
		return l, err
	case !l.Group.DeadLetterGroup:
		return l, usageErrorf("--from %q: %s is not a dead-letter group (%s)", rf.from, groupLabel(rf.from), deadLetterGroups(l.Groups))
	}
	var to *logfile.GroupInfo
	for i := range l.Groups {
		if l.Groups[i].Name == rf.to {
			to = &l.Groups[i]
		}
	}
	if to == nil {
		return l, usageErrorf("--to %q: the channel has no consumer group of that name (its groups: %s)", rf.to, groupNames(l.Groups))
	}
	if to.DeadLetter != rf.from {
		// The groups share events: another group a put fed may still
		// hold a dead letter's event (the channel refuses it too).
		return l, usageErrorf("--to %q: %q is not the dead-letter group of %s: redrive moves dead letters back to the group they left",
			rf.to, rf.from, groupLabel(rf.to))
	}
	return l, nil
}

// deadLetterGroups names the dead-letter groups among gs, for an error.
func deadLetterGroups(gs []logfile.GroupInfo) string {
	var dlqs []logfile.GroupInfo
	for _, g := range gs {
		if g.DeadLetterGroup {
			dlqs = append(dlqs, g)
		}
	}
	if len(dlqs) == 0 {
		return "it has no dead-letter group"
	}
	return "its dead-letter groups: " + groupNames(dlqs)
}

// groupNames lists gs for an error: "the unnamed group (--to "")", "a".
func groupNames(gs []logfile.GroupInfo) string {
	if len(gs) == 0 {
		return "none"
	}
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		if g.ID == 0 {
			names = append(names, `the unnamed group (--to "")`)
		} else {
			names = append(names, strconv.Quote(g.Name))
		}
	}
	return strings.Join(names, ", ")
}

// groupLabel names a group in a sentence: `group "a"`, or "the unnamed
// group".
func groupLabel(name string) string {
	if name == "" {
		return "the unnamed group"
	}
	return "group " + strconv.Quote(name)
}

// printRedrive writes redrive's text output.
func printRedrive(w io.Writer, r *redriveJSON) error {
	bw := bufio.NewWriter(w)
	from, to := "dead-letter "+groupLabel(r.From), groupLabel(r.To)
	switch {
	case r.Moved == 0 && r.Queued == 0:
		fmt.Fprintf(bw, "%s is empty: nothing to move\n", from)
	case r.Moved == 0:
		fmt.Fprintf(bw, "moved no event: %s has no room (%s holds %s)\n", to, from, plural(int64(r.Queued), "event"))
	default:
		fmt.Fprintf(bw, "moved %s from %s to %s", plural(int64(r.Moved), "event"), from, to)
		if r.MaxDeliveries > 0 {
			fmt.Fprintf(bw, "; their delivery counts start again at 0 (%s dead-letters an event after %s)", to, deliveries(r.MaxDeliveries))
		}
		fmt.Fprintln(bw)
		switch {
		case r.Left == 0:
			fmt.Fprintf(bw, "%s is empty\n", from)
		case r.Moved == r.Limit:
			fmt.Fprintf(bw, "%s in %s (-n %d)\n", stay(r.Left), from, r.Limit)
		default:
			fmt.Fprintf(bw, "%s in %s: %s has no room for more\n", stay(r.Left), from, to)
		}
	}
	return bw.Flush()
}

// stay is "1 event stays" or "n events stay".
func stay(n int) string {
	if n == 1 {
		return "1 event stays"
	}
	return strconv.Itoa(n) + " events stay"
}
