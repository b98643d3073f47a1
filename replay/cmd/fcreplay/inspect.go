package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/replay"
)

func newInspectCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect",
		Short: "Print the checkpoint, the backup and every log file (read-only)",
		Long: `inspect prints the facts about a channel's files without changing them: the
checkpoint's header and metadata (version, write-order id, capacity, head, size,
marker, complete or not, the consumer groups its catalog lists), the backup's
state, how the channel would recover and how many events it would hold, every
consumer group (id, name, events queued, in flight at the checkpoint, capacity,
policy when full; its position: the id of its oldest queued event and when that
event committed, with how long ago (its lag); and for dead letters its
MaxDeliveries and dead-letter group,
how many of its queued events were delivered before and at most how often, or
that it is a dead-letter group; the events waiting for their retry delay and the
earliest due time; its take options: OrderKey, RetryDelays, LeaseTimeout,
ExpireAfter; and the events the checkpoint lists in flight under the pseudo
transactions waitingTx, waiting for a retry delay, and parkedTx, parked behind
a held key, which no take holds), and every log file with its size, valid end,
record counts, write-order id range and tail; and the log files no group holds
(retained, with Config.Retention), their bytes and the oldest one's time. It
scans every log file in full.

Problems are counted, not listed: run 'fcreplay verify' for the list. The exit
code is 0 whenever the files could be read, whatever they hold.`,
		Example: `  fcreplay inspect --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data
  fcreplay inspect --checkpoint-dir ckpt --data-dirs data1,data2 --backup-checkpoint-dir backup --json`,
		Args: cobra.NoArgs,
		RunE: runner(o, func(*cobra.Command) error { return runInspect(o) }),
	}
}

func runInspect(o *options) error {
	defer o.lockForRead()()
	rep, err := replay.Verify(o.verifyOptions())
	if err != nil {
		return err
	}
	ck, err := checkpointFacts(o, rep.Checkpoint)
	if err != nil {
		return err
	}
	bk, err := checkpointFacts(o, rep.Backup)
	if err != nil {
		return err
	}
	out := inspectJSON{
		Checkpoint: ck, Backup: bk, RecoveredFrom: rep.RecoveredFrom,
		Queued: rep.Queued, FullReplayQueued: rep.FullReplayQueued,
		InflightPuts: rep.InflightPuts, InflightTakes: rep.InflightTakes,
		Groups: groupsFacts(rep.Groups), Logs: []logJSON{}, Problems: len(rep.Problems), Cost: costFacts(rep.Cost),
	}
	for _, g := range out.Groups {
		out.InflightTakes -= g.InflightWaiting + g.InflightParked
		out.InflightWaiting += g.InflightWaiting
		out.InflightParked += g.InflightParked
	}
	damage := damageByPlace(rep.Problems)
	for _, l := range rep.Logs {
		out.Logs = append(out.Logs, logFacts(l, damage))
		out.LogBytes += l.Size
	}
	retainedFacts(o, rep.Logs, &out)
	out.Dedup = dedupFacts(o)
	if o.json {
		return o.printJSON(out)
	}
	return printInspect(o.stdout, &out)
}

// inspectJSON is inspect's output (--json prints it as is).
type inspectJSON struct {
	Checkpoint checkpointJSON `json:"checkpoint"`
	Backup     checkpointJSON `json:"backup"` // state "none" without --backup-checkpoint-dir
	// RecoveredFrom is where the channel would recover from: "checkpoint",
	// "backup checkpoint" or "full replay".
	RecoveredFrom string `json:"recovered_from"`
	// Queued is the number of events the channel would hold after opening
	// (-1: that recovery fails); FullReplayQueued a full replay's.
	Queued           int `json:"queued"`
	FullReplayQueued int `json:"full_replay_queued"`
	InflightPuts     int `json:"inflight_puts"`  // events in flight at the checkpoint used
	InflightTakes    int `json:"inflight_takes"` // (taken ones return to the head), every group's
	// InflightWaiting and InflightParked are every group's groupJSON
	// fields of those names: not in InflightTakes.
	InflightWaiting int `json:"inflight_waiting,omitempty"`
	InflightParked  int `json:"inflight_parked,omitempty"`
	// Groups is every consumer group, by id (one, the unnamed group, for a
	// channel without named groups).
	Groups   []groupJSON `json:"groups"`
	Logs     []logJSON   `json:"logs"`
	LogBytes int64       `json:"log_bytes"`
	// Retained counts the log files with records that nothing holds: no
	// group queues an event in them and no transaction was in flight in
	// them at the checkpoint used. The channel deletes them at its next
	// checkpoint, or keeps them for Config.Retention. OldestRetained is
	// the oldest one's modification time: when its last record was
	// written.
	RetainedFiles  int    `json:"retained_files,omitempty"`
	RetainedBytes  int64  `json:"retained_bytes,omitempty"`
	OldestRetained string `json:"oldest_retained,omitempty"`
	Problems       int    `json:"problems"` // listed by verify
	// Cost is what the damage costs in committed events (as verify's).
	Cost costJSON `json:"cost"`
	// Dedup describes the deduplication snapshot (Config.Dedup); absent
	// without one.
	Dedup *dedupJSON `json:"dedup,omitempty"`
}

