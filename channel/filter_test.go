package channel

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// filterModel is what each group of filterConfig should hold: the bodies
// of the events its filter matches, in commit order, less those taken.
type filterModel map[string][]string

// filterGroups: "tags" takes tag x or y, "one" takes n == "1", "all"
// every event.
func filterGroups() []GroupConfig {
	return []GroupConfig{
		{Name: "tags", Filter: TagFilter("tag", "x", "y")},
		{Name: "one", Filter: `headers["n"] == "1"`, WhenFull: DropNewest},
		{Name: "all"},
	}
}

// modelMatch is filterGroups' filters written in Go.
func modelMatch(group string, h map[string]string) bool {
	switch group {
	case "tags":
		return h["tag"] == "x" || h["tag"] == "y"
	case "one":
		v, ok := h["n"]
		return ok && v == "1"
	}
	return true
}

func randomHeaders(r *rand.Rand) map[string]string {
	h := map[string]string{}
	if v := []string{"x", "y", "z", ""}[r.IntN(4)]; v != "" {
		h["tag"] = v
	}
	if v := []string{"0", "1", ""}[r.IntN(3)]; v != "" {
		h["n"] = v
	}
	if len(h) == 0 && r.IntN(2) == 0 {
		return nil
	}
	return h
}

// putRandom commits or rolls back random put transactions and records the
// committed ones in m.
func putRandom(t *testing.T, c *FileChannel, r *rand.Rand, m filterModel, seq *int) {
	t.Helper()
	for range 20 {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var evs []Event
		for range 1 + r.IntN(8) {
			e := Event{Headers: randomHeaders(r), Body: body(*seq)}
			*seq++
			if err := tx.Put(e); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
		}
		if r.IntN(5) == 0 {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			for _, g := range filterGroups() {
				if modelMatch(g.Name, e.Headers) {
					m[g.Name] = append(m[g.Name], string(e.Body))
				}
			}
		}
	}
}

// peekFiltered returns the bodies queued for the group, taking them all in
// one transaction rolled back.
func peekFiltered(t *testing.T, c *FileChannel, name string) []string {
	t.Helper()
	g, err := c.Group(name)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var out []string
	for {
		e, ok, err := tx.Take()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, string(e.Body))
	}
}

func checkModel(t *testing.T, c *FileChannel, m filterModel, when string) {
	t.Helper()
	for _, g := range filterGroups() {
		if got := peekFiltered(t, c, g.Name); !slices.Equal(got, m[g.Name]) {
			t.Fatalf("%s: group %q holds %d events %s, want %d %s", when, g.Name, len(got), short(got), len(m[g.Name]), short(m[g.Name]))
		}
	}
}

