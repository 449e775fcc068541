package release

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// pretend is the version the proxy test releases a copy of the working
// tree at, as make release VERSION=v0.1.0 would: the first version.
const pretend = "v0.1.0"

// requireRelease reports whether a test that cannot run here must fail
// instead of skipping (CI sets RETRYGATE_REQUIRE_RELEASE=1).
func requireRelease(t *testing.T, why string, args ...any) {
	t.Helper()
	if os.Getenv("RETRYGATE_REQUIRE_RELEASE") == "1" {
		t.Fatalf(why, args...)
	}
	t.Skipf(why, args...)
}

// TestModulesInstallAlone is what a user outside the repository sees
// after make release VERSION=v0.1.0, run in a fresh repository holding
// the working tree: every published module, laid from it in a module
// proxy at that version, is fetched alone into
// a fresh program whose go.mod requires only it; its packages and
// commands build, its tests and Examples type-check, and its Examples
// with output run. The root's command installs as the README says
// (go install …/cmd/retrygate@latest). Only the repository's modules come
// from the test's proxy; the others from the module cache already on this
// machine (else GOPROXY), so with a warm cache it needs no network, and
// builds use -trimpath so the build cache serves them on the next run.
func TestModulesInstallAlone(t *testing.T) {
	if testing.Short() {
		requireRelease(t, "builds every module from a module proxy: not in -short")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Files(root); err != nil {
		requireRelease(t, "the module zips are made of the files git lists: %v", err)
	}
	tmp := t.TempDir()
	root = released(t, root, filepath.Join(tmp, "repo"))
	proxy := filepath.Join(tmp, "proxy")
	mods, err := WriteProxy(proxy, root, pretend)
	if err != nil {
		t.Fatal(err)
	}
	env := goEnv(t, tmp, proxy)
	sums := repoSums(t, root)
	for _, m := range mods {
		t.Run(strings.ReplaceAll(m.Dir, "/", "_"), func(t *testing.T) {
			libs, cmds, examples := packages(t, root, m)
			if len(libs)+len(cmds) == 0 {
				t.Fatalf("%s has no packages", m.Path)
			}
			t.Logf("%d packages, %d commands, Examples in %v", len(libs), len(cmds), examples)
			dir := filepath.Join(tmp, "try", strings.ReplaceAll(m.Dir, "/", "_"))
			write(t, filepath.Join(dir, "go.mod"), "module example.com/try\n\ngo 1.24\n")
			write(t, filepath.Join(dir, "go.sum"), sums)
			var imports strings.Builder
			for _, p := range libs {
				imports.WriteString("\t_ \"" + p + "\"\n")
			}
			write(t, filepath.Join(dir, "main.go"), "package main\n\nimport (\n"+imports.String()+")\n\nfunc main() {}\n")

			all := append(append([]string{}, libs...), cmds...)
			run(t, dir, env, "go", append([]string{"get", "-t"}, withVersion(all)...)...)
			// The fresh program requires m, and the repository's other
			// modules it needs, at the version only.
			data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			gomod, err := modfile.Parse("go.mod", data, nil)
			if err != nil {
				t.Fatal(err)
			}
			ours := modulePaths(mods)
			found := false
			for _, r := range gomod.Require {
				if ours[r.Mod.Path] && r.Mod.Version != pretend {
					t.Errorf("the program requires %s, want %s", r.Mod, pretend)
				}
				found = found || r.Mod == module.Version{Path: m.Path, Version: pretend}
			}
			if !found {
				t.Errorf("the program does not require %s %s:\n%s", m.Path, pretend, data)
			}
			// pkg.go.dev shows a module's documentation only with a license.
			mdir := strings.TrimSpace(run(t, dir, env, "go", "list", "-m", "-f", "{{.Dir}}", m.Path))
			if _, err := os.Stat(filepath.Join(mdir, "LICENSE")); err != nil {
				t.Errorf("%s has no LICENSE: %v", m.Path, err)
			}
			bin := filepath.Join(tmp, "bin", filepath.Base(dir)) + string(filepath.Separator)
			run(t, dir, env, "go", append([]string{"build", "-o", bin, "."}, cmds...)...)
			run(t, dir, env, "go", append([]string{"vet"}, all...)...)
			if len(examples) > 0 {
				run(t, dir, env, "go", append([]string{"test", "-count=1", "-vet=off", "-run", "^Example"}, examples...)...)
			}
		})
	}
	t.Run("the README's Quickstart lines", func(t *testing.T) {
		dir := filepath.Join(tmp, "quickstart")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		lines := quickstartLines(t, root)
		for _, line := range lines {
			if strings.HasPrefix(line, "# save the program below as main.go") {
				src, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", "main.go"))
				if err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(dir, "main.go"), string(src))
				continue
			}
			if cmd, _, _ := strings.Cut(line, "#"); strings.TrimSpace(cmd) != "" {
				f := strings.Fields(cmd)
				run(t, dir, env, f[0], f[1:]...)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "quickstart")); err != nil {
			t.Fatalf("the Quickstart's lines %q built no program: %v", lines, err)
		}
	})
	t.Run("go install cmd/retrygate@latest", func(t *testing.T) {
		out := run(t, tmp, append(env, "GOBIN="+filepath.Join(tmp, "gobin")), "go", "install", "github.com/retrygate/retrygate/cmd/retrygate@latest")
		if _, err := os.Stat(filepath.Join(tmp, "gobin", "retrygate")); err != nil {
			t.Fatalf("go install left no binary: %v\n%s", err, out)
		}
	})
}

