package channel

// The Go source index behind TestDocArchitectureNames: what the module
// declares, parsed with go/parser, and how a doc's selector resolves in it.

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// goIndex is what Go source declares: per package name, its package-level
// names and types; every type, method, field and parameter name.
type goIndex struct {
	pkgs    map[string]*goPackage // by package name ("main" merges the commands)
	types   map[string][]*goType  // by type name, of any package
	named   map[string][]string   // a field, parameter, receiver or variable name: its types' names ("" unknown)
	members map[string]bool       // every field and method name
	files   map[string]bool       // the Go files, by path from the root ("logfile/set.go") and by base name
	consts  map[string]bool       // the values of string constants (file names: "inflightputs")
	std     map[string]string     // a standard library package's name → its import path, as the source imports it
	stdIx   map[string]*goIndex   // the standard library packages indexed so far
}

type goPackage struct {
	decls map[string][]string // package-level name → its type's name ("" for a func or an unknown type)
	types map[string]*goType
}

type goType struct {
	members  map[string][]string // field or method → a field's type name ("" for a method)
	embedded []string
}

// indexGoSource parses the non-test Go files under root (testdata and
// hidden directories aside) into a goIndex.
func indexGoSource(t *testing.T, root string) *goIndex {
	t.Helper()
	ix := newGoIndex()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		ix.files[filepath.ToSlash(rel)], ix.files[d.Name()] = true, true
		return ix.addFile(path)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func newGoIndex() *goIndex {
	return &goIndex{pkgs: map[string]*goPackage{}, types: map[string][]*goType{}, named: map[string][]string{},
		members: map[string]bool{}, files: map[string]bool{}, consts: map[string]bool{}, std: map[string]string{}, stdIx: map[string]*goIndex{}}
}

// addFile adds one Go file's declarations.
func (ix *goIndex) addFile(path string) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	p := ix.pkgs[f.Name.Name]
	if p == nil {
		p = &goPackage{decls: map[string][]string{}, types: map[string]*goType{}}
		ix.pkgs[f.Name.Name] = p
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if !strings.Contains(strings.Split(path, "/")[0], ".") {
			ix.std[name] = path
		}
	}
	typeOf := func(fields *ast.FieldList) {
		if fields == nil {
			return
		}
		for _, fd := range fields.List {
			for _, n := range fd.Names {
				ix.named[n.Name] = append(ix.named[n.Name], goTypeName(fd.Type))
			}
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			typeOf(d.Recv)
			typeOf(d.Type.Params)
			typeOf(d.Type.Results)
			if d.Recv == nil {
				p.decls[d.Name.Name] = append(p.decls[d.Name.Name], "")
				ix.named[d.Name.Name] = append(ix.named[d.Name.Name], "")
				continue
			}
			recv := goTypeName(d.Recv.List[0].Type)
			ix.typeIn(p, recv).members[d.Name.Name] = []string{""}
			ix.members[d.Name.Name] = true
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					p.decls[s.Name.Name] = append(p.decls[s.Name.Name], s.Name.Name)
					ix.addType(ix.typeIn(p, s.Name.Name), s.Type)
				case *ast.ValueSpec:
					for _, v := range s.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING && d.Tok == token.CONST {
							val, _ := strconv.Unquote(lit.Value)
							ix.consts[val] = true
						}
					}
					for _, n := range s.Names {
						tn := goTypeName(s.Type)
						p.decls[n.Name] = append(p.decls[n.Name], tn)
						ix.named[n.Name] = append(ix.named[n.Name], tn)
					}
				}
			}
		}
	}
	return nil
}

// typeIn returns package p's type of that name, made on first use (a
// method may come before its type).
func (ix *goIndex) typeIn(p *goPackage, name string) *goType {
	gt := p.types[name]
	if gt == nil {
		gt = &goType{members: map[string][]string{}}
		p.types[name] = gt
		ix.types[name] = append(ix.types[name], gt)
	}
	return gt
}

