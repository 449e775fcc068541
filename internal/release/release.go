package release

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// Changelog is the file whose "## Unreleased" section a release names.
const Changelog = "CHANGELOG.md"

const unreleased = "## Unreleased\n"

// Release makes version of every published module in the git repository
// at root, locally: it sets every module's requirements of the others to
// version, moves the changelog's unreleased entries under the version's
// heading (dated day), commits that, and tags the commit once per
// published module ("v0.2.0", "gate/gateasynq/v0.2.0"). It pushes
// nothing, and it refuses a bad version, a working tree with changes, an
// existing tag, a version not above the last release or an API listing
// (api/) that is not the code's. It returns the tags it made.
func Release(root, version string, day time.Time) ([]string, error) {
	if err := CheckVersion(version); err != nil {
		return nil, err
	}
	if st, err := git(root, "status", "--porcelain"); err != nil {
		return nil, err
	} else if st != "" {
		return nil, fmt.Errorf("release: the working tree has changes; commit or stash them first:\n%s", st)
	}
	mods, err := Modules(root)
	if err != nil {
		return nil, err
	}
	existing, err := git(root, "tag", "--list")
	if err != nil {
		return nil, err
	}
	last := ""
	have := map[string]bool{}
	for _, t := range strings.Fields(existing) {
		have[t] = true
		if semver.IsValid(t) && (last == "" || semver.Compare(t, last) > 0) {
			last = t
		}
	}
	if last != "" && semver.Compare(version, last) <= 0 {
		return nil, fmt.Errorf("release: %s is not above the last release, %s", version, last)
	}
	var tags []string
	for _, m := range mods {
		if !m.Published() {
			continue
		}
		t := m.TagPrefix() + version
		if have[t] {
			return nil, fmt.Errorf("release: tag %s exists", t)
		}
		tags = append(tags, t)
	}

	if err := CheckAPI(root, mods); err != nil {
		return nil, err
	}

	changed, err := setRequirements(root, mods, version)
	if err != nil {
		return nil, err
	}
	if err := dateChangelog(root, version, day); err != nil {
		return nil, err
	}
	changed = append(changed, Changelog)
	if _, err := git(root, append([]string{"add", "--"}, changed...)...); err != nil {
		return nil, err
	}
	if _, err := git(root, "commit", "-q", "-m", "release "+version+"\n\nEvery module requires the others at "+version+"; tags: "+strings.Join(tags, " ")+"."); err != nil {
		return nil, fmt.Errorf("%w (undo the edits with: git checkout -- .)", err)
	}
	for _, t := range tags {
		if _, err := git(root, "tag", "-a", "-m", "retrygate "+t, t); err != nil {
			return nil, err
		}
	}
	return tags, nil
}

// setRequirements rewrites every module's go.mod so that it requires the
// repository's modules at version, and returns the files it changed.
func setRequirements(root string, mods []Module, version string) ([]string, error) {
	paths := modulePaths(mods)
	var changed []string
	for _, m := range mods {
		name := path.Join(m.Dir, "go.mod")
		file := filepath.Join(root, filepath.FromSlash(name))
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		out, ok, err := Require(name, data, paths, version)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if err := os.WriteFile(file, out, 0o644); err != nil {
			return nil, err
		}
		changed = append(changed, name)
	}
	return changed, nil
}

// dateChangelog puts a heading for version, dated day, under the
// changelog's "## Unreleased" heading, so what was unreleased is now
// version's and a new release starts with an empty section.
func dateChangelog(root, version string, day time.Time) error {
	file := filepath.Join(root, Changelog)
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	i := bytes.Index(data, []byte(unreleased))
	if i < 0 || (i > 0 && data[i-1] != '\n') {
		return fmt.Errorf("release: %s has no %q heading to release", Changelog, strings.TrimSpace(unreleased))
	}
	heading := fmt.Sprintf("\n## %s (%s)\n", version, day.UTC().Format("2006-01-02"))
	at := i + len(unreleased)
	out := append(append(append([]byte{}, data[:at]...), heading...), data[at:]...)
	return os.WriteFile(file, out, 0o644)
}
