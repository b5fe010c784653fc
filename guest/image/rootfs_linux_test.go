//go:build linux

package image

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// buildAgent compiles the real guest agent (guest/cmd/capsem-agent) as a
// static linux/amd64 binary.
func buildAgent(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), "capsem-agent")
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, "../cmd/capsem-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build guest/cmd/capsem-agent: %v\n%s", err, b)
	}
	if err := CheckStaticAgent(out, ""); err != nil {
		t.Fatal(err)
	}
	return out
}

// testGuest builds (or finds in $XDG_CACHE_HOME/capsem, like testKernel)
// the default guest with the real agent, skipping when this host cannot
// build it. The first run takes minutes; later runs are cache hits.
func testGuest(t *testing.T) (*Cache, *Guest, string) {
	t.Helper()
	c, _ := testKernel(t) // skips without the kernel; fetches it otherwise
	agent := buildAgent(t)
	if _, ok := c.cachedRootfs(DefaultRootfs); !ok {
		if err := RootfsPreflight(""); err != nil {
			t.Skipf("cannot build the root filesystem here (CI can): %v", err)
		}
		t.Logf("building the root filesystem into %s: a few minutes", c.Root)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	g, err := c.BuildDefault(ctx, BuildOptions{Agent: agent, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest %s (%d MiB) in %v: kernel %s, rootfs %s", g.ID, g.Size>>20, time.Since(start).Round(time.Millisecond), g.KernelRelease, g.Rootfs)
	return c, g, agent
}

// inImage runs a shell script in the finished image, mounted read-only in
// a private mount namespace (nothing leaks onto the host), with /proc,
// /dev and a tmpfs /tmp, as the guest would have them.
func inImage(t *testing.T, img, script string) (string, error) {
	t.Helper()
	mnt := t.TempDir()
	const wrap = `set -e
img=$1 mnt=$2 script=$3
mount -t erofs -o loop,ro "$img" "$mnt"
mount -t proc proc "$mnt/proc"
mount --rbind /dev "$mnt/dev"
mount -t tmpfs -o mode=1777 tmpfs "$mnt/tmp"
mkdir -m 700 "$mnt/tmp/home"
exec chroot "$mnt" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp/home LANG=C.UTF-8 /bin/sh -ec "$script"`
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", wrap, "sh", img, mnt, script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// TestBuildDefaultRootfs builds the real default guest and checks the root
// filesystem image itself: no setuid/setgid file, the agent CLIs and
// Node 22 run, Python has pytest and certifi, the mount points exist; then
// a second build must be a cache hit and FindDefault must find it.
func TestBuildDefaultRootfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: building and mounting the root filesystem (CI runs as root)")
	}
	c, g, agent := testGuest(t)

	if g.Rootfs == "" || filepath.Base(g.Rootfs) != RootfsImageName || g.KernelRelease != DefaultKernel.Release {
		t.Fatalf("guest %+v", g)
	}
	f, err := os.Open(g.Rootfs)
	if err != nil {
		t.Fatal(err)
	}
	magic := make([]byte, 4)
	_, err = f.ReadAt(magic, 1024)
	f.Close()
	if err != nil || !bytes.Equal(magic, []byte{0xe2, 0xe1, 0xf5, 0xe0}) {
		t.Fatalf("%s: no erofs superblock (%x, %v)", g.Rootfs, magic, err)
	}

	var versions strings.Builder
	for _, tool := range append([]NPMTool{DefaultRootfs.Node}, DefaultRootfs.Tools...) {
		versions.WriteString(tool.Command + " --version\n")
	}
	script := `
test "$(command -v node)" = /usr/local/bin/node
` + versions.String() + `
python3 -c 'import pytest, certifi, requests; print("python ok", certifi.where())'
for d in /workspace /proc /sys /dev /run /tmp /root; do test -d "$d" || { echo "no $d"; exit 1; }; done
grep -q '^nameserver 198.18.0.1$' /etc/resolv.conf
test "$(cat /etc/hostname)" = capsem
echo setid: $(find / -xdev -perm /6000 | wc -l)
ls /var/lib/apt/lists | grep -v -e '^lock$' -e '^partial$' | wc -l | sed 's/^/apt lists: /'
`
	out, err := inImage(t, g.Rootfs, script)
	t.Logf("inside the image:\n%s", out)
	if err != nil {
		t.Fatalf("checks inside the image failed: %v", err)
	}
	for _, want := range []string{"v" + DefaultRootfs.Node.Version, "python ok", "setid: 0", "apt lists: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("inside the image: no %q", want)
		}
	}
	for _, tool := range DefaultRootfs.Tools {
		if !strings.Contains(out, tool.Version) {
			t.Errorf("%s --version does not say %s", tool.Command, tool.Version)
		}
	}

	before, err := os.Stat(g.Rootfs)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	g2, err := c.BuildDefault(context.Background(), BuildOptions{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	hit := time.Since(start)
	t.Logf("second BuildDefault: %v", hit.Round(time.Millisecond))
	if *g2 != *g {
		t.Errorf("second build gave %+v, want %+v", g2, g)
	}
	// A cache hit leaves the image as it was (a rebuild replaces the file).
	if after, err := os.Stat(g.Rootfs); err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("second BuildDefault rebuilt the root filesystem (%v)", err)
	}
	// FindDefault works offline, with no apt-get (or anything) on PATH.
	t.Setenv("PATH", "")
	g3, ok, err := c.FindDefault(agent, "")
	if err != nil || !ok || *g3 != *g {
		t.Errorf("FindDefault = %+v, %v, %v", g3, ok, err)
	}
}
