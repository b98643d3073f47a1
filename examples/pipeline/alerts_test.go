package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"go.yaml.in/yaml/v3"

	"github.com/flumego/filechannel/channel"
)

// The operations guide and the alerting rules name metrics by hand. These
// tests hold them to what the channel really registers, so a renamed or
// removed metric cannot leave a dashboard or an alert silently empty.
// (docs/ is not a Go package; the pipeline is the program that serves
// these metrics.)

const (
	operationsDoc = "../../docs/operations.md"
	alertsFile    = "../../docs/alerts.yml"
	dashboardFile = "../../docs/grafana-dashboard.json"
)

// registeredMetrics opens a channel on a fresh registry and returns its
// metric families by name. Its unnamed group has MaxDeliveries, and so a
// dead-letter group ("dlq"): the dead-letter metrics exist only for such
// groups, and a channel without them would not export them; the same for
// its filtered group and the filter's metric.
func registeredMetrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	c, err := channel.Open(channel.Config{
		Name:                 "docs",
		Registerer:           reg,
		CheckpointDir:        filepath.Join(dir, "checkpoint"),
		DataDirs:             []string{filepath.Join(dir, "data")},
		MinimumRequiredSpace: -1,
		Groups: []channel.GroupConfig{{MaxDeliveries: 5, LeaseTimeout: time.Minute, ExpireAfter: time.Hour, RetryDelays: []time.Duration{time.Second}},
			{Name: "filtered", Filter: `headers["x"] == "y"`}, {Name: "ordered", OrderKey: "k"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	if len(byName) < 30 {
		t.Fatalf("only %d metrics registered", len(byName))
	}
	return byName
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of the "## title" section of a markdown file.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

var metricName = regexp.MustCompile(`filechannel_[a-z_]+`)

// TestDocsNameOnlyRegisteredMetrics: every filechannel_* name in the
// operations guide, the alerting rules and the dashboard (its descriptions
// included) is a metric the channel registers, or a histogram's _bucket,
// _sum or _count series.
func TestDocsNameOnlyRegisteredMetrics(t *testing.T) {
	have := registeredMetrics(t)
	for _, path := range []string{operationsDoc, alertsFile, dashboardFile} {
		seen := 0
		for _, name := range metricName.FindAllString(readDoc(t, path), -1) {
			seen++
			if have[name] != nil {
				continue
			}
			ok := false
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(name, suffix); cut && have[base].GetType() == dto.MetricType_HISTOGRAM {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s names %s, which the channel does not register", path, name)
			}
		}
		if seen == 0 {
			t.Errorf("%s names no metric", path)
		}
	}
}

// TestMetricsTableIsComplete: the Metrics section of the operations guide
// has one row per registered metric, with its type and its labels besides
// channel_name.
func TestMetricsTableIsComplete(t *testing.T) {
	have := registeredMetrics(t)
	row := regexp.MustCompile("(?m)^\\| `(filechannel_[a-z_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")
	rows := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(section(t, readDoc(t, operationsDoc), "Metrics"), -1) {
		if rows[m[1]] != nil {
			t.Errorf("metrics table: %s has two rows", m[1])
		}
		rows[m[1]] = m[2:]
	}
	for name, mf := range have {
		r := rows[name]
		if r == nil {
			t.Errorf("metrics table: no row for %s", name)
			continue
		}
		if want := strings.ToLower(mf.GetType().String()); r[0] != want {
			t.Errorf("metrics table: %s is a %s, the table says %s", name, want, r[0])
		}
		var want []string
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			if lp.GetName() != "channel_name" {
				want = append(want, lp.GetName())
			}
		}
		var got []string
		for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(r[1], -1) {
			got = append(got, l[1])
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("metrics table: %s has labels %v besides channel_name, the table says %v", name, want, got)
		}
	}
	for name := range rows {
		if have[name] == nil {
			t.Errorf("metrics table: row for %s, which the channel does not register", name)
		}
	}
}

// TestAlertsFileMatchesGuide: docs/alerts.yml is the YAML block of the
// guide's "Alerts worth setting" section, so the two cannot drift, and
// every rule in it has an expression.
func TestAlertsFileMatchesGuide(t *testing.T) {
	file := readDoc(t, alertsFile)
	sec := section(t, readDoc(t, operationsDoc), "Alerts worth setting")
	_, block, ok := strings.Cut(sec, "```yaml\n")
	if !ok {
		t.Fatal(`"Alerts worth setting" has no yaml block`)
	}
	block, _, _ = strings.Cut(block, "```")
	if block != file {
		t.Errorf("the yaml block of \"Alerts worth setting\" differs from %s", alertsFile)
	}
	if strings.Contains(file, "\t") {
		t.Errorf("%s contains a tab, which YAML does not allow for indentation", alertsFile)
	}
	rules := readAlertRules(t)
	if len(rules) == 0 {
		t.Fatalf("%s has no rule", alertsFile)
	}
	for _, r := range rules {
		if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
			t.Errorf("%s: rule %q needs a name, an expr, a severity label and a summary", alertsFile, r.Alert)
		}
		if !strings.Contains(sec, "`"+r.Alert+"`") {
			t.Errorf("alert %s is not described in \"Alerts worth setting\"", r.Alert)
		}
	}
}

// alertRule is a Prometheus alerting rule, as rule files spell it.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// readAlertRules parses docs/alerts.yml; a key Prometheus does not know
// (a misspelt "annotations") fails the test.
func readAlertRules(t *testing.T) []alertRule {
	t.Helper()
	var file struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(readDoc(t, alertsFile)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var rules []alertRule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// The dashboard, as far as these tests read it. Every panel and target
// names its data source as the dashboard's DS_PROMETHEUS variable.
type (
	grafanaDashboard struct {
		Inputs []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			PluginID string `json:"pluginId"`
		} `json:"__inputs"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"` // a string, or {"query": "..."}
			} `json:"list"`
		} `json:"templating"`
	}
	grafanaPanel struct {
		ID         int                      `json:"id"`
		Type       string                   `json:"type"`
		Title      string                   `json:"title"`
		Datasource *grafanaDS               `json:"datasource"`
		Targets    []grafanaQuery           `json:"targets"`
		Panels     []grafanaPanel           `json:"panels"` // a collapsed row's
		GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
	}
	grafanaQuery struct {
		Expr       string     `json:"expr"`
		Datasource *grafanaDS `json:"datasource"`
	}
	grafanaDS struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
)

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	var d grafanaDashboard
	if err := json.Unmarshal([]byte(readDoc(t, dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// promqlMetrics returns the filechannel_* identifiers of a PromQL
// expression: its metric names, leaving out string literals (label values,
// regexps) and comments. A selector by __name__ is an error: the metric it
// names cannot be checked.
func promqlMetrics(expr string) ([]string, error) {
	var names []string
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			i = j + 1
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case '0' <= c && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++ // a number or a duration (5m), never a name
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			switch id := expr[i:j]; {
			case id == "__name__":
				return nil, fmt.Errorf("selects by __name__")
			case strings.HasPrefix(id, "filechannel_"):
				names = append(names, id)
			}
			i = j
		default:
			i++
		}
	}
	return names, nil
}

// exportedAs maps a series name to the metric the channel registers: a
// histogram's _bucket, _sum and _count series to the histogram; "" when
// the channel registers no such metric.
func exportedAs(have map[string]*dto.MetricFamily, name string) string {
	if have[name] != nil {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, cut := strings.CutSuffix(name, suffix); cut && have[base].GetType() == dto.MetricType_HISTOGRAM {
			return base
		}
	}
	return ""
}

// TestDashboardAndAlertsQueryRegisteredMetrics: every metric that an
// expression of docs/grafana-dashboard.json (its panels' queries and its
// template variables) or of docs/alerts.yml names is one the channel
// registers (a histogram through its series), and every expression names
// at least one. Every metric the channel registers is on the dashboard,
// but for the few listed here with the reason.
func TestDashboardAndAlertsQueryRegisteredMetrics(t *testing.T) {
	have := registeredMetrics(t)
	notOnDashboard := map[string]string{
		"filechannel_replay_records": "a count only useful beside the replay's duration when investigating a slow Open",
	}
	onDashboard := map[string]bool{}
	check := func(where, expr string, used map[string]bool) {
		names, err := promqlMetrics(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
		}
		if len(names) == 0 {
			t.Errorf("%s: %q names no filechannel metric", where, expr)
		}
		for _, n := range names {
			base := exportedAs(have, n)
			if base == "" {
				t.Errorf("%s: %q names %s, which the channel does not register", where, expr, n)
				continue
			}
			if used != nil {
				used[base] = true
			}
		}
	}
	for _, r := range readAlertRules(t) {
		check(alertsFile+": alert "+r.Alert, r.Expr, nil)
	}
	d := readDashboard(t)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("%s: variable %s: query %s: %v", dashboardFile, v.Name, v.Query, err)
			}
			q = obj.Query
		}
		check(dashboardFile+": variable "+v.Name, q, onDashboard)
	}
	n := 0
	for _, p := range dashboardPanels(d.Panels) {
		for _, q := range p.Targets {
			n++
			check(fmt.Sprintf("%s: panel %q", dashboardFile, p.Title), q.Expr, onDashboard)
		}
	}
	if n < 30 {
		t.Errorf("%s: only %d queries", dashboardFile, n)
	}
	for name := range have {
		_, left := notOnDashboard[name]
		if onDashboard[name] == left {
			if left {
				t.Errorf("%s shows %s, listed as left off it", dashboardFile, name)
			} else {
				t.Errorf("%s does not show %s: add a panel, or list it in notOnDashboard with the reason", dashboardFile, name)
			}
		}
	}
}

