package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
)

// registeredMetrics opens a channel on a fresh registry and returns its
// metric families by name. Its unnamed group has MaxDeliveries, and so a
// dead-letter group ("dlq"): the dead-letter metrics exist only for such
// groups, and a channel without them would not export them.
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
		Groups:               []channel.GroupConfig{{MaxDeliveries: 5}},
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
// operations guide and the alerting rules is a metric the channel
// registers, or a histogram's _bucket, _sum or _count series.
func TestDocsNameOnlyRegisteredMetrics(t *testing.T) {
	have := registeredMetrics(t)
	for _, path := range []string{operationsDoc, alertsFile} {
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
	// No YAML parser is among the module's dependencies: check the shape.
	alerts := regexp.MustCompile(`(?m)^      - alert: (\w+)$`).FindAllStringSubmatch(file, -1)
	exprs := regexp.MustCompile(`(?m)^        expr: `).FindAllString(file, -1)
	if len(alerts) == 0 || len(alerts) != len(exprs) {
		t.Errorf("%s: %d alerts, %d expressions", alertsFile, len(alerts), len(exprs))
	}
	for _, a := range alerts {
		if !strings.Contains(sec, "`"+a[1]+"`") {
			t.Errorf("alert %s is not described in \"Alerts worth setting\"", a[1])
		}
	}
}
