// Command portbench measures the way in: a guest's TCP ports published on
// the host, through capsem-net (its gvproxy services API, the same
// ports.Publisher and netstack.Stack.Inbound as `capsem start --publish`),
// gvproxy's expose and passt's -t, side by side in one run, over the same
// namespace harness as netbench: iperf3 and an HTTP/1.1 server in the guest
// namespace, iperf3 and an HTTP client on the host's loopback, and the same
// clients against the same servers on the host's loopback directly, the
// baseline of the added latency.
//
// Run as root: go tool task bench:ports (or go run ./bench/portbench -h).
package main
