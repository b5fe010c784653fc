package qemu

import (
	"fmt"
	"strings"

	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/hypervisor"
)

// fdLayout says which descriptor numbers the child sees the inherited
// sockets at (3 is the first of exec.Cmd.ExtraFiles). -1: not passed.
type fdLayout struct {
	nic     int
	control int
	console int
	qmp     int
}

// layoutFor numbers the inherited fds: the NIC (when there is one) first,
// then the control socket, then the console's socket (when it is logged),
// then QMP's (when the VM can be snapshotted or is restored).
func layoutFor(haveNIC, haveConsole, haveQMP bool) fdLayout {
	l := fdLayout{nic: -1, control: 3, console: -1, qmp: -1}
	if haveNIC {
		l.nic, l.control = 3, 4
	}
	next := l.control + 1
	if haveConsole {
		l.console, next = next, next+1
	}
	if haveQMP {
		l.qmp = next
	}
	return l
}

// cfgLayout is the layout for cfg.
func cfgLayout(cfg *hypervisor.Config) fdLayout {
	return layoutFor(cfg.NIC != nil, cfg.ConsoleLog != "", snapshots(cfg))
}

// snapshots reports whether cfg's VM talks QMP: it can be snapshotted
// (RAM in a file) or starts from a snapshot.
func snapshots(cfg *hypervisor.Config) bool { return cfg.RAMFile != "" || cfg.Restore != nil }

// startFacts are what Start learns about the host that the command line
// depends on.
type startFacts struct {
	// runAs is -runas's "uid:gid", or "": QEMU drops to the workspace
	// owner after it has opened its files (see workspaceOwner).
	runAs string
}

// optEscape escapes a value for QEMU's comma-separated option syntax, where
// a literal comma is written twice.
func optEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// kernelCmdline is the guest kernel's command line: the measured-fast base,
// the caller's words, then the boot parameters with what this backend owns
// (the root device when there is a root image, 9p for the workspace).
// With an initramfs its /init (guest/boot) mounts the root image, named by
// capsem.root; without one the kernel itself would (root=, which needs
// virtio_blk and the filesystem built in).
func kernelCmdline(cfg *hypervisor.Config, t target, tscKHz int) string {
	w := hypervisor.BaseCmdline(tscKHz)
	if t.console != "ttyS0" {
		// The base names ttyS0; the last console= is /dev/console.
		w = append(w, "console="+t.console)
	}
	p := cfg.Boot
	w = append(w, hypervisor.DiskBoot(cfg, &p)...)
	if cfg.Workspace != "" {
		p.WSFS = "9p"
	}
	w = append(w, cfg.Cmdline...)
	if b := p.String(); b != "" {
		w = append(w, b)
	}
	return strings.Join(w, " ")
}