// released copies the files git lists in root (the working tree, changes
// included) into a fresh repository at dir, commits them and runs Release
// there at pretend, as make release does in a clean clone; it checks
// what the release wrote and returns dir.
func released(t *testing.T, root, dir string) string {
	t.Helper()
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, filepath.FromSlash(f)), string(data))
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.email", "release-test@example.com"},
		{"config", "user.name", "release test"},
		{"add", "."},
		{"commit", "-q", "-m", "the working tree"},
	} {
		if _, err := git(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	tags, err := Release(dir, pretend, time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatalf("make release VERSION=%s: %v", pretend, err)
	}
	mods, err := Modules(dir)
	if err != nil {
		t.Fatal(err)
	}
	paths := modulePaths(mods)
	for _, m := range mods {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(m.Dir), "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		gomod, err := modfile.Parse("go.mod", data, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range gomod.Require {
			if paths[r.Mod.Path] && r.Mod.Version != pretend {
				t.Errorf("after the release %s/go.mod requires %s, want %s", m.Dir, r.Mod, pretend)
			}
		}
		if m.Published() && !slices.Contains(tags, m.TagPrefix()+pretend) {
			t.Errorf("the release made no tag for %s: %v", m.Path, tags)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, Changelog))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "\n## "+pretend+" (2026-11-29)\n") {
		t.Errorf("%s has no dated %s section", Changelog, pretend)
	}
	return dir
}

// quickstartLines are the lines of the README's first block under
// "## Quickstart": the commands a newcomer runs to build the program.
func quickstartLines(t *testing.T, root string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(data), "\n## Quickstart\n")
	if !ok {
		t.Fatal("README.md has no Quickstart section")
	}
	_, block, ok := strings.Cut(after, "\n```\n")
	if !ok {
		t.Fatal("the Quickstart has no command block")
	}
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if !strings.HasPrefix(l, "go ") && !strings.HasPrefix(l, "# save the program below as main.go") {
			t.Fatalf("the Quickstart's block holds %q, which this test cannot run", l)
		}
		lines = append(lines, l)
	}
	return lines
}

// goEnv is the go command's environment for a user outside the
// repository: the test's proxy first, then the module cache of this
// machine as a read-only proxy, then the configured GOPROXY; a module
// cache and a GOPATH of the test's own.
func goEnv(t *testing.T, tmp, proxy string) []string {
	t.Helper()
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	cache := filepath.Join(goenv("GOMODCACHE"), "cache", "download")
	proxies := "file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(cache)
	if p := goenv("GOPROXY"); p != "" && p != "off" {
		proxies += "," + p
	}
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOPROXY", "GOMODCACHE", "GOPATH", "GOFLAGS", "GONOSUMDB", "GONOPROXY", "GOPRIVATE", "GOWORK", "GOTOOLCHAIN", "GOBIN":
		default:
			env = append(env, kv)
		}
	}
	return append(env,
		"GOPROXY="+proxies,
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOPATH="+filepath.Join(tmp, "gopath"),
		"GOFLAGS=-modcacherw -trimpath -buildvcs=false",
		// The repository's modules at this version are in no checksum
		// database, and the others come from this machine's module cache,
		// checked when they entered it (and against the go.sum lines
		// repoSums seeds): asking the database again would need a network.
		"GOSUMDB=off",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
}

// repoSums is every go.sum line of the repository: the checksums the
// repository pins for the modules' dependencies, checked again in the
// fresh programs.
func repoSums(t *testing.T, root string) string {
	t.Helper()
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var lines []string
	for _, f := range files {
		if path.Base(f) != "go.sum" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			if l := sc.Text(); l != "" && !seen[l] {
				seen[l] = true
				lines = append(lines, l)
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// packages lists m's packages by import path, as go list sees them in
// m's directory: importable ones, commands (package main), and those
// with an Example; internal packages are left out.
func packages(t *testing.T, root string, m Module) (libs, cmds, examples []string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Dir}}\t{{join .TestGoFiles \" \"}} {{join .XTestGoFiles \" \"}}", "./...")
	cmd.Dir = filepath.Join(root, filepath.FromSlash(m.Dir))
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", m.Dir, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 {
			t.Fatalf("go list: %q", line)
		}
		path, name, dir, tests := f[0], f[1], f[2], strings.Fields(f[3])
		if internal(path) {
			continue
		}
		if name == "main" {
			cmds = append(cmds, path)
		} else {
			libs = append(libs, path)
		}
		for _, tf := range tests {
			data, err := os.ReadFile(filepath.Join(dir, tf))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "\nfunc Example") {
				examples = append(examples, path)
				break
			}
		}
	}
	return libs, cmds, examples
}

// withVersion asks go get for every package at the pretend version.
func withVersion(pkgs []string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = p + "@" + pretend
	}
	return out
}

func write(t *testing.T, file, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs a command in dir and fails the test with its output if it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
