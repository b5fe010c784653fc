//go:build linux

package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/bootparam"
)

// rootfsTools are the host programs the build runs, with how to get them.
var rootfsTools = []struct{ name, fix string }{
	{"mmdebstrap", "apt-get install mmdebstrap"},
	{"mkfs.erofs", "apt-get install erofs-utils"},
	{"npm", "apt-get install npm (or Node.js 20+ from nodesource)"},
	{"unshare", "apt-get install util-linux"},
	{"chroot", "apt-get install coreutils"},
}

// RootfsPreflight says what is missing to build a root filesystem of
// architecture a ("" is the host's) on this host: the tools, for a normal
// user what a user namespace needs (see rootfs_userns_linux.go), and for a
// foreign architecture qemu-user through binfmt_misc (binfmt_linux.go),
// which root's preflight mounts and registers when it can. nil means a
// build can start.
func RootfsPreflight(a arch.Arch) error {
	if a == "" {
		a = arch.Host()
	}
	if os.Geteuid() != 0 {
		if err := userNSPreflight(); err != nil {
			return err
		}
	}
	if err := foreignPreflight(a, hostBinfmt); err != nil {
		return err
	}
	var missing, fixes []string
	for _, t := range rootfsTools {
		if _, err := lookPathSbin(t.name); err != nil {
			missing = append(missing, t.name)
			fixes = append(fixes, t.fix)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("building the root filesystem needs %s: run `go tool task deps` or %s",
			strings.Join(missing, ", "), strings.Join(fixes, "; "))
	}
	return nil
}

// inNamespace runs name args in a private mount namespace (unshare -m), so
// any mount it makes (mmdebstrap's /proc and /dev in the tree, ours for the
// checks) disappears with it even if it is killed: the tree can then be
// removed without reaching into the host's /dev.
func inNamespace(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "--", name}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// chrootScript mounts /proc and /dev into the tree (inside the private
// namespace) and runs the command in it with a clean environment.
const chrootScript = `set -e
r=$1; shift
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
exec chroot "$r" /usr/bin/env -i PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin HOME=/tmp/capsem-check LANG=C.UTF-8 TERM=dumb CI=1 NO_COLOR=1 "$@"`

// inTree runs argv inside the tree (chroot, with /proc and /dev) and
// returns its combined output.
func inTree(ctx context.Context, tree string, timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := inNamespace(ctx, "sh", append([]string{"-c", chrootScript, "sh", tree}, argv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Stdin = nil
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %v", timeout)
	}
	return strings.TrimSpace(out.String()), err
}

// rootfsManifest is written next to the image: what went in.
type rootfsManifest struct {
	Key      string            `json:"key"`
	Recipe   RootfsRecipe      `json:"recipe"`
	Built    time.Time         `json:"built"`
	Versions map[string]string `json:"versions"` // command → its --version
	Stripped []string          `json:"setid_stripped"`
	// Scripts are the npm install scripts run in the tree after a foreign
	// architecture's install, and how each ended (installscripts_linux.go).
	Scripts  []string `json:"npm_scripts,omitempty"`
	Debs     []string `json:"debs"` // "package version", sorted
	TreeSize int64    `json:"tree_bytes"`
	Size     int64    `json:"image_bytes"`
}

// buildRootfs builds the image for r into dir (an empty cache directory).
func buildRootfs(ctx context.Context, r RootfsRecipe, dir string, p *progress) (*rootfsManifest, error) {
	if err := RootfsPreflight(r.Arch); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return buildRootfsInUserNS(ctx, r, dir, p)
	}
	m := &rootfsManifest{Key: r.Key(), Recipe: r, Versions: map[string]string{}}
	tree := filepath.Join(dir, ".tree")
	defer os.RemoveAll(tree) // safe: every mount into it was in a private namespace

	// Debian.
	p.step("root filesystem: mmdebstrap %s %s %s, %d packages (about a minute%s)…", r.Suite, r.arch(), r.Variant, len(r.Packages), foreignNote(r.arch()))
	args := []string{"--mode=root", "--arch=" + r.arch().String(), "--variant=" + r.Variant, "--include=" + strings.Join(r.Packages, ",")}
	for _, d := range r.DpkgPaths {
		args = append(args, "--dpkgopt="+d)
	}
	if r.arch().Foreign() {
		args = append(args, caDivertHooks...) // foreignca_linux.go
	}
	args = append(args, r.Suite, tree)
	args = append(args, r.Mirrors...)
	cmd := inNamespace(ctx, "mmdebstrap", args...)
	tail := newTail(40)
	cmd.Stdout, cmd.Stderr = tail, tail
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("root filesystem: mmdebstrap: %w", ctx.Err())
		}
		return nil, fmt.Errorf("root filesystem: mmdebstrap failed (%v); its last lines:\n%s\n(check that apt on this host reaches %s)",
			err, tail, strings.Join(r.Mirrors, "; "))
	}
	if r.arch().Foreign() {
		if err := updateForeignCA(ctx, tree); err != nil {
			return nil, err
		}
	}
	p.note("Debian %s ready", r.Suite)

	// Node and the agent CLIs, from npm.
	p.step("root filesystem: Node.js %s and %d agent CLIs from npm, checks, image…", r.Node.Version, len(r.Tools))
	scripts, err := installNPM(ctx, tree, r)
	if err != nil {
		return nil, err
	}
	m.Scripts = scripts
	p.note("npm: %s", joinTools(append([]NPMTool{r.Node}, r.Tools...)))

	// The system around them.
	if err := configureTree(tree); err != nil {
		return nil, fmt.Errorf("root filesystem: %w", err)
	}

	// Everything must run inside the tree.
	if err := checkTree(ctx, tree, r, m); err != nil {
		return nil, err
	}
	p.note("checked: %s", describeVersions(m.Versions))
	if out, err := inTree(ctx, tree, time.Minute, "dpkg-query", "-W", "-f", "${Package} ${Version}\n"); err == nil {
		m.Debs = strings.Split(out, "\n")
	} else {
		return nil, fmt.Errorf("root filesystem: dpkg-query in the tree: %v: %s", err, out)
	}
	if err := cleanTree(tree); err != nil {
		return nil, fmt.Errorf("root filesystem: %w", err)
	}
	stripped, err := StripSetid(tree)
	if err != nil {
		return nil, fmt.Errorf("root filesystem: %w", err)
	}
	m.Stripped = stripped
	p.note("setuid/setgid bits removed from %d files and directories; none left", len(stripped))

	// The image.
	size, latest, err := treeStats(tree)
	if err != nil {
		return nil, fmt.Errorf("root filesystem: %w", err)
	}
	m.TreeSize = size
	img := filepath.Join(dir, RootfsImageName)
	if err := mkfsErofs(ctx, tree, img, r.Compression, latest); err != nil {
		return nil, err
	}
	st, err := os.Stat(img)
	if err != nil {
		return nil, fmt.Errorf("root filesystem: %w", err)
	}
	m.Size = st.Size()
	m.Built = time.Now().UTC().Truncate(time.Second)
	p.note("mkfs.erofs -z%s: %s tree → %s image", r.Compression, mib(size), mib(m.Size))
	return m, nil
}

