// Package upstream is how the MITM's requests reach their upstreams: TLS
// connections verified against the system roots and the policy's
// [upstream] ca_files (roots.go), kept alive in pools shared by the guest
// connections to each upstream under each policy (pool.go), HTTP/1.1 on
// the handler's own goroutine (h1.go), HTTP/2 through net/http's
// transport, and HTTP/3 to an upstream that answers QUIC (h3.go).
//
// A request carries what the transports need to know of it in a Request
// under this package's own context key (WithRequest): the policy that
// decided it, whose pool it takes. The transports tell back through it
// what they read (the response head's field order). A flow's transport is
// an http.RoundTripper, so recording, replaying or an upstream proxy is a
// RoundTripper that wraps it.
//
// What it must never do: import the MITM core or an inspector; carry a
// request on a connection opened under another policy than the one that
// decided it; forward a request it was not given (it decides nothing);
// keep connections without bound (the pools' bounds, pool.go); let an
// upstream's 101 through that nobody asked for.
package upstream
