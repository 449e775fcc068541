package release

import (
	"fmt"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// CheckVersion reports whether v can be a release of modules whose paths
// have no major-version suffix: a canonical semantic version (vX.Y.Z, or
// vX.Y.Z-pre) of major version 0 or 1, with no build metadata.
func CheckVersion(v string) error {
	switch {
	case !semver.IsValid(v):
		return fmt.Errorf("release: version %q is not a semantic version like v0.2.0", v)
	case semver.Canonical(v) != v:
		return fmt.Errorf("release: version %q is not canonical (want %q: major, minor and patch, no build metadata)", v, semver.Canonical(v))
	case semver.Major(v) != "v0" && semver.Major(v) != "v1":
		return fmt.Errorf("release: version %q needs a /%s suffix on every module path first", v, semver.Major(v))
	}
	return nil
}

// Require returns the go.mod data (named file, for errors) with every
// requirement of a module in paths set to version; replace directives and
// comments are kept. changed reports whether a requirement moved.
func Require(file string, data []byte, paths map[string]bool, version string) (out []byte, changed bool, err error) {
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		return nil, false, err
	}
	for _, r := range f.Require {
		if !paths[r.Mod.Path] || r.Mod.Version == version {
			continue
		}
		if err := f.AddRequire(r.Mod.Path, version); err != nil {
			return nil, false, fmt.Errorf("%s: %w", file, err)
		}
		changed = true
	}
	if !changed {
		return data, false, nil
	}
	f.Cleanup()
	out, err = f.Format()
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", file, err)
	}
	return out, true, nil
}

// modulePaths is the set of the modules' paths.
func modulePaths(mods []Module) map[string]bool {
	paths := make(map[string]bool, len(mods))
	for _, m := range mods {
		paths[m.Path] = true
	}
	return paths
}
