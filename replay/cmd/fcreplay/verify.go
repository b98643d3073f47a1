package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flumego/filechannel/replay"
)

func newVerifyCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check every file and list every problem (read-only)",
		Long: `verify checks a channel's files without changing them and lists every problem,
each with its kind, file and byte offset: damaged, incomplete or missing
checkpoints (and backup), damaged log headers and records, torn tails, log files
left by an interrupted create, write-order ids out of order, a recovered queue
that differs from a full replay of the logs, queued events that do not read back,
and checkpoint bookkeeping that does not match its ring. Every consumer group is
checked: its checkpoint, its queue against a full replay's, its pointers; in a
channel with named groups a problem about one group names it ("(group "a")"
after the kind, "group" in JSON).

A torn tail and an unfinished create are normal after a crash: the channel's next
open handles them. Anything else is damage.

Exit code: 0 when there is no problem, 1 when there are problems, 2 on a bad
command line.`,
		Example: `  fcreplay verify --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data
  fcreplay verify --checkpoint-dir ckpt --data-dirs data --json | jq -r '.problems[].kind'`,
		Args: cobra.NoArgs,
		RunE: runner(o, func(*cobra.Command) error { return runVerify(o) }),
	}
}

func runVerify(o *options) error {
	defer o.lockForRead()()
	rep, err := replay.Verify(o.verifyOptions())
	if err != nil {
		return err
	}
	out := verifyJSON{OK: rep.OK(), RecoveredFrom: rep.RecoveredFrom, Queued: rep.Queued,
		FullReplayQueued: rep.FullReplayQueued, LogFiles: len(rep.Logs), PointersChecked: rep.PointersChecked,
		Problems: problemsJSON(rep.Problems), Notes: problemsJSON(rep.Notes), Cost: costFacts(rep.Cost)}
	if o.json {
		err = o.printJSON(out)
	} else {
		err = printVerify(o.stdout, &out)
	}
	if err != nil {
		return err
	}
	if !out.OK {
		return problemsFound
	}
	return nil
}

// verifyJSON is verify's output (--json prints it as is).
type verifyJSON struct {
	OK               bool          `json:"ok"`
	RecoveredFrom    string        `json:"recovered_from"`
	Queued           int           `json:"queued"` // -1: that recovery fails
	FullReplayQueued int           `json:"full_replay_queued"`
	LogFiles         int           `json:"log_files"`
	PointersChecked  int           `json:"pointers_checked"`
	Problems         []problemJSON `json:"problems"`
	Notes            []problemJSON `json:"notes"` // not damage; "ok" ignores them
	// Cost sums the problems' costs (those not listed one by one too).
	Cost costJSON `json:"cost"`
}

type problemJSON struct {
	Kind   replay.ProblemKind `json:"kind"` // a replay.Problem* kind
	File   string             `json:"file,omitempty"`
	Offset *int64             `json:"offset,omitempty"` // absent when not about a place in a file
	// Group is the consumer group the problem is about, in a channel with
	// named groups; absent otherwise.
	Group  *groupRefJSON `json:"group,omitempty"`
	Detail string        `json:"detail,omitempty"`
	costJSON
}

// costJSON is what damage costs in committed events (replay.Cost): lower
// bounds.
type costJSON struct {
	// Lost: committed events the channel loses when it opens as it would
	// now; LostFullReplay: the same after a repair or a full replay.
	Lost           int `json:"lost"`
	LostFullReplay int `json:"lost_full_replay"`
	// Redelivered: taken events that stay queued (their take records were
	// damaged) and are delivered again.
	Redelivered int `json:"redelivered"`
}

func costFacts(c replay.Cost) costJSON {
	return costJSON{Lost: c.Lost, LostFullReplay: c.LostFullReplay, Redelivered: c.Redelivered}
}

func (c costJSON) cost() replay.Cost {
	return replay.Cost{Lost: c.Lost, LostFullReplay: c.LostFullReplay, Redelivered: c.Redelivered}
}

func problemsJSON(ps []replay.Problem) []problemJSON {
	out := make([]problemJSON, 0, len(ps))
	for _, p := range ps {
		j := problemJSON{Kind: p.Kind, File: p.File, Offset: offsetPtr(p.Offset), Detail: p.Detail, costJSON: costFacts(p.Cost)}
		if g := p.Group; g != nil {
			j.Group = &groupRefJSON{ID: g.ID, Name: g.Name}
		}
		out = append(out, j)
	}
	return out
}

// printVerify writes verify's text output: one line per problem, the notes,
// what to do next, and a summary line.
func printVerify(w io.Writer, r *verifyJSON) error {
	for _, p := range r.Problems {
		fmt.Fprintln(w, problemLine(p))
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note: "+problemLine(n))
	}
	for _, a := range advice(r) {
		fmt.Fprintln(w, "next: "+a)
	}
	queued := "fails"
	if r.Queued >= 0 {
		queued = plural(int64(r.Queued), "event")
	}
	full := "fails"
	if r.FullReplayQueued >= 0 {
		full = plural(int64(r.FullReplayQueued), "event")
	}
	status := "ok: no problems"
	if !r.OK {
		status = plural(int64(len(r.Problems)), "problem")
	}
	if _, err := fmt.Fprintf(w, "%s (recovery from %s: %s; full replay: %s; %s, %s read back)\n",
		status, recoverySource(r.RecoveredFrom), queued, full, plural(int64(r.LogFiles), "log file"),
		plural(int64(r.PointersChecked), "pointer")); err != nil {
		return err
	}
	return printCost(w, r.Cost)
}