// dedupJSON is the deduplication snapshot in the checkpoint dir: the
// header it is of and the ids it holds, or why it does not read.
type dedupJSON struct {
	Header string `json:"header,omitempty"`
	IDs    int    `json:"ids"`
	Error  string `json:"error,omitempty"`
}

// dedupFacts reads the deduplication snapshot, nil without one.
func dedupFacts(o *options) *dedupJSON {
	header, entries, err := checkpoint.ReadDedup(o.fs, o.checkpointDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &dedupJSON{Error: err.Error()}
	}
	return &dedupJSON{Header: header, IDs: len(entries)}
}

// checkpointJSON describes the checkpoint or the backup.
type checkpointJSON struct {
	Dir   string `json:"dir,omitempty"`
	State string `json:"state"` // complete, incomplete, corrupt, missing, none
	Error string `json:"error,omitempty"`
	// Header is the checkpoint file's header as stored, not verified; nil
	// without a checkpoint file.
	Header *rawHeader `json:"header,omitempty"`
	// Verified holds what a complete checkpoint records, checked.
	Verified *verifiedJSON `json:"verified,omitempty"`
}

type verifiedJSON struct {
	WriteOrderID uint64 `json:"write_order_id"`
	Capacity     int    `json:"capacity"` // of the top-level ring: the unnamed group's (1 without one)
	Head         int    `json:"head"`
	Size         int    `json:"size"`
	Time         string `json:"time,omitempty"`
	LogStates    int    `json:"log_states"`
	// Groups is the consumer groups its catalog lists, by id; absent
	// without a catalog (an older release's checkpoint: the unnamed group
	// alone).
	Groups *[]groupRefJSON `json:"groups,omitempty"`
}

// groupRefJSON names a consumer group.
type groupRefJSON struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"` // "" for the unnamed group
}

// groupJSON describes one consumer group.
type groupJSON struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"` // "" for the unnamed group
	// Queued is the number of events queued for it after the channel
	// opens (-1: that recovery fails, or does not have the group);
	// FullReplayQueued a full replay's.
	Queued           int `json:"queued"`
	FullReplayQueued int `json:"full_replay_queued"`
	InflightTakes    int `json:"inflight_takes"` // its events in flight at the checkpoint used, taken by a transaction
	// InflightWaiting and InflightParked count the events the checkpoint
	// lists in flight under a pseudo transaction, not a take: waitingTx
	// (waiting for their retry delay) and parkedTx (parked behind a key
	// another transaction held, OrderKey). They return to the head too.
	InflightWaiting int `json:"inflight_waiting,omitempty"`
	InflightParked  int `json:"inflight_parked,omitempty"`
	// Capacity is 0 when nothing records it (no checkpoint, no groups
	// record: an older release's logs).
	Capacity int    `json:"capacity"`
	Policy   string `json:"policy"` // when full: block, drop-oldest, drop-newest
	// Dead letters. MaxDeliveries (0: no limit) and DeadLetter (the group
	// its dead letters and rejected events go to; "": none) are its
	// settings; DeadLetterGroup says that it is a dead-letter group, which
	// no put feeds.
	MaxDeliveries   uint32 `json:"max_deliveries"`
	DeadLetter      string `json:"dead_letter"`
	DeadLetterGroup bool   `json:"dead_letter_group"`
	// Filter is its filter (GroupConfig.Filter): only the events it
	// matches reach the group; "" = every event.
	Filter string `json:"filter,omitempty"`
	// OrderKey, RetryDelays, LeaseTimeout and ExpireAfter are its take
	// options (GroupConfig's fields of the same names, durations in Go's
	// notation, "1m30s"); absent when not set.
	OrderKey     string   `json:"order_key,omitempty"`
	RetryDelays  []string `json:"retry_delays,omitempty"`
	LeaseTimeout string   `json:"lease_timeout,omitempty"`
	ExpireAfter  string   `json:"expire_after,omitempty"`
	// DeliveredBefore counts its queued events that carry a delivery
	// count after the recovery: delivered, and neither taken for good
	// nor dead-lettered yet (-1: unknown, that recovery fails).
	// MaxDeliveryCount is the largest count.
	DeliveredBefore  int    `json:"delivered_before"`
	MaxDeliveryCount uint32 `json:"max_delivery_count"`
	// Waiting counts its queued events that wait for their retry delay
	// (GroupConfig.RetryDelays, Transaction.Retry); EarliestDue is when
	// the first of them is due (RFC 3339 in milliseconds).
	Waiting     int    `json:"waiting,omitempty"`
	EarliestDue string `json:"earliest_due,omitempty"`
	// HeadID and OldestQueued are its position: the id of the event at
	// the head of its recovered queue (its oldest) and when that event's
	// put committed (RFC 3339 in milliseconds; absent for an event of a
	// log file older than format version 7): time since then is its lag.
	HeadID       string `json:"head_id,omitempty"`
	OldestQueued string `json:"oldest_queued,omitempty"`
}

