// Package tests holds capsem's end-to-end tests, each with real programs
// against a real capsem process:
//
//   - the namespace tests (netns_*, mitm_*, provider_, store_diskfull_,
//     export_) run real clients (dig, curl, python3, node, ping, openssl,
//     busybox udhcpc) in a Linux network namespace whose only
//     interface is a TAP device pumped to a real capsem-net (see
//     tests/harness), and assert both what the client saw and the event
//     capsem-net recorded in its store;
//   - the `capsem run` tests (run_, walls_run_, env_, claude_) boot the real
//     default guest under QEMU with its NIC in capsem's netstack, and assert
//     the command's output and exit code, the session's events, and what a
//     hostile guest could not do to the host;
//   - the doctor tests (doctor_) run `capsem doctor`, the in-guest suite.
//
// They need root, /dev/net/tun, QEMU, a built guest and those programs;
// without them they skip and say why. .ci/run installs everything, so in CI
// they run.
package tests
