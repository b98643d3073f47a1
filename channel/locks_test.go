package channel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// channelLocks are the channel's locks whose every unlock is deferred
// (architecture.md §6), but in the functions earlyUnlocks lists.
var channelLocks = []string{"ckptMu", "commitMu", "queueMu"}

// earlyUnlocks are the functions, as file:function, allowed to unlock one
// of channelLocks without defer. architecture.md §6 lists the same
// functions (TestDocLockRules checks both ways).
var earlyUnlocks = []string{}

// lockFinding is one break of the lock rules: where, and in which function.
type lockFinding struct {
	pos  token.Position
	fn   string // file:function
	what string
}

// TestDocLockRules: every unlock of ckptMu, commitMu and queueMu in the
// channel's code is deferred, but in the functions architecture.md lists
// (and it lists exactly those); no log call (c.log, slog) stands between a
// queueMu.Lock and its unlock (best effort: lexically, in the function that
// locks; a deferred unlock covers the rest of that function).
func TestDocLockRules(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var early, logs []lockFinding
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		e, l := lockRuleBreaks(fset, name, f)
		early, logs = append(early, e...), append(logs, l...)
	}
	allowed := map[string]bool{}
	for _, fn := range earlyUnlocks {
		allowed[fn] = true
	}
	seen := map[string]bool{}
	for _, b := range early {
		seen[b.fn] = true
		if !allowed[b.fn] {
			t.Errorf("%s: %s in %s is not deferred: move the locked part into a function that unlocks with defer, or list %s in architecture.md §6 and earlyUnlocks with the reason", b.pos, b.what, b.fn, b.fn)
		}
	}
	for _, fn := range earlyUnlocks {
		if !seen[fn] {
			t.Errorf("earlyUnlocks lists %s, which unlocks nothing early now: drop it here and in architecture.md §6", fn)
		}
	}
	for _, b := range logs {
		t.Errorf("%s: %s in %s runs under queueMu: log after the unlock", b.pos, b.what, b.fn)
	}

	doc, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	listed := docEarlyUnlocks(string(doc))
	if listed == nil {
		t.Fatalf("%s has no paragraph starting %q", architectureDoc, earlyUnlocksTitle)
	}
	want := slices.Clone(earlyUnlocks)
	sort.Strings(want)
	if !slices.Equal(listed, want) {
		t.Errorf("%s §6 lists the unlocks that are not deferred as %q; the code has %q", architectureDoc, listed, want)
	}
}

// earlyUnlocksTitle opens the paragraph of architecture.md §6 that lists
// the functions that unlock a channel lock without defer, each as
// `function` (`channel/file.go`).
const earlyUnlocksTitle = "**Unlocks that are not deferred.**"