func groupsFacts(gs []replay.GroupReport) []groupJSON {
	out := make([]groupJSON, 0, len(gs))
	for _, g := range gs {
		j := groupJSON{ID: g.Info.ID, Name: g.Info.Name, Queued: g.Queued, FullReplayQueued: g.FullReplayQueued,
			InflightTakes: g.InflightTakes - g.InflightWaiting - g.InflightParked, InflightWaiting: g.InflightWaiting,
			InflightParked: g.InflightParked, Capacity: int(min(g.Info.Capacity, math.MaxInt)),
			Policy: channel.FullPolicy(g.Info.Policy).String(), MaxDeliveries: g.Info.MaxDeliveries,
			DeadLetter: g.Info.DeadLetter, DeadLetterGroup: g.Info.DeadLetterGroup, DeliveredBefore: len(g.Deliveries),
			HeadID: g.HeadID, Filter: g.Info.Filter}
		if !g.Oldest.IsZero() {
			j.OldestQueued = formatTime(g.Oldest)
		}
		for _, n := range g.Deliveries {
			j.MaxDeliveryCount = max(j.MaxDeliveryCount, n)
		}
		j.Waiting, j.EarliestDue = waitingFacts(g.Waiting)
		takeOptionFacts(&j, &g.Info)
		if g.Queued < 0 {
			j.DeliveredBefore = -1
		}
		out = append(out, j)
	}
	return out
}

// logJSON describes one log file.
type logJSON struct {
	ID                uint32 `json:"id"`
	Dir               string `json:"dir"`
	Path              string `json:"path"`
	Size              int64  `json:"size"`
	End               int64  `json:"end"` // just past the last valid record
	Records           int64  `json:"records"`
	Puts              int64  `json:"puts"`
	Takes             int64  `json:"takes"`
	Commits           int64  `json:"commits"`
	Rollbacks         int64  `json:"rollbacks"`
	FirstWriteOrderID uint64 `json:"first_write_order_id"`
	LastWriteOrderID  uint64 `json:"last_write_order_id"`
	Tail              string `json:"tail"` // clean, torn, or leftover (a recycled file's old bytes)
	TailError         string `json:"tail_error,omitempty"`
	// TornBytes: for a torn tail, its bytes up to the last non-zero one
	// (the zeros laid out after it are not counted).
	TornBytes int64 `json:"torn_bytes,omitempty"`
	// Truncated: the valid records end below the length the checkpoint
	// recorded for the file (verify's truncated-log): committed data was
	// cut off. TailCost is what the tail costs, torn or truncated.
	Truncated   bool         `json:"truncated,omitempty"`
	TailCost    *costJSON    `json:"tail_cost,omitempty"`
	HeaderError string       `json:"header_error,omitempty"`
	HeaderCost  *costJSON    `json:"header_cost,omitempty"`
	Damaged     []regionJSON `json:"damaged,omitempty"`
	Unfinished  bool         `json:"unfinished,omitempty"` // left by a crash inside its creation
	// KeyID is the key an encrypted log file's events are sealed with
	// (format versions 5 and 6); "" for a file without encryption.
	KeyID string `json:"key_id,omitempty"`
	// ChannelID is the channel a version-6 file's keys are bound to (32
	// hex digits); "" for other files.
	ChannelID string `json:"channel_id,omitempty"`
}

