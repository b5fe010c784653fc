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
// here, dhcp.go), DNS (fake DNS, dns.go, to any destination address) and
// QUIC to port 443 (quic.go). Everything else is dropped, and every drop
// is recorded as an event (rate-limited per reason, with exact counts).
//
// QUIC is decided on its first Initial as TCP is on the SYN, on any port:
// to an address fake DNS handed out, for a name allowed on port 443, under
// [quic] mode = "intercept", it starts a flow that a DatagramFlowHandler
// (the MITM) reads as a net.PacketConn; anything else gets ICMP port
// unreachable, with the reason the SYN would get (direct-ip,
// port-not-allowed, …; quic-unserved on another port the policy allows),
// so the client falls back to TCP at once. At most
// MaxQUICHandshakes (256) flows are in their handshake; Initials beyond
// are dropped as quic-initial-flood. A flow counts against MaxFlows and
// ends after QUICIdleTimeout (30 s) without a datagram.
//
// Fake DNS (dns.go, dnspool.go) answers an allowed name with an address
// from 198.19.0.0/16 and anything else with NXDOMAIN. An address stays with
// its name until the pool runs out; then the least recently used address
// with no live flow goes to the new name (the old name no longer maps to
// it). Names that only a wildcard entry allows hold at most all but 4,096
// addresses, which stay for exactly listed names, and at most
// [dns] max_wildcard_names distinct ones (4,096 by default) get an address
// per session; beyond that, NXDOMAIN and a wildcard-name-cap event. Query
// names are stored in RFC 1035 presentation form (\DDD for any byte that is
// not printable ASCII), and dns_events.answer is the address or the RCODE
// the guest got (NXDOMAIN, NOERROR, SERVFAIL, REFUSED, …).
//
// Fake DNS never asks a real resolver. A flow does: dialling a name makes
// the host resolve it (unless [upstream] resolve pins it), and under a
// wildcard entry the guest chooses that name, so labels of its choosing
// reach the zone's name servers. The per-session cap on wildcard names
// bounds how many.
//
// TCP goes through gVisor in promiscuous and spoofing mode, so the stack
// answers for any destination. The flow decision is made on the SYN,
// before the handshake completes (syn.go): only an address fake DNS handed
// out for an allowed name, on an allowed port, is dialled upstream
// (dial.go), and only after the upstream connect succeeds does the guest
// get its SYN-ACK. Anything else gets a RST. Host answers in private,
// loopback, link-local or metadata ranges are refused unless the policy
// says allow_private. The FlowHandler then gets the connection and its
// Flow (flow.go); Splice copies a flow byte for byte (splice.go).
//
// The one way in (inbound.go): Stack.Inbound carries a connection the
// host accepted on a published port into the guest, opening a TCP
// connection from the gateway to the guest's port, counted against
// MaxFlows, refused when it cannot be recorded, and recorded with
// direction inbound. Nothing the guest sends opens one.
//
// Addresses: guest link 198.18.0.0/24, gateway 198.18.0.1 (DNS, DHCP),
// guest 198.18.0.2, fake-DNS pool 198.19.0.0/16.
//
// What a hostile guest can make the host hold is bounded (limits.go,
// dnstcp.go): MaxInFlightSYN (1,024) SYNs awaiting a decision or a dial —
// beyond it SYNs are dropped, the guest retransmits, and each drop is
// recorded as syn-cap; MaxFlows (4,096) open connections, beyond it a RST
// and flow-cap; MaxDNSTCPConns (64) DNS-over-TCP connections, each with
// 4 KiB buffers and one answer in flight, beyond it a RST and dns-tcp-cap.
// Events a guest can repeat at will — refused SYNs, DNS answers, DHCP
// answers, dropped frames — are recorded like drops: 50 a second per
// reason, then one event whose Count says how many it stands for. The
// outcome of every upstream dial and every flow is one event each.
//
// Fail closed: before a flow is dialled or an allowed name is answered, the
// Recorder is asked whether it can record (Admit). When it cannot (a full
// disk), the SYN gets a RST and the query SERVFAIL, with reason
// store-unavailable, and the user is warned once until recording resumes.
//
// A reset on either side of a spliced flow resets the other side, so that a
// truncated stream is never passed on as a complete one.
//
// What is ours and what is borrowed: the TCP/IP stack is gVisor's
// (gvisor.dev/gvisor/pkg/tcpip), with its TCP forwarder (in-flight SYN cap
// raised to 1024 from gvproxy's 10) and SACK and large, auto-tuned buffers
// on, RACK off (its per-ACK walk of the window cost more than the losses it
// recovers on a link that never drops), and gVisor's GSO toward the guest
// (segments of up to 64 KiB inside, cut to the MTU on the way out), GRO of
// the guest's in-order segments on the way in (gro.go). The link endpoint,
// transports, guard, DHCP and DNS servers are capsem's own rather than
// gvisor-tap-vsock's: gvproxy's endpoint takes a global lock per frame and
// allocates a buffer per frame, its DNS server forwards to real resolvers
// and binds to the gateway only, and its DHCP and port forwarding do not
// make a policy decision before the handshake. Here
// writes are batched into one reused buffer and one syscall, and reads are
// zero-copy out of a large buffered reader (one copy into gVisor's pooled
// buffers). gvisor-tap-vsock's gvproxy remains the benchmark peer (bench/)
// and the model for the --listen-* flags.
//
// netstack never imports mitm: allowed flows go to a FlowHandler, and QUIC
// flows to a DatagramFlowHandler, both of which the MITM implements. It
// must never forward a guest packet it did not decide on, never ask a real
// resolver on the guest's behalf except to dial an allowed name, never let
// a flow or an allowed answer happen that it cannot record, never let an
// event go uncounted (repeated ones are aggregated, not dropped), and
// never let a guest grow what the host holds without a bound.
package netstack
