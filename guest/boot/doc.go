// Package boot holds the steps capsem-agent takes as the guest's PID 1,
// each a small function: read the kernel command line (ParseCmdline), mount
// the kernel filesystems (EarlyMounts), load the kernel modules of the
// initramfs's list (ParseModuleList, LoadModules), mount the root image
// read-only under a tmpfs overlay and switch into it (MountRoot,
// SwitchRoot), finish the system mounts (SystemMounts), configure the NIC
// over rtnetlink from the command line or DHCP (ConfigureNetwork),
// mount the workspace (WorkspaceMount: 9p under QEMU, virtiofs under vz),
// install the capsem CA (InstallCA, CAEnv), lock the kernel down
// (EarlySysctls, LockdownSysctls, SwapOff), find the control port
// (FindPort, OpenPort, ListenVsock) and power off (Poweroff).
//
// Kernel command line (all optional):
//
//	capsem.ip=198.18.0.2/24|dhcp|none   address (default dhcp)
//	capsem.gw=198.18.0.1                default gateway
//	capsem.dns=198.18.0.1[,…]           resolv.conf
//	capsem.mtu=N                        NIC MTU (576..65535)
//	capsem.if=eth0                      NIC (default eth0, else the first)
//	capsem.hostname=capsem
//	capsem.root=/dev/vda                root image (default: stay in the initramfs)
//	capsem.rootfs=erofs|squashfs|auto   default auto (superblock magic)
//	capsem.ws=9p|virtiofs|none          workspace filesystem (default none)
//	capsem.ws.tag=workspace             its mount tag
//	capsem.ws.path=/workspace           its mount point
//	capsem.port=capsem.control          virtio-serial port name of the control channel
//	capsem.vsock=PORT                   serve on vsock instead (Apple vz)
//	capsem.ca=BASE64                    a CA certificate (DER or PEM, base64)
//	capsem.modules=/lib/modules/capsem.order
//	capsem.lockdown=0                   skip the sysctl lockdown (debugging only)
//	capsem.debug=1                      log every step on the console
//
// What this package must never do: give the guest a network path of its
// own (it configures only the NIC capsem terminates), leave the kernel
// unlocked after a successful boot, or guess: a malformed command line is
// an error that names the parameter.
package boot
