package channel

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/flumego/filechannel/logfile"
)

// operationsDoc is the operations guide, whose numbers these tests hold to
// the code's.
const operationsDoc = "../docs/operations.md"

// TestDocTransactionCapacityLimit: every place docs/operations.md gives the
// TransactionCapacity limit ("8 388 600 (`channel.MaxTransactionCapacity`"),
// it is MaxTransactionCapacity, and no number near it is written there;
// the guide does not claim Open leaves it
// unchecked; Open refuses one more, and a take commit of that many events
// fits a record.
func TestDocTransactionCapacityLimit(t *testing.T) {
	b, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	re := regexp.MustCompile("([0-9][0-9 ,]*[0-9])\\s+\\(`channel\\.MaxTransactionCapacity`")
	found := re.FindAllStringSubmatch(doc, -1)
	if len(found) < 2 {
		t.Errorf("%s names the TransactionCapacity limit %d times as \"N (`channel.MaxTransactionCapacity`\"; want it in Options and in Sizing", operationsDoc, len(found))
	}
	for _, m := range found {
		n, err := strconv.Atoi(strings.NewReplacer(" ", "", ",", "").Replace(m[1]))
		if err != nil {
			t.Fatalf("%s: %q: %v", operationsDoc, m[0], err)
		}
		if n != MaxTransactionCapacity {
			t.Errorf("%s gives the TransactionCapacity limit as %d; MaxTransactionCapacity is %d", operationsDoc, n, MaxTransactionCapacity)
		}
	}
	// Any other spelling of a number near it (8 388 605 was the guide's
	// once) is the limit given wrong.
	for _, m := range regexp.MustCompile(`\b8[ ,]?3[0-9]{2}[ ,]?[0-9]{3}\b`).FindAllString(doc, -1) {
		if n, _ := strconv.Atoi(strings.NewReplacer(" ", "", ",", "").Replace(m)); n != MaxTransactionCapacity {
			t.Errorf("%s mentions %q, near the TransactionCapacity limit %d but not it", operationsDoc, m, MaxTransactionCapacity)
		}
	}
	if strings.Contains(doc, "does not check\nthis") || regexp.MustCompile("`Open` does not\\s+check\\s+this").MatchString(doc) {
		t.Errorf("%s says Open does not check the TransactionCapacity limit; it does", operationsDoc)
	}

	cfg := Config{CheckpointDir: "/cp", DataDirs: []string{"/d"}, Capacity: 2 * MaxTransactionCapacity}
	cfg.TransactionCapacity = MaxTransactionCapacity
	if _, err := cfg.withDefaults(); err != nil {
		t.Fatalf("TransactionCapacity = MaxTransactionCapacity refused: %v", err)
	}
	cfg.TransactionCapacity++
	if _, err := cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), "TransactionCapacity") {
		t.Fatalf("TransactionCapacity = MaxTransactionCapacity+1: %v; want it refused", err)
	}
	take := logfile.Record{Type: logfile.RecordTake, Pointers: make([]uint64, MaxTransactionCapacity)}
	if n := take.EncodedSize() - logfile.FrameHeaderSize; n > logfile.MaxPayloadSize {
		t.Fatalf("a take record of MaxTransactionCapacity pointers has a %d-byte payload, more than %d", n, logfile.MaxPayloadSize)
	}
}

