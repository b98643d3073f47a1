package channel

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// updateScenarios rewrites the expected outputs of testdata/recovery/*.txt
// with what the code does: go test ./channel -run TestRecoveryScenarios -update-scenarios
// Read the diff before committing it.
var updateScenarios = flag.Bool("update-scenarios", false, "rewrite the expected outputs of testdata/recovery/*.txt")

// TestRecoveryScenarios runs the scripts of testdata/recovery, one per
// path of the recovery procedure (docs/crash-safety.md §3), each in its own
// directories. A script is a list of blocks separated by blank lines; a
// block is command lines, a "----" line, and the output the commands must
// print, exactly ('#' starts a comment line outside outputs). The commands
// are those of scenario.run. When a script ends, the channel is closed and
// Verify must find no problem of a kind the script's last verify did not
// print (as mustOpen's cleanup does with expectProblems).
func TestRecoveryScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "recovery", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/recovery: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScenarioFile(t, file)
		})
	}
}

// scenarioBlock is one block of a script: its commands (with their line
// number) and the output it expects.
type scenarioBlock struct {
	comments []string // the comment lines before it
	line     int
	cmds     []string
	want     string
}

// parseScenario splits a script into its blocks.
func parseScenario(t *testing.T, file string, text string) (blocks []scenarioBlock, trailer []string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var b scenarioBlock
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case l == "----":
			if len(b.cmds) == 0 {
				t.Fatalf("%s:%d: ---- without a command", file, i+1)
			}
			var out []string
			for i+1 < len(lines) && lines[i+1] != "" {
				i++
				out = append(out, lines[i])
			}
			b.want = strings.Join(out, "\n")
			blocks = append(blocks, b)
			b = scenarioBlock{}
		case strings.HasPrefix(l, "#"):
			if len(b.cmds) > 0 {
				t.Fatalf("%s:%d: comment inside a block", file, i+1)
			}
			b.comments = append(b.comments, l)
		case strings.TrimSpace(l) == "":
			if len(b.cmds) > 0 {
				t.Fatalf("%s:%d: block without ----", file, i+1)
			}
			if len(b.comments) > 0 {
				b.comments = append(b.comments, "")
			}
		default:
			if len(b.cmds) == 0 {
				b.line = i + 1
			}
			b.cmds = append(b.cmds, l)
		}
	}
	if len(b.cmds) > 0 {
		t.Fatalf("%s:%d: block without ----", file, b.line)
	}
	return blocks, b.comments
}

// formatScenario writes blocks back as a script, with got as their outputs.
func formatScenario(blocks []scenarioBlock, got []string, trailer []string) []byte {
	var buf bytes.Buffer
	for i, b := range blocks {
		if i > 0 {
			buf.WriteString("\n")
		}
		for _, c := range b.comments {
			buf.WriteString(c + "\n")
		}
		for _, c := range b.cmds {
			buf.WriteString(c + "\n")
		}
		buf.WriteString("----\n")
		if got[i] != "" {
			buf.WriteString(got[i] + "\n")
		}
	}
	if len(trailer) > 0 {
		buf.WriteString("\n" + strings.Join(trailer, "\n") + "\n")
	}
	return buf.Bytes()
}

