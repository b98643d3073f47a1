package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/replay"
)

func newReplayCmd(o *options) *cobra.Command {
	var dryRun bool
	var capacity int
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Rebuild the checkpoint from a full replay of the log files",
		Long: `replay throws the checkpoint away (and the backup's copy) and rebuilds the queue
from a full replay of every log file, as the channel does when it has no usable
checkpoint, then writes a fresh checkpoint (and backup). Every consumer group is
rebuilt, with the capacity and policy the logs last recorded for it (--capacity
sets the unnamed group's); no group is added or removed. Use it when the
checkpoint is missing, damaged or disagrees with the logs (verify's
checkpoint-* and bad-pointer problems), and after a repair (repair runs it).

It first replays the logs read-only to count the events; if they do not fit in
the capacity it fails and changes nothing. --dry-run stops there and reports
what would be recovered. A long run shows its progress on stderr: a bar on a
terminal, otherwise a line every 2 seconds. It ends with a summary.

replay refuses to run while the channel is open. Exit code: 0 when done, 1 when
it failed, 2 on a bad command line.`,
		Example: `  fcreplay replay --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data --dry-run
  fcreplay replay --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data --capacity 2000000`,
		Args: cobra.NoArgs,
		RunE: runner(o, func(*cobra.Command) error { return runReplay(o, dryRun, capacity) }),
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "report what a rebuild would recover and change nothing")
	f.IntVar(&capacity, "capacity", 0, "capacity of the new checkpoint (0: the existing checkpoint's, else the default 1000000)")
	o.addModeFlags(cmd)
	return cmd
}

func runReplay(o *options, dryRun bool, capacity int) error {
	if capacity < 0 {
		return usageErrorf("--capacity %d is negative", capacity)
	}
	cfg := o.config()
	cfg.Capacity = capacity // 0: Rebuild keeps the existing checkpoint's
	p := newProgress(o.stderr, o.stderrTTY)
	rep, err := channel.Rebuild(cfg, channel.RebuildOptions{DryRun: dryRun, Progress: p.callback(), ProgressEvery: p.interval()})
	p.finish()
	if err != nil {
		var ce *replay.CapacityError
		if errors.As(err, &ce) {
			return fmt.Errorf("the logs hold %d events, more than the capacity %d; run again with --capacity %d or more (nothing was changed)",
				ce.Needed, ce.Capacity, ce.Needed)
		}
		return lockedError(err)
	}
	out := rebuildFacts(rep, dryRun)
	if o.json {
		return o.printJSON(out)
	}
	return printRebuild(o.stdout, &out)
}

