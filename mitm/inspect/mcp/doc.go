// Package mcp is the inspector of MCP over HTTP: it knows MCP by its
// content on any allowed host (JSON-RPC 2.0 in a request body, a JSON
// response or an event stream), records every request and notification
// as one mcp_call event with its response (matched by id across the
// streams of a session, track.go), answers a tools/call an [[mcp.rules]]
// entry denies with a JSON-RPC error in the transport's own form without
// forwarding it (deny.go; the body is held whole, up to MaxHold, to a host
// with deny rules), and under [mcp] hide_denied leaves the denied tools
// out of a tools/list result (sse.go rewrites event streams at event
// boundaries).
//
// What it must never do: import the MITM core (it sees an exchange
// through package inspect only) or set an exchange's decision (it refuses
// through inspect.Exchange); forward a request whose tools/calls it could
// not decide to a host with deny rules; hold more of a body than MaxHold,
// or of an event stream than its bounds (sse.go); keep a session after
// nothing can match a response in it.
package mcp
