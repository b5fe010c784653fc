// Package boot holds the steps capsem-agent takes as the guest's PID 1,
// each a small function: read the kernel command line (bootparam.Parse), mount
// the kernel filesystems (EarlyMounts), load the kernel modules of the
// initramfs's list (ParseModuleList, LoadModules), mount the root image
// read-only under an overlay whose writable layer is a tmpfs or the
// sandbox's ext4 disk and switch into it (MountRoot, SwitchRoot), grow
// that disk's filesystem online to fill its device (GrowDisk: the host
// only lengthens the file), finish the system mounts (SystemMounts),
// configure the NIC over rtnetlink from the command line or DHCP
// (ConfigureNetwork),
// mount the workspace (WorkspaceMount: 9p under QEMU, virtiofs under vz),
// install the capsem CA (InstallCA, CAEnv), lock the kernel down
// (EarlySysctls, LockdownSysctls, SwapOff), find the control port
// (FindPort, OpenPort, NewVsockListener) and power off (Poweroff).
//
// The kernel command line it reads is the boot contract of
// guest/bootparam, which parses it and lists its parameters.
//
// What this package must never do: give the guest a network path of its
// own (it configures only the NIC capsem terminates), leave the kernel
// unlocked after a successful boot, or guess: a malformed command line is
// an error that names the parameter. It never formats or shrinks the
// writable disk: the host makes it, and a disk that is not ext4 is refused.
package boot
