package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flumego/filechannel/channel"
)

func newRepairCmd(o *options) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Remove torn tails and damaged records from the log files, keeping the bytes",
		Long: `repair fixes the damage in a closed channel's log files without moving any record:
it cuts torn tails, overwrites damaged regions in place with padding records,
rewrites damaged file headers and removes log files left empty by a crash. Every
byte it removes or overwrites is first copied to a .corrupt file next to its log
(log-NNNNNNNNNN.<offset>.corrupt). Then it rebuilds the checkpoint from the logs
(as 'fcreplay replay' does) and verifies the result.

Events in damaged regions are lost (the channel already skips them); the other
events of their transactions are kept. Run it with --dry-run first:
that lists the actions and changes nothing.

repair refuses to run while the channel is open. Exit code: 0 when the channel
verifies clean afterwards (or after a dry run), 1 when problems remain or a
region could not be repaired, 2 on a bad command line.`,
		Example: `  fcreplay repair --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data --dry-run
  fcreplay repair --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data`,
		Args: cobra.NoArgs,
		RunE: runner(o, func(*cobra.Command) error { return runRepair(o, dryRun) }),
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what repair would do and change nothing")
	o.addModeFlags(cmd)
	return cmd
}

func runRepair(o *options, dryRun bool) error {
	p := newProgress(o.stderr, o.stderrTTY)
	rep, err := channel.Repair(o.config(), channel.RepairOptions{
		DryRun:        dryRun,
		Progress:      p.callback(),
		ProgressEvery: p.interval(),
	})
	p.finish()
	if rep == nil {
		return lockedError(err)
	}
	out := repairJSON{DryRun: dryRun, Actions: []actionJSON{}, Problems: problemsJSON(rep.Problems), Before: costFacts(rep.Before)}
	for _, a := range rep.Actions {
		out.Actions = append(out.Actions, actionJSON{Kind: a.Kind, File: a.File, Offset: offsetPtr(a.Offset),
			Length: a.Length, KeptIn: a.KeptIn, Detail: a.Detail, Lost: a.Lost})
		if a.Kind == channel.RepairCannotPad || a.Kind == channel.RepairCannotRepair {
			out.Unrepaired++
		}
	}
	if rep.Rebuild != nil {
		r := rebuildFacts(rep.Rebuild, false)
		out.Rebuild = &r
	}
	out.OK = err == nil && (dryRun || len(rep.Problems) == 0) && out.Unrepaired == 0
	if o.json {
		if perr := o.printJSON(out); perr != nil && err == nil {
			err = perr
		}
	} else if perr := printRepair(o.stdout, &out); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("repair stopped: %w", err) // after the actions it made, printed above
	}
	if !out.OK {
		return problemsFound
	}
	return nil
}

// repairJSON is repair's output (--json prints it as is).
type repairJSON struct {
	OK     bool `json:"ok"` // no problem left (a dry run: nothing prevents a repair)
	DryRun bool `json:"dry_run"`
	// Actions are what repair did, or would do in a dry run.
	Actions []actionJSON `json:"actions"`
	// Unrepaired counts cannot-pad and cannot-repair actions.
	Unrepaired int `json:"unrepaired"`
	// Rebuild is the checkpoint rebuild that ends a repair; absent in a dry run.
	Rebuild *rebuildJSON `json:"rebuild,omitempty"`
	// Problems are what verify reports after the repair (in a dry run: now).
	Problems []problemJSON `json:"problems"`
	// Before is what the damage cost before the repair: lost is what
	// opening the channel unrepaired loses, lost_full_replay what the
	// repair loses (committed events, lower bounds).
	Before costJSON `json:"before"`
}

type actionJSON struct {
	Kind   channel.RepairKind `json:"kind"` // cut-torn-tail, pad-damaged-region, rewrite-header, remove-empty-log, cannot-pad, cannot-repair
	File   string             `json:"file"`
	Offset *int64             `json:"offset,omitempty"` // absent for a whole file
	Length int64              `json:"length"`
	KeptIn string             `json:"kept_in,omitempty"`
	Detail string             `json:"detail,omitempty"`
	// Lost counts the committed events this damage costs once the
	// repair has rebuilt the checkpoint (a lower bound).
	Lost int `json:"lost"`
}

// printRepair writes repair's text output.
func printRepair(w io.Writer, r *repairJSON) error {
	bw := bufio.NewWriter(w)
	if r.DryRun {
		fmt.Fprintln(bw, "dry run: nothing was changed; a repair would do this:")
	}
	for _, a := range r.Actions {
		fmt.Fprintln(bw, actionLine(a))
	}
	switch {
	case len(r.Actions) == 0:
		fmt.Fprintln(bw, "the log files have no damage to repair")
	case r.Unrepaired > 0:
		fmt.Fprintf(bw, "%s cannot be repaired by this tool (see above)\n", plural(int64(r.Unrepaired), "problem"))
	}
	if b := r.Before; b != (costJSON{}) {
		will := "costs"
		if r.DryRun {
			will = "would cost"
		}
		fmt.Fprintf(bw, "the repair %s %s (a lower bound); opening the channel unrepaired loses %d\n",
			will, plural(int64(b.LostFullReplay), "committed event"), b.Lost)
		if r.DryRun && b.LostFullReplay > b.Lost {
			fmt.Fprintf(bw, "to save the %d more: open the channel and drain it (or let the sink catch up) before the repair\n",
				b.LostFullReplay-b.Lost)
		}
	}
	if r.DryRun {
		if r.Unrepaired == 0 {
			fmt.Fprintln(bw, "then rebuild the checkpoint from the logs and verify the channel")
		}
		fmt.Fprintf(bw, "verify now: %s\n", problemCount(len(r.Problems)))
		return bw.Flush()
	}
	if b := r.Rebuild; b != nil {
		if _, unnamed := b.named(); unnamed {
			fmt.Fprintf(bw, "rebuilt the checkpoint from the logs: %s queued (capacity %d)\n",
				plural(int64(b.Events), "event"), b.Capacity)
		} else {
			fmt.Fprintf(bw, "rebuilt the checkpoint from the logs: %s\n", plural(int64(len(b.Groups)), "consumer group"))
		}
		for _, l := range b.groupLines() {
			fmt.Fprintln(bw, l)
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintln(bw, problemLine(p))
	}
	fmt.Fprintf(bw, "verify after the repair: %s\n", problemCount(len(r.Problems)))
	return bw.Flush()
}

// actionLine is "kind file at offset N: L bytes, kept in K: detail".
func actionLine(a actionJSON) string {
	s := a.Kind.String() + " " + a.File
	if a.Offset != nil {
		s += fmt.Sprintf(" at offset %d", *a.Offset)
	}
	s += fmt.Sprintf(": %d bytes", a.Length)
	if a.Lost > 0 {
		s += ", " + plural(int64(a.Lost), "committed event") + " lost"
	}
	if a.KeptIn != "" {
		s += ", kept in " + a.KeptIn
	}
	if a.Detail != "" {
		// The detail is often a corruption error naming the same place.
		d := a.Detail
		if a.Offset != nil {
			d = strings.TrimPrefix(d, fmt.Sprintf("corrupt %s at offset %d: ", a.File, *a.Offset))
		}
		s += ": " + d
	}
	return s
}

// problemCount is "ok, no problems" or "N problems".
func problemCount(n int) string {
	if n == 0 {
		return "ok, no problems"
	}
	return plural(int64(n), "problem")
}
