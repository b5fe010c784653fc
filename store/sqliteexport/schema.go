package sqliteexport

// SchemaVersion is the version of the exported schema, written to PRAGMA
// user_version. It changes when a table or column is renamed or removed or
// changes meaning; adding a table or a column does not require a new
// version, so readers should name the columns they select.
//
// Version 2: fs_events.timestamp is the host's time of receipt (it was the
// guest's claim, now in fs_events.guest_time); sessions.allowed and denied
// weigh DNS events by dns_events.count. Added: dns_events.count,
// fs_events.guest_time, agent_events, sessions.agent, recording_events.
//
// Version 3: mcp_calls has rows (it was an empty placeholder table), and
// gains reason and matched_rule.
//
// Version 4: tool_calls.mcp_call_id is filled (it was always NULL): a tool
// call with origin mcp names the mcp_calls row of the MCP call that
// carried it, so a reader that took NULL to mean "not executed over MCP"
// reads it differently now (see toolCalls).
//
// Version 5: net_events gains http_version, the HTTP version the guest
// spoke on a request row. A column alone needs no new version; this one
// marks the exports in which a request row (method set, conn_type https) is
// no longer always HTTP/1.1 or HTTP/2 over TCP: an HTTP/3 request the MITM
// decoded came over QUIC (transport udp), so a reader that took every
// request for TCP tells them apart by http_version.
//
// Version 6: net_events gains direction (inbound for a connection to a
// published port, outbound for everything the guest opened). The reader
// takes exactly its own version, so a column it reads needs one.
//
// Version 7: the hash chain (store/chain.go). Every table with one row per
// stored event gains prev_sha256, sha256 and record (the stored value;
// NULL in a --scrub export); sessions gains chain_seq, chain_head,
// chain_meta, chain_key and chain_sig. `capsem inspect` checks each row
// against its record and the chain against the seal (verifychain.go).
const SchemaVersion = 7

// ApplicationID is written to PRAGMA application_id so that tools (and
// `file`) can tell a capsem export from another SQLite database: "CpSm".
const ApplicationID = 0x4370536d

// Conventions of the schema:
//
//   - Every event table has id (INTEGER PRIMARY KEY, assigned in export
//     order), session_id (→ sessions.id), seq (the store's sequence number
//     within the session; unique per table, except in tool_calls and
//     tool_responses, whose rows share the seq of the model call they came
//     with), timestamp (ISO-8601 UTC text with nanoseconds,
//     fixed width so that it sorts, e.g. 2026-05-01T12:00:00.123456789Z) and
//     timestamp_ms (Unix epoch milliseconds). sessions has the same pairs
//     for started_at and ended_at.
//   - Absent values are NULL: an empty string, an unset address, port 0,
//     status 0. Measures (bytes, durations, counts) are 0 when zero.
//   - duration_ms is REAL: milliseconds with sub-millisecond precision.
//   - Headers are JSON arrays of [name, value] pairs, duplicates included,
//     in wire order where capsem knows it (net_events' column comments
//     say where); sessions.command and exec_events.argv are JSON
//     arrays of strings. exec_events.command is the same argv as one line,
//     as a POSIX shell would show it: words quoted where the shell would
//     read them otherwise (sh -c 'echo hi'), control characters as $'\n'.
//   - Text that is not valid UTF-8 (body previews may hold any bytes) has
//     each invalid byte sequence replaced with U+FFFD.
//   - sessions.id is the store's session id (text), so that ids in the
//     file match `capsem sessions`.
//   - A model_call event is one model_calls row, one tool_calls row per tool
//     call the model made in its response (model_call_id → that row), and
//     one tool_responses row per tool result its request sent back
//     (model_call_id → that row: the call whose request carried the result,
//     not the one that asked for the tool). A tool response answers the
//     tool call with the same session_id and call_id.
//   - Flags (model_calls.stream, tool_responses.is_error, exec_events.tty,
//     fs_events.is_dir) are 0 or 1.
//   - Who says so. Everything but fs_events is the host's own record: what
//     its netstack, MITM and control channel saw and decided. exec_events
//     are built by the host from the command it sent the guest (argv, dir,
//     tty; started_at and duration by the host's clock) and the exit it
//     received back (exit code and signal, and the pid the agent gave); a
//     command the host did not start has no row. fs_events are
//     guest-reported: what the guest agent said happened in the workspace,
//     which a guest that controls its agent can invent or leave out; their
//     timestamp is when the host received the report and guest_time the
//     time the guest claimed. agent_events say when the agent went silent,
//     was cut off, or had its reports dropped or truncated, and
//     recording_events when the store itself could not keep everything (the
//     session's byte budget, a full disk), so that a record with gaps says
//     so and where.
//   - Text the guest chose — query names, hosts, paths, previews, file
//     names — is stored as the guest sent it (query names escaped, see
//     dns_events.qname): whoever shows it on a terminal escapes it, as
//     `capsem inspect` does.
//   - Paths (fs_events.path, old_path) are relative to the workspace and
//     slash-separated.