// TestFilterModel: random puts with random headers reach the groups whose
// filters match them, and the same queues come back after Close and Open,
// a crash, and a full replay (no checkpoint).
func TestFilterModel(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.TransactionCapacity = cfg.Capacity
	cfg.Groups = filterGroups()
	r := rand.New(rand.NewPCG(31, 1))
	m, seq := filterModel{}, 0
	c := mustOpen(t, cfg)
	for _, reopen := range []string{"close", "crash", "full replay"} {
		putRandom(t, c, r, m, &seq)
		for _, name := range []string{"tags", "one"} { // takers move the heads
			g, _ := c.Group(name)
			n := r.IntN(len(m[name]) + 1)
			wantEvents(t, takeWith(t, g.Begin, n, 10), m[name][:n])
			m[name] = m[name][n:]
		}
		checkModel(t, c, m, "live")
		switch reopen {
		case "close":
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		case "crash":
			crash(t, c)
		case "full replay":
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(cfg.CheckpointDir); err != nil {
				t.Fatal(err)
			}
		}
		c = mustOpen(t, cfg)
		checkModel(t, c, m, "after "+reopen)
	}
	st, _ := c.Group("tags")
	if s := st.Stats(); s.Filter != TagFilter("tag", "x", "y") {
		t.Fatalf("Stats().Filter = %q", s.Filter)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFilterCapacity: events a group's filter keeps out take no room in
// it, and a full Block group never holds up a Put it does not match.
func TestFilterCapacity(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.TransactionCapacity = 3
	cfg.Groups = []GroupConfig{{Name: "x", Capacity: 3, Filter: `headers["tag"] == "x"`}, {Name: "all"}}
	c := mustOpen(t, cfg)
	defer c.Close()
	put := func(tag string) error {
		tx, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Put(Event{Headers: map[string]string{"tag": tag}, Body: []byte(tag)}); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	for i := range 10 {
		if err := put("y"); err != nil {
			t.Fatalf("put %d of a filtered-out event: %v", i, err)
		}
	}
	for i := range 3 {
		if err := put("x"); err != nil {
			t.Fatalf("put %d of a matching event: %v", i, err)
		}
	}
	if err := put("y"); err != nil { // x is full: this one is not for it
		t.Fatalf("put of an event a full Block group does not match: %v", err)
	}
	if err := put("x"); !errors.Is(err, ErrChannelFull) {
		t.Fatalf("put of a matching event into a full Block group: %v, want ErrChannelFull", err)
	}
	g, _ := c.Group("x")
	if s := g.Stats(); s.Queued != 3 || s.FilteredOut != 11 {
		t.Fatalf("group x: %d queued, %d filtered out; want 3, 11", s.Queued, s.FilteredOut)
	}
	if all, _ := c.Group("all"); all.Len() != 14 {
		t.Fatalf("group all holds %d, want 14", all.Len())
	}
}

// TestBadFilter: Open and AddGroup refuse an expression that does not
// compile, is not bool, is too long or too costly, with ErrBadFilter
// naming the group and the position; Open creates nothing.
func TestBadFilter(t *testing.T) {
	for _, tc := range []struct{ expr, pos string }{
		{`headers["tag"] ==`, "1:18"},
		{"true &&\n  nope", "2:3"},
		{`headers["tag"]`, "1:1"}, // a string
		{`size(headers)`, "1:1"},  // an int
		{`headers.all(a, headers.all(b, headers.all(c, a + b + c != "")))`, "1:1"},
		{strings.Repeat("true && ", 600) + "true", "1:1"},
	} {
		cfg := testConfig(t, 1)
		cfg.Groups = []GroupConfig{{Name: "f", Filter: tc.expr}}
		_, err := Open(cfg)
		if !errors.Is(err, ErrBadFilter) || !strings.Contains(err.Error(), `group "f"`) || !strings.Contains(err.Error(), "at "+tc.pos) {
			t.Errorf("Open with filter %.40q: %v; want ErrBadFilter naming group \"f\" at %s", tc.expr, err, tc.pos)
		}
		if _, err := os.Stat(cfg.CheckpointDir); !os.IsNotExist(err) {
			t.Errorf("Open with filter %.40q created the checkpoint dir (%v)", tc.expr, err)
		}
		cfg.Groups = nil
		c := mustOpen(t, cfg)
		if _, err := c.AddGroup(GroupConfig{Name: "f", Filter: tc.expr}); !errors.Is(err, ErrBadFilter) {
			t.Errorf("AddGroup with filter %.40q: %v, want ErrBadFilter", tc.expr, err)
		}
		if names := c.GroupNames(); slices.Contains(names, "f") {
			t.Errorf("AddGroup with a bad filter created the group: %v", names)
		}
		c.Close()
	}
}

// TestFilterMissingHeader: a missing header is no match, never an error,
// whatever the expression does with it.
func TestFilterMissingHeader(t *testing.T) {
	for _, expr := range []string{`headers["x"] == "y"`, `!(headers["x"] == "y")`, `headers.x.startsWith("y")`, `has(headers.x)`} {
		f, err := compileFilter(expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []map[string]string{nil, {}, {"z": "y"}} {
			if m, _ := f.match(h); m {
				t.Errorf("%s matches %v", expr, h)
			}
		}
	}
}

// TestTagFilter: the tags are taken as they are, whatever they hold:
// quotes, backslashes or CEL cannot break or widen the expression.
func TestTagFilter(t *testing.T) {
	tags := []string{`TagA`, `a"b`, `a\`, `"] || true || ["`, `\"`, "new\nline", `'`, "é\x00"}
	expr := TagFilter("tag", tags...)
	f, err := compileFilter(expr)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	for _, tag := range tags {
		if m, _ := f.match(map[string]string{"tag": tag}); !m {
			t.Errorf("%s does not match tag %q", expr, tag)
		}
	}
	for _, other := range []string{"TagB", `a`, `ab`, `"`, `\`, ""} {
		if m, _ := f.match(map[string]string{"tag": other}); m {
			t.Errorf("%s matches tag %q", expr, other)
		}
	}
	odd := TagFilter(`t"] || true || headers["`, "v")
	g, err := compileFilter(odd)
	if err != nil {
		t.Fatalf("%s: %v", odd, err)
	}
	if m, _ := g.match(map[string]string{"t": "v"}); m {
		t.Errorf("%s matches an event without its header", odd)
	}
	if want := `headers["tag"] in ["TagA", "TagC"]`; TagFilter("tag", "TagA", "TagC") != want {
		t.Errorf("TagFilter = %s, want %s", TagFilter("tag", "TagA", "TagC"), want)
	}
}

// TestFilterRebuild: Rebuild (with Config.Groups nil: the logs' groups)
// keeps each group's filter and queue.
func TestFilterRebuild(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.TransactionCapacity = cfg.Capacity
	cfg.Groups = filterGroups()
	r := rand.New(rand.NewPCG(31, 2))
	m, seq := filterModel{}, 0
	c := mustOpen(t, cfg)
	putRandom(t, c, r, m, &seq)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Rebuild(cfg, RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Groups {
		if want := filterOfName(g.Name); g.Filter != want {
			t.Errorf("Rebuild reports group %q with filter %q, want %q", g.Name, g.Filter, want)
		}
	}
	c = mustOpen(t, cfg)
	checkModel(t, c, m, "after Rebuild")
	putRandom(t, c, r, m, &seq)
	checkModel(t, c, m, "puts after Rebuild")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func filterOfName(name string) string {
	for _, g := range filterGroups() {
		if g.Name == name {
			return g.Filter
		}
	}
	return ""
}

// TestFilterChangedAtOpen: a filter Config.Groups changes at Open applies
// to the events committed afterwards, and is kept (a full replay of the
// logs gives the same queue).
func TestFilterChangedAtOpen(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "g", Filter: `headers["k"] == "a"`}}
	put := func(c *FileChannel, v string) {
		tx, _ := c.Begin()
		if err := tx.Put(Event{Headers: map[string]string{"k": v}, Body: []byte(v)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	c := mustOpen(t, cfg)
	put(c, "a")
	put(c, "b")
	c.Close()
	cfg.Groups[0].Filter = `headers["k"] == "b"`
	c = mustOpen(t, cfg)
	put(c, "a")
	put(c, "b")
	want := []string{"a", "b"}
	if got := peekFiltered(t, c, "g"); !slices.Equal(got, want) {
		t.Fatalf("after the change: %v, want %v", got, want)
	}
	c.Close()
	if err := os.RemoveAll(cfg.CheckpointDir); err != nil {
		t.Fatal(err)
	}
	cfg.Groups = nil
	c = mustOpen(t, cfg)
	defer c.Close()
	if got := peekFiltered(t, c, "g"); !slices.Equal(got, want) {
		t.Fatalf("after a full replay: %v, want %v", got, want)
	}
	g, _ := c.Group("g")
	if f := g.Stats().Filter; f != `headers["k"] == "b"` {
		t.Fatalf("filter after a full replay: %q", f)
	}
}

// TestFilterChangedAtOpenCrash: the changed filter survives a crash right
// after Open (Open writes the groups record that says so).
func TestFilterChangedAtOpenCrash(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Groups = []GroupConfig{{Name: "g", Filter: `headers["k"] == "a"`}}
	c := mustOpen(t, cfg)
	c.Close()
	cfg.Groups[0].Filter = `headers["k"] == "b"`
	c = mustOpen(t, cfg)
	crash(t, c)
	cfg.Groups = nil
	c = mustOpen(t, cfg)
	defer c.Close()
	g, _ := c.Group("g")
	if f := g.Stats().Filter; f != `headers["k"] == "b"` {
		t.Fatalf("filter after a crash: %q", f)
	}
}

// BenchmarkFilterMatch is one evaluation of a tag filter: by the fast
// path (filterfast.go) and by CEL.
func BenchmarkFilterMatch(b *testing.B) {
	f, err := compileFilter(TagFilter("tag", "x", "y"))
	if err != nil {
		b.Fatal(err)
	}
	if f.fast == nil {
		b.Fatal("a tag filter is not on the fast path")
	}
	h := map[string]string{"tag": "y", "n": "1"}
	for _, path := range []struct {
		name  string
		match func(map[string]string) (bool, bool)
	}{{"fast", f.match}, {"cel", f.celMatch}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if m, _ := path.match(h); !m {
					b.Fatal("no match")
				}
			}
		})
	}
}

// BenchmarkFilterPut measures put commits of batch 100 × 1 KiB (NoSync:
// the CPU's part) to 4 named groups, unfiltered or each filtering on
// headers["tag"] (the events' tags t0-t3 drawn at random: each group
// matches a quarter). examples/bench's "filters" step compares the two durable,
// interleaved; this one is for -cpuprofile:
//
//	go test -run '^$' -bench FilterPut -benchtime 300000x -cpuprofile cpu.out ./channel/
func BenchmarkFilterPut(b *testing.B) {
	for _, filtered := range []bool{false, true} {
		b.Run(fmt.Sprintf("filtered=%v", filtered), func(b *testing.B) {
			cfg := groupsBenchConfig(b, 4, 2_000_000)
			cfg.NoSync = true
			for i := range cfg.Groups {
				if filtered {
					cfg.Groups[i].Filter = fmt.Sprintf(`headers["tag"] == "t%d"`, i)
				}
			}
			c := mustOpen(b, cfg)
			defer c.Close()
			gs := benchGroups(b, c)
			var evs [4]Event
			for i := range evs {
				evs[i] = Event{Headers: map[string]string{"tag": fmt.Sprintf("t%d", i)}, Body: make([]byte, 1024)}
			}
			rng := rand.New(rand.NewPCG(31, 4))
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 100 {
				tx, _ := c.Begin()
				for range min(100, b.N-i) {
					if err := tx.Put(evs[rng.IntN(len(evs))]); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				if gs[0].Len() > 1_500_000 {
					b.StopTimer()
					for _, g := range gs {
						drainGroupsBench(b, []*Group{g}, g.Len())
					}
					b.StartTimer()
				}
			}
		})
	}
}

// fastFormGen draws filter expressions of the forms filterfast.go
// evaluates without CEL, and headers to try them on.
type fastFormGen struct{ rng *rand.Rand }

var (
	fastGenNames  = []string{"tag", "k", "", "a b", "é", "\x00", `"q`, `x\y`}
	fastGenIdents = []string{"tag", "k"}
	fastGenValues = []string{"", "x", "y", "X", "é", "\u00ff", "\xff", "a\x00b", "TagA", "line\n", `'`}
)

func (g fastFormGen) pick(xs []string) string { return xs[g.rng.IntN(len(xs))] }

// lit writes v as a CEL string literal: double-quoted with escapes, or,
// where v allows, single-quoted or raw.
func (g fastFormGen) lit(v string) string {
	switch g.rng.IntN(4) {
	case 0:
		if !strings.ContainsAny(v, "'\\\n") && utf8.ValidString(v) {
			return "'" + v + "'"
		}
	case 1:
		if !strings.ContainsAny(v, "\"\\\n") && utf8.ValidString(v) {
			return `r"` + v + `"`
		}
	}
	return celQuote(v)
}

// expr returns headers["h"] == "x", "x" == headers["h"] or
// headers["h"] in [...] (headers.h for an identifier h, at times).
func (g fastFormGen) expr() string {
	r := "headers[" + celQuote(g.pick(fastGenNames)) + "]"
	if g.rng.IntN(3) == 0 {
		r = "headers." + g.pick(fastGenIdents)
	}
	switch g.rng.IntN(3) {
	case 0:
		return r + " == " + g.lit(g.pick(fastGenValues))
	case 1:
		return g.lit(g.pick(fastGenValues)) + " == " + r
	}
	var ls []string
	for range g.rng.IntN(4) {
		ls = append(ls, g.lit(g.pick(fastGenValues)))
	}
	return r + " in [" + strings.Join(ls, ", ") + "]"
}

// headers returns 0 to 3 random headers, or nil at times.
func (g fastFormGen) headers() map[string]string {
	if g.rng.IntN(10) == 0 {
		return nil
	}
	h := map[string]string{}
	for range g.rng.IntN(4) {
		h[g.pick(fastGenNames)] = g.pick(fastGenValues)
	}
	return h
}

// TestFilterFastPathAgrees: the forms filterfast.go evaluates without CEL
// give CEL's result, over random expressions of those forms (literals
// written with CEL's escapes, quotes and raw strings) and random headers
// (missing, empty, non-ASCII and invalid UTF-8 values).
func TestFilterFastPathAgrees(t *testing.T) {
	g := fastFormGen{rand.New(rand.NewPCG(31, 3))}
	matched := 0
	for range 300 {
		expr := g.expr()
		f, err := compileFilter(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if f.fast == nil {
			t.Fatalf("%s: not on the fast path", expr)
		}
		for range 50 {
			h := g.headers()
			// ok (no evaluation error) may differ: CEL folds x in [] to false.
			fm, _ := f.match(h)
			cm, _ := f.celMatch(h)
			if fm != cm {
				t.Fatalf("%s on %q: fast path %v, CEL %v", expr, h, fm, cm)
			}
			if fm {
				matched++
			}
		}
	}
	if matched < 100 {
		t.Errorf("%d of 15,000 evaluations matched: the test hardly tries a match", matched)
	}
}

// TestFilterFastPathForms: expressions near the fast path's forms but not
// of them stay with CEL.
func TestFilterFastPathForms(t *testing.T) {
	for _, expr := range []string{
		`headers["a"] == "x" || false`, `headers["a"] != "x"`, `has(headers.a)`, `!(headers["a"] == "x")`,
		`"x" in [headers["a"]]`, `headers["a"] in ["x", headers["b"]]`, `headers["a"] == headers["b"]`,
		`headers.a.startsWith("x")`, `size(headers) == 1`, `"x" == "x"`, `headers["a"] in {"x": "y"}`,
	} {
		f, err := compileFilter(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if f.fast != nil {
			t.Errorf("%s: on the fast path", expr)
		}
	}
}
