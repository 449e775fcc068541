package release

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite api/*.txt from the code (make api)")

// TestAPI fails when a published module's exported API differs from its
// committed listing in api/: an exported name or signature changed. If
// the change is meant, run make api, commit the listing with the change,
// and say what changed in CHANGELOG.md.
func TestAPI(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Modules(root)
	if err != nil {
		requireRelease(t, "listing the modules: %v", err)
	}
	listed := map[string]bool{}
	for _, m := range mods {
		if !m.Published() {
			continue
		}
		file := filepath.Join(root, APIDir, APIFile(m))
		listed[APIFile(m)] = true
		t.Run(m.Dir, func(t *testing.T) {
			got, err := API(root, m)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v: run make api to write the listing", err)
			}
			gone, added := lineDiff(string(want), got)
			if len(gone)+len(added) == 0 {
				return
			}
			var b strings.Builder
			for _, l := range gone {
				b.WriteString("\n- " + l)
			}
			for _, l := range added {
				b.WriteString("\n+ " + l)
			}
			t.Errorf("the exported API of %s differs from %s/%s:%s\n\nIf this is meant: make api, and a CHANGELOG.md entry.",
				m.Path, APIDir, APIFile(m), b.String())
		})
	}
	entries, _ := os.ReadDir(filepath.Join(root, APIDir))
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("%s/%s lists no published module: remove it", APIDir, e.Name())
		}
	}
}

// lineDiff returns the lines only in a and those only in b.
func lineDiff(a, b string) (onlyA, onlyB []string) {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	for _, l := range strings.Split(strings.TrimSpace(a), "\n") {
		if !mb[l] {
			onlyA = append(onlyA, l)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(b), "\n") {
		if !ma[l] {
			onlyB = append(onlyB, l)
		}
	}
	return onlyA, onlyB
}

// The counts docs/contributing/api.md states for package gate are the
// listing's: its table's last row (live names), Options' fields, the
// error sentinels, and the figure "Why not 72" argues from.
func TestAPIPageCountsTheListing(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	listing, err := os.ReadFile(filepath.Join(root, APIDir, "root.txt"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "contributing", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names, fields, sentinels int
	member := regexp.MustCompile(`^type \w+ (struct|interface), `)
	for _, l := range strings.Split(string(listing), "\n") {
		l, ok := strings.CutPrefix(l, "pkg github.com/retrygate/retrygate/gate, ")
		switch {
		case !ok:
		case strings.HasPrefix(l, "type Options struct, "):
			fields++
		case member.MatchString(l):
		case strings.HasPrefix(l, "var Err"):
			sentinels++
			names++
		default:
			names++
		}
	}
	if names < 50 || fields == 0 || sentinels == 0 {
		t.Fatalf("listing read as %d names, %d Options fields, %d sentinels: is gate still in %s/root.txt?", names, fields, sentinels, APIDir)
	}
	// The count table: the rows under its header, up to its first
	// line that is not a row.
	_, table, _ := strings.Cut(string(page), "| | live | deprecated | total |\n")
	var last string
	for _, l := range strings.Split(table, "\n") {
		if !strings.HasPrefix(l, "|") {
			break
		}
		last = l
	}
	row := regexp.MustCompile(`\| (\d+) \| 0 \| (\d+) \|$`).FindStringSubmatch(last)
	if row == nil {
		t.Fatalf("the count table's last row %q does not end in live | 0 | total", last)
	}
	for _, c := range []struct{ claim, want string }{
		{"the count table's live names", row[1]},
		{"the count table's total", row[2]},
	} {
		if c.want != fmt.Sprint(names) {
			t.Errorf("api.md: %s %s, the listing has %d: add a row for the change", c.claim, c.want, names)
		}
	}
	for _, claim := range []string{
		fmt.Sprintf("`Options` has %d fields", fields),
		fmt.Sprintf("## Errors (%d sentinels", sentinels),
		fmt.Sprintf("%d error sentinels", sentinels),
		fmt.Sprintf("Issue 36 asked for at most 72 live names. %d is", names),
	} {
		if !strings.Contains(string(page), claim) {
			t.Errorf("api.md does not say %q, as the listing counts", claim)
		}
	}
}