// schema is every table of the export, in creation order. Each is defined
// below, column by column: the name, the SQL type and constraints, the
// comment the DDL carries, and the value a row gives it (see table.go).
var schema = []*table{
	sessionsTable, netEvents, dnsEvents, modelCalls, mcpCalls, toolCalls, toolResponses,
	fsEvents, execEvents, agentEvents, recordingEvents, otherEvents,
}

func init() {
	for i, t := range schema {
		t.pos = i
	}
}

// sessionsTable has one row per exported session. The count columns have
// no value in the INSERT: sessionCounts fills them from the exported
// tables, and the events column is set as each session's events are read.
var sessionsTable = &table{
	name:    "sessions",
	seq:     noSeq,
	indexes: []string{"started_at"},
	tabs:    []int{18, 28},
	columns: []column{
		{name: "id", decl: "TEXT PRIMARY KEY",
			value: func(_ *converter, s *source) any { return s.session }},
		{name: "started_at", decl: "TEXT NOT NULL",
			value: func(_ *converter, s *source) any { return timeText(s.sess.StartedAt) }},
		{name: "started_at_ms", decl: "INTEGER NOT NULL",
			value: func(_ *converter, s *source) any { return timeMS(s.sess.StartedAt) }},
		{name: "ended_at", decl: "TEXT", doc: "NULL while running or when the writer crashed",
			value: func(_ *converter, s *source) any { return timeText(s.sess.EndedAt) }},
		{name: "ended_at_ms", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return timeMS(s.sess.EndedAt) }},
		{name: "command", decl: "TEXT", doc: "JSON array of the argv",
			value: func(c *converter, s *source) any {
				if len(s.sess.Command) == 0 {
					return nil
				}
				return c.json(c.argv(s.sess.Command))
			}},
		{name: "exit_code", decl: "INTEGER", doc: "NULL until the session ended with a code",
			value: func(_ *converter, s *source) any {
				if s.sess.ExitCode == nil {
					return nil
				}
				return int64(*s.sess.ExitCode)
			}},
		{name: "policy_sha256", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.sess.PolicySHA256) }},
		{name: "image", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.sess.Image) }},
		{name: "host", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.sess.Host) }},
		{name: "events", decl: "INTEGER NOT NULL DEFAULT 0", doc: "stored events exported, all kinds"},
		{name: "allowed", decl: "INTEGER NOT NULL DEFAULT 0", doc: "allowed decisions: dns_events and net_events, each weighted by count"},
		{name: "denied", decl: "INTEGER NOT NULL DEFAULT 0", doc: "denied decisions, likewise"},
		{name: "dns", decl: "INTEGER NOT NULL DEFAULT 0", doc: "rows in dns_events"},
		{name: "net", decl: "INTEGER NOT NULL DEFAULT 0", doc: "rows in net_events"},
		{name: "model_calls", decl: "INTEGER NOT NULL DEFAULT 0", doc: "rows in model_calls"},
		{name: "input_tokens", decl: "INTEGER NOT NULL DEFAULT 0", doc: "sum of model_calls.input_tokens"},
		{name: "output_tokens", decl: "INTEGER NOT NULL DEFAULT 0", doc: "sum of model_calls.output_tokens"},
		{name: "cost_usd", decl: "REAL NOT NULL DEFAULT 0", doc: "sum of model_calls.estimated_cost_usd"},
		{name: "lost", decl: "INTEGER NOT NULL DEFAULT 0", doc: "events the writer could not record (store Counts.Lost), the unstored counts of recording_events included",
			value: func(_ *converter, s *source) any { return s.sess.Counts.Lost }},
		{name: "exec", decl: "INTEGER NOT NULL DEFAULT 0", doc: "rows in exec_events"},
		{name: "fs", decl: "INTEGER NOT NULL DEFAULT 0", doc: "rows in fs_events"},
		{name: "agent", decl: "INTEGER NOT NULL DEFAULT 0", doc: "rows in agent_events"},
		{name: "sandbox", decl: "TEXT", doc: "the long-lived sandbox this session is a start of; NULL for a capsem run",
			value: func(c *converter, s *source) any { return c.text(s.sess.Sandbox) }},
	},
}

