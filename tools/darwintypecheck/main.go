package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

func main() {
	goos := flag.String("goos", "darwin", "the GOOS to check for")
	goarch := flag.String("goarch", "arm64", "the GOARCH to check for; comma-separated, each in turn")
	tags := flag.String("tags", "", "build tags, comma-separated")
	tests := flag.Bool("test", true, "check the named packages' tests too")
	verbose := flag.Bool("v", false, "say what was checked")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: darwintypecheck [-goos darwin] [-goarch arm64] [-tags vz] [-test=false] [-v] PACKAGE...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	failed := false
	for _, arch := range strings.Split(*goarch, ",") {
		t0 := time.Now()
		r, err := check(".", target{GOOS: *goos, GOARCH: arch, Tags: *tags, Tests: *tests}, flag.Args())
		if err != nil {
			fmt.Fprintln(os.Stderr, "darwintypecheck:", err)
			os.Exit(1)
		}
		for _, e := range r.Errors {
			fmt.Fprintln(os.Stderr, e)
		}
		if *verbose || len(r.Errors) > 0 {
			fmt.Fprintf(os.Stderr, "darwintypecheck %s/%s tags=%q: %d packages (%d in full: %s), %d cgo packages with C unchecked (%s), %d errors, %v\n",
				*goos, arch, *tags, r.Packages, len(r.Full), strings.Join(r.Full, " "), len(r.Cgo), strings.Join(r.Cgo, " "),
				len(r.Errors), time.Since(t0).Round(time.Millisecond))
		}
		failed = failed || len(r.Errors) > 0
	}
	if failed {
		os.Exit(1)
	}
}

// target is what the packages are checked as built for.
type target struct {
	GOOS, GOARCH, Tags string
	// Tests checks the named packages' _test.go files too.
	Tests bool
}

// report is what check found.
type report struct {
	// Packages is how many were type-checked; Full those checked with
	// their function bodies (the named ones and their tests); Cgo those
	// whose C went unchecked (FakeImportC).
	Packages int
	Full     []string
	Cgo      []string
	// Errors are the type checker's errors and the expressions of the
	// named packages that could not be checked, "file:line:col: text".
	Errors []string
}

// listed is what check needs of `go list -json`.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	ForTest    string
	DepOnly    bool
	Module     *struct{ GoVersion string }
	Error      *struct{ Err string }
}