// buildArgs is QEMU's command line for cfg (already validated).
func buildArgs(cfg *hypervisor.Config, t target, accel Accel, tscKHz int, fds fdLayout, facts startFacts) []string {
	// -runas needs setuid and setgid, which elevateprivileges=deny forbids
	// (QEMU dies of SIGSYS, tried); once QEMU has dropped to a non-root
	// user those calls cannot give it any privilege back.
	elevate := "deny"
	if facts.runAs != "" {
		elevate = "allow"
	}
	a := []string{
		"-M", t.machine, // see target
		"-accel", accel.qemuArg(),
		"-cpu", t.cpu(accel),
		"-smp", fmt.Sprint(cfg.CPUs),
		"-m", fmt.Sprintf("%dM", cfg.MemoryMiB),
	}
	a = append(a, memoryArgs(cfg)...)
	a = append(a,
		"-no-reboot",
		"-nodefaults",
		"-no-user-config",
		"-nographic",
		"-sandbox", "on,obsolete=deny,elevateprivileges="+elevate+",spawn=deny,resourcecontrol=deny",
		"-kernel", cfg.Kernel,
	)
	if facts.runAs != "" {
		a = append(a, "-runas", facts.runAs)
	}
	if cfg.Initramfs != "" {
		a = append(a, "-initrd", cfg.Initramfs)
	}
	a = append(a, "-append", kernelCmdline(cfg, t, tscKHz))

	// The serial console (target.console) goes to a socket whose other end capsem
	// writes to the log under a cap (hypervisor.ConsoleLog), or nowhere.
	if fds.console >= 0 {
		a = append(a, "-chardev", fmt.Sprintf("socket,id=console,fd=%d", fds.console))
	} else {
		a = append(a, "-chardev", "null,id=console")
	}
	a = append(a, "-serial", "chardev:console")

	// The control channel: a named virtio-serial port on an inherited socket.
	a = append(a,
		"-chardev", fmt.Sprintf("socket,id=control,fd=%d", fds.control),
		"-device", t.virtio("serial")+",max_ports=2",
		"-device", "virtserialport,chardev=control,name="+bootparam.ControlPort,
	)

	if fds.nic >= 0 {
		a = append(a,
			"-netdev", fmt.Sprintf("stream,id=net0,addr.type=fd,addr.str=%d", fds.nic),
			"-device", t.virtio("net")+",netdev=net0,mac="+cfg.MAC,
		)
	}
	if cfg.RootImage != "" {
		a = append(a,
			"-drive", "file="+optEscape(cfg.RootImage)+",if=none,id=root,format=raw,readonly=on",
			"-device", t.virtio("blk")+",drive=root",
		)
	}
	if cfg.DataDisk != "" {
		// The second virtio-blk device, hence hypervisor.DataDevice. The
		// guest's discards punch holes in the sparse file (discard=unmap);
		// cache=writeback (QEMU's default) leaves the host's page cache in
		// the path and honours the guest's flushes, so what ext4's journal
		// commits is on the host's disk.
		a = append(a,
			"-drive", "file="+optEscape(cfg.DataDisk)+",if=none,id=data,format=raw,discard=unmap,cache=writeback",
			"-device", t.virtio("blk")+",drive=data",
		)
	}
	if cfg.TransferDisk != "" {
		// The third, hence hypervisor.TransferDevice. No discard: the host
		// punches its holes itself after each transfer.
		a = append(a,
			"-drive", "file="+optEscape(cfg.TransferDisk)+",if=none,id=transfer,format=raw,cache=writeback",
			"-device", t.virtio("blk")+",drive=transfer",
		)
	}
	if cfg.Workspace != "" {
		// security_model=mapped-xattr: the guest's owners, modes and special
		// files live in user.virtfs.* extended attributes of the host files,
		// never in the files themselves. QEMU creates every file as itself
		// (the workspace owner, see startFacts.runAs) with fmode/dmode, so a
		// guest's chown 0:0 + chmod 6755 leaves a plain 0644 file owned by
		// the user on the host; mknod and mkfifo leave regular files, and a
		// guest's symlink is a small regular file holding its target, which
		// no host program follows. The guest sees host files with their host
		// owner and mode. With security_model=none (before) a guest root
		// planted setuid-root binaries in the user's directory. mapped-file
		// would do the same with .virtfs_metadata directories in the
		// workspace, which a git tree would show.
		fsdev := "local,id=workspace,path=" + optEscape(cfg.Workspace) + ",security_model=mapped-xattr,fmode=0644,dmode=0755"
		if cfg.WorkspaceReadOnly {
			fsdev += ",readonly=on"
		}
		a = append(a,
			"-fsdev", fsdev,
			"-device", t.virtio("9p")+",fsdev=workspace,mount_tag="+bootparam.WorkspaceTag,
		)
	}
	if fds.qmp >= 0 {
		// QMP on an inherited socket: no path for anything else to
		// connect to. A restore waits for its state there (-incoming
		// defer): 7.2 takes x-ignore-shared only from QMP, before the
		// stream is read.
		a = append(a,
			"-chardev", fmt.Sprintf("socket,id=qmp,fd=%d", fds.qmp),
			"-mon", "chardev=qmp,mode=control",
		)
	}
	if cfg.Restore != nil {
		a = append(a, "-incoming", "defer")
	}
	return a
}

// memoryArgs puts the guest's RAM in a file when it is to be snapshotted
// (shared: the snapshot copies the file) or restored privately
// (copy-on-write over the saved RAM, shared by every restore of it).
func memoryArgs(cfg *hypervisor.Config) []string {
	path, share := cfg.RAMFile, "on"
	if r := cfg.Restore; r != nil && r.Private {
		path, share = r.RAM, "off"
	}
	if path == "" {
		return nil
	}
	return []string{
		"-object", fmt.Sprintf("memory-backend-file,id=ram0,size=%dM,mem-path=%s,share=%s", cfg.MemoryMiB, optEscape(path), share),
		"-machine", "memory-backend=ram0",
	}
}