// TestDocLinksResolve: every link between the docs (README.md and docs/*.md)
// names a file that exists, and its #anchor a heading of that file (as
// GitHub makes anchors: lower case, punctuation dropped, spaces to
// hyphens). A doc truncated or a heading renamed fails it.
func TestDocLinksResolve(t *testing.T) {
	files := []string{"../README.md"}
	docs, err := os.ReadDir("../docs")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if strings.HasSuffix(d.Name(), ".md") {
			files = append(files, "../docs/"+d.Name())
		}
	}
	link := regexp.MustCompile(`\]\(([A-Za-z0-9_./-]*\.md)?(#[^)\s]+)?\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		a := markdownAnchors(string(b))
		anchors[path] = a
		return a
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 1000 {
			t.Errorf("%s has %d bytes", f, len(b))
		}
		dir := f[:strings.LastIndex(f, "/")+1]
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, frag := f, strings.TrimPrefix(m[2], "#")
			if m[1] != "" {
				target = dir + m[1]
			}
			a := anchorsOf(target)
			if a == nil {
				t.Errorf("%s links to %s, which does not exist", f, m[1])
				continue
			}
			if frag != "" && !a[frag] {
				t.Errorf("%s links to %s#%s: no such heading", f, target, frag)
			}
		}
	}
}

// runbookBase is where the runbook_url of every alert in docs/alerts.yml
// points: the operations guide on GitHub.
const runbookBase = "https://github.com/flumego/filechannel/blob/main/docs/operations.md#"

// TestAlertRunbooksResolve: every rule of docs/alerts.yml has a
// runbook_url annotation pointing to a heading of docs/operations.md, as
// GitHub makes its anchors, and no two rules share one.
func TestAlertRunbooksResolve(t *testing.T) {
	b, err := os.ReadFile("../docs/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatalf("docs/alerts.yml: %v", err)
	}
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(doc))
	seen := map[string]string{}
	n := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			n++
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, runbookBase)
			switch {
			case !ok:
				t.Errorf("alert %s: runbook_url %q does not start with %s", r.Alert, url, runbookBase)
			case !anchors[anchor]:
				t.Errorf("alert %s: runbook_url %q: %s has no heading with the anchor %q", r.Alert, url, operationsDoc, anchor)
			case seen[anchor] != "":
				t.Errorf("alert %s: runbook_url %q is also %s's", r.Alert, url, seen[anchor])
			}
			seen[anchor] = r.Alert
		}
	}
	if n == 0 {
		t.Fatal("docs/alerts.yml has no rule")
	}
}

// markdownAnchors returns the anchors GitHub gives the headings of a
// markdown document: lines starting with 1 to 6 # outside fenced code
// blocks (a YAML comment in a code block is no heading); the second
// heading of one text gets "-1", the third "-2".
func markdownAnchors(doc string) map[string]bool {
	heading := regexp.MustCompile(`^#{1,6} (.+)$`)
	anchors := map[string]bool{}
	count := map[string]int{}
	fenced := false
	for line := range strings.Lines(doc) {
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		a := githubAnchor(m[1])
		if k := count[a]; k > 0 {
			anchors[a+"-"+strconv.Itoa(k)] = true
		} else {
			anchors[a] = true
		}
		count[a]++
	}
	return anchors
}

