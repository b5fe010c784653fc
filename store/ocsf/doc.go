// Package ocsf writes a session's events as OCSF 1.8.0 events, one JSON
// object a line: what a security team's SIEM ingests (capsem export
// --format ocsf). Each event kind has its class:
//
//	dns         DNS Activity (4003), activity Traffic: the query and the answer capsem gave
//	net, a flow Network Activity (4001): Open when allowed, Refuse when denied
//	net, a request the MITM decoded
//	            HTTP Activity (4002), activity by method (Get, Post, …; Other for the rest)
//	model_call  HTTP Activity (4002): the call to the provider's API
//	mcp_call    HTTP Activity (4002), Post: the JSON-RPC call
//	exec        Process Activity (1007), Terminate: the command the host ran, with its exit
//	fs          File System Activity (1001): Create, Update, Delete, Rename
//
// and agent and recording events (the guest agent went silent; the store
// could not keep everything) have none among these classes: they are
// counted, not written (Result.Skipped), and are in the SQLite export.
//
// What OCSF has no attribute for goes under unmapped.capsem, named as the
// SQLite export names its columns: the policy's reason, a request's
// conn_type, a model call's model, tokens and cost, an MCP call's method
// and tool, an event's count. Bodies and headers are not written (the
// SQLite export has their previews); with Scrub every text is passed
// through the same redaction as capsem export --scrub.
//
// What this package must never do: write an event that does not
// validate against the OCSF schema of its class (ocsf_test.go checks the
// real session fixture against the pinned schemas in testdata), or drop
// an event without counting it.
package ocsf
