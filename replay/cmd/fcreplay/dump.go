package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/flumego/filechannel/channel"
	"github.com/flumego/filechannel/replay"
)

// dumpFlags are dump's own flags.
type dumpFlags struct {
	skip, limit, maxBody int
	group                string
	keysFile, keysEnv    string // the keys of encrypted log files
}

func newDumpCmd(o *options) *cobra.Command {
	var df dumpFlags
	cmd := &cobra.Command{
		Use:   "dump",
		Short: "List the queued events in order without consuming them (read-only)",
		Long: `dump recovers the queue as the channel would on open (from the checkpoint, else
the backup, else a full replay of the logs) without writing anything, and lists
the events of one consumer group (--group NAME; the unnamed group by default) in
the order its takes would return them, events taken by uncommitted transactions
first. A name the channel has no group of is an error naming its groups ('fcreplay
inspect' lists them too).

Text output: one line per event, "INDEX POINTER id=ID time=TIME {HEADERS} BODY",
the body quoted as a Go string and cut after --max-body bytes. ID is the event's
id (Event.ID: 'fcreplay reset --to after:ID' starts a group after it), TIME when
its put committed (RFC 3339, UTC; absent for events of log files older than
format version 7). With --json: one JSON object per line, {"index": 0, "pointer":
"1:16", "id": "42", "time": "...", "headers": {...}, "body": "..."}, the body in
base64 (as encoding/json writes []byte). In a group with MaxDeliveries each
event also has its delivery count, how many times the group delivered it
without a committed take ("INDEX POINTER deliveries=N {HEADERS} BODY" in text,
"deliveries": N in JSON). An event waiting for its retry delay also has the
time it is due ("due=TIME" in text, "due" in JSON). A dead-letter group is
listed like any group. An
event that does not read back is listed with its error instead ("DAMAGED: ..."
in text, "error" in JSON), and the exit code is then 1. A summary goes to
stderr.

Events in encrypted log files need their keys: --keys-file PATH (a key file of
mode 0600, as channel.KeysFromFile reads) or --keys-env NAME (the variable
channel.KeysFromEnv reads). Without them such events are listed with the error
"the event is encrypted". 'fcreplay inspect' shows the key id of each file;
verify, inspect and repair need no key.`,
		Example: `  fcreplay dump --checkpoint-dir /var/lib/app/fc/checkpoint --data-dirs /var/lib/app/fc/data --limit 10
  fcreplay dump --checkpoint-dir ckpt --data-dirs data --json --skip 1000 --limit 100 > events.jsonl
  fcreplay dump --checkpoint-dir ckpt --data-dirs data --group audit --limit 10`,
		Args: cobra.NoArgs,
		RunE: runner(o, func(*cobra.Command) error { return runDump(o, df) }),
	}
	f := cmd.Flags()
	f.IntVar(&df.skip, "skip", 0, "skip the first N queued events")
	f.IntVar(&df.limit, "limit", -1, "list at most N events (-1: all)")
	f.IntVar(&df.maxBody, "max-body", 64, "text output: bytes of each body shown (0: all)")
	f.StringVar(&df.group, "group", "", "the consumer group whose queue to list (default: the unnamed group)")
	f.StringVar(&df.keysFile, "keys-file", "", "read the keys of encrypted log files from this key file (mode 0600)")
	f.StringVar(&df.keysEnv, "keys-env", "", "read the keys of encrypted log files from this environment variable")
	return cmd
}

// eventJSON is one line of dump --json.
type eventJSON struct {
	Index   int    `json:"index"`
	Pointer string `json:"pointer"`
	ID      string `json:"id,omitempty"`   // Event.ID's text
	Time    string `json:"time,omitempty"` // when its put committed, RFC 3339 (absent: unknown)
	// Deliveries is its delivery count, in a group with MaxDeliveries
	// (absent in the others).
	Deliveries *uint32 `json:"deliveries,omitempty"`
	// Due is when it is due again, waiting for its retry delay (RFC 3339);
	// absent when it does not wait.
	Due     string            `json:"due,omitempty"`
	Headers map[string]string `json:"headers"` // null for a damaged event
	Body    []byte            `json:"body"`    // base64; null for a damaged event
	Error   string            `json:"error,omitempty"`
}

func runDump(o *options, df dumpFlags) error {
	if err := df.check(); err != nil {
		return err
	}
	opts := o.verifyOptions()
	keys, err := df.keys()
	if err != nil {
		return err
	}
	opts.Keys = keys
	defer o.lockForRead()()
	bw := bufio.NewWriter(o.stdout)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	listed, damaged := 0, 0
	l, err := replay.ListEvents(opts, df.group, df.skip, df.limit, func(ev replay.Event) error {
		listed++
		counting := ev.Group.MaxDeliveries > 0
		if ev.Err != nil {
			damaged++
		}
		if o.json {
			return enc.Encode(newEventJSON(&ev, counting))
		}
		return writeEventLine(bw, &ev, counting, df.maxBody)
	})
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	var ne *replay.NoGroupError
	if errors.As(err, &ne) {
		return noGroupError(ne)
	}
	if err != nil {
		return err
	}
	return dumpSummary(o.stderr, df.group, &l, listed, damaged)
}

