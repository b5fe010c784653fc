// Package arch names the guest architectures capsem builds and boots —
// amd64 (QEMU on x86-64 Linux) and arm64 (Apple silicon under the
// Virtualization framework, and QEMU's virt machine on any Linux) — and is
// the one home of what each is called by the tools that must agree on it:
// Go (GOARCH), Debian (dpkg and mmdebstrap --arch), uname -m and QEMU's
// qemu-system-*, the ELF machine of the agent and the kernel file's format.
//
// It must never guess: a name it does not know is an error that lists the
// ones it does, and a kernel file whose format it does not recognise has no
// architecture.
package arch
