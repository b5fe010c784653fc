//go:build linux

package image

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/hypervisor/qemu"
)

// buildBootInit compiles testdata/bootinit as a static linux/amd64 binary.
func buildBootInit(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), "init")
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./testdata/bootinit")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/bootinit: %v\n%s", err, b)
	}
	return out
}

// testKernel fetches (or finds cached) the pinned kernel, skipping the test
// when it cannot be had on this machine.
func testKernel(t *testing.T) (*Cache, *Kernel) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("the pinned guest kernel is amd64; this is %s", runtime.GOARCH)
	}
	c, err := DefaultCache()
	if err != nil {
		t.Skipf("no cache directory: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	deb, err := c.FetchKernelDeb(ctx, DefaultKernel)
	if err != nil {
		t.Skipf("guest kernel not available (CI installs it through apt): %v", err)
	}
	start := time.Now()
	k, err := c.PrepareKernel(ctx, KernelOptions{Deb: deb})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s (%s payload), modules %v, ready in %v", k.Package, k.Compression, k.Modules, time.Since(start).Round(time.Millisecond))
	return c, k
}

// TestBootToInit boots the pinned kernel with a tiny static Go /init under
// the qemu backend (TCG here), with a NIC, a root disk and a 9p workspace
// attached: /init must load every module, see every device, write through
// 9p, say so on the control port and power off.
func TestBootToInit(t *testing.T) {
	if _, err := qemu.FindBinary(""); err != nil {
		t.Skipf("no QEMU: %v", err)
	}
	c, k := testKernel(t)
	initrd, err := c.Initramfs(k, buildBootInit(t), None)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root.img")
	if err := os.WriteFile(root, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	host, nic, err := hypervisor.SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go io.Copy(io.Discard, host) // no netstack here: frames are dropped

	cfg := hypervisor.Config{
		Kernel:      k.Boot(),
		Initramfs:   initrd,
		RootImage:   root,
		NIC:         nic,
		Workspace:   ws,
		ConsoleLog:  filepath.Join(dir, "console.log"),
		BootTimeout: 2 * time.Minute,
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	vm, err := qemu.New(cfg, qemu.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("accelerator %s (%s)", vm.Accel().Name, vm.Accel().Reason)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	defer vm.Stop(context.Background())

	start := time.Now()
	if err := vm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	nic.Close()
	line, rerr := bufio.NewReader(vm.Control()).ReadString('\n')
	marker := time.Since(start)
	werr := vm.Wait()
	exited := time.Since(start)
	console, _ := os.ReadFile(cfg.ConsoleLog)
	if rerr != nil || !strings.HasPrefix(line, "capsem-init-ok ") {
		t.Fatalf("control channel: %q, %v (wait: %v)\nconsole:\n%s", line, rerr, werr, console)
	}
	if werr != nil {
		t.Fatalf("QEMU did not exit cleanly after power-off: %v\nconsole:\n%s", werr, console)
	}
	fields := map[string]string{}
	for _, f := range strings.Fields(line)[1:] {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	t.Logf("boot: control marker %v after exec (guest uptime %ss), QEMU exited %v after exec; %s",
		marker.Round(time.Millisecond), fields["uptime"], exited.Round(time.Millisecond), strings.TrimSpace(line))
	if fields["net"] == "none" || fields["blk"] != "vda" || fields["9p"] != "ok" {
		t.Errorf("guest saw net=%s blk=%s 9p=%s, want a NIC, vda and a writable workspace\nconsole:\n%s",
			fields["net"], fields["blk"], fields["9p"], console)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "from-guest.txt")); err != nil || string(b) != "capsem-9p-ok\n" {
		t.Errorf("workspace file from the guest: %q, %v", b, err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