// rebuildJSON is replay's output (--json prints it as is), and the rebuild
// part of repair's.
type rebuildJSON struct {
	DryRun  bool  `json:"dry_run"`
	Records int64 `json:"records"` // log records read, one pass (a rebuild reads them twice)
	Bytes   int64 `json:"bytes"`   // log bytes read, one pass
	// Events is the number of events in the rebuilt queue: the unnamed
	// group's, else the largest group's; groups has each group's.
	Events     int                `json:"events"`
	Groups     []rebuildGroupJSON `json:"groups"`
	Puts       int64              `json:"puts"`  // committed puts applied
	Takes      int64              `json:"takes"` // committed takes applied
	Corrupt    int                `json:"corrupt"`
	DamagedTxs int                `json:"damaged_txs"`
	Padding    int64              `json:"padding"` // padding records read (regions a repair overwrote)
	Capacity   int                `json:"capacity"`
	// CapacityFrom says where the capacity came from: "config" (--capacity),
	// "checkpoint", "backup checkpoint" or "default" (no checkpoint recorded
	// one).
	CapacityFrom    string  `json:"capacity_from"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// rebuildGroupJSON is one consumer group of the rebuilt channel.
type rebuildGroupJSON struct {
	ID       uint32 `json:"id"`
	Name     string `json:"name"` // "" for the unnamed group
	Events   int    `json:"events"`
	Capacity int    `json:"capacity"`
	Policy   string `json:"policy"` // when full: block, drop-oldest, drop-newest
}

func rebuildFacts(r *channel.RebuildReport, dryRun bool) rebuildJSON {
	out := rebuildJSON{DryRun: dryRun, Records: r.Records, Bytes: r.Bytes, Events: r.Events, Groups: []rebuildGroupJSON{},
		Puts: r.Puts, Takes: r.Takes, Corrupt: r.Corrupt, DamagedTxs: r.DamagedTxs, Padding: r.Padding, Capacity: r.Capacity,
		CapacityFrom: r.CapacityFrom.String(), DurationSeconds: r.Duration.Seconds()}
	for _, g := range r.Groups {
		out.Groups = append(out.Groups, rebuildGroupJSON{ID: g.ID, Name: g.Name, Events: g.Events, Capacity: g.Capacity,
			Policy: g.WhenFull.String()})
	}
	return out
}

// named reports whether the rebuilt channel has named consumer groups;
// unnamed whether it has the unnamed one (true when the report lists no
// group: an older release's).
func (r *rebuildJSON) named() (named, unnamed bool) {
	unnamed = len(r.Groups) == 0
	for _, g := range r.Groups {
		named, unnamed = named || g.ID != 0, unnamed || g.ID == 0
	}
	return named, unnamed
}

// groupLines are the lines of a rebuild's summary for its consumer
// groups, when it has named ones.
func (r *rebuildJSON) groupLines() []string {
	if named, _ := r.named(); !named {
		return nil
	}
	var out []string
	for _, g := range r.Groups {
		label := "the unnamed group"
		if g.ID != 0 {
			label = fmt.Sprintf("group %q", g.Name)
		}
		out = append(out, fmt.Sprintf("  %s: %s, capacity %d, %s when full", label, plural(int64(g.Events), "event"), g.Capacity, g.Policy))
	}
	return out
}

// printRebuild writes replay's summary.
func printRebuild(w io.Writer, r *rebuildJSON) error {
	d := time.Duration(r.DurationSeconds * float64(time.Second))
	// A rebuild reads the logs twice (a count, then Open's replay); the
	// report counts one pass.
	passes, twice := int64(2), " twice"
	if r.DryRun {
		passes, twice = 1, ""
	}
	read := fmt.Sprintf("read %s (%s MB)%s in %v, %s MB/s", plural(r.Records, "record"), mb(r.Bytes), twice,
		roundDuration(d), rateMBs(passes*r.Bytes, d))
	applied := fmt.Sprintf("%s applied", plural(r.Puts, "put")+" and "+plural(r.Takes, "take"))
	var err error
	_, unnamed := r.named()
	switch {
	case !unnamed && r.DryRun:
		_, err = fmt.Fprintf(w, "dry run: nothing was changed; a rebuild would recover %s (%s); %s\n",
			plural(int64(len(r.Groups)), "consumer group"), applied, read)
	case !unnamed:
		_, err = fmt.Fprintf(w, "rebuilt the checkpoint: %s (%s); %s\n",
			plural(int64(len(r.Groups)), "consumer group"), applied, read)
	case r.DryRun:
		_, err = fmt.Fprintf(w, "dry run: nothing was changed; a rebuild would recover %s (%s) into capacity %d; %s\n",
			plural(int64(r.Events), "event"), applied, r.Capacity, read)
	default:
		_, err = fmt.Fprintf(w, "rebuilt the checkpoint: %s queued (%s), capacity %d; %s\n",
			plural(int64(r.Events), "event"), applied, r.Capacity, read)
	}
	for _, l := range r.groupLines() {
		if err == nil {
			_, err = fmt.Fprintln(w, l)
		}
	}
	if err == nil && unnamed {
		// The capacity is the unnamed group's.
		_, err = fmt.Fprintln(w, capacityNote(r))
	}
	switch {
	case err != nil:
	case r.Corrupt > 0:
		_, err = fmt.Fprintf(w, "damage: %s stepped over, %s (put transactions lose their damaged events, take transactions apply the takes found); 'fcreplay repair' pads the damaged regions\n",
			plural(int64(r.Corrupt), "damaged region"), plural(int64(r.DamagedTxs), "damaged transaction"))
	case r.DamagedTxs > 0:
		_, err = fmt.Fprintf(w, "note: %s lost records to damage that was repaired (padded) before: their put events are lost, their takes applied in part\n",
			plural(int64(r.DamagedTxs), "transaction"))
	}
	return err
}

// capacityNote says where the rebuild's capacity came from, and what the
// application's next Open does with it.
func capacityNote(r *rebuildJSON) string {
	switch r.CapacityFrom {
	case channel.CapacityFromConfig.String():
		return fmt.Sprintf("capacity %d: as --capacity asked; an application that opens the channel with another Config.Capacity resizes it again", r.Capacity)
	case channel.CapacityDefault.String():
		return fmt.Sprintf("capacity %d: the default, as no checkpoint recorded the channel's capacity; the application's next Open resizes the queue to its Config.Capacity (or run again with --capacity)", r.Capacity)
	}
	return fmt.Sprintf("capacity %d: kept from the %s", r.Capacity, r.CapacityFrom)
}

// roundDuration rounds d for a summary: to the millisecond, or to the
// microsecond below one.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
