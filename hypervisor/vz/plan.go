package vz

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/hypervisor"
)

// Plan is the VM a Config makes under vz: every device the framework is
// given, in the order buildMachine configures them, with what each is
// told. It is the one home of what the VM contains: buildMachine
// (vz_darwin.go) only translates it into framework calls, and machineName
// names a snapshot's machine from it. What the framework decides is not in
// it: the CPU and memory limits are this Mac's, checked when the VM is
// built. There is no memory balloon and no other device.
type Plan struct {
	// Boot is the framework's Linux boot loader: no firmware, the kernel
	// started directly.
	Boot BootLoader
	// CPUs is the vCPU count, MemoryBytes the guest RAM.
	CPUs        int
	MemoryBytes uint64
	// Console is the one virtio console port (hvc0).
	Console Console
	// Entropy is the virtio-rng device; every VM has one.
	Entropy bool
	// Disks are the virtio block devices in attach order: the guest names
	// them /dev/vda, /dev/vdb, /dev/vdc in that order, and Disk.Device
	// says which each is.
	Disks []Disk
	// NIC is the one virtio-net device (nil: the VM has none).
	NIC *NIC
	// Workspace is the one virtio-fs device (nil: nothing is shared).
	Workspace *Share
	// VsockPort is the guest agent's port on the virtio-vsock device: the
	// only vsock port the host connects to; the host listens on none.
	VsockPort uint32
}

// BootLoader is what the Linux boot loader starts.
type BootLoader struct {
	Kernel  string // an uncompressed arm64 Image on Apple silicon (checkKernel)
	Initrd  string // "": none
	Cmdline string // kernelCmdline
}

// Console is where hvc0's output goes; its input is a pipe nobody writes
// to.
type Console struct {
	Log string // the console log ("": discarded)
	Max int64  // the log's cap (0: hypervisor.DefaultConsoleLogMax)
}

// Disk is one virtio block device.
type Disk struct {
	// Name is what the disk is ("root", "data", "transfer"): the word
	// machineName writes for it and errors name it by.
	Name     string
	Path     string
	ReadOnly bool
	// Device is the guest's name for it (hypervisor.RootDevice,
	// DataDevice, TransferDevice), which the command line gives the guest.
	Device string
}

// NIC is the virtio-net device on a file-handle attachment: the only way
// out of the guest, and it ends in netstack (never NAT or bridged).
type NIC struct {
	// File is the VM's end of a vz.DatagramPair (Config.NIC); the built
	// VM uses a duplicate of it.
	File *os.File
	// MAC is the guest's address (Config.MAC).
	MAC string
	// MTU of the attachment; 0 is the framework's default, 1500.
	MTU int
}

// Share is the workspace, shared over virtio-fs with the mapping
// guarantee of workspace.go: the framework's server creates files with
// this process's identity, which planFor makes sure is not root; a
// writable share has its setuid and setgid bits cleared when the VM stops
// (ClearSetID); the guest mounts it nosuid,nodev.
type Share struct {
	Dir      string
	Tag      string // bootparam.WorkspaceTag, the tag the command line names
	ReadOnly bool
	// ClearSetID: stripSetID runs over Dir when the VM stops (a writable
	// share: the guest may have set those bits).
	ClearSetID bool
}

// planFor is the VM cfg and opts make on a Mac of architecture host, run
// by the user euid, or why that Mac must not or cannot boot it. cfg must
// have been validated (hypervisor.Config.Validate; newVM does) and opts
// given their defaults.
func planFor(cfg *hypervisor.Config, opts *Options, host arch.Arch, euid int) (Plan, error) {
	if euid == 0 {
		// The framework's virtio-fs server writes guest files with this
		// process's identity: as root, a guest could leave root-owned
		// and device files in the workspace (workspace.go).
		return Plan{}, errors.New("vz: refusing to run a guest as root: run capsem as the user who owns the workspace")
	}
	if err := checkKernel(cfg.Kernel, host); err != nil {
		return Plan{}, err
	}
	p := layout(cfg, opts)
	if n := p.NIC; n != nil {
		if _, err := net.ParseMAC(n.MAC); err != nil {
			return Plan{}, fmt.Errorf("vz: NIC MAC %q: %v: give an address like %s", n.MAC, err, hypervisor.DefaultMAC)
		}
		mtu := n.MTU
		if mtu == 0 {
			mtu = 1500
		}
		if cfg.Boot.MTU > mtu {
			return Plan{}, fmt.Errorf("vz: the guest is told MTU %d (capsem.mtu) but its NIC carries %d: set Options.MTU to %d, or tell the guest less", cfg.Boot.MTU, mtu, cfg.Boot.MTU)
		}
	}
	return p, nil
}

// layout is the VM cfg and opts describe, checking nothing: planFor is
// what checks that the host can boot it.
func layout(cfg *hypervisor.Config, opts *Options) Plan {
	p := Plan{
		Boot:        BootLoader{Kernel: cfg.Kernel, Initrd: cfg.Initramfs, Cmdline: kernelCmdline(cfg, opts.ControlPort)},
		CPUs:        cfg.CPUs,
		MemoryBytes: uint64(cfg.MemoryMiB) << 20,
		Console:     Console{Log: cfg.ConsoleLog, Max: cfg.ConsoleLogMax},
		Entropy:     true,
		VsockPort:   opts.ControlPort,
	}
	// The order hypervisor names them in (DiskBoot); Validate has made
	// sure that each needs the one before it.
	for _, d := range []Disk{
		{Name: "root", Path: cfg.RootImage, ReadOnly: true, Device: hypervisor.RootDevice},
		{Name: "data", Path: cfg.DataDisk, Device: hypervisor.DataDevice},
		{Name: "transfer", Path: cfg.TransferDisk, Device: hypervisor.TransferDevice},
	} {
		if d.Path != "" {
			p.Disks = append(p.Disks, d)
		}
	}
	if cfg.NIC != nil {
		n := &NIC{File: cfg.NIC, MAC: cfg.MAC}
		if opts.MTU > 1500 {
			n.MTU = opts.MTU
		}
		p.NIC = n
	}
	if cfg.Workspace != "" {
		p.Workspace = &Share{
			Dir:        cfg.Workspace,
			Tag:        bootparam.WorkspaceTag,
			ReadOnly:   cfg.WorkspaceReadOnly,
			ClearSetID: !cfg.WorkspaceReadOnly,
		}
	}
	return p
}

// devices names the plan's devices in the order buildMachine configures
// them, with what of their configuration the framework compares on a
// restore (machineName).
func (p *Plan) devices() []string {
	devs := []string{"console"}
	if p.Entropy {
		devs = append(devs, "rng")
	}
	for _, d := range p.Disks {
		devs = append(devs, d.Name)
	}
	if n := p.NIC; n != nil {
		if n.MTU != 0 {
			devs = append(devs, fmt.Sprintf("net(mtu=%d)", n.MTU))
		} else {
			devs = append(devs, "net")
		}
	}
	if s := p.Workspace; s != nil {
		if s.ReadOnly {
			devs = append(devs, "virtiofs(ro)")
		} else {
			devs = append(devs, "virtiofs")
		}
	}
	return append(devs, "vsock")
}
