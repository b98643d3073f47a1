package channel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of the module may be, from its
// func line to its closing brace.
const maxFuncLines = 80

// longFuncsAllowed are the functions allowed past maxFuncLines, by
// "path/from/module/root.go:Name" (methods as "(*T).Name"), each with
// its reason.
var longFuncsAllowed = map[string]string{
	"channel/metrics.go:newMetrics": "a declarative table: one metric definition after another, no control flow to split",
}

// TestFuncLength: no non-test function of the main module is longer than
// maxFuncLines but those in longFuncsAllowed, and each of those is still
// long (an entry no longer needed is removed). Nested modules
// (examples/bench, scripts/tools) are not part of it.
func TestFuncLength(t *testing.T) {
	const root = ".."
	fset := token.NewFileSet()
	long := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxFuncLines {
				long[filepath.ToSlash(rel)+":"+funcName(fn)] = n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(long)) {
		if n := long[name]; longFuncsAllowed[name] == "" {
			t.Errorf("%s is %d lines, more than %d: split it into named steps", name, n, maxFuncLines)
		}
	}
	for name := range longFuncsAllowed {
		if _, ok := long[name]; !ok {
			t.Errorf("longFuncsAllowed names %s, which is not longer than %d lines (or gone): remove the entry", name, maxFuncLines)
		}
	}
}

// funcName is fn's name, "(*T).Name" or "(T).Name" for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	var recv func(ast.Expr) string
	recv = func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.StarExpr:
			return "*" + recv(e.X)
		case *ast.IndexExpr: // a generic type's receiver, T[P]
			return recv(e.X)
		case *ast.IndexListExpr:
			return recv(e.X)
		case *ast.Ident:
			return e.Name
		}
		return "?"
	}
	return "(" + recv(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}
