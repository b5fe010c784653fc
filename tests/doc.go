// Package tests holds capsem's end-to-end tests. The namespace tests run
// real programs (dig, curl, python3, ping, openssl, busybox udhcpc) in a
// Linux network namespace whose only interface is a TAP device pumped to a
// real capsem-net process (see tests/harness), and assert both what the
// program saw and the event capsem-net recorded in its store.
//
// They need root, /dev/net/tun and those programs; without them they skip
// and say why. .ci/run installs everything so they always run in CI.
package tests
