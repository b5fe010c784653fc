// Package bootparam is the boot contract between capsem on the host and
// capsem-agent, the guest's PID 1: the capsem.* kernel parameters
// (BootParams — the host writes String, the guest reads Parse), the name of
// the virtio-serial port the control channel runs on (ControlPort) and the
// mount tag of the workspace (WorkspaceTag). It is to booting what
// guest/proto is to the control channel: the one place both sides take
// these from.
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
//	capsem.rw=/dev/vdb                  an ext4 disk for the root's writable layer (default: a tmpfs)
//	capsem.ws=9p|virtiofs|none          workspace filesystem (default none)
//	capsem.ws.tag=workspace             its mount tag
//	capsem.ws.path=/workspace           its mount point
//	capsem.wsdefer=1                    do not mount it at boot: the first Thaw does (a boot snapshot)
//	capsem.port=capsem.control          virtio-serial port name of the control channel
//	capsem.vsock=PORT                   serve on vsock instead (Apple vz)
//	capsem.ca=BASE64                    a CA certificate (DER or PEM, base64)
//	capsem.modules=/lib/modules/capsem.order
//	capsem.lockdown=0                   skip the sysctl lockdown (debugging only)
//	capsem.debug=1                      log every step on the console
//
// Stability: these names and values are a contract between two binaries
// built apart (capsem, and the agent inside a cached guest image). Add a
// key; never rename one or change what a value means. String's word order
// is kept too (see String), so that the command line a guest gets changes
// only when a parameter does.
//
// It imports nothing of capsem's, so that host and guest code can both
// import it. It must never guess: a malformed value is an error that names
// the parameter, an unknown capsem.* key is kept and reported rather than
// dropped, and the zero BootParams is the safe one (the lockdown on).
package bootparam