// eventColumns are the columns every event table starts with (see the
// conventions), then its own.
func eventColumns(own []column) []column {
	return append([]column{
		{name: "id", decl: "INTEGER PRIMARY KEY",
			value: func(_ *converter, s *source) any { return s.id }},
		{name: "session_id", decl: "TEXT NOT NULL", ref: "sessions(id)",
			value: func(_ *converter, s *source) any { return s.session }},
		{name: "seq", decl: "INTEGER NOT NULL",
			value: func(_ *converter, s *source) any { return int64(s.ev.Seq) }},
		{name: "timestamp", decl: "TEXT NOT NULL",
			value: func(_ *converter, s *source) any { return eventTimeText(s.ev.Time) }},
		{name: "timestamp_ms", decl: "INTEGER NOT NULL",
			value: func(_ *converter, s *source) any { return s.ev.Time.UnixMilli() }},
	}, own...)
}

var netEvents = &table{
	name:    "net_events",
	indexes: []string{"domain", "path"},
	columns: eventColumns([]column{
		{name: "domain", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.Domain) }},
		{name: "ip", decl: "TEXT",
			value: func(_ *converter, s *source) any { return addr(s.ev.Net.IP) }},
		{name: "port", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return nonZero(s.ev.Net.Port) }},
		{name: "src_ip", decl: "TEXT",
			value: func(_ *converter, s *source) any { return addr(s.ev.Net.SrcIP) }},
		{name: "src_port", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return nonZero(s.ev.Net.SrcPort) }},
		{name: "transport", decl: "TEXT", doc: "tcp, udp, icmp, arp, ipv6, other",
			value: func(c *converter, s *source) any { return c.text(string(s.ev.Net.Transport)) }},
		{name: "conn_type", decl: "TEXT", doc: "tcp, tls, https, http, quic",
			value: func(c *converter, s *source) any { return c.text(string(s.ev.Net.ConnType)) }},
		{name: "decision", decl: "TEXT", doc: "allowed, denied",
			value: func(c *converter, s *source) any { return c.text(string(s.ev.Net.Decision)) }},
		{name: "direction", decl: "TEXT NOT NULL DEFAULT 'outbound'", doc: "inbound: a connection to a port published on the host, opened into the guest (ip and port are the guest's end, src_ip and src_port the host peer's); outbound: everything the guest opened or sent",
			value: func(c *converter, s *source) any { return c.direction(s.ev.Net.Direction) }},
		{name: "reason", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.Reason) }},
		{name: "matched_rule", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.MatchedRule) }},
		{name: "http_version", decl: "TEXT", doc: "HTTP/1.1, HTTP/2, HTTP/3 (HTTP/1.0 from a 1.0 client) for a request; NULL for a flow, and for a request recorded before capsem kept it",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.HTTPVersion) }},
		{name: "method", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.Method) }},
		{name: "path", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.Path) }},
		{name: "query", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.Query) }},
		{name: "status_code", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return nonZero(s.ev.Net.StatusCode) }},
		{name: "bytes_sent", decl: "INTEGER NOT NULL DEFAULT 0", doc: "guest to upstream",
			value: func(_ *converter, s *source) any { return s.ev.Net.BytesSent }},
		{name: "bytes_received", decl: "INTEGER NOT NULL DEFAULT 0", doc: "upstream to guest",
			value: func(_ *converter, s *source) any { return s.ev.Net.BytesReceived }},
		{name: "duration_ms", decl: "REAL NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return ms(s.ev.Net.Duration) }},
		{name: "request_headers", decl: "TEXT",
			doc:   "JSON [[name, value], …], canonical names, secrets hashed; as the guest sent them in order (HTTP/1.1 with Host; HTTP/2 without pseudo-headers but :protocol, cookie crumbs joined), sorted by name where capsem lost track of the connection",
			value: func(c *converter, s *source) any { return c.headers(s.ev.Net.RequestHeaders) }},
		{name: "response_headers", decl: "TEXT",
			doc:   "likewise: in the upstream's order on capsem's own HTTP/1.1 upstream path; sorted by name for HTTP/2 upstreams and for what Go's http.Transport reads (WebSocket upgrades, Expect: 100-continue)",
			value: func(c *converter, s *source) any { return c.headers(s.ev.Net.ResponseHeaders) }},
		{name: "request_body_preview", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.RequestBodyPreview) }},
		{name: "response_body_preview", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.ResponseBodyPreview) }},
		{name: "count", decl: "INTEGER NOT NULL DEFAULT 1",
			doc:   "how many events this row stands for: past 50 a second of one reason, one row stands for the rest of dropped frames and refused flows, with the last one's fields",
			value: func(_ *converter, s *source) any { return max(s.ev.Net.Count, 1) }},
		{name: "detail", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Net.Detail) }},
	}),
}

