// Package hypervisor will hold the VM backends behind one small interface
// (start, wait, stop, control channel, network frames): qemu on Linux
// (microvm, PVH boot, KVM when the CPU really has it, TCG otherwise) and vz
// on macOS behind a build tag.
//
// It is empty until the `capsem run` issue lands. It must never give a guest
// a network path that does not go through netstack.
package hypervisor
