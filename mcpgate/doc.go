// Package mcpgate is capsem's MCP gateway: it serves the MCP servers of the
// policy's [mcp.servers.NAME] to the guest at https://mcp.capsem.internal/NAME
// (streamable HTTP; capsem's MITM terminates TLS and hands those requests to
// [Gateway.Serve]) while the servers themselves — a stdio process run on the
// host (command, env, cwd) or a remote streamable-HTTP server (url, headers)
// — and their credentials stay on the host.
//
// Every request the gateway answers for the guest is one store.MCPCall event
// with server_name NAME; every tools/call is decided by the policy
// ([Decider]) before it reaches the server, and a refused one is answered
// with a JSON-RPC error (code policy.MCPRefusalCode, message
// policy.MCPRefusal) that never reaches it. With hide_denied, tools/list
// leaves the denied tools out; with no policy, it lists none.
//
// One backend per server NAME per Gateway (a Gateway serves one sandbox): a
// stdio server is started on the first call with only PATH and HOME of
// capsem's environment plus its own env, in its cwd, in its own process
// group, its stderr logged (each line capped, at most stderrLogBudget per
// backend, over its restarts); if it died, the next call kills what is left
// of its process group, starts it again and records an MCPCall with method
// "capsem/server-restarted" whose error_message says how it ended. After the
// second death or failed start in a row, calls are answered at once with a
// JSON-RPC error until a backoff (1 s doubling to 60 s, reset by a process
// that lived a minute) has passed. Close, and an Apply that removes or
// changes its config, stop it: a start in progress cancelled, stdin closed,
// then the process group killed after stopGrace.
//
// Guest sessions end after sessionTimeout without a request, and a server
// keeps at most maxSessions: a POST that would start one more is answered
// 503. A call ends when the guest's POST does. A remote server's redirect
// is not followed, and its headers go to its configured host only.
//
// What is the SDK's and what is capsem's own. The official Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp) does all of MCP: the
// guest-facing streamable-HTTP server (mcp.NewStreamableHTTPHandler, one
// mcp.Server per NAME, sessions, protocol negotiation, JSON-RPC framing) and
// the backend client sessions (mcp.Client over mcp.IOTransport for stdio,
// over mcp.StreamableClientTransport for remote). capsem's own parts are:
//
//   - the proxy: one receiving middleware (proxy.go) that answers initialize
//     with the backend's capabilities, serverInfo and instructions (the
//     guest's protocol version is negotiated by the SDK server) and answers
//     ping, tools/*, resources/list, resources/templates/list,
//     resources/read, prompts/* and completion/complete from the backend;
//   - the policy decision and the record of each call (record.go);
//   - the request peek (peek.go): Serve reads the JSON-RPC id of a POST's
//     message and hands it, with the Decider, to the middleware through a
//     header it sets, because the SDK gives middleware neither;
//   - the process management of stdio servers (stdio.go): environment,
//     process group, stderr, restart, stop — the SDK's CommandTransport
//     gives no exit status and kills only the leader;
//   - list_changed forwarding (notify.go): the SDK server has no call to
//     send a list_changed notification, so the gateway adds and removes a
//     placeholder tool, prompt or resource on the guest-facing server, which
//     the SDK answers with the notification (the guest never sees the
//     placeholder: every list is answered from the backend).
//
// Not forwarded: resources/subscribe (the guest is told the backend does not
// support it), logging messages (the logging capability is not advertised),
// progress notifications, and requests from a server to the client
// (sampling, elicitation, roots: the backend client advertises none).
//
// What it must never do:
//
//   - let a tools/call reach a server before the policy allowed it, or when
//     there is no policy to ask (fail closed);
//   - give a stdio server more of capsem's environment than PATH and HOME;
//   - leave a server process running after Close, or after Apply removed or
//     changed its server;
//   - reach a remote server except through Config.DialContext, with
//     verified TLS (Config.Roots);
//   - hold unbounded memory for one call or one guest: a request body is
//     read up to the SDK's limit, previews and error messages are capped at
//     the preview size, request ids and tool names at the record's caps
//     (store.MCPMaxIDBytes, store.MCPMaxToolBytes), stderr is logged up to
//     a budget, guest sessions are capped per server.
package mcpgate
