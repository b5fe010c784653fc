// Package guest is the root of what runs inside the VM and what builds it:
// proto/ (the host↔guest control channel), agent/ (the agent that runs
// commands and reports file events), boot/ (the PID-1 steps before it),
// internal/fdctl/ (a system call on a file's descriptor, for agent/ and
// boot/), cmd/capsem-agent/ (the static /init binary), image/ (the pinned
// kernel, the initramfs and the root filesystem, built on the host) and
// diagnostics/ (capsem-doctor, the in-guest pytest suite).
//
// Nothing in the guest may open a network path of its own: the guest's only
// way out is its NIC, which netstack terminates in the host process. The
// agent is trusted by nobody on the host: what it reports is checked there
// (guest/proto's limits, the sandbox's guest record).
package guest