// docEarlyUnlocks returns, sorted, the file:function pairs the paragraph
// earlyUnlocksTitle names, or nil without such a paragraph.
func docEarlyUnlocks(doc string) []string {
	i := strings.Index(doc, earlyUnlocksTitle)
	if i < 0 {
		return nil
	}
	para := doc[i:]
	if j := strings.Index(para, "\n\n"); j >= 0 {
		para = para[:j]
	}
	if j := strings.Index(para, "\n- "); j >= 0 {
		para = para[:j]
	}
	out := []string{}
	re := regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_.]*)` \\(`channel/([a-z_]+\\.go)`")
	for _, m := range re.FindAllStringSubmatch(para, -1) {
		out = append(out, m[2]+":"+m[1])
	}
	sort.Strings(out)
	return out
}

// lockRuleBreaks returns file f's unlocks of channelLocks that are not
// deferred, and its log calls between a queueMu.Lock and its unlock.
func lockRuleBreaks(fset *token.FileSet, name string, f *ast.File) (early, logs []lockFinding) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		fn := name + ":" + fd.Name.Name
		deferred := map[*ast.CallExpr]bool{}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if ds, ok := n.(*ast.DeferStmt); ok {
				deferred[ds.Call] = true
			}
			return true
		})
		// The innermost function body around each node, for the end of
		// a region that a deferred unlock closes.
		var bodies []*ast.BlockStmt
		var regions [][2]token.Pos
		var calls []*ast.CallExpr
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				bodies = append(bodies, n.Body)
				ast.Inspect(n.Body, visit)
				bodies = bodies[:len(bodies)-1]
				return false
			case *ast.CallExpr:
				calls = append(calls, n)
				lock, op := lockCall(n)
				if lock == "" {
					return true
				}
				if (op == "Unlock" || op == "RUnlock") && !deferred[n] && slices.Contains(channelLocks, lock) {
					early = append(early, lockFinding{fset.Position(n.Pos()), fn, lock + "." + op + "()"})
				}
				if lock == "queueMu" && op == "Lock" {
					regions = append(regions, [2]token.Pos{n.End(), queueMuEnd(bodies[len(bodies)-1], n, deferred)})
				}
			}
			return true
		}
		bodies = append(bodies, fd.Body)
		ast.Inspect(fd.Body, visit)
		for _, call := range calls {
			what := logCall(call)
			if what == "" {
				continue
			}
			for _, r := range regions {
				if call.Pos() > r[0] && call.Pos() < r[1] {
					logs = append(logs, lockFinding{fset.Position(call.Pos()), fn, what})
					break
				}
			}
		}
	}
	return early, logs
}

// lockCall returns the lock and the method of a call x.….lock.op() of a
// method named Lock, Unlock, RLock or RUnlock, or "".
func lockCall(call *ast.CallExpr) (lock, op string) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	switch sel.Sel.Name {
	case "Lock", "Unlock", "RLock", "RUnlock":
	default:
		return "", ""
	}
	switch x := sel.X.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name, sel.Sel.Name
	case *ast.Ident:
		return x.Name, sel.Sel.Name
	}
	return "", ""
}

// queueMuEnd returns where the queueMu section that lock starts ends in
// body: at the first unlock of queueMu after it that is not deferred, else
// (a deferred unlock) at the end of body.
func queueMuEnd(body *ast.BlockStmt, lock *ast.CallExpr, deferred map[*ast.CallExpr]bool) token.Pos {
	end := body.End()
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || call.Pos() <= lock.Pos() || call.Pos() >= end || deferred[call] {
			return true
		}
		if l, op := lockCall(call); l == "queueMu" && op == "Unlock" {
			end = call.Pos()
		}
		return true
	})
	return end
}

// logCall names a call to the channel's logger (x.log.M) or to package
// slog's functions, or returns "".
func logCall(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	switch x := sel.X.(type) {
	case *ast.SelectorExpr:
		if x.Sel.Name == "log" {
			return "log." + sel.Sel.Name
		}
	case *ast.Ident:
		if x.Name == "slog" {
			return "slog." + sel.Sel.Name
		}
	}
	return ""
}

// TestDocLockRulesCatches: the check of TestDocLockRules finds an early
// unlock and a log call under queueMu, and passes the helper pattern.
func TestDocLockRulesCatches(t *testing.T) {
	const src = `package channel
func (c *FileChannel) early() {
	c.queueMu.Lock()
	c.log.Warn("under")
	c.queueMu.Unlock()
	c.log.Warn("after")
}
func (c *FileChannel) rlocked() {
	c.commitMu.RLock()
	c.commitMu.RUnlock()
}
func (c *FileChannel) helper() int {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return 1
}
func (c *FileChannel) deferredLog() {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	func() { slog.Info("still under") }()
}
func (c *FileChannel) caller() {
	_ = c.helper()
	c.log.Info("no lock")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	early, logs := lockRuleBreaks(fset, "x.go", f)
	var got []string
	for _, b := range early {
		got = append(got, "early "+b.fn+" "+b.what)
	}
	for _, b := range logs {
		got = append(got, "log "+b.fn+" "+b.what)
	}
	want := []string{
		"early x.go:early queueMu.Unlock()",
		"early x.go:rlocked commitMu.RUnlock()",
		"log x.go:early log.Warn",
		"log x.go:deferredLog slog.Info",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lockRuleBreaks found %q, want %q", got, want)
	}
}