var dnsEvents = &table{
	name:    "dns_events",
	indexes: []string{"qname"},
	columns: eventColumns([]column{
		{name: "qname", decl: "TEXT",
			doc:   `the name asked, lower-cased, no trailing dot; a byte outside printable ASCII as \DDD, a backslash as \\`,
			value: func(c *converter, s *source) any { return c.text(s.ev.DNS.QName) }},
		{name: "qtype", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.DNS.QType) }},
		{name: "transport", decl: "TEXT", doc: "udp, tcp",
			value: func(c *converter, s *source) any { return c.text(string(s.ev.DNS.Transport)) }},
		{name: "decision", decl: "TEXT", doc: "allowed, denied",
			value: func(c *converter, s *source) any { return c.text(string(s.ev.DNS.Decision)) }},
		{name: "reason", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.DNS.Reason) }},
		{name: "matched_rule", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.DNS.MatchedRule) }},
		{name: "answer", decl: "TEXT",
			doc:   "what the guest got: the synthetic address of an A answer, else the response code (NOERROR for an allowed name without records of the type, NXDOMAIN, SERVFAIL, REFUSED, FORMERR, NOTIMP); NULL when no reply was sent",
			value: func(c *converter, s *source) any { return c.text(s.ev.DNS.Answer) }},
		{name: "resolver_asked", decl: "TEXT", doc: "the IP the guest sent the query to",
			value: func(_ *converter, s *source) any { return addr(s.ev.DNS.ResolverAsked) }},
		{name: "count", decl: "INTEGER NOT NULL DEFAULT 1",
			doc:   "how many queries this row stands for: past 50 a second of one reason and transport, one row stands for the rest, with the last one's name",
			value: func(_ *converter, s *source) any { return max(s.ev.DNS.Count, 1) }},
	}),
}

