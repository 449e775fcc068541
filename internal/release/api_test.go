package release

import (
	"flag"
	"os"
	"path/filepath"
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
