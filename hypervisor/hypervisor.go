package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/capsem/capsem/guest/bootparam"
)

// The guest devices the disks appear as: the backends attach
// Config.RootImage as the first virtio block device and Config.DataDisk as
// the second, and DiskBoot names them to the guest.
const (
	// RootDevice is the read-only root image (capsem.root: the guest's
	// /init mounts it; root=RootDevice when there is no initramfs).
	RootDevice = "/dev/vda"
	// DataDevice is the writable disk (capsem.rw: the root's writable
	// layer).
	DataDevice = "/dev/vdb"
	// TransferDevice is the transfer disk (Config.TransferDisk), the
	// third: files into and out of the guest go through it.
	TransferDevice = "/dev/vdc"
)

// DiskBoot names the attached disks in p, as the backends attach them, and
// returns the kernel's own root= words when there is a root image but no
// initramfs to mount it.
func DiskBoot(c *Config, p *bootparam.BootParams) (kernelWords []string) {
	if c.RootImage != "" {
		if c.Initramfs == "" {
			return []string{"root=" + RootDevice, "ro"}
		}
		p.Root = RootDevice
	}
	if c.DataDisk != "" {
		p.RW = DataDevice
	}
	return nil
}

// DefaultBootTimeout bounds how long a guest may take to say anything on
// its control channel. Under TCG the measured boot to /init is ~1.5 s; the
// margin is for loaded CI machines and -race builds.
const DefaultBootTimeout = 60 * time.Second

// ErrBootTimeout is what Wait returns when the guest said nothing on the
// control channel within Config.BootTimeout (the VM has been killed).
var ErrBootTimeout = errors.New("guest did not write to the control channel within the boot timeout (see the console log)")

// VM is one guest. Start it once; Wait returns when it has exited.
type VM interface {
	// Start launches the VM. The VM lives until it powers off, Stop is
	// called, the boot timeout passes without a word on the control
	// channel, or ctx is cancelled (then it is killed).
	Start(ctx context.Context) error
	// Wait blocks until the VM has exited and returns nil if the guest
	// powered off (a reboot is a power-off: qemu runs with -no-reboot) or
	// Stop ended it.
	Wait() error
	// Stop ends the VM: politely first, killed when ctx is done. It
	// returns once the VM has exited; calling it on an exited VM is fine.
	Stop(ctx context.Context) error
	// Control is the host end of the control channel, a byte stream with
	// no framing: the virtio-serial port bootparam.ControlPort under qemu,
	// a vsock connection to the agent under vz. Valid after Start.
	Control() io.ReadWriteCloser
	// Console is the path of the serial console log ("" when not kept).
	Console() string
}

// Config describes a VM. Kernel is required; everything else is optional.
type Config struct {
	// Kernel is the guest kernel: an x86-64 ELF vmlinux with a PVH entry
	// note (what guest/image extracts from Debian's bzImage; qemu only), or
	// an uncompressed arm64 Image (qemu's virt machine, and vz on Apple
	// silicon). Its header says which (arch.OfKernel).
	Kernel string
	// Initramfs is a newc cpio archive (optionally compressed) whose /init
	// is the capsem agent.
	Initramfs string
	// RootImage is attached read-only as RootDevice (erofs or squashfs).
	RootImage string
	// DataDisk is a raw ext4 image (guest/image.CreateDataDisk) attached
	// writable as DataDevice: the root's writable layer, kept from one boot
	// to the next. It needs RootImage and an initramfs. "": that layer is
	// a tmpfs, gone at power-off.
	DataDisk string
	// TransferDisk is a raw file attached writable as TransferDevice, for
	// the host to pass file contents through (sandbox.PutFile, GetFile)
	// faster than the control channel can; it holds no filesystem. It
	// needs DataDisk (it is the third disk). "": none.
	TransferDisk string
	// Boot is what the guest's PID 1 is told on the kernel command line
	// (the capsem.* parameters of guest/bootparam). The backend adds what
	// is its own — the root device, the workspace filesystem, the vsock
	// port under vz — and writes it after Cmdline; the zero value boots
	// with every default.
	Boot bootparam.BootParams
	// Cmdline holds other kernel command-line words (debugfs=off),
	// appended after the defaults; capsem.* parameters go in Boot.
	Cmdline []string
	// CPUs is the vCPU count (default 1); MemoryMiB the guest RAM (default 512).
	CPUs      int
	MemoryMiB int
	// NIC is the VM's side of a connected socketpair: for qemu SOCK_STREAM
	// (SocketPair) carrying length-prefixed frames, the other side given to
	// netstack.NewStreamConn; for vz SOCK_DGRAM (vz.DatagramPair), one frame
	// per datagram, netstack.NewDatagramConn. Nil: the VM has no NIC at all.
	// The backend dups it; the caller may close its copy after Start.
	NIC *os.File
	// MAC is the NIC's address (default DefaultMAC).
	MAC string
	// Workspace is a host directory shared into the guest with the mount tag
	// bootparam.WorkspaceTag (9p under qemu, virtio-fs under vz); "" shares
	// nothing.
	// The guest's ownership, modes and special files never reach the host
	// files: see the backends' doc.go ("The workspace").
	Workspace string
	// WorkspaceReadOnly exports the workspace read-only.
	WorkspaceReadOnly bool
	// BootTimeout bounds the time from Start to the guest's first byte on
	// the control channel (default DefaultBootTimeout; negative: none).
	BootTimeout time.Duration
	// ConsoleLog is the file the serial console is written to ("" discards it).
	ConsoleLog string
	// ConsoleLogMax caps the console log in bytes (ConsoleLog); zero means
	// DefaultConsoleLogMax.
	ConsoleLogMax int64
	// RAMFile, when set, is a file (on tmpfs: /dev/shm) that holds the
	// guest's RAM, mapped shared, so that a snapshot copies the pages the
	// guest touched instead of streaming all of its RAM (see the backends'
	// snapshot files for the measurements). The backend creates it 0600
	// and removes it when the VM ends. "": anonymous RAM, no snapshots.
	RAMFile string
	// Restore, when set, starts the VM from a snapshot instead of booting
	// the kernel: same devices, same CPUs and memory as when it was saved.
	Restore *Restore
}