// githubAnchor is the anchor GitHub gives a heading.
func githubAnchor(h string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			sb.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// architectureDoc is the maintainers' map, whose names the tests hold to
// the code's.
const architectureDoc = "../docs/architecture.md"

// docNotIdentifiers are words architecture.md writes in backticks that
// look like Go identifiers but name no declaration of ours, each with the
// reason. Keep it short: a name that should exist is not excused here.
var docNotIdentifiers = map[string]string{
	// System calls and errno names, spelled as the kernel spells them.
	"pread": "a system call", "pwrite": "a system call", "fdatasync": "a system call",
	"flock": "a system call", "msync": "a system call", "posix_fadvise": "a system call",
	"ENOSPC": "an errno", "EIO": "an errno",
	"O_NOFOLLOW": "an open(2) flag", "POSIX_FADV_WILLNEED": "a posix_fadvise(2) advice",
	// Commands run from a shell.
	"fcreplay": "the tool's command name (replay/cmd/fcreplay)",
	"inspect":  "an fcreplay subcommand", "verify": "an fcreplay subcommand",
	"dump": "an fcreplay subcommand", "repair": "an fcreplay subcommand",
}

// docFileSuffixes end the file names the docs write in backticks
// (channel.id, in_use.lock, checkpoint.meta, logfile/set.go): such a token
// is a file, not a selector.
var docFileSuffixes = []string{".go", ".md", ".tmp", ".lock", ".id", ".meta", ".reserve", ".corrupt", ".yml", ".json", ".sh"}

// TestDocArchitectureNames: every backticked token of docs/architecture.md
// (outside fenced code blocks) that looks like a Go identifier or selector
// (Name, pkg.Name, Type.Method, Type.Field, pkg.Type.Field.Method, with or
// without call arguments) names something the module's Go source (tests
// aside) declares, a package of the module, a standard library package it
// imports (sync.RWMutex), or the value of a string constant (a file name
// such as checkpoint.InflightPutsName's "inflightputs"). Other file names,
// metric names (filechannel_…) and docNotIdentifiers are not names; a Go
// file the doc names (`logfile/set.go`, or `set.go` where the package is
// clear) exists. A function renamed, a field removed or a file split
// without the map following fails it.
func TestDocArchitectureNames(t *testing.T) {
	b, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	ix := indexGoSource(t, "..")
	checked := 0
	for _, tok := range docCodeSpans(string(b)) {
		if strings.HasSuffix(tok, ".go") && !ix.files[tok] && !ix.files[filepath.Base(tok)] {
			t.Errorf("%s names the file `%s`, which does not exist", architectureDoc, tok)
		}
		name, ok := docGoName(tok)
		if !ok {
			continue
		}
		checked++
		if !ix.resolves(strings.Split(name, ".")) {
			t.Errorf("%s names `%s`, which the code does not declare (renamed or removed? fix the doc)", architectureDoc, tok)
		}
	}
	if checked < 500 {
		t.Errorf("%s: only %d backticked Go names found; the extraction is broken", architectureDoc, checked)
	}
}

// TestDocArchitectureNamesCatchesStale: the check of
// TestDocArchitectureNames refuses names the code lost, and takes the
// forms the doc uses.
func TestDocArchitectureNamesCatchesStale(t *testing.T) {
	ix := indexGoSource(t, "..")
	for _, tc := range []struct {
		tok  string
		want bool
	}{
		{"buildQueue", false},         // became buildGroups
		{"LogState.TakesFrom", false}, // became LogState.Completes
		{"checkpoint.LogState.TakesFrom", false},
		{"logfile.NoSuchThing", false},
		{"Set.noSuchField", false},
		{"buildGroups", true},
		{"checkpoint.LogState.Completes", true},
		{"logfile.Set", true},
		{"Set.Reader(file)", true}, // a method, with arguments
		{"*logfile.NotRegularError", true},
		{"groupState.gate.acquire", true}, // field, then its type's method
		{"Problem.Lost", true},            // promoted from the embedded Cost
		{"sync.RWMutex", true},            // the standard library
		{"sync.NoSuchMutex", false},
	} {
		name, ok := docGoName(tc.tok)
		if !ok {
			t.Errorf("%q: not taken for a Go name", tc.tok)
			continue
		}
		if got := ix.resolves(strings.Split(name, ".")); got != tc.want {
			t.Errorf("%q resolves = %v, want %v", tc.tok, got, tc.want)
		}
	}
	for _, tok := range []string{"channel.id", "logfile/set.go", "filechannel_put_waits_total", "ENOSPC", "size == 0", "log-NNNNNNNNNN"} {
		if name, ok := docGoName(tok); ok {
			t.Errorf("%q taken for the Go name %q", tok, name)
		}
	}
}

// docCodeSpans returns the inline code spans of a markdown document,
// outside fenced code blocks.
func docCodeSpans(doc string) []string {
	span := regexp.MustCompile("`([^`\n]+)`")
	var out []string
	fenced := false
	for line := range strings.Lines(doc) {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range span.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// docGoName returns the Go name a code span writes (without a leading *
// or call arguments), and whether it is one to check.
func docGoName(tok string) (string, bool) {
	name := strings.TrimLeft(tok, "*&")
	if i := strings.IndexByte(name, '('); i > 0 && strings.HasSuffix(name, ")") {
		name = name[:i]
	}
	if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`).MatchString(name) {
		return "", false
	}
	if strings.HasPrefix(name, "filechannel_") || docNotIdentifiers[name] != "" {
		return "", false
	}
	for _, s := range docFileSuffixes {
		if strings.HasSuffix(name, s) {
			return "", false
		}
	}
	return name, true
}

// TestDocRecoverySteps: every step that docs/crash-safety.md §3 numbers
// (1 to 15, and 4b, 4c, 7b) has a row in architecture.md §5's table of
// Open's steps, and every row a step of §3; the row of each step that
// FileChannel.open runs names (in backticks) the function open.go's list
// of steps runs for it. A step added, or a function renamed, without the
// table following fails it.
func TestDocRecoverySteps(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cs := read("../docs/crash-safety.md")
	start, end := strings.Index(cs, "\n## 3. "), strings.Index(cs, "\n## 4. ")
	if start < 0 || end < start {
		t.Fatalf("crash-safety.md: no §3 before §4")
	}
	defined := map[string]bool{}
	var order []string
	for _, m := range regexp.MustCompile(`(?m)^(?:(\d+)\. |\s*\*\*(\d+[a-z])\. )`).FindAllStringSubmatch(cs[start:end], -1) {
		n := m[1] + m[2]
		defined[n] = true
		order = append(order, n)
	}
	if len(defined) < 18 || !defined["1"] || !defined["15"] || !defined["4c"] || !defined["7b"] {
		t.Fatalf("crash-safety.md §3 defines the steps %v; the extraction is broken", order)
	}

	arch := read(architectureDoc)
	rows := map[string]string{}
	inTable := false
	for line := range strings.Lines(arch) {
		if strings.HasPrefix(line, "| § 3 |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "| ---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		for _, n := range docStepRange(cell) {
			rows[n] = line
		}
		if len(docStepRange(cell)) == 0 {
			t.Errorf("%s: recovery table row %q: no step number", architectureDoc, cell)
		}
	}
	for _, n := range order {
		if rows[n] == "" {
			t.Errorf("crash-safety.md §3 defines step %s; %s's table of Open's steps has no row for it", n, architectureDoc)
		}
	}
	for n := range rows {
		if !defined[n] {
			t.Errorf("%s's table of Open's steps has a row for step %s, which crash-safety.md §3 does not define", architectureDoc, n)
		}
	}

	steps := regexp.MustCompile(`(?s)steps := \[\]func\(\*recovery\) error\{(.*?)\n\t\}`).FindStringSubmatch(read("open.go"))
	if steps == nil {
		t.Fatal("open.go: no list of steps in open")
	}
	ran := 0
	for _, m := range regexp.MustCompile(`c\.(\w+),\s*// ([^\n]*)`).FindAllStringSubmatch(steps[1], -1) {
		for _, n := range regexp.MustCompile(`\b\d+[a-z]?\b`).FindAllString(m[2], -1) {
			ran++
			if !defined[n] {
				t.Errorf("open.go runs %s as step %s, which crash-safety.md §3 does not define", m[1], n)
			}
			if row := rows[n]; row != "" && !strings.Contains(row, "`"+m[1]+"`") {
				t.Errorf("open.go runs %s for step %s; %s's row for it does not name `%s`: %s", m[1], n, architectureDoc, m[1], strings.TrimSpace(row))
			}
		}
	}
	if ran < 14 {
		t.Errorf("open.go's steps name %d step numbers; the extraction is broken", ran)
	}
}

// docStepRange returns the step numbers a table cell names: "4b", "12",
// or a range "2–3".
func docStepRange(cell string) []string {
	if m := regexp.MustCompile(`^(\d+)[–-](\d+)$`).FindStringSubmatch(cell); m != nil {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		var out []string
		for i := a; i <= b && i-a < 20; i++ {
			out = append(out, strconv.Itoa(i))
		}
		return out
	}
	if regexp.MustCompile(`^\d+[a-z]?$`).MatchString(cell) {
		return []string{cell}
	}
	return nil
}
