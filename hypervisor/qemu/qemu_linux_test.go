//go:build linux

package qemu

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/hypervisor"
)

// fakeQEMU writes a shell script that stands in for qemu-system-x86_64: it
// records its arguments in $dir/args, its pid in $dir/pid, then runs body
// (the control socket is fd 3 when there is no NIC).
func fakeQEMU(t *testing.T, body string) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "qemu-system-x86_64")
	script := "#!/bin/sh\n" +
		"printf '%s\\n' \"$@\" > " + dir + "/args\n" +
		"echo $$ > " + dir + "/pid\n" +
		body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

func testConfig(t *testing.T) hypervisor.Config {
	t.Helper()
	return hypervisor.Config{Kernel: fakeKernel(t, arch.AMD64), BootTimeout: 10 * time.Second}
}

// fakeKernel is a file whose header says it is a's kernel (what New
// reads to pick the machine) and nothing more.
func fakeKernel(t *testing.T, a arch.Arch) string {
	t.Helper()
	h := make([]byte, 64)
	switch a {
	case arch.AMD64:
		copy(h, "\x7fELF\x02\x01\x01")
		binary.LittleEndian.PutUint16(h[18:], uint16(elf.EM_X86_64))
	case arch.ARM64:
		copy(h[0x38:], "ARM\x64")
	}
	k := filepath.Join(t.TempDir(), image.BootFileName(a))
	if err := os.WriteFile(k, h, 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newFake(t *testing.T, cfg hypervisor.Config, body string) (*VM, string) {
	t.Helper()
	bin, dir := fakeQEMU(t, body)
	vm, err := New(cfg, Options{Binary: bin, Accel: "tcg", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return vm, dir
}

func pidAlive(pid int) bool {
	// A zombie still answers kill(0); look at its state.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFakeControlAndPowerOff(t *testing.T) {
	vm, dir := newFake(t, testConfig(t), "printf 'capsem-init-ok\\n' >&3; exit 0")
	if err := vm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(vm.Control())
	if err != nil || string(b) != "capsem-init-ok\n" {
		t.Fatalf("control: %q, %v", b, err)
	}
	if err := vm.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	select {
	case <-vm.Booted():
	default:
		t.Fatal("Booted not closed after the guest wrote")
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if !strings.Contains(string(args), "socket,id=control,fd=3") {
		t.Fatalf("fake got args:\n%s", args)
	}
	if err := vm.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
}

func TestFakeNICIsFD3(t *testing.T) {
	host, nic, err := hypervisor.SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	cfg := testConfig(t)
	cfg.NIC = nic
	// The fake writes a frame-ish hello on the NIC fd and the marker on the control fd.
	vm, _ := newFake(t, cfg, "printf nic >&3; printf ctl >&4; exit 0")
	if err := vm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	nic.Close()
	b := make([]byte, 3)
	if _, err := io.ReadFull(host, b); err != nil || string(b) != "nic" {
		t.Fatalf("NIC: %q, %v", b, err)
	}
	c, _ := io.ReadAll(vm.Control())
	if string(c) != "ctl" {
		t.Fatalf("control: %q", c)
	}
	if err := vm.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestFakeExitErrorCarriesStderr(t *testing.T) {
	vm, _ := newFake(t, testConfig(t), "echo 'qemu-system-x86_64: -kernel: cannot load PVH kernel' >&2; exit 1")
	if err := vm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := vm.Wait()
	if err == nil || !strings.Contains(err.Error(), "cannot load PVH kernel") {
		t.Fatalf("Wait: %v", err)
	}
}

func TestFakeBootTimeoutKillsGroup(t *testing.T) {
	cfg := testConfig(t)
	cfg.BootTimeout = 300 * time.Millisecond
	// A child in QEMU's process group must die with it.
	vm, dir := newFake(t, cfg, "sleep 60 & echo $! > "+"$(dirname $0)/child; wait")
	start := time.Now()
	if err := vm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	child := readPid(t, filepath.Join(dir, "child"))
	err := vm.Wait()
	if !errors.Is(err, hypervisor.ErrBootTimeout) {
		t.Fatalf("Wait: %v, want ErrBootTimeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("boot timeout took %v", d)
	}
	waitDead(t, child)
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFakeBootedStopsTimer(t *testing.T) {
	cfg := testConfig(t)
	cfg.BootTimeout = 300 * time.Millisecond
	vm, _ := newFake(t, cfg, "printf hello >&3; sleep 2; exit 0")
	if err := vm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Nobody reads the control channel: the peek alone must see the byte.
	if err := vm.Wait(); err != nil {
		t.Fatalf("Wait: %v (the timer fired although the guest spoke)", err)
	}
}

func TestFakeStop(t *testing.T) {
	vm, dir := newFake(t, testConfig(t), "printf x >&3; exec sleep 60")
	if err := vm.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if err := vm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := vm.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := vm.Wait(); err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
	waitDead(t, pid)
	if err := vm.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestFakeStopEscalatesToKill(t *testing.T) {
	vm, dir := newFake(t, testConfig(t), "trap '' TERM; printf x >&3; while :; do sleep 1; done")
	if err := vm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := vm.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
}

func TestFakeContextCancelKills(t *testing.T) {
	vm, dir := newFake(t, testConfig(t), "printf x >&3; exec sleep 60")
	ctx, cancel := context.WithCancel(context.Background())
	if err := vm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	cancel()
	if err := vm.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", err)
	}
	waitDead(t, pid)
}

// TestFakeParentDeathKills runs a child test process that starts a fake
// QEMU and is then SIGKILLed: Pdeathsig must take QEMU down with it.
func TestFakeParentDeathKills(t *testing.T) {
	if dir := os.Getenv("CAPSEM_QEMU_ORPHAN_DIR"); dir != "" {
		bin := filepath.Join(dir, "qemu-system-x86_64")
		cfg := testConfig(t)
		vm, err := New(cfg, Options{Binary: bin, Accel: "tcg", Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if err := vm.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {} // wait to be killed
	}
	_, dir := fakeQEMU(t, "printf x >&3; exec sleep 60")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFakeParentDeathKills$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CAPSEM_QEMU_ORPHAN_DIR="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, filepath.Join(dir, "pid"))
	if !pidAlive(pid) {
		t.Fatal("fake QEMU not running")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	waitDead(t, pid)
}

func TestNewErrors(t *testing.T) {
	if _, err := New(hypervisor.Config{}, Options{}); err == nil {
		t.Fatal("New accepted a config without a kernel")
	}
	if _, err := New(testConfig(t), Options{Binary: "/bin/true", Accel: "hvf"}); err == nil {
		t.Fatal("New accepted accelerator hvf")
	}
	notKernel := filepath.Join(t.TempDir(), "vmlinuz")
	if err := os.WriteFile(notKernel, []byte{0x1f, 0x8b, 8, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(hypervisor.Config{Kernel: notKernel}, Options{Binary: "/bin/true"}); !errors.Is(err, arch.ErrUnknownKernel) {
		t.Fatalf("New with a compressed kernel: %v, want arch.ErrUnknownKernel (no machine can be picked for it)", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err := New(testConfig(t), Options{})
	if err == nil || !strings.Contains(err.Error(), "apt-get install qemu-system-x86") {
		t.Fatalf("missing QEMU: %v", err)
	}
	_, err = New(hypervisor.Config{Kernel: fakeKernel(t, arch.ARM64)}, Options{})
	if err == nil || !strings.Contains(err.Error(), "qemu-system-aarch64 not found") || !strings.Contains(err.Error(), "apt-get install qemu-system-arm") {
		t.Fatalf("missing QEMU for an arm64 kernel: %v", err)
	}
}
