package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// WriteProxy lays every published module of the repository at root into
// dir as a file-based module proxy (GOPROXY=file://dir) serves it, at
// version: what Release would tag, built from the working tree (the files
// Files lists) with every go.mod's requirements of the others set to
// version. Nothing in the repository is changed.
func WriteProxy(dir, root, version string) ([]Module, error) {
	if err := CheckVersion(version); err != nil {
		return nil, err
	}
	mods, err := Modules(root)
	if err != nil {
		return nil, err
	}
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	paths := modulePaths(mods)
	var published []Module
	for _, m := range mods {
		if !m.Published() {
			continue
		}
		published = append(published, m)
		name := path.Join(m.Dir, "go.mod")
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		gomod, _, err := Require(name, data, paths, version)
		if err != nil {
			return nil, err
		}
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return nil, err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, err
		}
		info, _ := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, time.Now().UTC().Truncate(time.Second)})
		for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return nil, err
			}
		}
		if err := writeZip(filepath.Join(vdir, version+".zip"), root, m, version, files, gomod); err != nil {
			return nil, err
		}
	}
	return published, nil
}

// writeZip writes m's module zip: its files under its directory, with
// gomod for its go.mod and the root's LICENSE if it has none. zip.Create
// leaves out the nested modules' files.
func writeZip(file, root string, m Module, version string, files []string, gomod []byte) error {
	prefix := ""
	if m.Dir != "." {
		prefix = m.Dir + "/"
	}
	var zf []zip.File
	for _, f := range files {
		if !strings.HasPrefix(f, prefix) {
			continue
		}
		rel := strings.TrimPrefix(f, prefix)
		zf = append(zf, srcFile{rel: rel, abs: filepath.Join(root, filepath.FromSlash(f))})
	}
	license := false
	for i, f := range zf {
		switch f.Path() {
		case "go.mod":
			zf[i] = srcFile{rel: "go.mod", abs: zf[i].(srcFile).abs, data: gomod}
		case "LICENSE":
			license = true
		}
	}
	if !license && slices.Contains(files, "LICENSE") {
		// The go command, fetching a nested module from its repository,
		// adds the root's LICENSE when the module has none (as
		// zip.CreateFromVCS does): proxy.golang.org and pkg.go.dev see it.
		zf = append(zf, srcFile{rel: "LICENSE", abs: filepath.Join(root, "LICENSE")})
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := zip.Create(out, module.Version{Path: m.Path, Version: version}, zf); err != nil {
		out.Close()
		return fmt.Errorf("release: zip of %s: %w", m.Path, err)
	}
	return out.Close()
}

// srcFile is a file of the working tree, or, with data, the content that
// replaces it.
type srcFile struct {
	rel, abs string
	data     []byte
}

func (f srcFile) Path() string { return f.rel }

func (f srcFile) Lstat() (fs.FileInfo, error) {
	fi, err := os.Lstat(f.abs)
	if err != nil || f.data == nil {
		return fi, err
	}
	return sized{fi, int64(len(f.data))}, nil
}

func (f srcFile) Open() (io.ReadCloser, error) {
	if f.data != nil {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return os.Open(f.abs)
}

// sized is a FileInfo with another size.
type sized struct {
	fs.FileInfo
	size int64
}

func (s sized) Size() int64 { return s.size }
