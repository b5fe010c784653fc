package qemu

import (
	"fmt"
	"strings"

	"github.com/capsem/capsem/hypervisor"
)

// Binary is the QEMU system emulator the backend runs.
const Binary = "qemu-system-x86_64"

// fdLayout says which descriptor numbers the child sees the inherited
// sockets at (3 is the first of exec.Cmd.ExtraFiles). -1: not passed.
type fdLayout struct {
	nic     int
	control int
}

// layoutFor numbers the inherited fds: the NIC (when there is one) first,
// then the control socket.
func layoutFor(haveNIC bool) fdLayout {
	if haveNIC {
		return fdLayout{nic: 3, control: 4}
	}
	return fdLayout{nic: -1, control: 3}
}

// optEscape escapes a value for QEMU's comma-separated option syntax, where
// a literal comma is written twice.
func optEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// kernelCmdline is the guest kernel's command line: the measured-fast base,
// the root device when there is a root image, then the caller's words.
// With an initramfs its /init (guest/boot) mounts the root image, named by
// capsem.root; without one the kernel itself would (root=, which needs
// virtio_blk and the filesystem built in).
func kernelCmdline(cfg *hypervisor.Config, tscKHz int) string {
	w := hypervisor.BaseCmdline(tscKHz)
	if cfg.RootImage != "" {
		if cfg.Initramfs != "" {
			w = append(w, "capsem.root="+hypervisor.RootDevice)
		} else {
			w = append(w, "root="+hypervisor.RootDevice, "ro")
		}
	}
	w = append(w, cfg.Cmdline...)
	return strings.Join(w, " ")
}

// buildArgs is QEMU's command line for cfg (already validated).
func buildArgs(cfg *hypervisor.Config, accel Accel, tscKHz int, fds fdLayout) []string {
	a := []string{
		// microvm: no PCI, no firmware beyond qboot, virtio-mmio devices
		// described to the guest by ACPI. The default option ROMs and the
		// second IO-APIC are not needed.
		"-M", "microvm",
		"-accel", accel.qemuArg(),
		"-cpu", accel.cpu(),
		"-smp", fmt.Sprint(cfg.CPUs),
		"-m", fmt.Sprintf("%dM", cfg.MemoryMiB),
		"-no-reboot",
		"-nodefaults",
		"-no-user-config",
		"-nographic",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-kernel", cfg.Kernel,
	}
	if cfg.Initramfs != "" {
		a = append(a, "-initrd", cfg.Initramfs)
	}
	a = append(a, "-append", kernelCmdline(cfg, tscKHz))

	// The serial console (ttyS0) goes to a file, or nowhere.
	if cfg.ConsoleLog != "" {
		a = append(a, "-chardev", "file,id=console,path="+optEscape(cfg.ConsoleLog))
	} else {
		a = append(a, "-chardev", "null,id=console")
	}
	a = append(a, "-serial", "chardev:console")

	// The control channel: a named virtio-serial port on an inherited socket.
	a = append(a,
		"-chardev", fmt.Sprintf("socket,id=control,fd=%d", fds.control),
		"-device", "virtio-serial-device,max_ports=2",
		"-device", "virtserialport,chardev=control,name="+hypervisor.ControlPortName,
	)

	if fds.nic >= 0 {
		a = append(a,
			"-netdev", fmt.Sprintf("stream,id=net0,addr.type=fd,addr.str=%d", fds.nic),
			"-device", "virtio-net-device,netdev=net0,mac="+cfg.MAC,
		)
	}
	if cfg.RootImage != "" {
		a = append(a,
			"-drive", "file="+optEscape(cfg.RootImage)+",if=none,id=root,format=raw,readonly=on",
			"-device", "virtio-blk-device,drive=root",
		)
	}
	if cfg.Workspace != "" {
		// security_model=none: guest writes become ordinary files owned by
		// the user running capsem (ownership and mode changes the host
		// refuses are ignored) — what a workspace shared with the user
		// wants; mapped-xattr would hide the guest's view in xattrs.
		fsdev := "local,id=workspace,path=" + optEscape(cfg.Workspace) + ",security_model=none"
		if cfg.WorkspaceReadOnly {
			fsdev += ",readonly=on"
		}
		a = append(a,
			"-fsdev", fsdev,
			"-device", "virtio-9p-device,fsdev=workspace,mount_tag="+hypervisor.WorkspaceTag,
		)
	}
	return a
}