// printCost writes the line that says what the damage costs, if anything.
func printCost(w io.Writer, c costJSON) error {
	if c == (costJSON{}) {
		return nil
	}
	line := fmt.Sprintf("committed events lost to damage: %d at the channel's next open, %d after 'fcreplay repair' or 'fcreplay replay'",
		c.Lost, c.LostFullReplay)
	if c.Redelivered > 0 {
		line += fmt.Sprintf("; %s delivered again", plural(int64(c.Redelivered), "taken event"))
	}
	line += " (lower bounds)"
	if c.LostFullReplay > c.Lost {
		line += "; a repair or replay loses more than opening the channel as it is: take the events out first (open the channel and drain it), then repair"
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// problemLine is "kind file at offset N: detail", as replay.Problem prints.
func problemLine(p problemJSON) string {
	off := int64(-1)
	if p.Offset != nil {
		off = *p.Offset
	}
	var g *replay.GroupRef
	if p.Group != nil {
		g = &replay.GroupRef{ID: p.Group.ID, Name: p.Group.Name}
	}
	return replay.Problem{Kind: p.Kind, File: p.File, Offset: off, Group: g, Detail: p.Detail, Cost: p.cost()}.String()
}

// advice says what to do about the kinds of problems found, in the order
// of the recovery procedure.
func advice(r *verifyJSON) []string {
	kinds := map[replay.ProblemKind]bool{}
	for _, p := range r.Problems {
		kinds[p.Kind] = true
	}
	has := func(ks ...replay.ProblemKind) bool {
		for _, k := range ks {
			if kinds[k] {
				return true
			}
		}
		return false
	}
	var out []string
	if has(replay.ProblemForeignDataDir, replay.ProblemForeignBackupDir, replay.ProblemChannelIDCorrupt) {
		out = append(out, "a directory belongs to another channel, or its channel.id is damaged: the channel, 'fcreplay repair' and 'fcreplay replay' refuse it; check the directories given (the problem names the file to delete to hand a directory over on purpose); but a damaged channel.id of the checkpoint or backup dir that every data dir vouches for is written again by the channel's next open, and 'fcreplay repair' and 'fcreplay replay' go ahead (the problem says so)")
	}
	if has(replay.ProblemForeignLog) {
		out = append(out, "an encrypted log file belongs to another channel (copied into a data dir): the channel refuses to open until it is moved out of the data dir")
	}
	if has(replay.ProblemBadFilterSkip) {
		out = append(out, "a filter skip record that no put commit writes (a changed log file, or a bug: keep a copy of the directories and report it): a filtered group may hold other events than its filter says; 'fcreplay reset' of that group evaluates its filter again over the retained events")
	}
	if has(replay.ProblemBadDuplicate) {
		out = append(out, "a duplicate record that no put commit writes (a changed log file, or a bug: keep a copy of the directories and report it): a group may hold an event twice, or miss one the record names wrongly")
	}
	if has(replay.ProblemTornTail, replay.ProblemUnfinishedCreate) {
		out = append(out, "torn tails and unfinished creates are normal after a crash; the channel's next open, or 'fcreplay repair', removes them")
	}
	if has(replay.ProblemTruncatedLog) {
		out = append(out, "a log file lost records that the checkpoint says were on disk (cut off, or copied incompletely): look for the full file (a backup, the copy's source) before you open or repair the channel")
	}
	if has(replay.ProblemCorruptRecord, replay.ProblemBadHeader) {
		out = append(out, "damaged log records or headers: run 'fcreplay repair --dry-run', then 'fcreplay repair' (removed bytes are kept in .corrupt files)")
	}
	if has(replay.ProblemCheckpointMissing, replay.ProblemCheckpointIncomplete, replay.ProblemCheckpointCorrupt) {
		if r.RecoveredFrom == replay.FromBackup {
			out = append(out, "the checkpoint is unusable: the channel's next open restores the backup checkpoint; 'fcreplay replay' rebuilds the checkpoint from the logs instead")
		} else {
			out = append(out, "no usable checkpoint: the channel's next open replays every log file in full; 'fcreplay replay' does it now, offline")
		}
	}
	// A replay that failed on an entry that is not a regular file is not
	// one 'fcreplay replay' can rebuild from: that replay refuses it too.
	if has(replay.ProblemCheckpointDisagrees, replay.ProblemBadPointer, replay.ProblemDuplicatePointer,
		replay.ProblemRefcountMismatch, replay.ProblemMissingLogState) ||
		(has(replay.ProblemRecoveryFailed) && !has(replay.ProblemNotRegularFile)) {
		a := "the checkpoint disagrees with the logs: 'fcreplay replay' rebuilds it from the logs ('fcreplay repair' does, after repairing damaged logs)"
		if r.Cost.LostFullReplay > r.Cost.Lost {
			a += "; but a rebuild loses events the checkpoint still holds (see the last line): drain the channel first"
		}
		out = append(out, a)
	}
	if has(replay.ProblemBackupMissing, replay.ProblemBackupIncomplete, replay.ProblemBackupCorrupt) {
		out = append(out, "the backup checkpoint is not usable: the channel's next checkpoint (or 'fcreplay replay') writes a new one")
	}
	if has(replay.ProblemNotRegularFile) {
		out = append(out, "entries named like the channel's files are not regular files (links, directories, pipes): nothing follows or opens them; a log file moved elsewhere and left as a link goes back into the data dir in place of the link; move the others away (a checkpoint file of the kind keeps the channel from opening; one named like a log file keeps 'fcreplay replay' and 'fcreplay repair' from running, and the channel from opening where it needs that log file)")
	}
	if has(replay.ProblemDuplicateLog, replay.ProblemMissingLog, replay.ProblemWriteOrder) {
		out = append(out, "log files are missing, duplicated or out of order: these need a person; see 'When Open fails' in docs/operations.md")
	}
	return out
}
