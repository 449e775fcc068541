package retrygate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
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
	least := map[string]int{"README.md": 2, "docs/operating.md": 2, "docs/guarantees.md": 1, "docs/upstreams.md": 1}
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

// readmeGiven is what the README's prose hands each example-backed block:
// the parameters of the function the block is compiled in.
var readmeGiven = map[string]string{
	"gate/example_wait_test.go ExampleGate_AcquireWait":      "ctx context.Context, g *gate.Gate",
	"httpmw/example_test.go Example":                         "rdb *redis.Client, evaluate http.HandlerFunc",
	"gate/example_fallback_test.go ExampleOptions_fallbacks": "ctx context.Context, rdb *redis.Client, models map[string]func(ctx context.Context, doc string) error",
	"gate/gateprom/example_test.go ExampleNew":               "rdb *redis.Client",
}

// readmeImports are the packages README blocks may name.
var readmeImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "log": "log", "http": "net/http", "time": "time",
	"redis": "github.com/redis/go-redis/v9", "chi": "github.com/go-chi/chi/v5",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"gate":       "github.com/retrygate/retrygate/gate", "httpmw": "github.com/retrygate/retrygate/httpmw",
	"gateprom": "github.com/retrygate/retrygate/gate/gateprom", "classify": "github.com/retrygate/retrygate/classify",
}

// TestReadmeBlocksCompile: every Go block of the README, and the gate's
// blocks the README hands on to docs/guarantees.md and docs/upstreams.md,
// compiles as pasted.
// The Quickstart is a whole program (examples/quickstart builds and runs
// it); each other block is compiled as the body of a function whose
// parameters are what the prose hands it (readmeGiven), so a block that
// declares a name twice, or uses one it never got, fails here even though
// its lines appear in a compiling example.
func TestReadmeBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	var blocks [][][]byte
	for _, doc := range []string{"README.md", "docs/guarantees.md", "docs/upstreams.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range regexp.MustCompile("(?s)<!-- example: (\\S+ \\S+) -->\\s*```go\\n(.*?)```").FindAllSubmatch(text, -1) {
			if _, ok := readmeGiven[string(b[1])]; !ok {
				if doc == "README.md" {
					t.Fatalf("README block from %s: say in readmeGiven what the prose hands it", b[1])
				}
				continue // a guide's block of another subject (its Example runs)
			}
			blocks = append(blocks, b)
		}
	}
	var funcs []string
	used := map[string]bool{}
	for i, b := range blocks {
		given := readmeGiven[string(b[1])]
		body := string(b[2])
		fn := fmt.Sprintf("// From %s.\nfunc block%d(%s) {\n%s%s}\n", b[1], i, given, body, blankUses(t, body))
		for name := range readmeImports {
			if regexp.MustCompile(`\b` + name + `\.`).MatchString(fn) {
				used[name] = true
			}
		}
		funcs = append(funcs, fn)
	}
	var imports []string
	for name := range used {
		imports = append(imports, fmt.Sprintf("\t%s %q\n", name, readmeImports[name]))
	}
	sort.Strings(imports)
	src := "package main\n\nimport (\n" + strings.Join(imports, "") + ")\n\n" + strings.Join(funcs, "\n") + "\nfunc main() {}\n"

	// The program lives in the module (so it imports it) through an
	// overlay: nothing is written outside the test's directory.
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, "internal", "readmeblocks", "main.go"): file}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", filepath.Join(dir, "blocks"), "./internal/readmeblocks")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's blocks do not compile as pasted: %v\n%s\nprogram:\n%s", err, out, src)
	}
}

