// Package qemu is the Linux hypervisor backend. The kernel file says which
// machine (target.go): an x86-64 PVH ELF boots on qemu-system-x86_64's
// microvm (no firmware, no bzImage decompression, virtio-mmio), an arm64
// Image on qemu-system-aarch64's virt (QEMU's own boot code and device
// tree, virtio over PCI as under the Virtualization framework). KVM only
// when the guest is the host's architecture and the host really has
// hardware virtualisation, TCG otherwise.
//
// Everything the guest touches is passed as an inherited file descriptor or
// an explicit path: the NIC is one end of a socketpair (-netdev stream,
// addr.type=fd) that the caller gives to netstack, the control channel is a
// virtio-serial port on another socketpair, the root image is read-only and
// the workspace is a 9p export. QEMU runs with -sandbox on, -nodefaults and
// -no-user-config, in its own process group, and dies with its parent. The
// serial console goes over a socketpair into a capped log
// (hypervisor.ConsoleLog), so a guest cannot fill the disk with it.
//
// # The workspace
//
// 9p with security_model=mapped-xattr,fmode=0644,dmode=0755: the guest's
// owners, modes and special files are kept in user.virtfs.* extended
// attributes of the host files, never in the files. Every file the guest
// creates is a plain file or directory owned by QEMU's user, 0644 or 0755;
// a guest's chown, chmod 6755, mknod or mkfifo changes only the attributes,
// and its symlinks are regular files holding the target. When capsem runs
// as root and the workspace belongs to another user, QEMU drops to that
// user with -runas once it has opened its files, so the guest's files are
// the user's. The guest sees host files with their host owner and mode.
// The workspace must be on a filesystem with user extended attributes
// (ext4, xfs, btrfs, tmpfs): Start checks.
//
// # Snapshots
//
// A VM whose RAM is a file (hypervisor.Config.RAMFile, on tmpfs) talks QMP
// on one more inherited socket and can be paused, its device state
// migrated to a descriptor (x-ignore-shared: the RAM stays out of the
// stream) and its RAM file copied sparse beside it (snapshot_linux.go). A
// restore starts QEMU with -incoming defer and loads the state over QMP,
// its RAM copied into a new file or mapped copy-on-write from the saved
// one; a state saved on another machine (machine.go: QEMU version,
// accelerator, CPU model, vCPUs, memory, devices) is refused first.
//
// It must never give the guest a network path of its own: no -netdev user,
// no TAP, no forwarded ports; never a NIC socket given by path (QEMU 7.2
// does not fail when nothing listens there, the link is silently dead); and
// never let guest ownership or modes reach host files (security_model=none
// let a guest plant setuid-root binaries in the user's directory).
package qemu