// modelCalls has one row per model call; its tool calls and the tool
// results its request carried go to toolCalls and toolResponses.
var modelCalls = &table{
	name:    "model_calls",
	indexes: []string{"trace_id", "path"},
	tabs:    []int{10},
	columns: eventColumns([]column{
		{name: "provider", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.Provider) }},
		{name: "domain", decl: "TEXT", doc: "the API host the call was seen on (for the provider check)", tab: 9,
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.Domain) }},
		{name: "model", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.Model) }},
		{name: "method", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.Method) }},
		{name: "path", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.Path) }},
		{name: "stream", decl: "INTEGER", doc: "0 or 1",
			value: func(_ *converter, s *source) any { return bit(s.ev.ModelCall.Stream) }},
		{name: "system_prompt_preview", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.SystemPromptPreview) }},
		{name: "messages_count", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return int64(s.ev.ModelCall.MessagesCount) }},
		{name: "tools_count", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return int64(s.ev.ModelCall.ToolsCount) }},
		{name: "request_bytes", decl: "INTEGER NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return s.ev.ModelCall.RequestBytes }},
		{name: "request_body_preview", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.RequestBodyPreview) }},
		{name: "message_id", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.MessageID) }},
		{name: "status_code", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return nonZero(s.ev.ModelCall.StatusCode) }},
		{name: "text_content", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.TextContent) }},
		{name: "thinking_content", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.ThinkingContent) }},
		{name: "stop_reason", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.StopReason) }},
		{name: "input_tokens", decl: "INTEGER NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return s.ev.ModelCall.InputTokens }},
		{name: "output_tokens", decl: "INTEGER NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return s.ev.ModelCall.OutputTokens }},
		{name: "cache_read_tokens", decl: "INTEGER NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return s.ev.ModelCall.CacheReadTokens }},
		{name: "cache_write_tokens", decl: "INTEGER NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return s.ev.ModelCall.CacheWriteTokens }},
		{name: "duration_ms", decl: "REAL NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return ms(s.ev.ModelCall.Duration) }},
		{name: "response_bytes", decl: "INTEGER NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return s.ev.ModelCall.ResponseBytes }},
		{name: "estimated_cost_usd", decl: "REAL NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return finite(s.ev.ModelCall.CostUSD) }},
		{name: "trace_id", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.TraceID) }},
		{name: "usage_details", decl: "TEXT", doc: "JSON, as the provider reported it",
			value: func(c *converter, s *source) any { return c.text(s.ev.ModelCall.UsageDetails) }},
	}),
}

// mcpCalls has a row per MCP call: a JSON-RPC request of the Model Context
// Protocol (or a notification) and its response, seen by the MITM or the
// MCP gateway.
var mcpCalls = &table{
	name:    "mcp_calls",
	indexes: []string{"server_name", "tool_name"},
	columns: eventColumns([]column{
		{name: "server_name", decl: "TEXT", doc: "the host and path posted to (mcp.example.com/mcp), or a gateway server's name",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.ServerName) }},
		{name: "method", decl: "TEXT", doc: "initialize, tools/list, tools/call, resources/read, …",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.Method) }},
		{name: "tool_name", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.ToolName) }},
		{name: "request_id", decl: "TEXT", doc: "the JSON-RPC id as sent; NULL for a notification",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.RequestID) }},
		{name: "request_preview", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.RequestPreview) }},
		{name: "response_preview", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.ResponsePreview) }},
		{name: "decision", decl: "TEXT", doc: "allowed, denied",
			value: func(c *converter, s *source) any { return c.text(string(s.ev.MCPCall.Decision)) }},
		{name: "duration_ms", decl: "REAL NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return ms(s.ev.MCPCall.Duration) }},
		{name: "error_message", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.ErrorMessage) }},
		{name: "bytes_sent", decl: "INTEGER NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return s.ev.MCPCall.BytesSent }},
		{name: "bytes_received", decl: "INTEGER NOT NULL DEFAULT 0",
			value: func(_ *converter, s *source) any { return s.ev.MCPCall.BytesReceived }},
		{name: "reason", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.Reason) }},
		{name: "matched_rule", decl: "TEXT", doc: "the [[mcp.rules]] entry that decided",
			value: func(c *converter, s *source) any { return c.text(s.ev.MCPCall.MatchedRule) }},
	}),
}