type regionJSON struct {
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Error  string `json:"error"`
	costJSON
}

// place is where a problem about a log file starts.
type place struct {
	file string
	off  int64
}

// damageByPlace indexes the problems about damage in the log files.
func damageByPlace(ps []replay.Problem) map[place]replay.Problem {
	m := map[place]replay.Problem{}
	for _, p := range ps {
		if p.LogDamage() {
			m[place{p.File, p.Offset}] = p
		}
	}
	return m
}

func checkpointFacts(o *options, ci replay.CheckpointInfo) (checkpointJSON, error) {
	c := checkpointJSON{Dir: ci.Dir, State: ci.State, Error: errString(ci.Err)}
	if ci.State == replay.StateNone {
		return c, nil
	}
	h, err := readHeader(o.fs, ci.Dir)
	if err != nil {
		return c, err
	}
	c.Header = h
	if ci.State == replay.StateComplete {
		c.Verified = &verifiedJSON{WriteOrderID: ci.WriteOrderID, Capacity: ci.Capacity, Head: ci.Head,
			Size: ci.Size, Time: formatTime(ci.Time), LogStates: ci.LogStates}
		if cat := ci.Catalog; cat != nil {
			refs := make([]groupRefJSON, 0, len(cat.Groups))
			for _, g := range cat.Groups {
				refs = append(refs, groupRefJSON{ID: g.ID, Name: g.Name})
			}
			c.Verified.Groups = &refs
		}
	}
	return c, nil
}

func logFacts(l replay.LogInfo, damage map[place]replay.Problem) logJSON {
	j := logJSON{ID: l.ID, Dir: l.Dir, Path: l.Path, Size: l.Size, End: l.End, Records: l.Records,
		Puts: l.Puts, Takes: l.Takes, Commits: l.Commits, Rollbacks: l.Rollbacks,
		FirstWriteOrderID: l.FirstWOID, LastWriteOrderID: l.LastWOID, Tail: l.Tail.String(),
		TailError: errString(l.TailErr), TornBytes: l.TornBytes, HeaderError: errString(l.HeaderErr), Unfinished: l.Unfinished, KeyID: l.KeyID}
	if l.ChannelID != ([16]byte{}) {
		j.ChannelID = hex.EncodeToString(l.ChannelID[:])
	}
	for _, s := range l.Skipped {
		j.Damaged = append(j.Damaged, regionJSON{Offset: s.Offset, Length: s.Length, Error: errString(s.Err),
			costJSON: costFacts(damage[place{l.Path, s.Offset}].Cost)})
	}
	if p, ok := damage[place{l.Path, l.End}]; ok && (p.Kind == replay.ProblemTornTail || p.Kind == replay.ProblemTruncatedLog) {
		c := costFacts(p.Cost)
		j.TailCost, j.Truncated = &c, p.Kind == replay.ProblemTruncatedLog
	}
	if p, ok := damage[place{l.Path, 0}]; ok && p.Kind == replay.ProblemBadHeader {
		c := costFacts(p.Cost)
		j.HeaderCost = &c
	}
	return j
}

