//go:build linux

package image

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/hypervisor/qemu"
)

// TestBootDefaultGuest boots the default guest (kernel, initramfs with the
// real capsem-agent, the erofs root) under the qemu backend, with a NIC
// that goes nowhere and a 9p workspace, and runs the agent CLIs in it over
// the control channel.
func TestBootDefaultGuest(t *testing.T) {
	if _, err := qemu.FindBinary(""); err != nil {
		t.Skipf("no QEMU: %v", err)
	}
	_, g, _ := testGuest(t)

	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	host, nic, err := hypervisor.SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go io.Copy(io.Discard, host) // no netstack here: frames are dropped

	cfg := hypervisor.Config{
		Kernel:    g.Kernel,
		Initramfs: g.Initramfs,
		RootImage: g.Rootfs,
		Boot: bootparam.BootParams{
			IP:      netip.MustParsePrefix("198.18.0.2/24"),
			Gateway: netip.MustParseAddr("198.18.0.1"),
			DNS:     []netip.Addr{netip.MustParseAddr("198.18.0.1")},
		},
		CPUs:        2,
		MemoryMiB:   2048,
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	defer vm.Stop(context.Background())
	console := func() string { b, _ := os.ReadFile(cfg.ConsoleLog); return string(b) }

	start := time.Now()
	if err := vm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	nic.Close()
	hctx, hcancel := context.WithTimeout(ctx, 2*time.Minute)
	cl, err := proto.NewClient(hctx, vm.Control(), proto.ClientOptions{Host: "image-test"})
	hcancel()
	if err != nil {
		t.Fatalf("handshake: %v\nconsole:\n%s", err, console())
	}
	defer cl.Close()
	ready := cl.Ready()
	t.Logf("ready %v after exec: root %q, workspace %s (%s), warnings %q", time.Since(start).Round(time.Millisecond), ready.Root, ready.Workspace, ready.WSFS, ready.Warnings)
	if !strings.HasPrefix(ready.Root, "erofs") || ready.Workspace != "/workspace" {
		t.Errorf("root %q, workspace %q: want the erofs image and /workspace", ready.Root, ready.Workspace)
	}

	script := "node --version\n"
	for _, tool := range DefaultRootfs.Tools {
		script += tool.Command + " --version\n"
	}
	script += `python3 -c 'import pytest, certifi; print("python ok")'
echo setid: $(find / -xdev -perm /6000 | wc -l)
echo from-guest > /workspace/from-guest.txt
echo pwd: $(pwd)`
	execStart := time.Now()
	s, err := cl.Exec(ctx, proto.Exec{Argv: []string{"/bin/sh", "-c", script}})
	if err != nil {
		t.Fatalf("exec: %v\nconsole:\n%s", err, console())
	}
	var stderr []byte
	errDone := make(chan struct{})
	go func() { stderr, _ = io.ReadAll(s.Stderr()); close(errDone) }()
	stdout, _ := io.ReadAll(s.Stdout())
	<-errDone
	exit, err := s.Wait()
	t.Logf("in the guest (%v):\n%s\nstderr:\n%s", time.Since(execStart).Round(time.Millisecond), stdout, stderr)
	if err != nil || exit.Code != 0 {
		t.Fatalf("script: exit %+v, %v\nconsole:\n%s", exit, err, console())
	}
	out := string(stdout)
	wants := []string{"v" + DefaultRootfs.Node.Version, "python ok", "setid: 0", "pwd: /workspace"}
	for _, tool := range DefaultRootfs.Tools {
		wants = append(wants, tool.Version)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("guest output lacks %q", w)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "from-guest.txt")); err != nil || string(b) != "from-guest\n" {
		t.Errorf("workspace file from the guest: %q, %v", b, err)
	}

	if err := cl.Shutdown("test done"); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- vm.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("QEMU after shutdown: %v", err)
		}
	case <-time.After(time.Minute):
		t.Errorf("the guest did not power off within a minute of Shutdown")
	}
}
