//go:build linux

package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/hypervisor/qemu/qmp"
)

var _ hypervisor.VM = (*VM)(nil)

// VM is a guest run by qemu-system-x86_64.
type VM struct {
	cfg    hypervisor.Config
	target target // the machine for the kernel's architecture
	bin    string
	accel  Accel
	tscKHz int
	log    *slog.Logger

	// Lifecycle: Control, Done, Booted and Wait; started, stopping and the
	// cause of a kill.
	*hypervisor.Lifecycle

	mu     sync.Mutex
	cmd    *exec.Cmd
	facts  startFacts
	stderr tailBuffer
	qmp    *qmp.Conn // when snapshots(&cfg): see snapshot_linux.go

	ramCopied chan struct{} // closed once RAMFile holds what it must (prepareRAM)
	ramErr    error         // why it does not, set before ramCopied is closed
}

// FindBinary returns the path of the QEMU that emulates a
// (qemu-system-x86_64, qemu-system-aarch64), or an error that says how to
// install it.
func FindBinary(a arch.Arch) (string, error) {
	if a == "" {
		a = arch.Host()
	}
	p, err := exec.LookPath(a.QEMUSystem())
	if err != nil {
		return "", fmt.Errorf("%s not found in PATH: install QEMU (apt-get install %s): %w", a.QEMUSystem(), a.QEMUSystemPackage(), err)
	}
	return p, nil
}

// New checks cfg, finds QEMU and picks the accelerator. Nothing runs until
// Start.
func New(cfg hypervisor.Config, opts Options) (*VM, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r := cfg.Restore; r != nil && !r.Private && cfg.RAMFile == "" {
		return nil, errors.New("qemu: a restore that is not private copies the saved RAM into hypervisor.Config.RAMFile: set it")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	// The kernel says which machine it boots on: amd64's PVH vmlinux or
	// arm64's Image.
	a, err := arch.OfKernel(cfg.Kernel)
	if err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	t, ok := targetFor(a)
	if !ok {
		return nil, fmt.Errorf("qemu: no machine for an %s kernel", a)
	}
	bin := opts.Binary
	if bin == "" {
		if bin, err = FindBinary(a); err != nil {
			return nil, err
		}
	}
	var accel Accel
	switch opts.Accel {
	case "":
		accel = probeAccel(hostPaths, arch.Host(), a)
	case "kvm", "tcg":
		accel = Accel{Name: opts.Accel, Reason: "forced by the caller"}
	default:
		return nil, fmt.Errorf("qemu: accelerator %q: want kvm, tcg or empty (probe)", opts.Accel)
	}
	if accel.KVM() {
		log.Debug("qemu: accelerator", "accel", accel.Name, "reason", accel.Reason)
	} else {
		log.Info("qemu: running the guest under TCG (emulation, slower than KVM)", "reason", accel.Reason)
	}
	tsc := 0
	if a == arch.AMD64 && arch.Host() == arch.AMD64 {
		tsc = hostTSCKHz(hostTSCPaths)
	}
	return &VM{
		cfg:       cfg,
		target:    t,
		bin:       bin,
		accel:     accel,
		tscKHz:    tsc,
		log:       log,
		Lifecycle: hypervisor.NewLifecycle("qemu"),
	}, nil
}

// Accel is the accelerator the VM runs (or will run) under.
func (v *VM) Accel() Accel { return v.accel }

// Args is QEMU's command line (without the binary).
func (v *VM) Args() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return buildArgs(&v.cfg, v.target, v.accel, v.tscKHz, cfgLayout(&v.cfg), v.facts)
}

// Console is the serial console log's path.
func (v *VM) Console() string { return v.cfg.ConsoleLog }

