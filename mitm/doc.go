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
//     rules), and forwards allowed requests upstream over verified TLS,
//     streaming bodies both ways without holding them, on connections kept
//     alive across guest connections (pool.go: per policy, name and port; a
//     request takes the pool of the policy that decided it, so a
//     connection is only transport and never carries a request decided
//     under another policy than the one it was opened under);
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
//   - sees MCP by its content on any host (mcp.go, mcpdeny.go, mcpsse.go,
//     mcptrack.go; package mcpscan parses): every JSON-RPC request and
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
//     its tool calls and tool results (package provider).
//
// HandleQUIC (quic.go) is the netstack.DatagramFlowHandler for QUIC to
// port 443: it reads the SNI from the guest's Initials (package quicpeek),
// refuses a mismatch (the netstack answers ICMP port unreachable, so the
// client falls back to TCP), terminates QUIC with a minted leaf (TLS 1.3,
// ALPN h3, no 0-RTT) and serves HTTP/3 into the same request path
// (serveHTTP), forwarding upstream over TCP. Under [quic] mode = "block"
// the h3 offers of upstreams' Alt-Svc are dropped (altsvc.go).
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
// (wsframe.go, wsguard.go); a leaked secret, or a credential under [dlp]
// block, closes the connection with 1008 and a denied event, a frame that
// breaks RFC 6455 with 1002.
package mitm
