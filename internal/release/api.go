package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// APIDir holds one listing per published module, named by APIFile.
const APIDir = "api"

// APIFile names module m's listing: api/root.txt, api/gate-gateasynq.txt.
func APIFile(m Module) string {
	if m.Dir == "." {
		return "root.txt"
	}
	return strings.ReplaceAll(m.Dir, "/", "-") + ".txt"
}

// CheckAPI compares the API of each published module with its listing
// and names the modules whose listing is missing or differs.
func CheckAPI(root string, mods []Module) error {
	var stale []string
	for _, m := range mods {
		if !m.Published() {
			continue
		}
		got, err := API(root, m)
		if err != nil {
			return err
		}
		want, err := os.ReadFile(filepath.Join(root, APIDir, APIFile(m)))
		if err != nil || string(want) != got {
			stale = append(stale, APIDir+"/"+APIFile(m))
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("release: the exported API differs from %s: run make api, say what changed in %s, and commit", strings.Join(stale, ", "), Changelog)
	}
	return nil
}

// API lists the exported API of module m of the repository at root, one
// feature a line, sorted: every exported constant (with its value),
// variable, function, type, struct field, interface method and method of
// every package outside internal/ and package main. Two listings differ
// exactly where a user's code could stop compiling or change meaning.
//
// It reads the packages' export data through the go command (go list
// -export), run in the module's directory with its own go.mod.
func API(root string, m Module) (string, error) {
	dir := filepath.Join(root, filepath.FromSlash(m.Dir))
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Name,Export,Module,DepOnly,Error", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("release: go list in %s: %w: %s", m.Dir, err, stderr.String())
	}
	exports := map[string]string{}
	var pkgs []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath, Name, Export string
			DepOnly                  bool
			Module                   *struct{ Path string }
			Error                    *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return "", err
		}
		if p.Error != nil {
			return "", fmt.Errorf("release: %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly && p.Module != nil && p.Module.Path == m.Path && p.Name != "main" && !internal(p.ImportPath) {
			pkgs = append(pkgs, p.ImportPath)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	var lines []string
	for _, path := range pkgs {
		pkg, err := imp.Import(path)
		if err != nil {
			return "", fmt.Errorf("release: %s: %w", path, err)
		}
		lines = append(lines, features(pkg)...)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n", nil
}

func internal(path string) bool {
	return strings.HasSuffix(path, "/internal") || strings.Contains(path, "/internal/")
}

// features lists pkg's exported API, each line led by "pkg <path>, ".
func features(pkg *types.Package) []string {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Path()
	}
	str := func(t types.Type) string { return types.TypeString(unnamed(t), qual) }
	lead := "pkg " + pkg.Path() + ", "
	var out []string
	add := func(format string, args ...any) { out = append(out, lead+fmt.Sprintf(format, args...)) }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			add("const %s %s = %s", name, str(obj.Type()), obj.Val().ExactString())
		case *types.Var:
			add("var %s %s", name, str(obj.Type()))
		case *types.Func:
			add("func %s%s", name, strings.TrimPrefix(str(obj.Type()), "func"))
		case *types.TypeName:
			out = append(out, typeFeatures(lead, obj, str)...)
		}
	}
	return out
}

// typeFeatures lists a type's declaration, its exported fields or
// interface methods, and its exported methods (those of *T too, promoted
// ones included).
func typeFeatures(lead string, obj *types.TypeName, str func(types.Type) string) []string {
	name := obj.Name()
	if obj.IsAlias() {
		return []string{lead + "type " + name + " = " + str(types.Unalias(obj.Type()))}
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		return []string{lead + "type " + name + " " + str(obj.Type().Underlying())}
	}
	if tp := named.TypeParams(); tp.Len() > 0 {
		var ps []string
		for i := range tp.Len() {
			ps = append(ps, tp.At(i).Obj().Name()+" "+str(tp.At(i).Constraint()))
		}
		name += "[" + strings.Join(ps, ", ") + "]"
	}
	var out []string
	switch u := named.Underlying().(type) {
	case *types.Struct:
		out = append(out, lead+"type "+name+" struct")
		for i := range u.NumFields() {
			f := u.Field(i)
			switch {
			case !f.Exported():
			case f.Embedded():
				out = append(out, lead+"type "+name+" struct, embedded "+str(f.Type()))
			default:
				out = append(out, lead+"type "+name+" struct, "+f.Name()+" "+str(f.Type()))
			}
		}
	case *types.Interface:
		out = append(out, lead+"type "+name+" interface")
		for i := range u.NumMethods() {
			m := u.Method(i)
			if !m.Exported() {
				out = append(out, lead+"type "+name+" interface, unexported methods")
				continue
			}
			out = append(out, lead+"type "+name+" interface, "+m.Name()+strings.TrimPrefix(str(m.Type()), "func"))
		}
	default:
		out = append(out, lead+"type "+name+" "+str(u))
	}
	if _, isIface := named.Underlying().(*types.Interface); isIface {
		return dedupe(out)
	}
	ms := types.NewMethodSet(types.NewPointer(named))
	vs := types.NewMethodSet(named)
	for i := range ms.Len() {
		sel := ms.At(i)
		if !sel.Obj().Exported() {
			continue
		}
		recv := "*" + obj.Name()
		if vs.Lookup(sel.Obj().Pkg(), sel.Obj().Name()) != nil {
			recv = obj.Name()
		}
		sig := sel.Type().(*types.Signature)
		out = append(out, lead+"method ("+recv+") "+sel.Obj().Name()+strings.TrimPrefix(str(types.NewSignatureType(nil, nil, nil, sig.Params(), sig.Results(), sig.Variadic())), "func"))
	}
	return dedupe(out)
}

func dedupe(lines []string) []string {
	seen := map[string]bool{}
	out := lines[:0]
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// unnamed returns t with the parameters and results of every function
// type in it unnamed: renaming a parameter changes no caller.
func unnamed(t types.Type) types.Type {
	switch t := t.(type) {
	case *types.Signature:
		strip := func(tu *types.Tuple) *types.Tuple {
			vs := make([]*types.Var, tu.Len())
			for i := range vs {
				vs[i] = types.NewParam(token.NoPos, nil, "", unnamed(tu.At(i).Type()))
			}
			return types.NewTuple(vs...)
		}
		var tps []*types.TypeParam
		for i := range t.TypeParams().Len() {
			// New ones of the same name: a type parameter is bound once.
			tp := t.TypeParams().At(i)
			tps = append(tps, types.NewTypeParam(types.NewTypeName(token.NoPos, nil, tp.Obj().Name(), nil), tp.Constraint()))
		}
		return types.NewSignatureType(nil, nil, tps, strip(t.Params()), strip(t.Results()), t.Variadic())
	case *types.Pointer:
		return types.NewPointer(unnamed(t.Elem()))
	case *types.Slice:
		return types.NewSlice(unnamed(t.Elem()))
	case *types.Array:
		return types.NewArray(unnamed(t.Elem()), t.Len())
	case *types.Map:
		return types.NewMap(unnamed(t.Key()), unnamed(t.Elem()))
	case *types.Chan:
		return types.NewChan(t.Dir(), unnamed(t.Elem()))
	case *types.Struct:
		fs := make([]*types.Var, t.NumFields())
		tags := make([]string, t.NumFields())
		for i := range fs {
			f := t.Field(i)
			fs[i] = types.NewField(f.Pos(), f.Pkg(), f.Name(), unnamed(f.Type()), f.Embedded())
			tags[i] = t.Tag(i)
		}
		return types.NewStruct(fs, tags)
	}
	return t
}
