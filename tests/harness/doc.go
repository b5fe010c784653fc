// Package harness runs real programs as capsem's guest without a VM: a Linux
// network namespace whose only interface is a TAP device, and a pump that
// carries the TAP's frames to a frame socket (capsem-net's, gvproxy's,
// passt's) with the same framing QEMU uses. curl, dig, python3, ping and
// iperf3 started in the namespace see exactly the network a VM guest sees.
//
// It needs root, /dev/net/tun, iproute2 and busybox (udhcpc). Requirements
// reports what is missing so tests can skip with a clear reason.
package harness
