package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// repo makes a git repository in a temporary directory with a root module,
// a published nested module requiring it (and replacing it, for
// development), an example module, a changelog, and one commit.
func repo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		requireRelease(t, "no git: %v", err)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module example.com/lib\n\ngo 1.24\n")
	write(t, filepath.Join(dir, "lib.go"), "package lib\n")
	write(t, filepath.Join(dir, "adapter", "go.mod"), `module example.com/lib/adapter

go 1.24

require (
	example.com/lib v0.0.0-00010101000000-000000000000
	example.com/other v1.2.3
)

// Development: the working tree.
replace example.com/lib => ../
`)
	write(t, filepath.Join(dir, "adapter", "adapter.go"), "package adapter\n")
	write(t, filepath.Join(dir, "examples", "demo", "go.mod"), "module example.com/lib/examples/demo\n\ngo 1.24\n\nrequire example.com/lib/adapter v0.0.0-00010101000000-000000000000\n")
	write(t, filepath.Join(dir, Changelog), "# Changelog\n\n## Unreleased\n\n- Added: adapter.\n")
	for _, m := range []Module{{Dir: ".", Path: "example.com/lib"}, {Dir: "adapter", Path: "example.com/lib/adapter"}} {
		listing, err := API(dir, m)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, APIDir, APIFile(m)), listing)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.email", "test@example.com"},
		{"config", "user.name", "test"},
		{"add", "."},
		{"commit", "-q", "-m", "start"},
	} {
		if _, err := git(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var day = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func TestReleaseTagsEveryPublishedModule(t *testing.T) {
	dir := repo(t)
	tags, err := Release(dir, "v0.2.0", day)
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := "v0.2.0 adapter/v0.2.0", strings.Join(tags, " "); exp != got {
		t.Errorf("tags: exp %q, got %q", exp, got)
	}
	// Every tag names the release commit, which has the new requirements.
	for _, tag := range tags {
		gomod, err := git(dir, "show", tag+":adapter/go.mod")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(gomod, "example.com/lib v0.2.0") || !strings.Contains(gomod, "example.com/other v1.2.3") {
			t.Errorf("%s: adapter/go.mod requires:\n%s", tag, gomod)
		}
		if !strings.Contains(gomod, "replace example.com/lib => ../") || !strings.Contains(gomod, "// Development: the working tree.") {
			t.Errorf("%s: adapter/go.mod lost its replace or its comment:\n%s", tag, gomod)
		}
	}
	demo, err := git(dir, "show", "v0.2.0:examples/demo/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(demo, "example.com/lib/adapter v0.2.0") {
		t.Errorf("an unpublished module's requirement did not move:\n%s", demo)
	}
	log, err := git(dir, "show", "v0.2.0:"+Changelog)
	if err != nil {
		t.Fatal(err)
	}
	if exp := "## Unreleased\n\n## v0.2.0 (2026-11-27)\n\n- Added: adapter.\n"; !strings.Contains(log, exp) {
		t.Errorf("changelog: want %q in\n%s", exp, log)
	}
	if st, err := git(dir, "status", "--porcelain"); err != nil || st != "" {
		t.Errorf("the tree is not clean after the release: %q, %v", st, err)
	}
	// Pushes nothing: there is nowhere to push, and no remote was added.
	if remotes, _ := git(dir, "remote"); remotes != "" {
		t.Errorf("remotes: %q", remotes)
	}
}

func TestReleaseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		setup   func(t *testing.T, dir string)
		want    string
	}{
		{name: "not a version", version: "0.2.0", want: "not a semantic version"},
		{name: "not canonical", version: "v0.2", want: "not canonical"},
		{name: "build metadata", version: "v0.2.0+abc", want: "not canonical"},
		{name: "major version 2", version: "v2.0.0", want: "/v2 suffix"},
		{name: "dirty tree", version: "v0.2.0", want: "working tree has changes",
			setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "lib.go"), "package lib\n\nvar X = 1\n") }},
		{name: "untracked file", version: "v0.2.0", want: "working tree has changes",
			setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "new.go"), "package lib\n") }},
		{name: "tag exists", version: "v0.2.0", want: "tag adapter/v0.2.0 exists",
			setup: func(t *testing.T, dir string) { mustGit(t, dir, "tag", "adapter/v0.2.0") }},
		{name: "not above the last", version: "v0.2.0", want: "not above the last release, v0.3.0",
			setup: func(t *testing.T, dir string) { mustGit(t, dir, "tag", "v0.3.0") }},
		{name: "API listing not the code's", version: "v0.2.0", want: "the exported API differs from api/adapter.txt",
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "adapter", "adapter.go"), "package adapter\n\nfunc New() {}\n")
				mustGit(t, dir, "commit", "-q", "-am", "an unannounced function")
			}},
		{name: "no changelog section", version: "v0.2.0", want: "no \"## Unreleased\" heading",
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, Changelog), "# Changelog\n")
				mustGit(t, dir, "commit", "-q", "-am", "changelog")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := repo(t)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			head := mustGit(t, dir, "rev-parse", "HEAD")
			_, err := Release(dir, tc.version, day)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("exp an error with %q, got %v", tc.want, err)
			}
			if got := mustGit(t, dir, "rev-parse", "HEAD"); got != head {
				t.Errorf("a refused release committed")
			}
			if tags := mustGit(t, dir, "tag", "--list", tc.version); tags != "" && tc.name != "tag exists" {
				t.Errorf("a refused release tagged %q", tags)
			}
		})
	}
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The listing changes exactly where a caller's code could break: a
// signature, a removed name; a parameter's name or an unexported name
// does not.
func TestAPIListsWhatCallersUse(t *testing.T) {
	dir := repo(t)
	m := Module{Dir: ".", Path: "example.com/lib"}
	listing := func(src string) string {
		t.Helper()
		write(t, filepath.Join(dir, "lib.go"), src)
		got, err := API(dir, m)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	base := listing("package lib\n\n// Do does.\nfunc Do(n int) error { return nil }\n\ntype T struct{ A int; b int }\n\nconst C = \"c\"\n")
	for _, tc := range []struct {
		name, src string
		same      bool
	}{
		{"parameter renamed", "package lib\n\nfunc Do(count int) error { return nil }\n\ntype T struct{ A int; b int }\n\nconst C = \"c\"\n", true},
		{"doc and unexported field", "package lib\n\nfunc Do(n int) error { return nil }\n\ntype T struct{ A int; c string }\n\nconst C = \"c\"\n", true},
		{"signature", "package lib\n\nfunc Do(n int64) error { return nil }\n\ntype T struct{ A int; b int }\n\nconst C = \"c\"\n", false},
		{"field removed", "package lib\n\nfunc Do(n int) error { return nil }\n\ntype T struct{ b int }\n\nconst C = \"c\"\n", false},
		{"constant's value", "package lib\n\nfunc Do(n int) error { return nil }\n\ntype T struct{ A int; b int }\n\nconst C = \"d\"\n", false},
		{"method added", "package lib\n\nfunc Do(n int) error { return nil }\n\ntype T struct{ A int; b int }\n\nfunc (T) M() {}\n\nconst C = \"c\"\n", false},
	} {
		got := listing(tc.src)
		if (got == base) != tc.same {
			t.Errorf("%s: same listing %v, want %v:\n%s\nvs\n%s", tc.name, got == base, tc.same, base, got)
		}
	}
	if !strings.Contains(base, "pkg example.com/lib, func Do(int) error") {
		t.Errorf("listing:\n%s", base)
	}
	// A renamed type keeps a deprecated alias: the listing names what it
	// stands for.
	alias := listing("package lib\n\nfunc Do(n int) error { return nil }\n\ntype T struct{ A int; b int }\n\n// Deprecated: use T.\ntype Old = T\n\nconst C = \"c\"\n")
	if !strings.Contains(alias, "pkg example.com/lib, type Old = T\n") {
		t.Errorf("alias listing:\n%s", alias)
	}
}

// The adapters reach the root module through its public API only: a
// nested module importing the root's internal packages would be tied to
// one root version's internals, which change without notice.
func TestPublishedModulesImportNoOtherModulesInternals(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Modules(root)
	if err != nil {
		requireRelease(t, "listing the modules: %v", err)
	}
	for _, m := range mods {
		if !m.Published() || m.Dir == "." {
			continue
		}
		cmd := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", "./...")
		cmd.Dir = filepath.Join(root, filepath.FromSlash(m.Dir))
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: go list: %v\n%s", m.Dir, err, out)
		}
		for _, p := range strings.Fields(string(out)) {
			if internal(p) && strings.HasPrefix(p, "github.com/retrygate/retrygate/") && !strings.HasPrefix(p, m.Path+"/") {
				t.Errorf("%s imports %s", m.Path, p)
			}
		}
	}
}