// blankUses returns "_ = name" for each name a block declares at its top
// level: a block stops where the reader's own code goes on using them.
func blankUses(t *testing.T, body string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc f() {\n"+body+"}\n", 0)
	if err != nil {
		t.Fatalf("README block does not parse: %v\n%s", err, body)
	}
	var out strings.Builder
	seen := map[string]bool{"_": true}
	use := func(id *ast.Ident) {
		if !seen[id.Name] {
			seen[id.Name] = true
			fmt.Fprintf(&out, "\t_ = %s\n", id.Name)
		}
	}
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, e := range st.Lhs {
					use(e.(*ast.Ident))
				}
			}
		case *ast.DeclStmt:
			for _, sp := range st.Decl.(*ast.GenDecl).Specs {
				if vs, ok := sp.(*ast.ValueSpec); ok {
					for _, id := range vs.Names {
						use(id)
					}
				}
			}
		}
	}
	return out.String()
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
// (its prose, code blocks aside), and every relative link in it, in
// docs/ and in the contributor pages (CONTRIBUTING.md, docs/contributing/)
// reaches a file.
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
	contributing, _ := filepath.Glob("docs/contributing/*.md")
	for _, doc := range append(append(docs, contributing...), "README.md", "CONTRIBUTING.md") {
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

// TestReadmeExplainsSentinels: an option value whose meaning is a
// convention (a negative Jitter means none) is explained in the prose
// wherever a README block uses it.
func TestReadmeExplainsSentinels(t *testing.T) {
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	code := strings.Join(regexp.MustCompile("(?s)```go\\n.*?```").FindAllString(string(text), -1), "\n")
	prose := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(text), "")
	for _, m := range regexp.MustCompile(`\b([A-Z][A-Za-z]+): (-\d+)\b`).FindAllStringSubmatch(code, -1) {
		if want := "`" + m[1] + ": " + m[2] + "` turns off"; !strings.Contains(prose, want) {
			t.Errorf("README uses %s: %s in code; the prose should say what it does (%q)", m[1], m[2], want)
		}
	}
}

// TestOperatingRedisCLI runs every "$ redis-cli ..." line of
// docs/operating.md against a real Redis holding the state the guide
// describes (doc-1 cooling down for an hour after a timeout, its first
// attempt) and compares what redis-cli prints with what the guide shows.
// Times and fences (runs of 10 or more digits) may differ; an integer
// reply may be a few seconds lower, time having passed. So the guide's key
// layout cannot drift from the gate's.
func TestOperatingRedisCLI(t *testing.T) {
	s := redistest.Server(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("RETRYGATE_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-cli not on PATH and RETRYGATE_REQUIRE_REDIS=1")
		}
		t.Skip("redis-cli not on PATH")
	}
	timeout := func(error) classify.Verdict {
		return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonTimeout}
	}
	g, err := gate.New(s.Client(t), gate.Options{Cooldown: time.Hour, Classify: timeout, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Do(context.Background(), "doc-1", func(context.Context, *gate.Lease) error {
		return errors.New("the model timed out")
	}); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatalf("doc-1: exp a cooldown, got %v", err)
	}

	text, err := os.ReadFile("docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, lines := range codeBlocks(string(text)) {
		for i := 0; i < len(lines); i++ {
			cmdline, ok := strings.CutPrefix(lines[i], "$ redis-cli ")
			if !ok {
				continue
			}
			var want []string
			for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "$ ") {
				i++
				want = append(want, lines[i])
			}
			args := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port()), "--no-raw"}, shellWords(t, cmdline)...)
			out, err := exec.Command("redis-cli", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli %s: %v\n%s", cmdline, err, out)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if !sameCLIOutput(want, got) {
				t.Errorf("docs/operating.md: redis-cli %s\nshows:\n%s\nprints:\n%s", cmdline, strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
			ran++
		}
	}
	if ran < 3 {
		t.Fatalf("ran %d redis-cli lines of docs/operating.md, want at least 3", ran)
	}
}

// codeBlocks returns the lines of each fenced code block of a Markdown text.
func codeBlocks(text string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "```") && !in:
			in, cur = true, nil
		case strings.HasPrefix(l, "```"):
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
}

// shellWords splits a command line as a shell would, for words and
// single-quoted strings (all the guide uses).
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	for _, m := range regexp.MustCompile(`'([^']*)'|(\S+)`).FindAllStringSubmatch(line, -1) {
		if strings.ContainsAny(m[2], `"\$`) {
			t.Fatalf("redis-cli line %q: only words and single quotes are understood", line)
		}
		words = append(words, m[1]+m[2])
	}
	return words
}

// sameCLIOutput compares redis-cli's output with the guide's: runs of 10
// or more digits (times, fences) stand for any; an integer reply may be
// up to 5 below the guide's.
func sameCLIOutput(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	long := regexp.MustCompile(`\d{10,}`)
	for i := range want {
		w, g := long.ReplaceAllString(want[i], "N"), long.ReplaceAllString(got[i], "N")
		wn, okw := strings.CutPrefix(w, "(integer) ")
		gn, okg := strings.CutPrefix(g, "(integer) ")
		if okw && okg {
			a, err1 := strconv.Atoi(wn)
			b, err2 := strconv.Atoi(gn)
			if err1 == nil && err2 == nil && b <= a && b >= a-5 {
				continue
			}
		}
		if w != g {
			return false
		}
	}
	return true
}
