// Command soakbench measures what capsem-net holds over time — resident
// memory, goroutines, threads and open file descriptors — beside gvproxy
// (gvisor-tap-vsock) and passt, in one run over the namespace harness of
// tests/harness: a network namespace whose TAP is pumped to the peer's
// socket with QEMU's stream framing, configured by DHCP, and an upstream
// server of this program's own on host loopback.
//
// Three measurements, each peer with a fresh process and namespace:
//
//   - idle: the guest takes a DHCP lease, makes one DNS query and one
//     allowed flow, then idles for -idle (30 s); the peer's RSS at the end;
//   - flows: the guest then opens -flows (1,000) connections to the
//     upstream and holds them open, idle; RSS once they are all
//     established, and again after they are closed;
//   - soak: -soak (10 min) of steady mixed traffic from the guest — allowed
//     and denied DNS queries, short flows, long transfers both ways, denied
//     SYNs — with RSS, goroutines (capsem-net, through its hidden
//     --debug-addr), threads and fds sampled every -sample; the figures of
//     the first minute against those of the last.
//
// The guest side is python3 in the namespace (guestScript); capsem-net is
// built from this checkout (or -capsem-bin), gvproxy from the Go module
// proxy into -cache, passt is Debian's.
//
// It is a benchmark run by hand (go tool task bench:soak, as root, from the
// repository root; -soak 20s for a smoke run), never a test: it takes about
// 19 minutes, and its figures depend on what else the machine is doing,
// which it reports. It must never reach anything beyond host loopback: the
// names the guest resolves are answered by the peers themselves (passt, which
// would forward DNS to the host's resolver, gets no DNS traffic).
package main