// Start launches QEMU. ctx bounds the VM's whole life: when it is done,
// QEMU is killed.
func (v *VM) Start(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.CheckStart(ctx); err != nil {
		return err
	}
	hostCtl, vmCtl, err := hypervisor.SocketPair()
	if err != nil {
		return fmt.Errorf("qemu: control channel: %w", err)
	}
	defer vmCtl.Close()
	// undo is what an error before QEMU runs releases, last made first.
	undo := []func(){func() { hostCtl.Close() }}
	fail := func(err error) error {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return err
	}
	uc, ok := hostCtl.(*net.UnixConn)
	if !ok {
		return fail(fmt.Errorf("qemu: control channel is a %T, not a unix socket", hostCtl))
	}

	fds := cfgLayout(&v.cfg)
	var extra []*os.File
	if v.cfg.NIC != nil {
		extra = append(extra, v.cfg.NIC)
	}
	extra = append(extra, vmCtl)

	if v.cfg.Workspace != "" && !v.cfg.WorkspaceReadOnly {
		if err := checkWorkspaceXattrs(v.cfg.Workspace); err != nil {
			return fail(err)
		}
	}
	if v.facts.runAs, err = workspaceRunAs(v.cfg.Workspace); err != nil {
		return fail(err)
	}

	var hostCon net.Conn
	var console *hypervisor.ConsoleLog
	if v.cfg.ConsoleLog != "" {
		// Each boot gets a fresh log, capped.
		if console, err = hypervisor.CreateConsoleLog(v.cfg.ConsoleLog, v.cfg.ConsoleLogMax); err != nil {
			return fail(fmt.Errorf("qemu: %w", err))
		}
		undo = append(undo, func() { console.Close() })
		var vmCon *os.File
		if hostCon, vmCon, err = hypervisor.SocketPair(); err != nil {
			return fail(fmt.Errorf("qemu: console: %w", err))
		}
		undo = append(undo, func() { hostCon.Close() })
		defer vmCon.Close()
		extra = append(extra, vmCon)
	}

	var hostQMP net.Conn
	if snapshots(&v.cfg) {
		var vmQMP *os.File
		if hostQMP, vmQMP, err = hypervisor.SocketPair(); err != nil {
			return fail(fmt.Errorf("qemu: QMP: %w", err))
		}
		undo = append(undo, func() { hostQMP.Close() })
		defer vmQMP.Close()
		if err := v.prepareRAM(); err != nil {
			return fail(fmt.Errorf("qemu: %w", err))
		}
		undo = append(undo, v.removeRAM)
		extra = append(extra, vmQMP)
	}

	args := buildArgs(&v.cfg, v.target, v.accel, v.tscKHz, fds, v.facts)
	cmd := exec.Command(v.bin, args...)
	cmd.ExtraFiles = extra
	cmd.Stdin = nil
	cmd.Stdout = &v.stderr
	cmd.Stderr = &v.stderr
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so a kill reaches anything QEMU spawned, and
		// SIGKILL when this process dies, however it dies.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	v.log.Debug("qemu: starting", "bin", v.bin, "args", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("qemu: start %s: %w", v.bin, err))
	}
	consoleDone := make(chan struct{})
	if hostCon != nil {
		go func() {
			defer close(consoleDone)
			console.Copy(hostCon) // until QEMU exits and the socket ends
			hostCon.Close()
		}()
	} else {
		close(consoleDone)
	}
	v.cmd = cmd
	v.Started(&controlConn{UnixConn: uc, seen: v.MarkBooted})

	go func() {
		err := cmd.Wait()
		<-consoleDone // the log is complete (and closed) once the VM is done
		if err != nil {
			err = fmt.Errorf("qemu exited: %w%s", err, v.stderr.suffix())
		}
		if hostQMP != nil {
			hostQMP.Close()
		}
		v.removeRAM()
		v.Exit(err, nil)
	}()

	if hostQMP != nil {
		if err := v.startQMP(ctx, hostQMP); err != nil {
			// v.mu is held: kill's own locking would deadlock. QEMU's
			// end is not waited for here: the console's socket ends only
			// once Start has closed its copy of QEMU's end.
			v.RecordCause(err)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return err
		}
	}

	go v.OnCancel(ctx, func() { v.kill(fmt.Errorf("qemu: VM killed: %w", ctx.Err())) })

	if t := v.cfg.BootTimeout; t > 0 {
		go v.watchBoot(uc, t)
	}
	return nil
}

// watchBoot kills the VM unless the guest writes to the control channel
// within t. It peeks (MSG_PEEK) so the reader still gets every byte.
func (v *VM) watchBoot(uc *net.UnixConn, t time.Duration) {
	go func() {
		rc, err := uc.SyscallConn()
		if err != nil {
			return
		}
		var b [1]byte
		_ = rc.Read(func(fd uintptr) bool {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EAGAIN || err == syscall.EINTR {
				return false // wait for readability
			}
			if err == nil && n > 0 {
				v.MarkBooted()
			}
			return true // data, EOF or an error: stop peeking
		})
	}()
	v.WatchBoot(t, func() {
		v.kill(fmt.Errorf("qemu: %w after %v%s", hypervisor.ErrBootTimeout, t, v.cfg.ConsoleHint()))
	})
}

// kill SIGKILLs QEMU's process group, recording why (first cause wins).
func (v *VM) kill(cause error) {
	if !v.RecordCause(cause) {
		return
	}
	v.mu.Lock()
	cmd := v.cmd
	v.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Wait blocks until QEMU has exited. It returns nil when the guest powered
// off or Stop ended it; ErrBootTimeout (wrapped) when the guest stayed
// silent; the context's error when Start's context ended it.
func (v *VM) Wait() error { return v.Lifecycle.Wait() }

// Stop asks QEMU to quit (SIGTERM: it stops the guest at once and exits)
// and SIGKILLs its process group if it has not exited when ctx is done.
// The guest is not asked to shut down: do that over the control channel
// first when its disks matter.
func (v *VM) Stop(ctx context.Context) error {
	if !v.BeginStop() {
		return nil
	}
	v.mu.Lock()
	cmd := v.cmd
	v.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-v.Done():
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-v.Done()
	}
	return nil
}

// controlConn is the host end of the control port; it notes the first
// byte read so the boot timer stops even when the reader wins the race
// with the peek.
type controlConn struct {
	*net.UnixConn
	seen func()
}

func (c *controlConn) Read(p []byte) (int, error) {
	n, err := c.UnixConn.Read(p)
	if n > 0 {
		c.seen()
	}
	return n, err
}
