// Package vz is the macOS hypervisor backend: Apple's Virtualization
// framework through github.com/Code-Hex/vz/v3. It boots the guest with the
// framework's Linux boot loader (no firmware), attaches the root image
// read-only as the first virtio block device, gives the guest one
// virtio-net NIC on a datagram socket whose other end the caller hands to
// netstack, shares the workspace over virtio-fs, writes the virtio console
// (hvc0) to the console log, and talks to the guest agent over virtio-vsock:
// the agent listens on Options.ControlPort (capsem.vsock=PORT on the kernel
// command line) and the host connects to it.
//
// # Building
//
// The files that use the framework need cgo and the macOS SDK, so they are
// built only with the vz build tag on darwin:
//
//	CGO_ENABLED=1 go build -tags vz ./cmd/capsem
//	codesign --entitlements hypervisor/vz/vz.entitlements -s - capsem
//
// The binary must be signed with the com.apple.security.virtualization
// entitlement (vz.entitlements in this directory), or every VM
// configuration fails validation. Without the tag (any other OS, or a plain
// CGO_ENABLED=0 build on a Mac) the package still builds: New returns
// ErrNotBuilt, and DatagramPair, Options and the VM type stay available
// (its snapshot methods return ErrNotBuilt).
//
// Linux CI cannot build the tagged files (no macOS SDK, no cgo for
// darwin): the lint task type-checks them instead, for darwin/arm64 and
// darwin/amd64, with tools/darwintypecheck — every Go expression in this
// package, against the framework binding's Go API; not the binding's C,
// nor anything only the linker or the SDK would see. Only a Mac build is
// the final word: .github/workflows/macos.yml builds and signs it and, on
// a self-hosted Apple silicon runner (GitHub's hosted macOS runners cannot
// run VMs), boots the arm64 image built on Linux and handed over — for
// whoever has one; this project has never run it.
//
// # The guest
//
// It boots the arm64 guest guest/image builds (capsem image build --arch
// arm64, or go tool task image:arm64; on Linux only, the root filesystem
// needs mmdebstrap): the same three files the qemu backend boots on
// arm64, with the boot parameters the sandbox gives any backend
// (Config.Boot). They are the kernel, an uncompressed arm64 Image (the file
// "Image", from image.DefaultKernelARM64); the initramfs, whose /init is
// capsem-agent; and the erofs root, read-only. The initramfs loads the
// modules image.DefaultModulesARM64 names: virtio_pci (the framework puts
// its devices on PCI), virtio_console (hvc0), virtio_net, virtio_blk,
// 9pnet_virtio and 9p (qemu's workspace), virtiofs,
// vmw_vsock_virtio_transport (the control channel), overlay, erofs and
// squashfs.
//
// Config.Kernel must be what the framework's Linux boot loader takes, and
// New checks it before anything is built: on Apple silicon the
// uncompressed Image (arch.IsARM64Image: not Image.gz, not an EFI zboot
// vmlinuz, not the amd64 guest's x86 ELF vmlinux, each refused with what
// to use instead); on an Intel Mac an x86-64 kernel in a form the loader
// takes (only an arm64 Image is refused there; nothing else is checked).
//
// The kernel command line is hypervisor.BaseCmdline(0), console=hvc0,
// (root=/dev/vda ro when there is a root image but no initramfs),
// Config.Cmdline, and then Config.Boot's capsem.* words with what this
// backend owns set in it: capsem.root=/dev/vda with a root image,
// capsem.rw=/dev/vdb with a data disk, capsem.vsock=PORT and, with a
// workspace, capsem.ws=virtiofs under the mount tag bootparam.WorkspaceTag
// (the guest's default: a tag from Config.Boot is replaced by the one the
// share has).
//
// # The VM
//
// Plan (plan.go) is the one home of what the VM contains: the boot
// loader's kernel, initramfs and command line; the vCPUs and memory; the
// virtio console; a virtio-rng device; the disks in attach order (the root
// image read-only as /dev/vda, the data disk as /dev/vdb, the transfer
// disk as /dev/vdc); the NIC; the workspace's virtio-fs device; the
// virtio-vsock device and the agent's port. No memory balloon, no other
// device. New makes it (planFor) and buildMachine only translates it into
// the framework's calls, so the unit tests say what a sandbox's VM
// contains on any OS; the snapshot's machine name is made from it too.
//
// # The workspace
//
// The threat model's mapping guarantee — no setuid, setgid or device file
// and no file of another owner materialises on the host — holds under vz
// as workspace.go says: the framework's virtio-fs server runs in this
// process and creates files with its identity, so New refuses to run as
// root (no other owner, no device node); the guest mounts the share
// nosuid,nodev; and the setuid and setgid bits of a writable workspace
// are cleared when the VM stops (between the guest setting one and the
// stop, another host user who runs that file runs it as the owner; qemu's
// 9p, which keeps guest modes in extended attributes, has no such window).
// A read-only workspace is exported read-only to the framework. Symbolic
// links are where vz falls short of it: the framework's server has no
// mapped mode like 9p's mapped-xattr, so a link the guest makes is, as far
// as is known (not yet seen on a Mac), a real link on the host, pointing
// wherever the guest chose; a host tool that follows it leaves the
// workspace.
//
// # The NIC
//
// The framework's file-handle attachment wants a connected SOCK_DGRAM
// socket, one Ethernet frame per datagram, not the SOCK_STREAM pair with
// 4-byte length prefixes the qemu backend uses: make the pair with
// DatagramPair, give vm to Config.NIC and wrap host with
// netstack.NewDatagramConn.
//
// # Snapshots
//
// VM has what sandbox.Save needs: Machine, Pause, Resume, SaveState and
// SaveRAM (snapshot.go); hypervisor.Config.Restore starts a VM from a
// saved state. They use the framework's own save and restore
// (VZVirtualMachine saveMachineStateToURL and restoreMachineStateFromURL,
// through the binding's SaveMachineStateToPath and
// RestoreMachineStateFromURL), which need macOS 14 or later, and which
// the binding, github.com/Code-Hex/vz/v3 v3.7.1, has only on arm64: on an
// older macOS or an Intel Mac, Pause and a restore refuse with an error
// that says so (and to start the sandbox cold); Pause refuses so that a
// save fails before the guest is stopped.
//
// The framework saves the whole machine into one file: the devices'
// state and all of the guest's RAM (the file's format is Apple's and not
// documented; capsem treats it as opaque). SaveState saves it to
// f.Name() — the framework takes a path, not a descriptor — by way of a
// new private directory beside it, then makes it 0600 and renames it over
// f.Name(). There is no RAM file: SaveRAM writes an empty 0600 file and
// returns 0, and a restore reads neither hypervisor.Restore.RAM nor
// Config.RAMFile, so Restore.Private (a copy-on-write mapping of the RAM
// file under qemu) means nothing here. The disks are not in the state:
// the caller keeps the data disk as it was at the save, as under qemu.
// The framework's calls cannot be cancelled: Pause, Resume and SaveState
// look at their context before they call it only.
//
// A restore builds the VM exactly as a boot would, loads the state into
// it (the framework leaves it paused) and resumes it; the kernel is not
// booted. The framework refuses a state saved by another configuration;
// capsem refuses first, before anything is built: Machine names the
// macOS version (major.minor), the architecture, the vCPUs, the memory
// and the devices in the order they are configured (with the NIC's MTU
// and a read-only workspace), and a restore whose Machine
// (hypervisor.Restore) differs fails with an error that says to start the
// sandbox cold. Saved states are reported to restore only on the Mac that
// saved them; Machine does not name the Mac, so that refusal is the
// framework's.
//
// None of this has run here: Linux CI has no framework. The unit tests
// run the logic above against a fake machine, and tools/darwintypecheck
// type-checks the calls into the binding; a save and a restore on a Mac
// running macOS 14 or later are still to be done. The control channel
// after a restore rests on this: vsock connections do not survive a save
// and restore (the restored VM is a new one on the host's side), so the
// new VM's controlConn dials the agent again, and the agent, which listens
// for as long as it serves, takes a connection that arrives while it is
// frozen as its new host's (agent.Config.Conns) and answers its Thaw
// there. The agent's half is tested on Linux; the framework's reset of the
// guest's old connection is not relied on (the new connection closes the
// old one).
//
// What this package must never do: give the guest a network path that does
// not go through netstack, or a host directory but the workspace. No NAT
// attachment, no bridged attachment, no vsock port but the control
// channel's, no shared directory but the one Plan.Workspace names.
package vz