// check refuses flag values out of range.
func (df *dumpFlags) check() error {
	switch {
	case df.skip < 0:
		return usageErrorf("--skip %d is negative", df.skip)
	case df.limit < -1:
		return usageErrorf("--limit %d: use -1 for all", df.limit)
	case df.maxBody < 0:
		return usageErrorf("--max-body %d is negative", df.maxBody)
	}
	return nil
}

// keys reads the keys --keys-file or --keys-env names (nil: neither).
func (df *dumpFlags) keys() (channel.KeyProvider, error) {
	switch {
	case df.keysFile != "" && df.keysEnv != "":
		return nil, usageErrorf("--keys-file and --keys-env: give one")
	case df.keysFile != "":
		return channel.KeysFromFile(df.keysFile)
	case df.keysEnv != "":
		return channel.KeysFromEnv(df.keysEnv)
	}
	return nil, nil
}

// newEventJSON is ev's line of dump --json, with its delivery count when
// counting.
func newEventJSON(ev *replay.Event, counting bool) eventJSON {
	e := eventJSON{Index: ev.Index, Pointer: ev.Pointer.String(), ID: ev.ID, Time: eventTime(ev), Error: errString(ev.Err)}
	if counting {
		e.Deliveries = &ev.Deliveries
	}
	if ev.Due != 0 {
		e.Due = time.Unix(0, ev.Due).UTC().Format(time.RFC3339Nano)
	}
	if ev.Err == nil {
		e.Headers, e.Body = ev.Headers, ev.Body
		if e.Headers == nil {
			e.Headers = map[string]string{}
		}
		if e.Body == nil {
			e.Body = []byte{}
		}
	}
	return e
}

// dumpSummary writes dump's summary line to w and returns problemsFound
// when an event did not read back.
func dumpSummary(w io.Writer, group string, l *replay.Listing, listed, damaged int) error {
	fmt.Fprintf(w, "fcreplay: listed %d of %d queued events", listed, l.Queued)
	switch {
	case l.Group.DeadLetterGroup:
		fmt.Fprintf(w, " of dead-letter group %q", group)
	case group != "":
		fmt.Fprintf(w, " of group %q", group)
	}
	if damaged > 0 {
		verb := "do"
		if damaged == 1 {
			verb = "does"
		}
		fmt.Fprintf(w, "; %d %s not read back\n", damaged, verb)
		return problemsFound
	}
	fmt.Fprintln(w)
	return nil
}

// noGroupError is dump's usage error for a group the channel does not
// have: it names the groups it has.
func noGroupError(e *replay.NoGroupError) error {
	names := make([]string, 0, len(e.Groups))
	for _, g := range e.Groups {
		if g.ID == 0 {
			names = append(names, "the unnamed group (no --group)")
		} else {
			names = append(names, strconv.Quote(g.Name))
		}
	}
	has := "none"
	if len(names) > 0 {
		has = strings.Join(names, ", ")
	}
	if e.Name == "" {
		return usageErrorf("the channel has no unnamed group: name one of its consumer groups with --group (its groups: %s)", has)
	}
	return usageErrorf("--group %q: the channel has no consumer group of that name (its groups: %s)", e.Name, has)
}

// eventTime is ev's commit time in RFC 3339 (UTC, nanoseconds), "" when
// unknown.
func eventTime(ev *replay.Event) string {
	if ev.Time.IsZero() {
		return ""
	}
	return ev.Time.UTC().Format(time.RFC3339Nano)
}

// writeEventLine writes "INDEX POINTER {HEADERS} BODY" for one event, with
// "deliveries=N" after the pointer in a group that counts deliveries.
func writeEventLine(w io.Writer, ev *replay.Event, counting bool, maxBody int) error {
	prefix := fmt.Sprintf("%d %v", ev.Index, ev.Pointer)
	if ev.ID != "" {
		prefix += " id=" + ev.ID
	}
	if t := eventTime(ev); t != "" {
		prefix += " time=" + t
	}
	if counting {
		prefix += " deliveries=" + strconv.FormatUint(uint64(ev.Deliveries), 10)
	}
	if ev.Due != 0 {
		prefix += " due=" + time.Unix(0, ev.Due).UTC().Format(time.RFC3339Nano)
	}
	if ev.Err != nil {
		_, err := fmt.Fprintf(w, "%s DAMAGED: %v\n", prefix, ev.Err)
		return err
	}
	_, err := fmt.Fprintf(w, "%s %s %s\n", prefix, formatHeaders(ev.Headers), formatBody(ev.Body, maxBody))
	return err
}

// formatHeaders is {k=v, k=v} in key order, quoting what needs it.
func formatHeaders(h map[string]string) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIfNeeded(k))
		b.WriteByte('=')
		b.WriteString(quoteIfNeeded(h[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// quoteIfNeeded quotes s as a Go string if it is empty or holds a space,
// a separator of formatHeaders, a quote or a character that is not
// printable.
func quoteIfNeeded(s string) string {
	if s == "" || strings.IndexFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r) || unicode.IsSpace(r) || strings.ContainsRune(`{}=,"\`, r)
	}) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// formatBody quotes body as a Go string, cut after limit bytes (0: never),
// with its length when cut.
func formatBody(body []byte, limit int) string {
	if limit == 0 || len(body) <= limit {
		return strconv.Quote(string(body))
	}
	return strconv.Quote(string(body[:limit])) + "... (" + strconv.Itoa(len(body)) + " bytes)"
}
