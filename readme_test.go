package retrygate_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README's Go code comes from Example tests: every ```go block that
// follows an <!-- example: FILE FUNC --> marker must appear, line by line
// and in order, in that function's body, so the README cannot drift from
// code that compiles and runs.
func TestReadmeCodeComesFromExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- example: (\\S+) (\\S+) -->\\s*```go\\n(.*?)```")
	blocks := re.FindAllSubmatch(readme, -1)
	if len(blocks) < 4 {
		t.Fatalf("found %d example-backed code blocks in README.md, want at least 4", len(blocks))
	}
	for _, b := range blocks {
		file, fn, code := string(b[1]), string(b[2]), string(b[3])
		body := funcBody(t, file, fn)
		if missing := notInOrder(code, body); missing != "" {
			t.Errorf("README block from %s %s: line %q is not in the example (in this order)", file, fn, missing)
		}
	}
	if m := regexp.MustCompile(`(?m)^[A-Z_]{6,}$`).Find(readme); m != nil {
		t.Errorf("README.md still has a placeholder: %s", m)
	}
}

func funcBody(t *testing.T, file, name string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name && fd.Body != nil {
			return string(src[fset.Position(fd.Body.Pos()).Offset:fset.Position(fd.Body.End()).Offset])
		}
	}
	t.Fatalf("%s has no func %s", file, name)
	return ""
}

// notInOrder returns the first non-blank line of code that does not occur,
// trimmed, in body after the previous one; "" when all do.
func notInOrder(code, body string) string {
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, string(bytes.TrimSpace([]byte(l))))
	}
	i := 0
	for _, want := range strings.Split(code, "\n") {
		want = strings.TrimSpace(want)
		if want == "" {
			continue
		}
		for i < len(lines) && lines[i] != want {
			i++
		}
		if i == len(lines) {
			return want
		}
		i++
	}
	return ""
}
