// Package guestns is the guest of the MITM benchmarks (mitmbench,
// mcpbench): a capsem-net process started with a policy of the bench's own,
// and a network namespace whose TAP is pumped to capsem-net's QEMU socket
// and leased an address by its DHCP, so that a client run with
// [Env.NS].Command takes the path a sandboxed agent takes.
//
// It never builds capsem-net (package peerbin does) and never decides what
// the policy says; it is bench code, run as root, never imported by capsem
// itself.
package guestns
