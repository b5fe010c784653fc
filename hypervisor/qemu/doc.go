// Package qemu is the Linux hypervisor backend: qemu-system-x86_64 with the
// microvm machine, the guest kernel booted as a PVH ELF (no firmware, no
// bzImage decompression), KVM only when the CPU really has hardware
// virtualisation and TCG otherwise.
//
// Everything the guest touches is passed as an inherited file descriptor or
// an explicit path: the NIC is one end of a socketpair (-netdev stream,
// addr.type=fd) that the caller gives to netstack, the control channel is a
// virtio-serial port on another socketpair, the root image is read-only and
// the workspace is a 9p export. QEMU runs with -sandbox on, -nodefaults and
// -no-user-config, in its own process group, and dies with its parent.
//
// It must never give the guest a network path of its own: no -netdev user,
// no TAP, no forwarded ports; never a NIC socket given by path (QEMU 7.2
// does not fail when nothing listens there, the link is silently dead).
package qemu
