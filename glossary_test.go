package retrygate_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// glossaryUnchecked are the files the glossary's words are not checked
// in: the changelog names what was renamed, mutants.md records past runs,
// and the glossary and its test name the words.
var glossaryUnchecked = map[string]bool{
	"CHANGELOG.md":                  true,
	"docs/contributing/mutants.md":  true,
	"docs/contributing/glossary.md": true,
	"glossary_test.go":              true,
}

// glossaryAllowed are the uses of a checked word that mean something else:
// another project's own term, a provider's error code, or a test that
// checks the word never comes back in output. A phrase is allowed
// anywhere; a file is allowed for the word as a whole.
var glossaryAllowed = map[string]struct {
	phrases []string
	files   []string
}{
	"scope": {
		phrases: []string{
			"ScopeName",             // gateotel: OpenTelemetry's instrumentation scope
			"instrumentation scope", // the same, in its doc
			"ACCESS_TOKEN_SCOPE",    // a provider's error code (classify)
			"issing scope",          // an API key's permissions, in OpenAI's 401 (classify's held-out data)
			"necessary scopes",      // the same
		},
		files: []string{
			"internal/release/api.go",        // go/types' Scope
			"cmd/retrygate/explain_test.go",  // explain's sentence never says it
			"examples/server/config_test.go", // the demo's help never says it
		},
	},
}

// glossaryBanned reads the words docs/contributing/glossary.md says not
// to use: the backticked ones of its table's last column.
func glossaryBanned(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("docs/contributing/glossary.md")
	if err != nil {
		t.Fatal(err)
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var words []string
	for _, line := range strings.Split(string(raw), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "|") || len(cells) != 3 || strings.HasPrefix(cells[0], "---") || cells[0] == "concept" {
			continue
		}
		for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
			words = append(words, m[1])
		}
	}
	return words
}

// TestGlossaryWordsNotUsed: no file of the repository uses a word the
// glossary says not to use for its concept ("scope" for the upstream,
// "reopen" for recover, ...), at the start of a word, in any case, outside
// the uses glossaryAllowed names. Metric and label names, log attributes,
// JSON keys and alert rules are in these files too, so this holds the
// names operators build dashboards on.
func TestGlossaryWordsNotUsed(t *testing.T) {
	banned := glossaryBanned(t)
	for _, must := range []string{"scope", "UpstreamOpen", "reopen", "upstream_trip", "held Done", "unwrittenFailure"} {
		found := false
		for _, w := range banned {
			found = found || w == must
		}
		if !found {
			t.Fatalf("glossary.md's checked words %q lack %q", banned, must)
		}
	}
	res := make(map[string]*regexp.Regexp, len(banned))
	for _, w := range banned {
		// At the start of a word: "scopeGate" and "retrygate_scope" are
		// caught, "dashscope" (a provider) is not.
		res[w] = regexp.MustCompile(`(?i)(^|[^a-z])` + regexp.QuoteMeta(w))
	}
	text := map[string]bool{".go": true, ".md": true, ".yml": true, ".yaml": true, ".lua": true, ".golden": true,
		".html": true, ".js": true, ".txt": true, ".json": true, ".sh": true}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		path = filepath.ToSlash(path)
		if glossaryUnchecked[path] || !text[filepath.Ext(path)] && d.Name() != "Makefile" {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		checked++
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for w, re := range res {
				if re.MatchString(line) && !glossaryAllows(w, path, line, re) {
					t.Errorf("%s:%d says %q (docs/contributing/glossary.md): %s", path, n, w, strings.TrimSpace(line))
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 500 {
		t.Fatalf("checked %d files, want the repository's (run from its root)", checked)
	}
}

// glossaryAllows reports whether every use of w on line is one
// glossaryAllowed names.
func glossaryAllows(w, path, line string, re *regexp.Regexp) bool {
	a := glossaryAllowed[w]
	for _, f := range a.files {
		if f == path {
			return true
		}
	}
	for _, p := range a.phrases {
		line = strings.ReplaceAll(line, p, "")
	}
	return !re.MatchString(line)
}
