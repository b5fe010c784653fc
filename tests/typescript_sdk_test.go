package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The TypeScript client (sdk/typescript) as a user gets it: npm pack builds
// it with its pinned compiler into a tarball, npm installs the tarball into
// an empty project, and its tests (sdk/typescript/test) run there with
// node --test against real sandboxes started with the capsem built for
// these tests.
func TestTypeScriptSDK(t *testing.T) {
	needGuest(t)
	if _, err := os.Stat("../sdk/typescript/node_modules/.bin/tsc"); err != nil {
		t.Skip("sdk/typescript's compiler is not installed (go tool task deps:npm runs npm ci there)")
	}
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}
	pkgs := t.TempDir()
	tarball := strings.TrimSpace(lastLine(run("../sdk/typescript", "npm", "pack", "--silent", "--pack-destination", pkgs)))
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"private": true, "type": "module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(proj, "npm", "install", "--offline", "--no-audit", "--no-fund", filepath.Join(pkgs, tarball))
	if err := os.CopyFS(filepath.Join(proj, "test"), os.DirFS("../sdk/typescript/test")); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-concurrency=1", "test/")
	cmd.Dir = proj
	cmd.Env = append(os.Environ(), "CAPSEM_BIN="+capsemBin, "CAPSEM_TEST_ROOT="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("node --test sdk/typescript/test:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript client's tests failed: %v", err)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
