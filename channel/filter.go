package channel

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"github.com/flumego/filechannel/logfile"
)

// A group's filter (GroupConfig.Filter) is a CEL expression of type bool
// over `headers`, a map(string, string). It is compiled once per
// expression (filterCache) and evaluated at each put commit, per event and
// filtered group, with no channel lock held (fanout.go). An evaluation
// error (a missing header read by headers["x"], a cost over the limit) is
// no match: the event does not reach the group, and is counted as
// filtered out; a panic in the evaluator is one too.

// ErrBadFilter is matched (errors.Is) by the error of Open and AddGroup for
// a GroupConfig.Filter that does not compile, is not of type bool, is
// longer than 4096 bytes or may cost too much to evaluate; the error names
// the group and the position (line:column) of the first problem. Nothing is
// created. Open also refuses so a filter stored with a group (a group
// Config.Groups does not list, added by AddGroup) that this build does not
// accept; listing the group in Config.Groups replaces it. ResetGroup of a
// group whose filter this build refuses fails with it too.
var ErrBadFilter = errors.New("filechannel: bad filter")

// Cost limits of a filter, in CEL's cost units: filterMaxEstimate bounds
// the cost that CEL estimates for an expression (headers of up to
// filterEstHeaders entries of filterEstLen bytes), filterCostLimit the
// actual cost of one evaluation (over it: no match).
const (
	filterMaxEstimate = 100_000
	filterCostLimit   = 1_000_000
	filterEstHeaders  = 64
	filterEstLen      = 1024
)

// filter is a compiled filter expression: fast, if not nil, evaluates it
// without CEL (filterfast.go).
type filter struct {
	expr string
	prg  cel.Program
	fast *headerMatch
}

var (
	filterEnvOnce sync.Once
	filterEnv     *cel.Env
	filterEnvErr  error
	filterCache   sync.Map // expression -> *filter
)

// celEnv returns the environment filters compile in.
func celEnv() (*cel.Env, error) {
	filterEnvOnce.Do(func() {
		filterEnv, filterEnvErr = cel.NewEnv(cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)))
	})
	return filterEnv, filterEnvErr
}