// checkTree runs node and each tool's --version, and Python's TLS
// pieces, inside the tree. Any failure fails the build: an image whose
// agent CLI does not start is no use.
func checkTree(ctx context.Context, tree string, r RootfsRecipe, m *rootfsManifest) error {
	if err := os.MkdirAll(filepath.Join(tree, "tmp", "capsem-check"), 0o700); err != nil {
		return fmt.Errorf("root filesystem: %w", err)
	}
	defer os.RemoveAll(filepath.Join(tree, "tmp", "capsem-check"))
	node := "/usr/local/bin/" + r.Node.Command
	out, err := inTree(ctx, tree, time.Minute, "which", r.Node.Command)
	if err != nil || out != node {
		return fmt.Errorf("root filesystem: `%s` in the tree is %q (%v), want %s", r.Node.Command, out, err, node)
	}
	// The checks are independent and each is mostly a program's start:
	// they run NumCPU at a time (in an arm64 tree on x86-64 each start is
	// emulated, and the six took 13 s one after the other).
	tools := append([]NPMTool{r.Node}, r.Tools...)
	errs := make([]error, len(tools)+1)
	sem := make(chan struct{}, runtime.NumCPU())
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(i int, check func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = check()
		}()
	}
	for i, t := range tools {
		if t.Command == "" {
			continue
		}
		run(i, func() error {
			out, err := inTree(ctx, tree, 2*time.Minute, t.Command, "--version")
			if err != nil {
				return fmt.Errorf("root filesystem: `%s --version` (from npm %s) fails inside the image: %v\n%s\n(its install script may not have run: check npm's output, or bump the pin)", t.Command, t, err, indent(out))
			}
			if !strings.Contains(out, t.Version) {
				return fmt.Errorf("root filesystem: `%s --version` inside the image says %q, want version %s", t.Command, firstLine(out), t.Version)
			}
			mu.Lock()
			m.Versions[t.Command] = lineWith(out, t.Version)
			mu.Unlock()
			return nil
		})
	}
	run(len(tools), func() error {
		out, err := inTree(ctx, tree, time.Minute, "python3", "-c", "import pytest, certifi, ssl; print(certifi.where())")
		if err != nil {
			return fmt.Errorf("root filesystem: python3 cannot import pytest and certifi inside the image: %v\n%s", err, indent(out))
		}
		return nil
	})
	wg.Wait()
	return errors.Join(errs...)
}