// addType adds a struct's fields or an interface's methods to gt.
func (ix *goIndex) addType(gt *goType, expr ast.Expr) {
	var fields *ast.FieldList
	switch x := expr.(type) {
	case *ast.StructType:
		fields = x.Fields
	case *ast.InterfaceType:
		fields = x.Methods
	default:
		return
	}
	for _, fd := range fields.List {
		tn := goTypeName(fd.Type)
		if len(fd.Names) == 0 { // embedded
			if tn != "" {
				gt.embedded = append(gt.embedded, tn)
				gt.members[tn] = append(gt.members[tn], tn)
				ix.members[tn] = true
			}
			continue
		}
		for _, n := range fd.Names {
			if _, ok := fd.Type.(*ast.FuncType); ok {
				tn = ""
			}
			gt.members[n.Name] = append(gt.members[n.Name], tn)
			ix.members[n.Name] = true
			ix.named[n.Name] = append(ix.named[n.Name], tn)
		}
	}
}

// goTypeName is the name of the type an expression names, through
// pointers, slices, maps' values, channels and type arguments, or "".
func goTypeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return goTypeName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.ArrayType:
		return goTypeName(x.Elt)
	case *ast.MapType:
		return goTypeName(x.Value)
	case *ast.ChanType:
		return goTypeName(x.Value)
	case *ast.IndexExpr:
		return goTypeName(x.X)
	case *ast.IndexListExpr:
		return goTypeName(x.X)
	}
	return ""
}

// resolves reports whether the selector path names something declared:
// its head a package (of the module or a standard one it imports), a type,
// a declared name or a predeclared one; each further element a member of
// what the one before it names (any type's member when that is unknown).
func (ix *goIndex) resolves(path []string) bool {
	head, rest := path[0], path[1:]
	if p := ix.pkgs[head]; p != nil && len(rest) > 0 {
		for _, tn := range p.decls[rest[0]] {
			if ix.resolvesIn(p, tn, rest[1:]) {
				return true
			}
		}
	}
	if imp, ok := ix.std[head]; ok && len(rest) > 0 {
		for _, p := range ix.stdPackage(imp).pkgs {
			for _, tn := range p.decls[rest[0]] {
				if ix.stdPackage(imp).resolvesIn(p, tn, rest[1:]) {
					return true
				}
			}
		}
	}
	if len(rest) == 0 {
		if types.Universe.Lookup(head) != nil || ix.pkgs[head] != nil || ix.consts[head] {
			return true
		}
		if _, ok := ix.types[head]; ok {
			return true
		}
		for _, p := range ix.pkgs {
			if _, ok := p.decls[head]; ok {
				return true
			}
		}
		return len(ix.named[head]) > 0 || ix.members[head]
	}
	if _, ok := ix.types[head]; ok && ix.resolvesIn(nil, head, rest) {
		return true
	}
	for _, tn := range ix.named[head] {
		if ix.resolvesIn(nil, tn, rest) {
			return true
		}
	}
	return false
}

// resolvesIn reports whether rest is a path of members from type tn (of
// package p when p is not nil); "" is an unknown type, of which any member
// is taken.
func (ix *goIndex) resolvesIn(p *goPackage, tn string, rest []string) bool {
	if len(rest) == 0 {
		return true
	}
	var cands []*goType
	switch {
	case tn == "":
		if !ix.members[rest[0]] {
			return false
		}
		for _, gts := range ix.types {
			cands = append(cands, gts...)
		}
	case p != nil && p.types[tn] != nil:
		cands = []*goType{p.types[tn]}
	default:
		cands = ix.types[tn]
	}
	for _, gt := range cands {
		for _, mt := range ix.member(gt, rest[0], 0) {
			if ix.resolvesIn(nil, mt, rest[1:]) {
				return true
			}
		}
	}
	return false
}

// member returns the types of gt's member of that name (promoted through
// embedded types too); none if it has none.
func (ix *goIndex) member(gt *goType, name string, depth int) []string {
	if m, ok := gt.members[name]; ok {
		return m
	}
	if depth > 4 {
		return nil
	}
	var out []string
	for _, e := range gt.embedded {
		for _, et := range ix.types[e] {
			out = append(out, ix.member(et, name, depth+1)...)
		}
	}
	return out
}

// stdPackage returns the index of a standard library package, parsed from
// GOROOT on first use.
func (ix *goIndex) stdPackage(imp string) *goIndex {
	if s := ix.stdIx[imp]; s != nil {
		return s
	}
	s := newGoIndex()
	ix.stdIx[imp] = s
	files, _ := filepath.Glob(filepath.Join(build.Default.GOROOT, "src", imp, "*.go"))
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			_ = s.addFile(f) // an unreadable file leaves names out: the check fails, not passes
		}
	}
	return s
}
