package release

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// Module is one module of the repository.
type Module struct {
	// Dir is the module's directory, slash-separated and relative to the
	// repository root: "." for the root module, "gate/gateasynq".
	Dir string
	// Path is the module path from its go.mod.
	Path string
}

// Published reports whether the module is released for users: examples,
// benchmarks and the repository's own tooling (under internal/) are not.
func (m Module) Published() bool {
	first, _, _ := strings.Cut(m.Dir, "/")
	return first != "examples" && first != "bench" && first != "internal"
}

// TagPrefix is what goes before the version in the module's tags: "" for
// the root module, "gate/gateasynq/" for a nested one.
func (m Module) TagPrefix() string {
	if m.Dir == "." {
		return ""
	}
	return m.Dir + "/"
}

// Modules returns the repository's modules: every go.mod git knows of
// (tracked, or new and not ignored) outside testdata, root first, then by
// directory.
func Modules(root string) ([]Module, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, f := range files {
		if path.Base(f) != "go.mod" || strings.Contains("/"+f, "/testdata/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		mp := modfile.ModulePath(data)
		if mp == "" {
			return nil, fmt.Errorf("release: %s has no module line", f)
		}
		mods = append(mods, Module{Dir: path.Dir(f), Path: mp})
	}
	sort.Slice(mods, func(i, j int) bool {
		if (mods[i].Dir == ".") != (mods[j].Dir == ".") {
			return mods[i].Dir == "."
		}
		return mods[i].Dir < mods[j].Dir
	})
	if len(mods) == 0 || mods[0].Dir != "." {
		return nil, fmt.Errorf("release: no go.mod at the root of %s", root)
	}
	return mods, nil
}

// Files lists the repository's files as a release would have them: those
// git tracks and new ones it does not ignore, still present in the working
// tree, slash-separated and relative to root.
func Files(root string) ([]string, error) {
	out, err := git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(out, "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		if fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a symlink (not allowed in a module zip)
		}
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

// git runs git in dir and returns its standard output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