// toolCalls has a row per tool call the model made in the response of the
// model call whose row is model_call_id. mcp_call_id is set, after the
// row, for a tool call with origin mcp: the mcp_calls row of its
// execution, the first tools/call of its tool (TOOL of claude's
// mcp__SERVER__TOOL, else the whole name) recorded at or after its model
// call and at most 10 minutes after, in the same session, that no earlier
// tool call took, preferring one whose server_name is SERVER and otherwise
// of any server; a tool call whose result went back to the model before
// such a call is left out. NULL: a native tool, or no MCP call found (a
// tool the user refused, a client that calls the server without capsem
// seeing it). See mcplink.go.
var toolCalls = &table{
	name:    "tool_calls",
	seq:     sharedSeq,
	indexes: []string{"model_call_id", "call_id", "mcp_call_id"},
	columns: eventColumns([]column{
		{name: "model_call_id", decl: "INTEGER", ref: "model_calls(id)",
			value: func(_ *converter, s *source) any { return s.modelCall }},
		{name: "call_index", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return int64(s.toolCall.Index) }},
		{name: "call_id", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.toolCall.CallID) }},
		{name: "tool_name", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.toolCall.Name) }},
		{name: "arguments", decl: "TEXT", doc: "JSON",
			value: func(c *converter, s *source) any { return c.text(s.toolCall.Arguments) }},
		{name: "origin", decl: "TEXT", doc: "native, mcp",
			value: func(c *converter, s *source) any { return c.text(s.toolCall.Origin) }},
		{name: "mcp_call_id", decl: "INTEGER", ref: "mcp_calls(id)", doc: "the MCP call that carried it; NULL for a native tool or when none was seen"},
	}),
}

// toolResponses has a row per tool result sent back in the request of the
// model call whose row is model_call_id; call_id names the tool_calls row
// it answers (made by an earlier model call).
var toolResponses = &table{
	name:    "tool_responses",
	seq:     sharedSeq,
	indexes: []string{"model_call_id", "call_id"},
	columns: eventColumns([]column{
		{name: "model_call_id", decl: "INTEGER", ref: "model_calls(id)",
			value: func(_ *converter, s *source) any { return s.modelCall }},
		{name: "call_id", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.toolResult.CallID) }},
		{name: "content_preview", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.toolResult.ContentPreview) }},
		{name: "is_error", decl: "INTEGER", doc: "0 or 1",
			value: func(_ *converter, s *source) any { return bit(s.toolResult.IsError) }},
	}),
}

// fsEvents are guest-reported: what the guest agent said happened (see the
// conventions above). timestamp is when the host received the report.
// An event recorded by a capsem older than guest_time has guest_time
// NULL and the guest's claim in timestamp.
var fsEvents = &table{
	name:    "fs_events",
	indexes: []string{"path"},
	columns: eventColumns([]column{
		{name: "action", decl: "TEXT",
			doc:   "created, modified, deleted, renamed, overflow (the guest dropped events under path), unknown (the agent sent another word)",
			value: func(c *converter, s *source) any { return c.text(s.ev.FS.Action) }},
		{name: "path", decl: "TEXT", doc: "relative to the workspace, slash-separated; for renamed the new name",
			value: func(c *converter, s *source) any { return c.text(s.ev.FS.Path) }},
		{name: "size", decl: "INTEGER NOT NULL DEFAULT 0", doc: "bytes, as the guest reported them",
			value: func(_ *converter, s *source) any { return s.ev.FS.Size }},
		{name: "old_path", decl: "TEXT", doc: "renamed: the name before",
			value: func(c *converter, s *source) any { return c.text(s.ev.FS.OldPath) }},
		{name: "is_dir", decl: "INTEGER", doc: "0 or 1: path is a directory",
			value: func(_ *converter, s *source) any { return bit(s.ev.FS.Dir) }},
		{name: "guest_time", decl: "TEXT", doc: "when it happened by the guest's clock, as the guest claimed; NULL when not reported",
			value: func(_ *converter, s *source) any { return timeText(s.ev.FS.GuestTime) }},
		{name: "guest_time_ms", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return timeMS(s.ev.FS.GuestTime) }},
	}),
}

