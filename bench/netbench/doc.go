// Command netbench measures guest-to-host throughput and short-connection
// rate through capsem-net, gvproxy (gvisor-tap-vsock) and passt, side by
// side in one run, over the same namespace harness and the same QEMU stream
// framing: iperf3 in a network namespace whose TAP is pumped to the peer's
// socket, to an iperf3 server on host loopback.
//
// Run as root: go tool task bench (or go run ./bench/netbench -h).
package main
