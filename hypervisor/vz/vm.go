package vz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/capsem/capsem/hypervisor"
)

// ErrNotBuilt is what New returns in a build without the framework (any
// OS but macOS, or macOS without -tags vz and cgo).
var ErrNotBuilt = errors.New("the vz backend is built only on macOS with -tags vz")

// machine is one framework VM, behind the little the lifecycle needs (the
// framework's side is in vz_darwin.go; tests use a fake).
type machine interface {
	// start boots the VM; it returns once the VM runs or failed to.
	start() error
	// wait blocks until the started VM has stopped: nil when it stopped
	// (guest power-off or a forced stop), an error when the framework
	// reports its error state.
	wait() error
	// requestStop asks the guest to power off; it does not wait.
	requestStop() error
	// forceStop stops the VM at once; it returns once it has stopped.
	forceStop() error
	// dialControl connects to the guest agent's vsock port; it fails
	// while nothing listens there.
	dialControl() (net.Conn, error)
	// release closes what the VM used (file descriptors), after it stopped
	// or when start failed.
	release()

	// pause stops a running VM's vCPUs; resume lets a paused one go on
	// (also one restoreState left paused).
	pause() error
	resume() error
	// saveState writes the paused VM's whole state (devices and RAM) to
	// a new file at path.
	saveState(path string) error
	// restoreState loads a state saveState wrote into the VM, which has
	// never been started; it is left paused.
	restoreState(path string) error
}

var _ hypervisor.VM = (*VM)(nil)

// VM is a guest run by Apple's Virtualization framework.
type VM struct {
	cfg  hypervisor.Config
	opts Options
	// plan is what the VM contains (plan.go): layout's in newVM, planFor's
	// once New has checked this Mac can boot it.
	plan Plan
	log  *slog.Logger
	// build makes the framework VM at Start (nil: not built with vz).
	build func() (machine, error)

	// Lifecycle: Control, Done, Booted and Wait; started, stopping and the
	// cause of a forced stop.
	*hypervisor.Lifecycle

	mu      sync.Mutex
	m       machine
	control *controlConn
}

// newVM checks cfg and fills in the defaults; build is set by New.
func newVM(cfg hypervisor.Config, opts Options) (*VM, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts.defaults()
	if opts.MTU != 0 && (opts.MTU < 1500 || opts.MTU > 65535) {
		return nil, fmt.Errorf("vz: MTU %d: want 1500..65535 (or 0 for the default)", opts.MTU)
	}
	return &VM{
		cfg:       cfg,
		opts:      opts,
		plan:      layout(&cfg, &opts),
		log:       opts.Logger,
		Lifecycle: hypervisor.NewLifecycle("vz"),
	}, nil
}

// Cmdline is the guest kernel's command line.
func (v *VM) Cmdline() string { return v.plan.Boot.Cmdline }

// Console is the serial console log's path.
func (v *VM) Console() string { return v.cfg.ConsoleLog }

// Start boots the VM, or with Config.Restore restores the snapshot and
// lets it go on (snapshot.go). ctx bounds the VM's whole life: when it is
// done, the VM is stopped by force.
func (v *VM) Start(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.CheckStart(ctx); err != nil {
		return err
	}
	if v.build == nil {
		return ErrNotBuilt
	}
	if r := v.cfg.Restore; r != nil {
		if err := v.checkRestore(r); err != nil {
			return err
		}
	}
	m, err := v.build()
	if err != nil {
		return err
	}
	if r := v.cfg.Restore; r != nil {
		v.log.Debug("vz: restoring", "state", r.State)
	} else {
		v.log.Debug("vz: starting", "kernel", v.cfg.Kernel, "cmdline", v.plan.Boot.Cmdline)
	}
	if err := v.boot(m); err != nil {
		m.release()
		return err
	}
	v.m = m
	// Control is the vsock connection to the guest agent, made in the
	// background as soon as the agent listens; Read and Write block until
	// then.
	v.control = newControlConn(m.dialControl, v.MarkBooted, v.log)
	v.Started(v.control)
	go v.control.run()

	go func() { v.finish(m.wait()) }()

	go v.OnCancel(ctx, func() { v.kill(fmt.Errorf("vz: VM stopped: %w", ctx.Err())) })

	if t := v.cfg.BootTimeout; t > 0 {
		go v.watchBoot(t)
	}
	return nil
}

// finish records how the VM ended; err is the machine's own account.
func (v *VM) finish(err error) {
	if err != nil {
		err = fmt.Errorf("vz: %w%s", err, v.cfg.ConsoleHint())
	}
	v.Exit(err, func() {
		v.mu.Lock()
		m, control := v.m, v.control
		v.mu.Unlock()
		control.vmExited()
		m.release()
		if s := v.plan.Workspace; s != nil && s.ClearSetID {
			changed, serr := stripSetID(s.Dir)
			for _, p := range changed {
				v.log.Warn("vz: the guest set the setuid or setgid bit of a workspace file; cleared", "path", p)
			}
			if serr != nil {
				v.log.Error("vz: clearing setuid and setgid bits in the workspace failed; check it by hand", "err", serr)
			}
		}
	})
}

// watchBoot stops the VM unless the guest writes to the control channel
// within t.
func (v *VM) watchBoot(t time.Duration) {
	v.WatchBoot(t, func() {
		v.kill(fmt.Errorf("vz: %w after %v%s", hypervisor.ErrBootTimeout, t, v.cfg.ConsoleHint()))
	})
}

// kill stops the VM by force, recording why (first cause wins).
func (v *VM) kill(cause error) {
	if !v.RecordCause(cause) {
		return
	}
	v.mu.Lock()
	m := v.m
	v.mu.Unlock()
	if err := m.forceStop(); err != nil {
		select {
		case <-v.Done():
		default:
			v.log.Warn("vz: could not stop the VM", "err", err)
		}
	}
}

// Wait blocks until the VM has stopped. It returns nil when the guest
// powered off or Stop ended it; ErrBootTimeout (wrapped) when the guest
// stayed silent; the context's error when Start's context ended it; an
// error when the framework put the VM in its error state.
func (v *VM) Wait() error { return v.Lifecycle.Wait() }

// Stop asks the guest to power off (the framework's stop request), and
// stops the VM by force when it has not after Options.StopGrace or when ctx
// is done, whichever comes first. It returns once the VM has stopped;
// calling it on a stopped or never started VM is fine. Ask the guest to
// shut down over the control channel first when its disks matter.
func (v *VM) Stop(ctx context.Context) error {
	if !v.BeginStop() {
		return nil
	}
	v.mu.Lock()
	m := v.m
	v.mu.Unlock()
	if err := m.requestStop(); err != nil {
		v.log.Debug("vz: cannot ask the guest to stop; stopping the VM", "err", err)
	} else {
		var grace <-chan time.Time
		if v.opts.StopGrace > 0 {
			t := time.NewTimer(v.opts.StopGrace)
			defer t.Stop()
			grace = t.C
		}
		select {
		case <-v.Done():
			return nil
		case <-ctx.Done():
		case <-grace:
			v.log.Debug("vz: the guest did not power off when asked; stopping the VM", "after", v.opts.StopGrace)
		}
	}
	if err := m.forceStop(); err != nil {
		select {
		case <-v.Done():
			return nil
		default:
		}
		return fmt.Errorf("vz: stop the VM: %w", err)
	}
	<-v.Done()
	return nil
}