// compileFilter compiles expr (not empty), or returns why it is refused:
// an error matching ErrBadFilter with the position of the problem.
func compileFilter(expr string) (*filter, error) {
	if f, ok := filterCache.Load(expr); ok {
		return f.(*filter), nil
	}
	bad := func(line, col int, format string, args ...any) (*filter, error) {
		return nil, fmt.Errorf("%w at %d:%d: %s", ErrBadFilter, line, col, fmt.Sprintf(format, args...))
	}
	if len(expr) > logfile.MaxFilterLen {
		return bad(1, 1, "%d bytes, limit %d", len(expr), logfile.MaxFilterLen)
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadFilter, err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		e := iss.Errors()[0]
		return bad(e.Location.Line(), e.Location.Column()+1, "%s", e.Message)
	}
	if !ast.OutputType().IsExactType(types.BoolType) {
		return bad(1, 1, "of type %v, want bool", ast.OutputType())
	}
	est, err := env.EstimateCost(ast, costEstimator{})
	if err != nil {
		return bad(1, 1, "cost: %v", err)
	}
	if est.Max > filterMaxEstimate {
		return bad(1, 1, "may cost %d to evaluate, limit %d", est.Max, filterMaxEstimate)
	}
	prg, err := env.Program(ast, cel.CostLimit(filterCostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return bad(1, 1, "%v", err)
	}
	f, _ := filterCache.LoadOrStore(expr, &filter{expr: expr, prg: prg, fast: fastFilter(ast.NativeRep().Expr())})
	return f.(*filter), nil
}

// costEstimator sizes `headers` and the strings of an expression for CEL's
// cost estimate.
type costEstimator struct{}

func (costEstimator) EstimateSize(e checker.AstNode) *checker.SizeEstimate {
	if p := e.Path(); len(p) == 1 && p[0] == "headers" {
		return &checker.SizeEstimate{Min: 0, Max: filterEstHeaders}
	}
	if e.Type() != nil && e.Type().IsExactType(types.StringType) {
		return &checker.SizeEstimate{Min: 0, Max: filterEstLen}
	}
	return nil
}

func (costEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// match reports whether the event with headers h matches f: false on any
// evaluation error, a cost over the limit or a panic (ok false then).
func (f *filter) match(h map[string]string) (match, ok bool) {
	if f.fast != nil {
		return f.fast.match(h)
	}
	return f.celMatch(h)
}

// celMatch is match by CEL's evaluation.
func (f *filter) celMatch(h map[string]string) (match, ok bool) {
	defer func() {
		if recover() != nil {
			match, ok = false, false
		}
	}()
	if h == nil {
		h = noHeaders
	}
	out, _, err := f.prg.Eval(headersActivation{h})
	if err != nil {
		return false, false
	}
	b, isBool := out.Value().(bool)
	return b && isBool, isBool
}

// noHeaders is the headers of an event without any (never written).
var noHeaders = map[string]string{}

// headersActivation gives `headers` to an evaluation without the map of
// variables cel's Eval would otherwise need per event.
type headersActivation struct{ h map[string]string }

func (a headersActivation) ResolveName(name string) (any, bool) {
	if name == "headers" {
		return a.h, true
	}
	return nil, false
}

func (a headersActivation) Parent() interpreter.Activation { return nil }

// checkFilter is GroupConfig.check's part for the filter.
func checkFilter(g GroupConfig) error {
	if g.Filter == "" {
		return nil
	}
	if _, err := compileFilter(g.Filter); err != nil {
		return fmt.Errorf("%s: Filter: %w", groupLabel(g.Name), err)
	}
	return nil
}

// filterOf returns g's compiled filter, nil for none (every event). The
// filter was checked when the group was configured, and one that a groups
// record or the catalog gives by Open (keptGroup), unless an offline tool
// opened the channel (Config.keepGroups): one that does not compile then
// matches nothing.
func (g *groupState) filterOf() *filter {
	if g.cfg.Filter == "" {
		return nil
	}
	if f := g.compiled.Load(); f != nil && f.expr == g.cfg.Filter {
		return f
	}
	f, err := compileFilter(g.cfg.Filter)
	if err != nil {
		f = &filter{expr: g.cfg.Filter} // no program: matches nothing
	}
	g.compiled.Store(f)
	return f
}

// matches reports whether the event with headers h reaches g (its filter,
// if any, is true for h), counting it as filtered out when not.
func (g *groupState) matches(h map[string]string) bool {
	f := g.filterOf()
	if f == nil {
		return true
	}
	if f.prg == nil {
		return false
	}
	m, _ := f.match(h)
	return m
}

// filterKeep returns what a reset's history keeps for a group with filter
// expr: nil (every event) for "", else the events expr matches. An
// expression this build does not compile is ErrBadFilter.
func filterKeep(expr string) (func(map[string]string) bool, error) {
	if expr == "" {
		return nil, nil
	}
	f, err := compileFilter(expr)
	if err != nil {
		return nil, err
	}
	return func(h map[string]string) bool {
		m, _ := f.match(h)
		return m
	}, nil
}

// TagFilter returns the filter expression that matches the events whose
// header header is one of tags: RocketMQ's "TagA || TagC" subscription is
// TagFilter("tag", "TagA", "TagC"), which gives
// headers["tag"] in ["TagA", "TagC"]. The header and the tags are quoted,
// so that any valid UTF-8 string is taken as it is. No tags: a filter
// that matches nothing. A CEL string holds Unicode text only: a tag or
// header that is not valid UTF-8 is written with escapes that CEL reads
// as code points ("\xff" is U+00FF), so it never matches the raw bytes;
// route on such values with a header that holds valid UTF-8.
func TagFilter(header string, tags ...string) string {
	var b strings.Builder
	b.WriteString("headers[")
	b.WriteString(celQuote(header))
	b.WriteString("] in [")
	for i, t := range tags {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(celQuote(t))
	}
	b.WriteString("]")
	return b.String()
}

// celQuote returns s as a CEL string literal: strconv.Quote's escapes
// (\", \\, \n, \xNN, \uNNNN, \UNNNNNNNN) are all CEL escapes too.
func celQuote(s string) string { return strconv.Quote(s) }
