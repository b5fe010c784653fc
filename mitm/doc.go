// Package mitm is capsem's TLS interception. It is a netstack.FlowHandler:
// netstack hands it every allowed TCP flow, and for flows to port 443 it
//
//   - reads the guest's ClientHello (package tlshello) and refuses the flow
//     when there is no SNI or the SNI is not the name the guest resolved;
//   - splices names listed in the policy's [tls] passthrough without
//     interception, after replaying the ClientHello upstream;
//   - otherwise terminates the guest's TLS (1.2/1.3, ALPN h2 and http/1.1)
//     with a leaf minted by the installation's CA (package ca), serves
//     HTTP/1.1 or HTTP/2 to the guest, decides every request against the
//     policy in force at that moment (Host must match the SNI; [[http]]
//     rules), runs every allowed request through the inspectors
//     (inspectors.go, chain.go; package inspect), and forwards it upstream
//     over verified TLS, streaming bodies both ways without holding them,
//     on connections kept alive across guest connections (package
//     upstream: per policy, name and port; a request takes the pool of the
//     policy that decided it, so a connection is only transport and never
//     carries a request decided under another policy than the one it was
//     opened under);
//   - keeps the policy's secrets out of the guest (secrets.go, guard.go,
//     bodyguard.go, reflect.go): in a request to a secret's host its
//     placeholder becomes the real value where the secret's `in` says
//     (header and Basic credentials, query, path, streamed body; header
//     and query by default), the placeholder going anywhere else and the
//     real value coming from the guest are refused in every encoding
//     (403), and every HTTP response of a secret's host (header, 1xx,
//     trailers, the body decoded) is scanned for the real value in every
//     encoding and fold, which reaches the guest as the placeholder;
//   - scans every decrypted request for credentials ([dlp], package dlp):
//     the event says dlp-match, and with action "block" the request is
//     refused;
//   - sees MCP by its content on any host (the inspector mitm/inspect/mcp;
//     package mcpscan parses): every JSON-RPC request and
//     notification in a request body, a JSON response or an event stream
//     is one mcp_call event, its response matched by id across the
//     session's streams; a tools/call an [[mcp.rules]] entry denies is
//     answered by capsem with a JSON-RPC error in the transport's own form
//     and never forwarded (the request body is held whole, up to 4 MiB, to
//     a host with deny rules); under [mcp] hide_denied a tools/list result
//     loses the denied tools;
//   - serves flows to the MCP gateway's name (netstack.Flow.Local: nothing
//     was dialled) through Config.MCPGateway (gateway.go), its requests
//     scanned like any egress;
//   - bounds what a guest can make it hold (limits.go, heldbody.go): a
//     guest HTTP/2 or HTTP/3 connection has at most 100 requests in
//     flight, and the bodies it reads whole before forwarding (to scan
//     them, to decide their MCP calls) take their bytes from a budget per
//     connection and one in all (Config.MaxHeldBodies) and must arrive
//     within Config.HeldBodyDeadline; past either, a 503 or a 408;
//   - records every request as a net event (headers with secret values
//     hashed, in wire order where it is known — see wireorder.go — body
//     previews) and every AI-provider API call as a model_call event with
//     its tool calls and tool results (the inspector
//     mitm/inspect/modelcall; package provider parses).
//
// HandleQUIC (quic.go) is the netstack.DatagramFlowHandler for QUIC to
// port 443: it reads the SNI from the guest's Initials (package quicpeek),
// refuses a mismatch (the netstack answers ICMP port unreachable, so the
// client falls back to TCP), terminates QUIC with a minted leaf (TLS 1.3,
// ALPN h3, no 0-RTT) and serves HTTP/3 into the same request path
// (serveHTTP), forwarding upstream over HTTP/3 when the upstream answers
// QUIC (tried for at most upstream.H3Probe, the answer remembered per
// host), else over TCP (HTTP/2 or HTTP/1.1). Under [quic] mode = "block"
// the h3 offers of upstreams' Alt-Svc are dropped (altsvc.go, a built-in
// inspector).
//
// Other ports are spliced byte for byte by netstack.Splice.
//
// The proxy never forwards a request it has not decided on, never forwards
// one its recorder says it cannot record (store-unavailable: it fails
// closed), never stores a secret header value in clear, never forwards a
// byte of a leaked placeholder or real value it found, and never stores a
// real value (events hold what the guest sent; a leaked real value is
// redacted). It never turns
// a connection into an opaque tunnel except an allowed, logged WebSocket
// upgrade (upgrade.go): other Upgrade tokens and HTTP2-Settings are
// stripped, CONNECT (plain or extended) and PRI are refused, and an
// upstream's 101 to anything but a valid WebSocket handshake is a 502.
// When the host's requests are scanned (the policy has secrets, or [dlp]
// is on for the host), the upgrade is not opaque either: the guest's
// frames are parsed and their payloads scanned as they pass, without
// compression (the extension offer is stripped) and without re-framing
// (wsframe.go, wsguard.go, wshooks.go); a leaked secret, or a credential under [dlp]
// block, closes the connection with 1008 and a denied event, a frame that
// breaks RFC 6455 with 1002.
//
// The packages under mitm, and what each must never do:
//
//   - inspect: the contract between the request path and an inspector
//     (what it sees of an exchange, the hooks it implements). It never
//     imports the core or an inspector, and holds no state.
//   - inspect/mcp, inspect/modelcall: inspectors. They import inspect,
//     never the core; they never set an exchange's decision (they refuse
//     through inspect.Exchange); the core imports them in inspectors.go
//     only, so adding one is its package and one line there.
//   - upstream: the transports (pools, HTTP/1.1, HTTP/2, HTTP/3, roots).
//     It never imports the core or an inspector, decides nothing, and
//     learns a request's policy only from its own context key
//     (upstream.WithRequest).
//   - ca, provider, internal/*: the CA, the AI-provider parsers, and the
//     parsers only the MITM uses (jsonscan, sse, contentcoding, quicpeek,
//     tlshello, mcpscan, pricing, fieldorder); none imports the core.
//
// Words, each with one meaning in this package and those under it:
//
//   - exchange: one request and its response (exchange.go).
//   - inspector, stream: a kind of inspection made once per Proxy, and its
//     part of one exchange (package inspect).
//   - tap: the copy of a body, counted, previewed and decoded, that the
//     streams read beside the bytes forwarded (exchange.go's tap).
//   - head reader: what follows a guest connection's bytes to record the
//     order of each request's header fields (h1heads.go, h2heads.go).
//   - guard: the secrets and DLP stage, the chain's built-in last stream,
//     and each of its parts by what it guards: bodyGuard and codedGuard a
//     request body, reflectGuard a response body, wsGuard a WebSocket's
//     guest frames (netstack's frame guard is another package's word).
//   - transport: how a forwarded request reaches its upstream (package
//     upstream).
package mitm
