package floors_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/retrygate/retrygate"

// floors, lowest first: a package's floor is that of the longest prefix
// that names it. A package may import from its floor and those below;
// its tests may import anything (the harness is above what it tests).
var floors = []struct {
	name     string
	prefixes []string
}{
	{"ground", []string{"internal/code", "internal/engine", "internal/keyspace", "internal/limits", "internal/persistence", "internal/redisop"}},
	{"classify", []string{"classify"}},
	{"gate's parts", []string{"gate/internal"}},
	{"gate", []string{"gate"}},
	{"edges", []string{"gate/gateasynq", "gate/gateotel", "gate/gateprom", "gate/gatequeue", "gate/gateriver", "gate/gateslog", "httpmw"}},
	{"programs", []string{"cmd", "examples"}},
	{"harness", []string{"internal/testkit", "internal/release", "bench"}},
}

// floorOf returns the floor of an import path in this repository, -1 for
// one outside it, and whether a floor names it.
func floorOf(path string) (int, bool) {
	if path != module && !strings.HasPrefix(path, module+"/") {
		return -1, true
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	best, bestLen := -1, -1
	for i, f := range floors {
		for _, p := range f.prefixes {
			if (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best, best >= 0 || rel == ""
}

func TestFloorOf(t *testing.T) {
	for path, want := range map[string]string{
		module + "/internal/keyspace":        "ground",
		module + "/classify/goopenai":        "classify",
		module + "/gate/internal/store":      "gate's parts",
		module + "/gate":                     "gate",
		module + "/gate/gateprom":            "edges",
		module + "/httpmw":                   "edges",
		module + "/cmd/retrygate":            "programs",
		module + "/internal/testkit/llmfake": "harness",
	} {
		if f, _ := floorOf(path); f < 0 || floors[f].name != want {
			t.Errorf("floorOf(%s) = %d, want %s", path, f, want)
		}
	}
}

// TestNoPackageImportsAbove lists every package of every module in the
// repository with go list and fails on an import from a floor above the
// importer's, or a package no floor names.
func TestNoPackageImportsAbove(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root := repoRoot(t)
	var mods []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case !d.IsDir() && d.Name() == "go.mod":
			mods = append(mods, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, dir := range mods {
		cmd := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v\n%s", dir, err, stderr.String())
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			pkg := fields[0]
			pf, ok := floorOf(pkg)
			if !ok {
				t.Errorf("%s: no floor names it (add it to floors)", pkg)
				continue
			}
			seen++
			for _, imp := range fields[1:] {
				if f, _ := floorOf(imp); f > pf {
					t.Errorf("%s (floor %q) imports %s (floor %q, above it)", pkg, floors[pf].name, imp, floors[f].name)
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("listed %d packages in %d modules: the walk missed the repository", seen, len(mods))
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}