// execEvents are built by the host from the command it sent and the exit
// it received. command and argv are NULL for an empty argv (the guest's
// interactive shell); command is built from the words argv holds, so it
// is scrubbed as they are.
var execEvents = &table{
	name: "exec_events",
	columns: eventColumns([]column{
		{name: "command", decl: "TEXT", doc: "the argv as a shell shows it; NULL for the guest's interactive shell",
			value: func(c *converter, s *source) any {
				if len(s.ev.Exec.Argv) == 0 {
					return nil
				}
				return ShellJoin(c.argv(s.ev.Exec.Argv))
			}},
		{name: "exit_code", decl: "INTEGER", doc: "the exit status, or 128+N when killed by signal N; -1 when the guest went away before saying",
			value: func(_ *converter, s *source) any { return int64(s.ev.Exec.ExitCode) }},
		{name: "duration_ms", decl: "REAL NOT NULL DEFAULT 0", doc: "from sending the command to seeing it end, by the host's clock",
			value: func(_ *converter, s *source) any { return ms(s.ev.Exec.Duration) }},
		{name: "argv", decl: "TEXT", doc: "JSON array of the words",
			value: func(c *converter, s *source) any {
				if len(s.ev.Exec.Argv) == 0 {
					return nil
				}
				return c.json(c.argv(s.ev.Exec.Argv))
			}},
		{name: "dir", decl: "TEXT", doc: "the working directory asked for; NULL: the workspace",
			value: func(c *converter, s *source) any { return c.text(s.ev.Exec.Dir) }},
		{name: "tty", decl: "INTEGER", doc: "0 or 1: it ran on a pseudo-terminal",
			value: func(_ *converter, s *source) any { return bit(s.ev.Exec.TTY) }},
		{name: "pid", decl: "INTEGER", doc: "in the guest, as the agent reported it",
			value: func(_ *converter, s *source) any { return nonZero(s.ev.Exec.PID) }},
		{name: "signal", decl: "TEXT", doc: "the signal that killed it (KILL, TERM, …); NULL when it exited",
			value: func(c *converter, s *source) any { return c.text(s.ev.Exec.Signal) }},
		{name: "started_at", decl: "TEXT",
			doc:   "when the host sent the command, by the host's clock (in records made before capsem built exec events on the host, the guest's)",
			value: func(_ *converter, s *source) any { return timeText(s.ev.Exec.Start) }},
		{name: "started_at_ms", decl: "INTEGER",
			value: func(_ *converter, s *source) any { return timeMS(s.ev.Exec.Start) }},
	}),
}

// agentEvents are the host's record of the guest agent: what it saw of the
// agent, not what the agent reported.
var agentEvents = &table{
	name: "agent_events",
	columns: eventColumns([]column{
		{name: "state", decl: "TEXT",
			doc:   "silent (stopped answering pings), resumed, protocol-violation (cut off), rate-limited (guest-reported events dropped), capped (a guest-reported field truncated)",
			value: func(c *converter, s *source) any { return c.text(s.ev.Agent.State) }},
		{name: "detail", decl: "TEXT",
			value: func(c *converter, s *source) any { return c.text(s.ev.Agent.Detail) }},
		{name: "count", decl: "INTEGER NOT NULL DEFAULT 1", doc: "rate-limited: events dropped; capped: fields truncated; otherwise 1",
			value: func(_ *converter, s *source) any { return max(s.ev.Agent.Count, 1) }},
	}),
}

// recordingEvents are the store's record of itself: where the record has a
// gap and why. sessions.lost is the total of unstored counts (and of any
// other event the writer could not record).
var recordingEvents = &table{
	name: "recording_events",
	columns: eventColumns([]column{
		{name: "state", decl: "TEXT", doc: "over-budget (new flows refused), disk-low (new flows refused), resumed, unstored (count events not stored)",
			value: func(c *converter, s *source) any { return c.text(s.ev.Recording.State) }},
		{name: "detail", decl: "TEXT", doc: "what happened and what to do; for unstored the span, the kinds and why",
			value: func(c *converter, s *source) any { return c.text(s.ev.Recording.Detail) }},
		{name: "count", decl: "INTEGER NOT NULL DEFAULT 0", doc: "unstored: events not stored; otherwise 0",
			value: func(_ *converter, s *source) any { return s.ev.Recording.Count }},
	}),
}

// otherEvents are events of a kind this build of capsem cannot decode
// (written by a newer one): kept as a row so that every stored event
// appears once.
var otherEvents = &table{
	name: "other_events",
	columns: eventColumns([]column{
		{name: "kind", decl: "TEXT NOT NULL",
			value: func(c *converter, s *source) any {
				if kind := c.text(string(s.ev.Kind)); kind != nil {
					return kind
				}
				return "unknown"
			}},
	}),
}
