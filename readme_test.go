package retrygate_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Go code of the README and of docs/*.md comes from tested code:
// every ```go block that follows an <!-- example: FILE NAME --> marker
// must appear, line by line and in order, in the body of FILE's func NAME
// (or, for a type NAME, in its declaration and methods); a block that
// follows <!-- program: FILE --> is FILE whole, a program that builds and
// whose test runs it. So the docs cannot drift from code that compiles and
// runs, and the Quickstart pastes whole into a program.
func TestReadmeCodeComesFromExamples(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	least := map[string]int{"README.md": 4, "docs/operating.md": 2}
	for _, doc := range append(docs, "README.md") {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile("(?s)<!-- example: (\\S+) (\\S+) -->\\s*```go\\n(.*?)```")
		blocks := re.FindAllSubmatch(text, -1)
		if len(blocks) < least[doc] {
			t.Fatalf("found %d example-backed code blocks in %s, want at least %d", len(blocks), doc, least[doc])
		}
		for _, b := range blocks {
			file, name, code := string(b[1]), string(b[2]), string(b[3])
			if missing := notInOrder(code, declSource(t, file, name)); missing != "" {
				t.Errorf("%s block from %s %s: line %q is not in the example (in this order)", doc, file, name, missing)
			}
		}
		programs := regexp.MustCompile("(?s)<!-- program: (\\S+) -->\\s*```go\\n(.*?)```").FindAllSubmatch(text, -1)
		for _, p := range programs {
			src, err := os.ReadFile(string(p[1]))
			if err != nil {
				t.Fatal(err)
			}
			if string(p[2]) != string(src) {
				t.Errorf("%s: the program block is not %s, whole", doc, p[1])
			}
		}
		if n := strings.Count(string(text), "```go"); n != len(blocks)+len(programs) {
			t.Errorf("%s has %d ```go blocks, %d of them backed by an example or a program", doc, n, len(blocks)+len(programs))
		}
		if m := regexp.MustCompile(`(?m)^[A-Z_]{6,}$`).Find(text); m != nil {
			t.Errorf("%s still has a placeholder: %s", doc, m)
		}
	}
}

// declSource returns the body of file's func name, or the declaration of
// its type name followed by that type's methods.
func declSource(t *testing.T, file, name string) string {
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
	text := func(n ast.Node) string {
		return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
	}
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == name && d.Body != nil {
				return text(d.Body)
			}
			if d.Recv != nil && len(d.Recv.List) == 1 {
				if id, ok := d.Recv.List[0].Type.(*ast.Ident); ok && id.Name == name {
					out = append(out, text(d))
				}
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				if ts, ok := sp.(*ast.TypeSpec); ok && ts.Name.Name == name {
					head := []string{text(d)}
					if d.Doc != nil {
						head = append([]string{text(d.Doc)}, head...)
					}
					out = append(head, out...)
				}
			}
		}
	}
	if out == nil {
		t.Fatalf("%s has no func or type %s", file, name)
	}
	return strings.Join(out, "\n")
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

// TestReadmeIsAFrontDoor: the README stays a read of about eight minutes
// (its prose, code blocks aside), and every relative link in it and in
// docs/ reaches a file.
func TestReadmeIsAFrontDoor(t *testing.T) {
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	prose := regexp.MustCompile("(?s)```.*?```").ReplaceAll(text, nil)
	if n := len(strings.Fields(string(prose))); n > 1800 {
		t.Errorf("README has %d words of prose, want at most 1,800: move detail into docs/", n)
	}
	docs, _ := filepath.Glob("docs/*.md")
	for _, doc := range append(docs, "README.md") {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text = regexp.MustCompile("(?s)```.*?```|`[^`]*`").ReplaceAll(text, nil)
		for _, m := range regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllSubmatch(text, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, target)
			}
		}
	}
}
