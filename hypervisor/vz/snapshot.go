package vz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/capsem/capsem/hypervisor"
)

// Snapshots under vz (see the package documentation, "Snapshots"): the
// framework saves the whole machine — device state and guest RAM — into
// one file, and restores it into a new VM of the same configuration. The
// methods here are those sandbox.Save needs (its vmSaver); they are in
// every build, and in one without the framework they return ErrNotBuilt.

// minSnapshotMacOS is the first macOS whose framework saves and restores
// (VZVirtualMachine saveMachineStateToURL, restoreMachineStateFromURL).
const minSnapshotMacOS = 14

// hostMacOS is the running macOS's version ("14.5"); tests replace it.
var hostMacOS = macOSVersion

// Machine says what a snapshot of this VM can be restored into (see
// machineName); "" before Start or in a build without the framework.
func (v *VM) Machine() string {
	v.mu.Lock()
	started := v.m != nil
	v.mu.Unlock()
	if !started {
		return ""
	}
	osv, err := hostMacOS()
	if err != nil {
		return ""
	}
	return machineName(&v.plan, osv, runtime.GOARCH)
}

// machineName names what a saved state can only be restored into: the
// macOS version (major.minor: the framework's; a point update does not
// change it), the architecture, the vCPUs and memory, and the plan's
// devices in the order buildMachine configures them, with what of their
// configuration the framework compares (the NIC's MTU, a read-only
// workspace: Plan.devices). Paths are not in it: a restore may attach
// another copy of the data disk or another workspace. The framework
// refuses a state saved by another configuration itself; this lets capsem
// refuse first, with an error that says what to do. Stability: saved in
// snapshots and compared as a string; any change to it makes earlier
// snapshots refused.
func machineName(p *Plan, macOS, arch string) string {
	return fmt.Sprintf("vz %s %s cpus=%d mem=%dM devices=%s",
		majorMinor(macOS), arch, p.CPUs, p.MemoryBytes>>20, strings.Join(p.devices(), ","))
}

// majorMinor cuts a macOS product version ("14.4.1") to "14.4".
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// canSnapshot says why this Mac cannot save or restore a VM, or nil.
func canSnapshot() error {
	if !snapshotAPI {
		return fmt.Errorf("vz: snapshots need Apple silicon: the framework binding capsem uses (github.com/Code-Hex/vz/v3) saves and restores only on arm64, this is %s: start the sandbox cold, or stop it instead of suspending it", runtime.GOARCH)
	}
	osv, err := hostMacOS()
	if err != nil {
		return fmt.Errorf("vz: cannot tell the macOS version: %w", err)
	}
	major, err := strconv.Atoi(strings.SplitN(osv, ".", 2)[0])
	if err != nil {
		return fmt.Errorf("vz: cannot tell the macOS version from %q", osv)
	}
	if major < minSnapshotMacOS {
		return fmt.Errorf("vz: snapshots need macOS %d or later, this Mac runs macOS %s: update macOS, or start the sandbox cold (stop it instead of suspending it)", minSnapshotMacOS, osv)
	}
	return nil
}

// running is the started VM's framework machine, or why there is none.
func (v *VM) running() (machine, error) {
	if v.build == nil {
		return nil, fmt.Errorf("vz: %w (this binary: %s/%s)", ErrNotBuilt, runtime.GOOS, runtime.GOARCH)
	}
	v.mu.Lock()
	m := v.m
	v.mu.Unlock()
	if m == nil {
		return nil, errors.New("vz: the VM has not been started: start it before pausing or saving it")
	}
	select {
	case <-v.Done():
		return nil, errors.New("vz: the VM has stopped: there is nothing to pause or save")
	default:
	}
	return m, nil
}

// saver is running, on a Mac that can save.
func (v *VM) saver() (machine, error) {
	m, err := v.running()
	if err != nil {
		return nil, err
	}
	if err := canSnapshot(); err != nil {
		return nil, err
	}
	return m, nil
}

// Pause stops the guest's vCPUs. It refuses on a Mac that cannot save
// (before macOS 14, an Intel Mac), so that a save fails before the guest
// stops. The framework's call cannot be cancelled: ctx is looked at
// before it only.
func (v *VM) Pause(ctx context.Context) error {
	m, err := v.saver()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("vz: pause: %w", err)
	}
	if err := m.pause(); err != nil {
		return fmt.Errorf("vz: pause the VM: %w", err)
	}
	return nil
}