// configureTree writes the files and directories the agent expects.
func configureTree(tree string) error {
	files := map[string]string{
		"etc/resolv.conf": "nameserver " + GuestDNS + "\n",
		"etc/hostname":    DefaultHostname + "\n",
		"etc/hosts":       "127.0.0.1\tlocalhost\n127.0.1.1\t" + DefaultHostname + "\n",
	}
	for name, data := range files {
		p := filepath.Join(tree, name)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	// Programs that name /usr/bin/node (#!/usr/bin/node) find the one
	// Node.js the image has.
	if err := os.Symlink("/usr/local/bin/node", filepath.Join(tree, "usr", "bin", "node")); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	dirs := map[string]fs.FileMode{
		bootparam.WorkspacePath: 0o755,
		"/proc":                 0o555,
		"/sys":                  0o555,
		"/dev":                  0o755,
		"/run":                  0o755,
		"/tmp":                  0o777 | fs.ModeSticky,
		"/root":                 0o700,
		"/mnt":                  0o755,
	}
	for d, mode := range dirs {
		p := filepath.Join(tree, filepath.FromSlash(d))
		if err := os.MkdirAll(p, mode.Perm()); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	return nil
}

// cleanTree removes what the build leaves behind: apt's caches and lists,
// logs, temporary files, caches the tools wrote under /root.
func cleanTree(tree string) error {
	globs := []string{
		"var/cache/apt/*.bin", "var/cache/apt/archives/*.deb", "var/cache/apt/archives/partial/*",
		"var/lib/apt/lists/*_*", "var/lib/apt/lists/partial/*",
		"var/log/apt/*", "var/log/dpkg.log", "var/log/alternatives.log", "var/log/bootstrap.log",
		"var/cache/debconf/*-old", "var/lib/dpkg/*-old", "var/cache/ldconfig/aux-cache",
		"tmp/*", "tmp/.*", "var/tmp/*", "root/.npm", "root/.cache", "root/.codex", "root/.gemini", "root/.claude*",
		"usr/local/lib/node_modules/.package-lock.json",
	}
	for _, g := range globs {
		ms, err := filepath.Glob(filepath.Join(tree, g))
		if err != nil {
			return err
		}
		for _, m := range ms {
			if b := filepath.Base(m); b == "." || b == ".." {
				continue
			}
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// treeStats is the bytes of regular files under tree and the newest
// modification time (whole seconds).
func treeStats(tree string) (int64, int64, error) {
	var size, latest int64
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			size += info.Size()
		}
		if s := info.ModTime().Unix(); s > latest {
			latest = s
		}
		return nil
	})
	return size, latest, err
}

// mkfsErofs makes the image. The UUID is fixed and SOURCE_DATE_EPOCH (the
// image's build time) is the tree's newest mtime — so the same tree gives
// the same bytes, and no file's mtime is clamped (Python's .pyc files
// record their sources' mtimes; a changed mtime makes them stale).
func mkfsErofs(ctx context.Context, tree, img, comp string, epoch int64) error {
	cmd := mkfsErofsCmd(ctx, tree, img, comp, epoch)
	tail := newTail(20)
	cmd.Stdout, cmd.Stderr = tail, tail
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("root filesystem: mkfs.erofs failed (%v):\n%s", err, tail)
	}
	return nil
}

// mkfsErofsCmd is the mkfs.erofs command mkfsErofs runs. It records the
// owners and modes as the process sees them: in a user namespace, the ids
// the namespace maps the tree's owners to.
func mkfsErofsCmd(ctx context.Context, tree, img, comp string, epoch int64) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "mkfs.erofs", "-z"+comp, "-U"+rootfsUUID, "--quiet", img, tree)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(epoch, 10))
	return cmd
}

// foreignNote is what the progress line adds for a foreign architecture.
func foreignNote(a arch.Arch) string {
	if a.Foreign() {
		return "; longer, its programs run under qemu-user"
	}
	return ""
}

func joinTools(ts []NPMTool) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}

func describeVersions(v map[string]string) string {
	var s []string
	for _, k := range sortedKeys(v) {
		s = append(s, k+" "+v[k])
	}
	return strings.Join(s, "; ")
}

// lineWith is the first line of s that contains sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return firstLine(s)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

func indent(s string) string {
	if s == "" {
		return "  (no output)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
