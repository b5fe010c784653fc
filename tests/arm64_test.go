package tests

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/image"
)

// The arm64 guest — what the vz backend boots on Apple silicon — built on
// this host (its programs under qemu-user) and booted under
// qemu-system-aarch64 -M virt, TCG on x86-64.

var (
	arm64Once sync.Once
	arm64Why  string // why the arm64 guest cannot be had here ("" when it can)
)

// needARM64Guest skips the test when the arm64 guest cannot be booted
// here, cross-building its agent next to the capsem under test and
// building the image when it is not cached (CI builds it first: go tool
// task image:arm64).
func needARM64Guest(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("the arm64 guest runs under QEMU on Linux; this is %s", runtime.GOOS)
	}
	arm64Once.Do(func() {
		if os.Geteuid() != 0 {
			arm64Why = "the VM tests run as root; run the tests as root"
			return
		}
		for _, bin := range []string{arch.ARM64.QEMUSystem(), "mmdebstrap", "mkfs.erofs", "npm"} {
			if _, err := exec.LookPath(bin); err != nil {
				arm64Why = bin + " not installed (go tool task deps:arm64 installs it)"
				return
			}
		}
		if arch.ARM64.Foreign() {
			if _, err := os.Stat("/proc/sys/fs/binfmt_misc/qemu-aarch64"); err != nil {
				arm64Why = "binfmt_misc has no qemu-aarch64 entry, so the arm64 image cannot be built here (go tool task deps:arm64 sets it up)"
				return
			}
		}
		agent := filepath.Join(filepath.Dir(capsemBin), image.AgentFile(arch.ARM64))
		build := exec.Command("go", "build", "-o", agent, "../guest/cmd/capsem-agent")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
		if out, err := build.CombinedOutput(); err != nil {
			arm64Why = fmt.Sprintf("FAIL: building the arm64 capsem-agent: %v\n%s", err, out)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, capsemBin, "image", "build", "--arch", "arm64").CombinedOutput(); err != nil {
			arm64Why = fmt.Sprintf("FAIL: capsem image build --arch arm64: %v\n%s", err, out)
		}
	})
	if strings.HasPrefix(arm64Why, "FAIL: ") {
		t.Fatal(strings.TrimPrefix(arm64Why, "FAIL: "))
	}
	if arm64Why != "" {
		t.Skip("no arm64 guest: " + arm64Why)
	}
}

// TestARM64Guest boots the arm64 guest once and checks, from one command,
// what makes it capsem's guest: its architecture, an exit code, the
// workspace with the threat model's mapping (guest root's setuid, owner
// and device nodes stay in xattrs), and the network through the MITM: an
// allowed name answered over verified TLS, a denied one refused and both
// recorded.
func TestARM64Guest(t *testing.T) {
	needARM64Guest(t)
	pol := allowedTestPolicy(t)
	ws, data := t.TempDir(), t.TempDir()
	if err := os.Chown(ws, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		"echo machine=$(uname -m)",
		"cp /usr/bin/node node.bin",
		"cp /bin/dash s && chown 0:0 s && chmod 6755 s && mknod dev c 1 3",
		"curl -sS --max-time 60 https://allowed.test/hello; echo; echo curl-allowed=$?",
		"curl -sS --max-time 20 https://denied.test/ >/dev/null 2>&1; echo curl-denied=$?",
		"exit 7",
	}, "\n")
	start := time.Now()
	r := capsemRun(t, runOpts{workspace: ws, data: data, policy: pol, timeout: 10 * time.Minute}, []string{"--arch", "arm64"}, "sh", "-c", script)
	t.Logf("capsem run --arch arm64 under %s: %v\nguest output:\n%s", arch.Host(), time.Since(start).Round(time.Millisecond), r.stdout)
	if r.code != 7 {
		t.Fatalf("exit %d, want the command's 7\nstderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"machine=aarch64",
		"hello from allowed.test via HTTP/2.0 path=/hello\ncurl-allowed=0",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("guest output lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "curl-denied=0") {
		t.Error("the guest reached denied.test")
	}

	// node, as the guest has it, is an ARM aarch64 program (file(1) on the
	// host reads the copy the guest put in the workspace).
	out, err := exec.Command("file", "-L", filepath.Join(ws, "node.bin")).CombinedOutput()
	if err != nil {
		t.Fatalf("file: %v: %s (go tool task deps installs file)", err, out)
	}
	if !strings.Contains(string(out), "ARM aarch64") {
		t.Errorf("file of the guest's /usr/bin/node: %s, want ARM aarch64", out)
	}

	// The workspace's mapping: guest root's setuid file and device node
	// are plain files of the workspace's owner on the host.
	for _, name := range []string{"s", "dev"} {
		st, err := os.Lstat(filepath.Join(ws, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if m := st.Mode(); m&(fs.ModeSetuid|fs.ModeSetgid) != 0 || !m.IsRegular() {
			t.Errorf("%s is %v on the host, want a plain file without setuid", name, m)
		}
		if sys.Uid != 65534 || sys.Gid != 65534 {
			t.Errorf("%s is owned by %d:%d on the host, want the workspace's owner 65534", name, sys.Uid, sys.Gid)
		}
	}

	wantInExport(t, exportRun(t, data, r.session), map[string]string{
		"the allowed HTTPS request":     `SELECT count(*) FROM net_events WHERE domain = 'allowed.test' AND decision = 'allowed' AND path = '/hello' AND status_code = 200`,
		"the DNS query for denied.test": `SELECT count(*) FROM dns_events WHERE qname LIKE 'denied.test%' AND decision = 'denied'`,
	})
}

// TestARM64Sandbox: a long-lived arm64 sandbox starts from its boot
// snapshot, keeps its architecture in its settings (a restart without
// --arch is arm64 still, one with --arch amd64 is refused), runs commands
// and says what it is in capsem ls.
func TestARM64Sandbox(t *testing.T) {
	needARM64Guest(t)
	e := &sbEnv{t: t, data: t.TempDir(), caDir: sharedCADir, ws: t.TempDir(), bin: capsemBin}
	t.Cleanup(e.removeAll)
	e.start("arm", "--arch", "arm64")
	if out := e.sh("arm", "uname -m; echo kept > /root/kept"); out != "aarch64\n" {
		t.Fatalf("uname -m in the arm64 sandbox: %q", out)
	}
	r := e.must(0, nil, "ls", "--json")
	if !strings.Contains(r.stdout, `"arch": "arm64"`) && !strings.Contains(r.stdout, `"arch":"arm64"`) {
		t.Errorf("capsem ls --json does not say arm64:\n%s", r.stdout)
	}
	e.must(0, nil, "stop", "arm")
	r = e.must(2, nil, "start", "--ca-dir", e.caDir, "--arch", "amd64", "arm")
	if !strings.Contains(r.stderr, "cannot change it") {
		t.Errorf("a restart with --arch amd64: %s, want refused", r.stderr)
	}
	e.start("arm")
	if out := e.sh("arm", "uname -m; cat /root/kept"); out != "aarch64\nkept\n" {
		t.Errorf("after a restart without --arch: %q, want aarch64 and the file its disk kept", out)
	}
	e.must(0, nil, "rm", "--force", "arm")
}