// Resume lets a paused guest go on, also after SaveState. Like Pause, the
// framework's call is not cancelled by ctx.
func (v *VM) Resume(ctx context.Context) error {
	m, err := v.running()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("vz: resume: %w", err)
	}
	if err := m.resume(); err != nil {
		return fmt.Errorf("vz: resume the VM: %w (stop the sandbox and start it again)", err)
	}
	return nil
}

// SaveState writes the paused guest's whole state to the file at
// f.Name(): the framework saves to a path, not a descriptor, and its file
// holds the devices and all of the guest's RAM (SaveRAM writes nothing).
// The framework writes into a new private directory beside f; the file
// is then made 0600 and renamed over f.Name(), so f itself stays empty
// and the caller just closes it. f must be the file at f.Name() (opened
// by path). The framework's save cannot be cancelled: ctx is looked at
// before it only.
func (v *VM) SaveState(ctx context.Context, f *os.File) error {
	m, err := v.saver()
	if err != nil {
		return err
	}
	dst, err := filepath.Abs(f.Name())
	if err != nil {
		return fmt.Errorf("vz: snapshot state file: %w", err)
	}
	if err := samePath(f, dst); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("vz: save: %w", err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(dst), ".vzsave-")
	if err != nil {
		return fmt.Errorf("vz: snapshot state: %w", err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, filepath.Base(dst))
	if err := m.saveState(tmp); err != nil {
		return fmt.Errorf("vz: the framework could not save the VM: %w (is it paused? every device of this configuration must be one the framework can save: stop the sandbox instead of suspending it)", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("vz: snapshot state: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("vz: snapshot state: %w", err)
	}
	return nil
}

// samePath checks that f is the file at path.
func samePath(f *os.File, path string) error {
	fst, err := f.Stat()
	if err != nil {
		return fmt.Errorf("vz: snapshot state file: %w", err)
	}
	pst, err := os.Stat(path)
	if err != nil || !os.SameFile(fst, pst) {
		return fmt.Errorf("vz: the framework saves to a path: the state file must be the file at %s (open it by path)", path)
	}
	return nil
}

// SaveRAM writes an empty file (0600) at dst and returns 0: under vz the
// guest's RAM is in the state file SaveState wrote, and a restore reads
// it from there (hypervisor.Restore.RAM is not read); compress changes
// nothing.
func (v *VM) SaveRAM(dst string, compress bool) (int64, error) {
	if _, err := v.saver(); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("vz: %w", err)
	}
	return 0, f.Close()
}

// checkRestore refuses a snapshot of another machine, then one this Mac
// cannot restore, before anything is built.
func (v *VM) checkRestore(r *hypervisor.Restore) error {
	osv, err := hostMacOS()
	if err != nil {
		return fmt.Errorf("vz: cannot tell the macOS version: %w", err)
	}
	if have := machineName(&v.plan, osv, runtime.GOARCH); have != r.Machine {
		return fmt.Errorf("vz: the snapshot was saved on another machine (%q), this one is %q: start the sandbox cold, or from a snapshot made on this Mac with this macOS and capsem", r.Machine, have)
	}
	return canSnapshot()
}

// boot starts m: boots the kernel, or for a restore loads the saved state
// (the framework leaves the VM paused) and resumes it.
func (v *VM) boot(m machine) error {
	r := v.cfg.Restore
	if r == nil {
		if err := m.start(); err != nil {
			return fmt.Errorf("vz: start the VM: %w%s", err, v.cfg.ConsoleHint())
		}
		return nil
	}
	if err := m.restoreState(r.State); err != nil {
		return fmt.Errorf("vz: the framework could not restore the snapshot %s: %w: start the sandbox cold", r.State, err)
	}
	if err := m.resume(); err != nil {
		if serr := m.forceStop(); serr != nil {
			v.log.Warn("vz: could not stop the restored VM", "err", serr)
		}
		return fmt.Errorf("vz: resume the restored VM: %w: start the sandbox cold", err)
	}
	return nil
}
