package gateprom_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/retrygate/retrygate/classify"
)

// The observer keeps classify.Reasons as label values and folds every
// other code into "other"; classify.Reasons is written by hand, so this
// reads classify's sources: a new Reason constant missing from the list
// fails here (its label would silently read "other").
func TestClassifyReasonsListsEveryCode(t *testing.T) {
	listed := map[string]int{}
	for _, r := range classify.Reasons() {
		listed[r]++
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "../../classify", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Reason") || !vs.Names[0].IsExported() {
					return true
				}
				lit, ok := vs.Values[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				v, _ := strconv.Unquote(lit.Value)
				found++
				if listed[v] != 1 {
					t.Errorf("classify.%s = %q is listed %d times in classify.Reasons, want once", vs.Names[0].Name, v, listed[v])
				}
				return true
			})
		}
	}
	if exp, got := found, len(classify.Reasons()); exp != got {
		t.Errorf("classify declares %d Reason constants, classify.Reasons lists %d codes", exp, got)
	}
	if found < 20 {
		t.Fatalf("found %d Reason constants in classify: the parse is broken", found)
	}
}
