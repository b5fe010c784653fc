// Command mitmbench measures what capsem's TLS interception (package mitm)
// costs, side by side in one run over the namespace harness of
// tests/harness: a guest namespace whose TAP is pumped to capsem-net, and an
// HTTPS upstream (HTTP/2 and HTTP/1.1, a CA of the benchmark's own; HTTP/3
// too for the HTTP/3 comparison below) on host loopback, reached four
// ways, or five:
//
//   - direct: from the host straight to the upstream's loopback port;
//   - pass: from the guest through capsem-net, name listed under
//     [tls] passthrough, so the flow is plain TCP forwarding with TLS end to
//     end;
//   - mitm: from the guest through capsem-net's MITM, which terminates TLS
//     with a leaf of the capsem CA, decides and records every request and
//     forwards it over verified TLS; no secret, [dlp] action = "off";
//   - mitmproxy: Debian's mitmproxy (mitmdump) in transparent mode, the
//     peer: a namespace of its own routed through the host over a veth
//     pair, an nft table redirecting its port 443 to mitmdump, which
//     streams large bodies and verifies the upstream as the MITM does
//     (mitmproxy.go). Left out, with a message, when mitmdump or nft is
//     missing; not in the HTTP/3 comparison (mitmproxy has no HTTP/3);
//   - mitm-secrets (only when named in -paths): the same host through a
//     second capsem-net whose policy has two [[secret]] tables, BENCH_TOKEN
//     bound to the host (a fixed placeholder, the real value from a file)
//     and OTHER_TOKEN bound to api.other.test, and [dlp] action = "log"
//     with every detector. Its report columns give it against mitm, the
//     target being 90 % of mitm: secrets and DLP may cost a tenth of the
//     MITM's rate, no more.
//
// Every client sends Authorization: Bearer TOKEN with every request:
// BENCH_TOKEN's placeholder on mitm-secrets, on the other paths a token of
// the same length that no policy knows. The upstream refuses any other value, so
// a placeholder the MITM failed to replace fails the run, and it prints on
// exit how many requests carried the real value.
//
// It measures a large download and a large upload (a POST of -bytes from a
// file, -ul-body: the download's bytes or JSON lines of words) with curl
// (Gbit/s), over HTTP/1.1 and HTTP/2 (-dl-protos), keep-alive requests/s
// with a small load generator (this program re-executed as "loadgen",
// inside the namespace with ip netns exec or on the host), and the
// per-request latency at concurrency 1 (p50, p99) — with h1-new in
// -rps-protos (the default), also the requests/s of a client that opens a
// new connection, with a full TLS handshake, for every request (curl in a
// loop), one of the figures issue 34 compares with mitmproxy, and with
// -upstream-rtt the upstream behind a relay that puts it that round trip
// away from every path (rtt.go) — each the median of
// -reps repetitions with a fresh capsem-net and namespace; and the CPU each
// party used during each run. The upstream runs as a process of its own
// (this program re-executed as "upstream") so that its CPU is counted
// apart from the frame pump's.
//
// The HTTP/3 comparison (-skip h3 leaves it out, -skip
// dl,ul,rps,lat runs it alone) measures HTTP/3 beside HTTP/2 with the same
// Go client (the "fetch" and "loadgen" sub-modes: net/http's HTTP/2,
// quic-go's http3.Transport), one connection each: a -h3-bytes download,
// requests/s of -h3-streams concurrent GET /ping, and the latency at
// concurrency 1, on the paths of -h3-paths: direct (host to upstream), mitm
// (the upstream serves HTTP/3 on the UDP port of its TCP port's number, so
// the MITM forwards HTTP/3 over HTTP/3) and mitm-h2up (h2up.test, a second
// upstream process without HTTP/3: the MITM forwards HTTP/3 over HTTP/2).
// Every download checks which protocol the upstream was reached over.
// The guest's quic-go sizes its UDP buffers with SO_RCVBUFFORCE (the
// benchmark runs as root), so net.core.rmem_max needs no change.
//
// Run as root from the repository root: go tool task bench:mitm (or
// go run ./bench/mitmbench -h).
package main
