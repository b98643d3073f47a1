package channel

import (
	"os"
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
