package channel

import (
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// The filters TagFilter builds, and the plain header comparison of
// Flume's multiplexing selector, are recognised from the checked
// expression at compile time and evaluated on the headers map without
// CEL: a map lookup and string comparisons instead of an evaluation (and
// its allocations) per event and filtered group. The forms are
//
//	headers["h"] == "x"   "x" == headers["h"]   headers.h == "x"
//	headers["h"] in ["x", "y", ...]             headers.h in [...]
//
// with string literals only. CEL gives them the same result: reading a
// missing key fails the evaluation (no match), and a present value is
// compared with types.String equality, which is Go's string ==; the
// literals are taken from the checked AST, so CEL's escapes mean what
// they mean to CEL. TestFilterFastPathAgrees checks the two against each
// other over random headers and expressions.

// headerMatch is a filter of one of the forms above: true when the event
// has header and its value is one of values.
type headerMatch struct {
	header string
	values []string
}

// match is filter.match for m: ok is false where CEL's evaluation fails
// (the header is missing).
func (m *headerMatch) match(h map[string]string) (match, ok bool) {
	v, ok := h[m.header]
	if !ok {
		return false, false
	}
	for _, x := range m.values {
		if v == x {
			return true, true
		}
	}
	return false, true
}

// fastFilter returns the headerMatch that checked expression e is, or nil
// if e is not one of the forms.
func fastFilter(e celast.Expr) *headerMatch {
	if e.Kind() != celast.CallKind {
		return nil
	}
	c := e.AsCall()
	if c.IsMemberFunction() || len(c.Args()) != 2 {
		return nil
	}
	a, b := c.Args()[0], c.Args()[1]
	switch c.FunctionName() {
	case operators.Equals:
		if a.Kind() == celast.LiteralKind {
			a, b = b, a
		}
		h, ok := headerRead(a)
		x, okx := stringLit(b)
		if ok && okx {
			return &headerMatch{header: h, values: []string{x}}
		}
	case operators.In:
		h, ok := headerRead(a)
		if !ok || b.Kind() != celast.ListKind || len(b.AsList().OptionalIndices()) > 0 {
			return nil
		}
		m := &headerMatch{header: h, values: []string{}}
		for _, el := range b.AsList().Elements() {
			x, ok := stringLit(el)
			if !ok {
				return nil
			}
			m.values = append(m.values, x)
		}
		return m
	}
	return nil
}

// headerRead returns h if e reads headers["h"] or headers.h (not a has()
// test).
func headerRead(e celast.Expr) (string, bool) {
	switch e.Kind() {
	case celast.CallKind:
		c := e.AsCall()
		if c.FunctionName() != operators.Index || c.IsMemberFunction() || len(c.Args()) != 2 || !isHeaders(c.Args()[0]) {
			return "", false
		}
		return stringLit(c.Args()[1])
	case celast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() || !isHeaders(s.Operand()) {
			return "", false
		}
		return s.FieldName(), true
	}
	return "", false
}

// isHeaders reports whether e is the variable headers (at the top of a
// filter nothing can shadow it).
func isHeaders(e celast.Expr) bool {
	return e.Kind() == celast.IdentKind && e.AsIdent() == "headers"
}

// stringLit returns the value of e if it is a string literal.
func stringLit(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}
