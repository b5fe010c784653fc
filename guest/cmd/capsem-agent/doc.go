// Command capsem-agent is the guest side of capsem: a static Go program
// (CGO_ENABLED=0) that runs as /init, PID 1, in the initramfs of capsem's
// guest, and serves the host over the control channel.
//
// As PID 1 it boots the guest (package boot): mounts /dev, /proc, /sys and
// /run, reads the capsem.* kernel parameters, turns IPv6 off, loads the
// modules of /lib/modules/capsem.order, mounts the root image read-only
// under an overlay (its writable layer a tmpfs, or the sandbox's ext4 disk,
// grown online to fill its device) and switches into it, mounts /dev/pts, /dev/shm and
// /tmp, removes /dev/mem, /dev/kmem and /dev/port, names the host, configures the NIC (command line or DHCP) and
// resolv.conf, mounts the workspace (9p or virtiofs; with capsem.wsdefer=1
// it only makes its directory, and the server mounts it at the first Thaw,
// so that a boot snapshot holds no mounted 9p export), installs a CA given
// on the command line, turns swap off and locks the kernel down
// (modules_disabled, kptr_restrict, dmesg_restrict, kexec off). Once the
// root is in place it starts itself again as `capsem-agent serve
// --boot-fd 3`, whose start-up overlaps the remaining steps; when they are
// done PID 1 writes what it did to /run/capsem/boot.json and to the
// server's pipe, and the server opens the control channel (the
// virtio-serial port named capsem.control, or vsock under vz) and runs
// package agent's Serve, with the workspace's mount (Freeze unmounts it for
// a snapshot, Thaw mounts it again), the clock and the kernel's random
// generator to set at Thaw. PID 1 itself only reaps: orphans reparent to it, and the server
// keeps exact exit statuses for the commands it started. When the server
// ends — the host sent Shutdown, or the channel closed — PID 1 stops every
// process, syncs and powers the machine off. A boot step that cannot be
// done safely powers off too, after saying why on the console.
//
// `capsem-agent serve --stdio` (or --port, --vsock) runs the server alone,
// for tests and for guests booted by something else.
//
// What it must never do: run a command the host did not ask for, pass its
// own environment to one, open any network path of its own, or keep a guest
// running whose kernel it could not lock down.
package main