// printInspect writes inspect's text output.
func printInspect(w io.Writer, r *inspectJSON) error {
	bw := bufio.NewWriter(w)
	kv := func(indent, k, format string, args ...any) {
		fmt.Fprintf(bw, "%-*s%s\n", kvWidth, indent+k, fmt.Sprintf(format, args...))
	}
	printCheckpoint(kv, "checkpoint", &r.Checkpoint)
	printCheckpoint(kv, "backup", &r.Backup)
	if r.RecoveredFrom == replay.FromFullReplay {
		kv("", "recovery", "from %s (no usable checkpoint)", recoverySource(r.RecoveredFrom))
	} else {
		kv("", "recovery", "from %s", recoverySource(r.RecoveredFrom))
	}
	if r.Queued >= 0 {
		kv("  ", "queued", "%d events after opening", r.Queued)
	} else {
		kv("  ", "queued", "unknown: this recovery fails (see 'fcreplay verify')")
	}
	if r.RecoveredFrom != replay.FromFullReplay {
		kv("  ", "in flight", "%d put events, %d taken events at the checkpoint used%s", r.InflightPuts, r.InflightTakes, pseudoTxTotals(r))
	}
	if r.FullReplayQueued >= 0 {
		kv("  ", "full replay", "%d events", r.FullReplayQueued)
	} else {
		kv("  ", "full replay", "fails (see 'fcreplay verify')")
	}
	if err := printGroups(bw, kv, r.Groups); err != nil {
		return err
	}
	if r.Problems == 0 {
		kv("", "problems", "none")
	} else {
		kv("", "problems", "%d (run 'fcreplay verify' to list them)", r.Problems)
	}
	if r.Cost != (costJSON{}) {
		kv("  ", "events lost", "%d committed at the channel's next open, %d after a repair or full replay (lower bounds)",
			r.Cost.Lost, r.Cost.LostFullReplay)
		if r.Cost.Redelivered > 0 {
			kv("  ", "redelivered", "%d taken events come back (their take records were damaged)", r.Cost.Redelivered)
		}
	}
	switch d := r.Dedup; {
	case d != nil && d.Error != "":
		kv("", "dedup", "snapshot unusable (the next Open rebuilds the window from the logs alone): %s", d.Error)
	case d != nil:
		kv("", "dedup", "%s remembered for header %q", plural(int64(d.IDs), "id"), d.Header)
	}
	kv("", "log files", "%s, %d bytes", plural(int64(len(r.Logs)), "file"), r.LogBytes)
	if r.RetainedFiles > 0 {
		kv("  ", "retained", "%s, %d bytes that no group holds; the oldest written %s",
			plural(int64(r.RetainedFiles), "file"), r.RetainedBytes, r.OldestRetained)
	}
	if len(r.Logs) > 0 {
		tw := tabwriter.NewWriter(bw, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  ID\tSIZE\tVALID END\tRECORDS\tPUTS\tTAKES\tCOMMITS\tROLLBACKS\tWRITE-ORDER IDS\tTAIL\tPATH")
		for _, l := range r.Logs {
			woids := "-"
			if l.Records > 0 {
				woids = strconv.FormatUint(l.FirstWriteOrderID, 10) + "-" + strconv.FormatUint(l.LastWriteOrderID, 10)
			}
			fmt.Fprintf(tw, "  %d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", l.ID, l.Size, l.End, l.Records,
				l.Puts, l.Takes, l.Commits, l.Rollbacks, woids, l.Tail, l.Path)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, l := range r.Logs {
			for _, note := range logNotes(&l) {
				fmt.Fprintf(bw, "  log %d: %s\n", l.ID, note)
			}
		}
	}
	return bw.Flush()
}

// kvWidth is the width of the labels of inspect's text output.
const kvWidth = 18

// recoverySource names a replay.From* source in a sentence.
func recoverySource(from string) string {
	if from == replay.FromFullReplay {
		return "a full replay of the logs"
	}
	return "the " + from
}

func printCheckpoint(kv func(indent, k, format string, args ...any), what string, c *checkpointJSON) {
	if c.State == replay.StateNone {
		kv("", what, "none (no --backup-checkpoint-dir)")
		return
	}
	kv("", what, "%s", c.Dir)
	kv("  ", "state", "%s", c.State)
	if c.Error != "" {
		kv("  ", "error", "%s", c.Error)
	}
	h := c.Header
	if v := c.Verified; v != nil {
		if h != nil {
			kv("  ", "version", "%d", h.Version)
			kv("  ", "marker", "%s", h.Marker)
		}
		kv("  ", "write-order id", "%d", v.WriteOrderID)
		if v.Time != "" {
			kv("  ", "written", "%s", v.Time)
		}
		kv("  ", "capacity", "%d", v.Capacity)
		kv("  ", "head", "%d", v.Head)
		kv("  ", "size", "%d", v.Size)
		kv("  ", "log states", "%d", v.LogStates)
		if v.Groups != nil {
			kv("  ", "groups", "%s", groupList(*v.Groups))
		}
		return
	}
	if h == nil {
		return
	}
	kv("  ", "header", "as stored, not verified:")
	if !h.MagicOK {
		kv("  ", "magic", "wrong (not a checkpoint file)")
	}
	kv("  ", "version", "%d", h.Version)
	kv("  ", "marker", "%s", h.Marker)
	kv("  ", "write-order id", "%d", h.WriteOrderID)
	if h.Time != "" {
		kv("  ", "written", "%s", h.Time)
	}
	kv("  ", "capacity", "%d", h.Capacity)
	kv("  ", "head", "%d", h.Head)
	kv("  ", "size", "%d", h.Size)
}

// printGroups writes the table of the consumer groups.
func printGroups(bw *bufio.Writer, kv func(indent, k, format string, args ...any), gs []groupJSON) error {
	kv("", "groups", "%d", len(gs))
	if len(gs) == 0 {
		return nil
	}
	count := func(n int) string {
		if n < 0 {
			return "-"
		}
		return strconv.Itoa(n)
	}
	tw := tabwriter.NewWriter(bw, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tNAME\tQUEUED\tIN FLIGHT\tCAPACITY\tPOLICY\tFULL REPLAY")
	for _, g := range gs {
		capacity := "-"
		if g.Capacity > 0 {
			capacity = strconv.Itoa(g.Capacity)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\t%s\t%s\n", g.ID, groupName(g.ID, g.Name), count(g.Queued), g.InflightTakes,
			capacity, g.Policy, count(g.FullReplayQueued))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range gs {
		if g.HeadID != "" {
			fmt.Fprintf(bw, "  group %s: oldest queued event %s%s\n", groupName(g.ID, g.Name), g.HeadID, lag(g.OldestQueued))
		}
	}
	for _, g := range gs {
		if g.Filter != "" {
			fmt.Fprintf(bw, "  group %s: filter %s\n", groupName(g.ID, g.Name), g.Filter)
		}
	}
	for _, g := range gs {
		if opts := takeOptionNotes(&g); opts != "" {
			fmt.Fprintf(bw, "  group %s: %s\n", groupName(g.ID, g.Name), opts)
		}
		if notes := pseudoTxNotes(&g); notes != "" {
			fmt.Fprintf(bw, "  group %s: %s\n", groupName(g.ID, g.Name), notes)
		}
	}
	for _, g := range gs {
		if g.Waiting > 0 {
			fmt.Fprintf(bw, "  group %s: %s waiting for their retry delay, the earliest due %s\n", groupName(g.ID, g.Name),
				plural(int64(g.Waiting), "event"), g.EarliestDue)
		}
	}
	for _, g := range gs {
		if notes := deadLetterNotes(&g, gs); len(notes) > 0 {
			fmt.Fprintf(bw, "  group %s: %s\n", groupName(g.ID, g.Name), strings.Join(notes, "; "))
		}
	}
	return nil
}

// waitingFacts returns the number of waiting events and the earliest
// due time among them ("" for none).
func waitingFacts(waiting map[eventqueue.Pointer]int64) (int, string) {
	if len(waiting) == 0 {
		return 0, ""
	}
	first := int64(math.MaxInt64)
	for _, due := range waiting {
		first = min(first, due)
	}
	return len(waiting), formatTime(time.Unix(0, first))
}

// lag is ", committed TIME (AGO ago)" for an event committed at oldest
// (formatTime's), "" when unknown.
func lag(oldest string) string {
	t, err := time.Parse("2006-01-02T15:04:05.000Z07:00", oldest)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(", committed %s (%s ago)", oldest, time.Since(t).Round(time.Second))
}

// deadLetterNotes says what a group's dead-letter settings are, how many
// of its queued events were delivered before, and which groups a
// dead-letter group serves; nothing for a group without dead letters.
func deadLetterNotes(g *groupJSON, gs []groupJSON) []string {
	var notes []string
	switch {
	case g.MaxDeliveries > 0:
		notes = append(notes, fmt.Sprintf("dead-letters an event after %s, to %s", deliveries(g.MaxDeliveries), g.DeadLetter))
	case g.DeadLetter != "":
		notes = append(notes, fmt.Sprintf("no delivery limit; rejected events go to %s", g.DeadLetter))
	}
	switch {
	case g.DeliveredBefore < 0 && g.MaxDeliveries > 0:
		notes = append(notes, "delivery counts unknown: this recovery fails (see 'fcreplay verify')")
	case g.DeliveredBefore > 0:
		notes = append(notes, fmt.Sprintf("%d of its queued events delivered before, at most %s each",
			g.DeliveredBefore, plural(int64(g.MaxDeliveryCount), "time")))
	case g.MaxDeliveries > 0:
		notes = append(notes, "none of its queued events delivered before")
	}
	if g.DeadLetterGroup {
		var feeders []groupJSON // the groups whose dead letters it receives
		for _, o := range gs {
			if o.DeadLetter == g.Name && !o.DeadLetterGroup {
				feeders = append(feeders, o)
			}
		}
		s, to := "a dead-letter group: no put feeds it", "GROUP"
		if len(feeders) > 0 {
			names := make([]string, 0, len(feeders))
			for _, o := range feeders {
				if o.ID == 0 {
					names = append(names, "the unnamed group")
				} else {
					names = append(names, o.Name)
				}
			}
			s = "the dead-letter group of " + strings.Join(names, ", ") + ": no put feeds it"
		}
		if len(feeders) == 1 {
			to = strconv.Quote(feeders[0].Name)
			if feeders[0].Name != "" {
				to = feeders[0].Name // group names need no quotes in a shell
			}
		}
		notes = append(notes, fmt.Sprintf("%s; 'fcreplay redrive --from %s --to %s' moves its events back", s, g.Name, to))
	}
	return notes
}

// groupName is a group's name in a table: "(unnamed)" for the unnamed
// group.
func groupName(id uint32, name string) string {
	if id == 0 {
		return "(unnamed)"
	}
	return name
}

// groupList lists the groups of a catalog: `3: (unnamed), a, b`.
func groupList(gs []groupRefJSON) string {
	if len(gs) == 0 {
		return "none"
	}
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, groupName(g.ID, g.Name))
	}
	return strconv.Itoa(len(gs)) + ": " + strings.Join(names, ", ")
}

// logNotes lists what is unusual about a log file.
func logNotes(l *logJSON) []string {
	var notes []string
	if l.KeyID != "" && l.ChannelID != "" {
		notes = append(notes, fmt.Sprintf("encrypted with key %q for channel %s", l.KeyID, l.ChannelID))
	} else if l.KeyID != "" {
		notes = append(notes, fmt.Sprintf("encrypted with key %q", l.KeyID))
	}
	if l.Unfinished {
		notes = append(notes, "left by a crash while it was created (no record; the channel removes it)")
	}
	if l.HeaderError != "" {
		notes = append(notes, "damaged header: "+l.HeaderError+costNote(l.HeaderCost))
	}
	for _, d := range l.Damaged {
		notes = append(notes, fmt.Sprintf("damaged region at offset %d, %d bytes%s", d.Offset, d.Length, costNote(&d.costJSON)))
	}
	switch {
	case l.Truncated:
		notes = append(notes, fmt.Sprintf("truncated: the valid records end at offset %d, below the length the checkpoint recorded; committed data was cut off, not a crash's torn tail%s",
			l.End, costNote(l.TailCost)))
	case l.Tail == "torn":
		notes = append(notes, fmt.Sprintf("torn tail: %d bytes after offset %d are not a record (normal after a crash)%s", l.TornBytes, l.End, costNote(l.TailCost)))
	}
	return notes
}

// costNote is " [costs ...]" for damage that costs events, else "".
func costNote(c *costJSON) string {
	if c == nil {
		return ""
	}
	if s := c.cost().String(); s != "" {
		return " [" + s + "]"
	}
	return ""
}

// deliveries is "1 delivery" or "n deliveries".
func deliveries(n uint32) string {
	if n == 1 {
		return "1 delivery"
	}
	return strconv.FormatUint(uint64(n), 10) + " deliveries"
}

// plural is "n word" with an s when n != 1.
func plural(n int64, word string) string {
	s := strconv.FormatInt(n, 10) + " " + word
	if n != 1 {
		s += "s"
	}
	return s
}

// retainedFacts counts the log files nothing holds (inspectJSON.Retained)
// into out.
func retainedFacts(o *options, logs []replay.LogInfo, out *inspectJSON) {
	var oldest time.Time
	for _, l := range logs {
		if l.Held || l.Unfinished || l.Records == 0 {
			continue
		}
		out.RetainedFiles++
		out.RetainedBytes += l.End
		if fi, err := o.fs.Stat(l.Path); err == nil && (oldest.IsZero() || fi.ModTime().Before(oldest)) {
			oldest = fi.ModTime()
		}
	}
	out.OldestRetained = formatTime(oldest)
}
