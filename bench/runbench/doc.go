// Command runbench measures `capsem run --cold -- true` wall time against a
// bare QEMU boot of the same kernel and initramfs, in the same run,
// alternating the two so that machine noise hits both alike. --cold: both
// boot the kernel; a run from the boot snapshot is bench/snapbench's.
//
// The bare boot is the qemu backend started with only the kernel and the
// initramfs (no root image, no NIC, no workspace): from exec until the
// guest's /init — the same capsem-agent — writes its first byte on the
// control channel, then QEMU is killed. `capsem run -- true` is the whole
// command as a user runs it: boot with root image, NIC and workspace,
// handshake, exec, exit, power-off, events flushed.
//
// Run it as `go tool task bench:run` (root; builds the guest if needed).
// Linux only: the qemu backend.
package main
