// Package filter is capsem's network filter assembled in one place: the
// gVisor netstack a guest's NIC ends in, the MITM that is its flow handler
// for port 443 and for QUIC, and the MCP gateway the MITM serves
// mcp.capsem.internal with, all three recording into one Recorder (the
// session's store.Writer, or a tap on it). The sandbox (a capsem guest)
// and capsem-net (any other VM) both build their filter with New, so the
// two cannot wire the pieces differently.
//
// It owns the policy in force after the start: SetPolicy gives a new one to
// the netstack and the gateway together, Reload reads it from a file first,
// keeping the placeholders of the secrets the guest holds. Flows, queries
// and requests that start after either see the new policy; those under way
// keep theirs.
//
// It knows nothing of VMs, sockets or the command line: the caller hands
// Serve the guest's frames, and opens and ends the store session. What it
// must never do:
//
//   - let a flow out that the netstack did not decide: every part it wires
//     reaches upstreams through the netstack's dialer, under the policy in
//     force (the gateway's remote servers too), verified against the roots
//     the MITM verifies any upstream with.
//   - apply half a policy: the netstack and the gateway are given the same
//     policy in one call, and a reload that fails (a broken file, a secret
//     without its real value) keeps the previous one — fail closed, never
//     open.
//   - outlive Close: Close stops the netstack (waiting for its flows), then
//     the MITM, then the gateway's stdio servers, so every event they make
//     while stopping precedes the end of the session.
package filter
