package metricspec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// Reasons lists classify's reason codes and gate's warnings by hand (a
// metric label set must be bounded); this test reads both packages'
// sources so the list cannot drift: a new code there fails here until it
// is added.
func TestReasonsCoverEveryCode(t *testing.T) {
	known := map[string]bool{}
	for _, r := range Reasons {
		known[r] = true
	}
	for dir, prefix := range map[string]string{"../../classify": "Reason", "../../gate": "Warn"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for name, p := range pkgs {
			if strings.HasSuffix(name, "_test") {
				continue
			}
			for fname, f := range p.Files {
				if strings.HasSuffix(fname, "_test.go") {
					continue
				}
				ast.Inspect(f, func(n ast.Node) bool {
					vs, ok := n.(*ast.ValueSpec)
					if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, prefix) || !vs.Names[0].IsExported() {
						return true
					}
					lit, ok := vs.Values[0].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						return true
					}
					v, _ := strconv.Unquote(lit.Value)
					found++
					if !known[v] {
						t.Errorf("%s.%s = %q is not in Reasons: its metric label would read %q", dir, vs.Names[0].Name, v, Other)
					}
					return true
				})
			}
		}
		if found < 4 {
			t.Fatalf("found %d %s* constants in %s: the parse is broken", found, prefix, dir)
		}
	}
}