// dashboardPanels returns the panels, those of collapsed rows included,
// rows left out.
func dashboardPanels(ps []grafanaPanel) []grafanaPanel {
	var out []grafanaPanel
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, dashboardPanels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// TestDashboardImportable: the dashboard asks for its Prometheus as the
// input DS_PROMETHEUS and every panel and query uses it; the variables
// name (channel_name) and group exist, and every selector of a panel's
// query is filtered by them, so that choosing a channel or a group
// narrows every panel; panel ids are unique and the panels fit the
// 24-column grid.
func TestDashboardImportable(t *testing.T) {
	d := readDashboard(t)
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].Type != "datasource" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("%s: __inputs %+v; want the one Prometheus data source input DS_PROMETHEUS", dashboardFile, d.Inputs)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for name, typ := range map[string]string{"DS_PROMETHEUS": "datasource", "name": "query", "group": "query"} {
		if vars[name] != typ {
			t.Errorf("%s: variable %s is %q, want a %s variable", dashboardFile, name, vars[name], typ)
		}
	}
	ds := func(where string, s *grafanaDS) {
		if s == nil || s.Type != "prometheus" || s.UID != "${DS_PROMETHEUS}" {
			t.Errorf("%s: %s: data source %+v, want {prometheus ${DS_PROMETHEUS}}", dashboardFile, where, s)
		}
	}
	// A selector: a metric name and its matchers.
	selector := regexp.MustCompile(`(filechannel_[a-z_]+)(\{[^}]*\})?`)
	ids := map[int]string{}
	for _, p := range dashboardPanels(d.Panels) {
		where := fmt.Sprintf("panel %q", p.Title)
		if other, dup := ids[p.ID]; dup {
			t.Errorf("%s: %s and panel %q have the id %d", dashboardFile, where, other, p.ID)
		}
		ids[p.ID] = p.Title
		if g := p.GridPos; g.X < 0 || g.W <= 0 || g.H <= 0 || g.X+g.W > 24 {
			t.Errorf("%s: %s: gridPos %+v is off the 24-column grid", dashboardFile, where, g)
		}
		ds(where, p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("%s: %s has no query", dashboardFile, where)
		}
		for _, q := range p.Targets {
			ds(where+" query", q.Datasource)
			for _, m := range selector.FindAllStringSubmatch(q.Expr, -1) {
				if !strings.Contains(m[2], `channel_name=~"$name"`) {
					t.Errorf("%s: %s: %s is not filtered by channel_name=~\"$name\"", dashboardFile, where, m[0])
				}
				if strings.HasPrefix(m[1], "filechannel_group_") && !strings.Contains(m[2], `group=~"$group"`) {
					t.Errorf("%s: %s: %s is not filtered by group=~\"$group\"", dashboardFile, where, m[0])
				}
			}
		}
	}
}