func runScenarioFile(t *testing.T, file string) {
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blocks, trailer := parseScenario(t, file, string(text))
	s := &scenario{t: t, txs: map[string]*Transaction{}}
	t.Cleanup(func() { // a script that failed halfway leaves it open
		if s.c != nil {
			s.c.Close()
		}
	})
	got := make([]string, len(blocks))
	for i, b := range blocks {
		var out []string
		for j, cmd := range b.cmds {
			lines, err := s.run(strings.Fields(cmd))
			if err != nil {
				t.Fatalf("%s:%d: %s: %v", file, b.line+j, cmd, err)
			}
			out = append(out, lines...)
		}
		got[i] = strings.Join(out, "\n")
		if got[i] != b.want && !*updateScenarios {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, b.line, strings.Join(b.cmds, "; "), got[i], b.want)
		}
	}
	s.finish()
	if *updateScenarios {
		if err := os.WriteFile(file, formatScenario(blocks, got, trailer), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scenario is the state of a running script: one channel's config, the
// channel when open, the named transactions and the next event number.
type scenario struct {
	t        *testing.T
	cfg      Config
	c        *FileChannel
	txs      map[string]*Transaction
	next     int                  // the number of the next event put
	problems []replay.ProblemKind // what the last verify found
}

// run runs one command and returns what it prints:
//
//	open [dirs=N] [backup] [max-file-size=N] [tx-capacity=N]
//	                       open the channel (the options set the config at
//	                       the first open); prints how it recovered
//	put N [batch=B] [tx=T] [size=S]
//	                       put events next..next+N-1: committed in batches of
//	                       B (default N), or in open transaction T; S pads
//	                       each body to S bytes
//	take N [batch=B] [group=G] [tx=T]
//	                       take up to N events and commit them in batches,
//	                       or take them in open transaction T; prints them
//	drain [group=G]        take every event; prints them
//	begin T [group=G]      begin transaction T
//	commit T, rollback T   end transaction T
//	add-group G            add consumer group G
//	checkpoint             write a checkpoint
//	inflight               print the puts spilled and the takes in flight
//	crash                  abandon the channel as a killed process does
//	close                  close the channel
//	damage event=N         flip a byte in the put record of event N
//	tear                   append a torn frame to the newest log file
//	remove-checkpoint      delete the main checkpoint's files
//	remove-backup          delete the backup checkpoint
//	corrupt-checkpoint     garble the main checkpoint's checkpoint.meta
//	verify                 run Verify (channel closed); prints its problems
func (s *scenario) run(f []string) ([]string, error) {
	cmd := f[0]
	args, err := parseScenarioArgs(f[1:])
	if err != nil {
		return nil, err
	}
	switch cmd {
	case "open":
		return s.open(args)
	case "damage", "tear", "remove-checkpoint", "remove-backup", "corrupt-checkpoint", "verify":
		return s.runOnFiles(cmd, args)
	}
	if s.c == nil {
		return nil, fmt.Errorf("%s needs the channel open", cmd)
	}
	switch cmd {
	case "put":
		return nil, s.put(args)
	case "take":
		return s.take(args)
	case "drain":
		args.n = 1 << 30
		return s.take(args)
	case "begin":
		begin, err := s.beginner(args.group)
		if err != nil {
			return nil, err
		}
		tx, err := begin()
		if err != nil {
			return nil, err
		}
		s.txs[args.name] = tx
		return nil, nil
	case "commit", "rollback":
		tx := s.txs[args.name]
		if tx == nil {
			return nil, fmt.Errorf("no transaction %q", args.name)
		}
		delete(s.txs, args.name)
		if cmd == "rollback" {
			return nil, tx.Rollback()
		}
		return nil, tx.Commit()
	case "add-group":
		_, err := s.c.AddGroup(GroupConfig{Name: args.name})
		return nil, err
	case "checkpoint":
		return nil, s.c.Checkpoint()
	case "inflight":
		st := s.c.Stats()
		return []string{fmt.Sprintf("in flight: %d puts spilled, %d takes", st.InflightPuts, st.InflightTakes)}, nil
	case "crash":
		crash(s.t, s.c)
		s.c, s.txs = nil, map[string]*Transaction{}
		return nil, nil
	case "close":
		err := s.c.Close()
		s.c, s.txs = nil, map[string]*Transaction{}
		return nil, err
	}
	return nil, fmt.Errorf("unknown command %q", cmd)
}

// runOnFiles runs the commands that work on the files of a closed or
// crashed channel.
func (s *scenario) runOnFiles(cmd string, args scenarioArgs) ([]string, error) {
	if s.c != nil {
		return nil, fmt.Errorf("%s needs the channel closed or crashed", cmd)
	}
	if s.cfg.CheckpointDir == "" {
		return nil, fmt.Errorf("%s before the first open", cmd)
	}
	switch cmd {
	case "damage":
		return nil, s.damage(args.event)
	case "tear":
		return nil, s.tear()
	case "remove-checkpoint":
		removeCheckpoint(s.t, s.cfg)
		return nil, nil
	case "remove-backup":
		if s.cfg.BackupCheckpointDir == "" {
			return nil, errors.New("no backup dir")
		}
		return nil, checkpoint.Remove(vfsOS(), s.cfg.BackupCheckpointDir)
	case "corrupt-checkpoint":
		return nil, os.WriteFile(filepath.Join(s.cfg.CheckpointDir, checkpoint.MetaName), []byte("garbage"), 0o600)
	case "verify":
		return s.verify()
	}
	return nil, fmt.Errorf("unknown command %q", cmd)
}

// scenarioArgs are a command's arguments: a bare number is n, a bare word
// name, key=value the others.
type scenarioArgs struct {
	n, batch, size, event int
	dirs                  int
	maxFileSize, txCap    int
	backup                bool
	name, group, tx       string
}

func parseScenarioArgs(f []string) (scenarioArgs, error) {
	a := scenarioArgs{event: -1}
	ints := map[string]*int{"n": &a.n, "batch": &a.batch, "size": &a.size, "event": &a.event,
		"dirs": &a.dirs, "max-file-size": &a.maxFileSize, "tx-capacity": &a.txCap}
	strs := map[string]*string{"group": &a.group, "tx": &a.tx}
	for _, w := range f {
		k, v, ok := strings.Cut(w, "=")
		switch {
		case !ok && w == "backup":
			a.backup = true
			continue
		case !ok && w[0] >= '0' && w[0] <= '9':
			k, v = "n", w
		case !ok:
			a.name = w
			continue
		}
		if p := strs[k]; p != nil {
			*p = v
			continue
		}
		p := ints[k]
		if p == nil {
			return a, fmt.Errorf("unknown argument %q", w)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return a, fmt.Errorf("bad number in %q", w)
		}
		*p = n
	}
	return a, nil
}

// open opens the channel and prints where it recovered from, what the
// replay read and found, and what each group holds.
func (s *scenario) open(a scenarioArgs) ([]string, error) {
	if s.c != nil {
		return nil, errors.New("channel already open")
	}
	if s.cfg.CheckpointDir == "" {
		s.cfg = testConfig(s.t, max(a.dirs, 1))
		if a.backup {
			s.cfg.BackupCheckpointDir = filepath.Join(filepath.Dir(s.cfg.CheckpointDir), "backup")
		}
		if a.maxFileSize > 0 {
			s.cfg.MaxFileSize = int64(a.maxFileSize)
		}
		if a.txCap > 0 {
			s.cfg.TransactionCapacity = a.txCap
		}
	}
	c, err := Open(s.cfg)
	if err != nil {
		return nil, err
	}
	s.c = c
	st := c.Stats()
	out := []string{
		"recovered from: " + st.RecoveredFrom,
		fmt.Sprintf("replayed: %d records, %d skipped", st.ReplayRecords, st.ReplaySkipped),
	}
	for _, v := range []struct {
		name string
		n    int64
	}{{"corrupt", st.ReplayCorrupt}, {"damaged transactions", st.ReplayDamagedTxs}, {"torn tails", st.TornTails}} {
		if v.n != 0 {
			out = append(out, fmt.Sprintf("%s: %d", v.name, v.n))
		}
	}
	groups := slices.Clone(st.Groups)
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	for _, g := range groups {
		name := g.Name
		if name == "" {
			name = `""`
		}
		out = append(out, fmt.Sprintf("group %s: %d queued", name, g.Queued))
	}
	return out, nil
}

func (s *scenario) put(a scenarioArgs) error {
	if a.n <= 0 {
		return errors.New("put needs a count")
	}
	ev := func() Event {
		i := s.next
		s.next++
		b := body(i)
		if len(b) < a.size {
			b = append(b, bytes.Repeat([]byte{'.'}, a.size-len(b))...)
		}
		return Event{Headers: map[string]string{"i": strconv.Itoa(i)}, Body: b}
	}
	if a.tx != "" {
		tx := s.txs[a.tx]
		if tx == nil {
			return fmt.Errorf("no transaction %q", a.tx)
		}
		for range a.n {
			if err := tx.Put(ev()); err != nil {
				return err
			}
		}
		return nil
	}
	batch := cmp0(a.batch, a.n)
	for done := 0; done < a.n; {
		tx, err := s.c.Begin()
		if err != nil {
			return err
		}
		for j := 0; j < batch && done < a.n; j, done = j+1, done+1 {
			if err := tx.Put(ev()); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// cmp0 is v, or def when v is 0.
func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// beginner returns the Begin of the channel or of group g.
func (s *scenario) beginner(g string) (func() (*Transaction, error), error) {
	if g == "" {
		return s.c.Begin, nil
	}
	grp, err := s.c.Group(g)
	if err != nil {
		return nil, err
	}
	return grp.Begin, nil
}

// take prints the numbers of the events it took, runs folded ("0-4 7").
func (s *scenario) take(a scenarioArgs) ([]string, error) {
	var took []int
	takeIn := func(tx *Transaction, n int) error {
		for range n {
			ev, ok, err := tx.Take()
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			i, err := strconv.Atoi(ev.Headers["i"])
			if err != nil {
				return fmt.Errorf("event without its number: %v", ev.Headers)
			}
			took = append(took, i)
		}
		return nil
	}
	if a.tx != "" {
		tx := s.txs[a.tx]
		if tx == nil {
			return nil, fmt.Errorf("no transaction %q", a.tx)
		}
		if err := takeIn(tx, a.n); err != nil {
			return nil, err
		}
		return []string{"took: " + foldRuns(took)}, nil
	}
	begin, err := s.beginner(a.group)
	if err != nil {
		return nil, err
	}
	batch := cmp0(a.batch, min(a.n, s.cfg.TransactionCapacity))
	for len(took) < a.n {
		tx, err := begin()
		if err != nil {
			return nil, err
		}
		before := len(took)
		if err := takeIn(tx, min(batch, a.n-len(took))); err != nil {
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
		if len(took) == before {
			break
		}
	}
	return []string{"took: " + foldRuns(took)}, nil
}

// foldRuns prints ns with runs of consecutive numbers folded: "0-4 7".
func foldRuns(ns []int) string {
	if len(ns) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ns[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, " ")
}

// logFiles returns the log files of every data dir, oldest first.
func (s *scenario) logFiles() ([]string, error) {
	var paths []string
	for _, d := range s.cfg.DataDirs {
		m, err := filepath.Glob(filepath.Join(d, "log-*"))
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			if _, ok := logfile.ParseLogName(filepath.Base(p)); ok {
				paths = append(paths, p)
			}
		}
	}
	sort.Slice(paths, func(i, j int) bool { return filepath.Base(paths[i]) < filepath.Base(paths[j]) })
	return paths, nil
}

// damage flips a byte inside the put record of event n (as
// TestCorruptRecordInTheMiddleCostsOnlyItsEvent does).
func (s *scenario) damage(n int) error {
	paths, err := s.logFiles()
	if err != nil {
		return err
	}
	for _, p := range paths {
		sc, err := logfile.NewScanner(vfsOS(), p, 0)
		if err != nil {
			return err
		}
		for sc.Next() {
			r := sc.Record()
			if r.Type == logfile.RecordPut && r.Headers["i"] == strconv.Itoa(n) {
				off := sc.Offset()
				if err := sc.Close(); err != nil {
					return err
				}
				flipAt(s.t, p, off+logfile.FrameHeaderSize+20)
				return nil
			}
		}
		if err := errors.Join(sc.Err(), sc.Close()); err != nil {
			return err
		}
	}
	return fmt.Errorf("no put record of event %d", n)
}

// tear appends half a frame to the newest log file, as a crash in the
// middle of a write leaves it.
func (s *scenario) tear() error {
	paths, err := s.logFiles()
	if err != nil || len(paths) == 0 {
		return fmt.Errorf("no log file to tear: %v", err)
	}
	appendBytes(s.t, paths[len(paths)-1], []byte("\x00\x00\x01\x00half a frame, then the power went"))
	return nil
}

// verify prints the problems Verify finds: kind, group, file and offset,
// and what they cost (Detail is left out: it names temporary paths).
func (s *scenario) verify() ([]string, error) {
	rep, err := Verify(s.cfg)
	if err != nil {
		return nil, err
	}
	out := []string{"would recover from: " + rep.RecoveredFrom}
	s.problems = s.problems[:0]
	for _, p := range rep.Problems {
		s.problems = append(s.problems, p.Kind)
		line := "problem: " + string(p.Kind)
		if p.Group != nil {
			line += " (" + p.Group.String() + ")"
		}
		if p.File != "" {
			line += " " + filepath.Base(p.File)
			if p.Offset >= 0 {
				line += " at " + strconv.FormatInt(p.Offset, 10)
			}
		}
		if c := p.Cost.String(); c != "" {
			line += " [" + c + "]"
		}
		out = append(out, line)
	}
	return out, nil
}

// finish closes the channel if the script left it open and fails the test
// if Verify finds a problem the script's last verify did not print.
func (s *scenario) finish() {
	if s.t.Failed() {
		return // the cleanup closes the channel
	}
	if s.c != nil {
		err := s.c.Close()
		s.c = nil
		if err != nil {
			s.t.Fatalf("Close at the end of the scenario: %v", err)
		}
	}
	if s.cfg.CheckpointDir == "" {
		return
	}
	rep, err := Verify(s.cfg)
	if err != nil {
		s.t.Fatalf("Verify at the end of the scenario: %v", err)
	}
	for _, p := range rep.Problems {
		if !slices.Contains(s.problems, p.Kind) {
			s.t.Errorf("Verify at the end of the scenario: a problem the script's last verify did not print: %s", p)
		}
	}
}
