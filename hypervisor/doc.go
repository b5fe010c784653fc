// Package hypervisor is the one small interface capsem boots guests through:
// a VM starts, waits, stops, and exposes its control channel (the
// virtio-serial port bootparam.ControlPort under qemu, vsock under vz) and
// its console log. Lifecycle holds what both backends do from Start to the
// VM's end.
// Backends live in subpackages: qemu (Linux: microvm, PVH boot, KVM when the
// CPU really has it, TCG otherwise) and vz (macOS, Apple's Virtualization
// framework, compiled only with -tags vz; nothing else in the tree imports
// it).
//
// Snapshots: a guest's RAM in a shared file (Config.RAMFile) is saved by
// copying it, sparse (sparsecopy.go) or compressed as a RAM image
// (ramimage.go), and a restore (Config.Restore) starts from the state and
// RAM saved. Neither file is ever read from a guest.
//
// A backend must never give a guest a network path that does not go through
// netstack: the only NIC a VM gets is the Config.NIC socket, whose other end
// the caller hands to netstack (netstack.NewStreamConn for qemu's stream
// socketpair, netstack.NewDatagramConn for vz.DatagramPair). No user-mode
// networking, no TAP, no host-forwarded ports.
package hypervisor