// DefaultMAC is a locally administered unicast address, stable so that
// netstack logs read the same from one boot to the next.
const DefaultMAC = "02:ca:95:e0:00:02"

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	if c.Kernel == "" {
		return errors.New("hypervisor: no kernel given (build one with guest/image)")
	}
	if c.DataDisk != "" && (c.RootImage == "" || c.Initramfs == "") {
		return errors.New("hypervisor: a data disk is the writable layer of the root image: it needs RootImage and an initramfs")
	}
	if c.TransferDisk != "" && c.DataDisk == "" {
		return errors.New("hypervisor: a transfer disk is the third disk: it needs DataDisk")
	}
	for _, f := range []struct{ what, path string }{
		{"kernel", c.Kernel}, {"initramfs", c.Initramfs}, {"root image", c.RootImage}, {"data disk", c.DataDisk}, {"transfer disk", c.TransferDisk},
	} {
		if f.path == "" {
			continue
		}
		st, err := os.Stat(f.path)
		if err != nil {
			return fmt.Errorf("hypervisor: %s: %w", f.what, err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("hypervisor: %s %s is not a regular file", f.what, f.path)
		}
	}
	if c.Workspace != "" {
		st, err := os.Stat(c.Workspace)
		if err != nil {
			return fmt.Errorf("hypervisor: workspace: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("hypervisor: workspace %s is not a directory", c.Workspace)
		}
	}
	if c.Restore != nil {
		if err := c.Restore.check(c); err != nil {
			return err
		}
	}
	if c.CPUs == 0 {
		c.CPUs = 1
	}
	if c.CPUs < 1 || c.CPUs > 64 {
		return fmt.Errorf("hypervisor: %d CPUs: want 1..64", c.CPUs)
	}
	if c.MemoryMiB == 0 {
		c.MemoryMiB = 512
	}
	if c.MemoryMiB < 64 || c.MemoryMiB > 1<<20 {
		return fmt.Errorf("hypervisor: %d MiB of memory: want 64..1048576", c.MemoryMiB)
	}
	if c.MAC == "" {
		c.MAC = DefaultMAC
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = DefaultBootTimeout
	}
	for _, w := range c.Cmdline {
		if w == "" || strings.ContainsAny(w, " \t\n\x00") {
			return fmt.Errorf("hypervisor: kernel command-line word %q: one word per entry, no whitespace", w)
		}
		if strings.HasPrefix(w, "capsem.") {
			return fmt.Errorf("hypervisor: kernel command-line word %q: set capsem.* parameters in Config.Boot (guest/bootparam), not Cmdline", w)
		}
	}
	return nil
}

// BaseCmdline is the kernel command line every capsem guest boots with
// (measured fastest under TCG, see docs/DESIGN.md). tscKHz > 0 adds
// tsc_early_khz, without which microvm can hang calibrating against the PIT.
func BaseCmdline(tscKHz int) []string {
	w := []string{"console=ttyS0", "panic=-1", "quiet", "loglevel=1"}
	if tscKHz > 0 {
		w = append(w, fmt.Sprintf("tsc_early_khz=%d", tscKHz))
	}
	return append(w, "mitigations=off", "no_timer_check", "audit=0", "8250.nr_uarts=1", "random.trust_cpu=on")
}
