//go:build linux

package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// npmPackage is what installScripts reads of one installed package.
type npmPackage struct {
	dir      string // in the tree, from its root: /usr/local/lib/node_modules/…
	name     string
	scripts  []npmScript
	native   bool // binding.gyp without an install script: npm would run node-gyp rebuild
	optional bool // its parent lists it in optionalDependencies
	depth    int  // node_modules levels
}

type npmScript struct{ phase, cmd string }

// npmPhases are the install lifecycle scripts, in the order npm runs them.
var npmPhases = []string{"preinstall", "install", "postinstall"}

// installScripts runs, inside the tree, the install scripts of every
// package npm installed with --ignore-scripts: dependencies before the
// packages that need them (deepest first, as npm does), each in its own
// directory. A script that fails, or a package that needs a native build
// (binding.gyp: no compiler for the guest's architecture here), fails the
// build unless the package is an optional dependency: then it is removed,
// as npm removes an optional dependency that fails to install. It returns
// a line per package run, for the manifest.
func installScripts(ctx context.Context, tree string) ([]string, error) {
	pkgs, err := findInstallScripts(tree)
	if err != nil {
		return nil, fmt.Errorf("root filesystem: npm install scripts: %w", err)
	}
	var report []string
	for _, pk := range pkgs {
		fail := ""
		if pk.native {
			fail = "needs a native build (binding.gyp), which has no compiler for the guest's architecture here"
		}
		for _, sc := range pk.scripts {
			if fail != "" {
				break
			}
			out, err := inTree(ctx, tree, 5*time.Minute, "sh", "-c", `cd "$1" && exec sh -c "$2"`, "sh", pk.dir, sc.cmd)
			if err != nil {
				fail = fmt.Sprintf("%s `%s`: %v\n%s", sc.phase, sc.cmd, err, indent(out))
			}
		}
		switch {
		case fail == "":
			report = append(report, pk.name+" ("+pk.dir+"): ran "+phaseNames(pk.scripts))
		case pk.optional:
			if err := os.RemoveAll(filepath.Join(tree, pk.dir)); err != nil {
				return nil, fmt.Errorf("root filesystem: removing %s, an optional package that failed to install: %w", pk.dir, err)
			}
			report = append(report, pk.name+" ("+pk.dir+"): optional, removed: "+firstLine(fail))
		default:
			return nil, fmt.Errorf("root filesystem: npm package %s (%s): %s", pk.name, pk.dir, fail)
		}
	}
	return report, nil
}

// findInstallScripts lists the packages under the tree's global
// node_modules that have install work, deepest first.
func findInstallScripts(tree string) ([]npmPackage, error) {
	root := filepath.Join(tree, "usr", "local", "lib", "node_modules")
	type manifest struct {
		Name     string            `json:"name"`
		Scripts  map[string]string `json:"scripts"`
		Optional map[string]string `json:"optionalDependencies"`
		Gypfile  *bool             `json:"gypfile"`
	}
	read := func(dir string) (manifest, error) {
		var m manifest
		b, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			return m, err
		}
		return m, json.Unmarshal(b, &m)
	}
	var out []npmPackage
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == ".bin" {
			return filepath.SkipDir
		}
		if filepath.Base(filepath.Dir(p)) != "node_modules" && !strings.HasPrefix(filepath.Base(filepath.Dir(p)), "@") {
			return nil
		}
		m, err := read(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a scope directory, or not a package
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		pk := npmPackage{name: m.Name, depth: strings.Count(p, "node_modules")}
		rel, _ := filepath.Rel(tree, p)
		pk.dir = "/" + filepath.ToSlash(rel)
		for _, ph := range npmPhases {
			if c := m.Scripts[ph]; c != "" {
				pk.scripts = append(pk.scripts, npmScript{ph, c})
			}
		}
		if m.Scripts["install"] == "" && (m.Gypfile == nil || *m.Gypfile) {
			if _, err := os.Stat(filepath.Join(p, "binding.gyp")); err == nil {
				pk.native = true
			}
		}
		if len(pk.scripts) == 0 && !pk.native {
			return nil
		}
		if parent := owningPackage(p); parent != "" {
			if pm, err := read(parent); err == nil {
				_, pk.optional = pm.Optional[m.Name]
			}
		}
		out = append(out, pk)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].depth != out[j].depth {
			return out[i].depth > out[j].depth
		}
		return out[i].dir < out[j].dir
	})
	return out, err
}

// owningPackage is the package directory whose node_modules holds the
// package at p ("" for a top-level one).
func owningPackage(p string) string {
	dir := filepath.Dir(p)
	if strings.HasPrefix(filepath.Base(dir), "@") {
		dir = filepath.Dir(dir)
	}
	if filepath.Base(dir) != "node_modules" {
		return ""
	}
	parent := filepath.Dir(dir)
	if _, err := os.Stat(filepath.Join(parent, "package.json")); err != nil {
		return ""
	}
	return parent
}

func phaseNames(s []npmScript) string {
	var n []string
	for _, x := range s {
		n = append(n, x.phase)
	}
	return strings.Join(n, ", ")
}
