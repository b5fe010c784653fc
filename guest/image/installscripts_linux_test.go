//go:build linux

package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindInstallScripts lays out a global node_modules the way npm does
// (scoped packages, nested dependencies, an optional native one) and
// checks what installScripts would run, in which order, and what it may
// drop.
func TestFindInstallScripts(t *testing.T) {
	tree := t.TempDir()
	nm := filepath.Join(tree, "usr", "local", "lib", "node_modules")
	write := func(rel, body string) {
		p := filepath.Join(nm, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("@scope/tool/package.json", `{"name":"@scope/tool","scripts":{"postinstall":"node install.cjs","test":"x"},"optionalDependencies":{"pty":"1"}}`)
	write("@scope/tool/node_modules/pty/package.json", `{"name":"pty","scripts":{"postinstall":"node post.js"}}`)
	write("@scope/tool/node_modules/pty/binding.gyp", `{}`)
	write("@scope/tool/node_modules/@k/keys/package.json", `{"name":"@k/keys","scripts":{"install":"node script/install.js || npm run build"}}`)
	write("@scope/tool/node_modules/@k/keys/binding.gyp", `{}`)
	write("@scope/tool/node_modules/plain/package.json", `{"name":"plain","scripts":{"build":"tsc"}}`)
	write("other/package.json", `{"name":"other"}`)
	write("other/node_modules/.bin/package.json", `{"name":"not-a-package","scripts":{"install":"x"}}`)

	pkgs, err := findInstallScripts(tree)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pkgs {
		var phases []string
		for _, s := range p.scripts {
			phases = append(phases, s.phase)
		}
		got = append(got, strings.Join([]string{p.name, strings.Join(phases, "+"), map[bool]string{true: "native", false: "-"}[p.native], map[bool]string{true: "optional", false: "required"}[p.optional]}, " "))
	}
	want := []string{
		"@k/keys install - required",         // its own install script builds it: not a bare binding.gyp
		"pty postinstall native optional",    // binding.gyp and no install script: npm would run node-gyp
		"@scope/tool postinstall - required", // after its dependencies, deepest first
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("install work:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if pkgs[2].dir != "/usr/local/lib/node_modules/@scope/tool" {
		t.Errorf("dir %q, want the path inside the tree", pkgs[2].dir)
	}
}
