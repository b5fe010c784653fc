// Package netstack terminates a guest's Ethernet frames in a userspace
// gVisor TCP/IP stack and lets out only what the policy allows.
//
// Frames arrive over a FrameConn: QEMU's stream framing (a 4-byte
// big-endian length, then the frame) on a unix stream socket or an
// inherited fd, one frame per datagram (vfkit, unixgram), or one frame per
// packet (bess, unixpacket). Every frame passes a guard before gVisor sees
// it (guard.go): the guest MAC is locked, spoofed source MACs and IPs are
// dropped, IPv6 is dropped and counted, ARP is answered only for the
// gateway, ICMP only as echo to the gateway, UDP only as DHCP (answered
// here, dhcp.go) and DNS (fake DNS, dns.go, to any destination address).
// Everything else is dropped, and every drop is recorded as an event
// (rate-limited per reason, with exact counts).
//
// TCP goes through gVisor in promiscuous and spoofing mode, so the stack
// answers for any destination. The flow decision is made on the SYN,
// before the handshake completes (tcp.go): only an address fake DNS handed
// out for an allowed name, on an allowed port, is dialled upstream, and
// only after the upstream connect succeeds does the guest get its SYN-ACK.
// Anything else gets a RST. Host answers in private, loopback, link-local
// or metadata ranges are refused unless the policy says allow_private.
//
// Addresses: guest link 198.18.0.0/24, gateway 198.18.0.1 (DNS, DHCP),
// guest 198.18.0.2, fake-DNS pool 198.19.0.0/16.
//
// What is ours and what is borrowed: the TCP/IP stack is gVisor's
// (gvisor.dev/gvisor/pkg/tcpip), with its TCP forwarder (in-flight SYN cap
// raised to 1024 from gvproxy's 10) and SACK and large, auto-tuned buffers
// on. The link endpoint, transports, guard, DHCP and DNS servers are
// capsem's own rather than gvisor-tap-vsock's: gvproxy's endpoint takes a
// global lock per frame and allocates a buffer per frame, its DNS server
// forwards to real resolvers and binds to the gateway only, and its DHCP and
// port forwarding do not make a policy decision before the handshake. Here
// writes are batched into one reused buffer and one syscall, and reads are
// zero-copy out of a large buffered reader (one copy into gVisor's pooled
// buffers). gvisor-tap-vsock's gvproxy remains the benchmark peer (bench/)
// and the model for the --listen-* flags.
//
// netstack never imports mitm: allowed flows go to a FlowHandler, which the
// MITM implements. It must never forward a guest packet it did not decide
// on, never ask a real resolver on the guest's behalf, and never drop an
// event.
package netstack