// check type-checks patterns (run in dir) as built for t.
func check(dir string, t target, patterns []string) (*report, error) {
	pkgs, err := goList(dir, t, patterns)
	if err != nil {
		return nil, err
	}
	sizes := types.SizesFor("gc", t.GOARCH)
	if sizes == nil {
		return nil, fmt.Errorf("unknown GOARCH %s", t.GOARCH)
	}
	fset := token.NewFileSet()
	done := map[string]*types.Package{"unsafe": types.Unsafe}
	r := &report{}
	for _, p := range pkgs {
		if p.ImportPath == "unsafe" {
			continue
		}
		if strings.HasSuffix(p.ImportPath, ".test") {
			continue // the generated test main
		}
		if p.Error != nil {
			return nil, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		path, _, _ := strings.Cut(p.ImportPath, " ")
		// In full: the named packages, their test variants and external
		// tests; other variants (a dependency recompiled for a test) are
		// dependencies.
		full := !p.DepOnly || p.ForTest != "" && (path == p.ForTest || path == p.ForTest+"_test")
		var files []*ast.File
		for _, name := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		var errs []string
		conf := types.Config{
			Importer:         importer{p.ImportMap, done},
			FakeImportC:      len(p.CgoFiles) > 0,
			IgnoreFuncBodies: !full,
			Sizes:            sizes,
			Error:            func(err error) { errs = append(errs, err.Error()) },
		}
		if p.Module != nil && p.Module.GoVersion != "" {
			conf.GoVersion = "go" + p.Module.GoVersion
		}
		info := &types.Info{}
		if full {
			info.Types = map[ast.Expr]types.TypeAndValue{}
		}
		tp, _ := conf.Check(path, fset, files, info)
		done[p.ImportPath] = tp
		r.Packages++
		if len(p.CgoFiles) > 0 {
			r.Cgo = append(r.Cgo, path)
		}
		if full {
			r.Full = append(r.Full, p.ImportPath)
			if len(p.CgoFiles) > 0 {
				errs = append(errs, fmt.Sprintf("%s: imports C: its C expressions cannot be checked here", p.ImportPath))
			}
			if len(errs) == 0 {
				errs = unchecked(fset, info)
			}
		}
		for _, e := range errs {
			// A package and its test variant share files: one report.
			if !slices.Contains(r.Errors, e) {
				r.Errors = append(r.Errors, e)
			}
		}
	}
	return r, nil
}

// unchecked lists the expressions whose type involves an invalid type:
// in a package without errors, a C type that came through a dependency's
// API, which the checker accepts anything for.
func unchecked(fset *token.FileSet, info *types.Info) []string {
	seen := map[types.Type]bool{}
	var out []string
	for e, tv := range info.Types {
		if tv.Type != nil && invalid(tv.Type, seen) {
			out = append(out, fmt.Sprintf("%s: %s has a type involving C (%s): not checked", fset.Position(e.Pos()), types.ExprString(e), tv.Type))
		}
	}
	sort.Strings(out)
	return out
}

// invalid says whether t is or contains the invalid type. seen caches
// the answers (and breaks cycles: a type being looked at counts as
// valid until its parts say otherwise).
func invalid(t types.Type, seen map[types.Type]bool) bool {
	if v, ok := seen[t]; ok {
		return v
	}
	seen[t] = false
	var v bool
	switch t := t.(type) {
	case *types.Basic:
		v = t.Kind() == types.Invalid
	case *types.Pointer:
		v = invalid(t.Elem(), seen)
	case *types.Slice:
		v = invalid(t.Elem(), seen)
	case *types.Array:
		v = invalid(t.Elem(), seen)
	case *types.Chan:
		v = invalid(t.Elem(), seen)
	case *types.Map:
		v = invalid(t.Key(), seen) || invalid(t.Elem(), seen)
	case *types.Tuple:
		for i := range t.Len() {
			v = v || invalid(t.At(i).Type(), seen)
		}
	case *types.Signature:
		v = invalid(t.Params(), seen) || invalid(t.Results(), seen)
	case *types.Struct:
		for i := range t.NumFields() {
			v = v || invalid(t.Field(i).Type(), seen)
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			v = v || invalid(t.Method(i).Type(), seen)
		}
	case *types.Named:
		v = invalid(t.Underlying(), seen)
		for i := range t.TypeArgs().Len() {
			v = v || invalid(t.TypeArgs().At(i), seen)
		}
	case *types.Alias:
		v = invalid(types.Unalias(t), seen)
	}
	seen[t] = v
	return v
}

// importer finds a package already checked, through the importing
// package's import map (vendored standard packages, test variants).
type importer struct {
	importMap map[string]string
	done      map[string]*types.Package
}

func (i importer) Import(path string) (*types.Package, error) {
	if p, ok := i.importMap[path]; ok {
		path = p
	}
	if p := i.done[path]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%s was not checked before its importer (go list -deps order)", path)
}

// goList lists patterns and all they import, dependencies first, as built
// for t with cgo on.
func goList(dir string, t target, patterns []string) ([]*listed, error) {
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Dir,GoFiles,CgoFiles,ImportMap,ForTest,DepOnly,Module,Error"}
	if t.Tests {
		args = append(args, "-test")
	}
	if t.Tags != "" {
		args = append(args, "-tags", t.Tags)
	}
	args = append(args, "--")
	args = append(args, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+t.GOOS, "GOARCH="+t.GOARCH, "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []*listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listed)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
