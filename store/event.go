package store

import (
	"net/netip"
	"time"
)

// Kind names the type of an event. Kinds are stored as strings, so a new kind
// is added by declaring a constant and a payload; readers built before it see
// the kind with no payload instead of an error.
type Kind string

// The kinds of events recorded today.
// An HTTP request seen by the MITM is a KindNet event with Method, Path and
// StatusCode set. A model call carries the tool calls the model made in its
// response and the tool results its request sent back, so the three tables
// model_calls, tool_calls and tool_responses come from one event. Exec and
// fs events come from the guest agent (`capsem run`): a command the host
// had the guest run, once it ended (built by the host from the Exec it sent
// and the Exit it received), and a change in the workspace (as the guest
// reported it). Agent events are the host's own record of the guest agent:
// it went silent, came back, was cut off, or had its reports dropped or
// truncated. Recording events are the store's own: the session reached its
// byte budget, the disk ran low, and how many events it could not store.
const (
	KindDNS       Kind = "dns"
	KindNet       Kind = "net"
	KindModelCall Kind = "model_call"
	KindExec      Kind = "exec"
	KindFS        Kind = "fs"
	KindAgent     Kind = "agent"
	KindRecording Kind = "recording"
	// KindMCPCall: one JSON-RPC request of the Model Context Protocol (or a
	// notification) and its answer, seen by the MITM or the MCP gateway.
	KindMCPCall Kind = "mcp_call"
)

// Decision is the outcome of applying policy to a query or a flow.
type Decision string

// Decisions.
const (
	Allowed Decision = "allowed"
	Denied  Decision = "denied"
)

// Transport is the layer-3/4 protocol of a flow (net_events.transport) or
// the transport a DNS query came over (dns_events.transport: udp or tcp).
type Transport string

// Transports.
const (
	TransportTCP   Transport = "tcp"
	TransportUDP   Transport = "udp"
	TransportICMP  Transport = "icmp"
	TransportARP   Transport = "arp"
	TransportIPv6  Transport = "ipv6"
	TransportOther Transport = "other"
)

// ConnType says how far into a connection capsem saw (net_events.conn_type).
type ConnType string

// Connection types.
const (
	ConnTCP   ConnType = "tcp"
	ConnTLS   ConnType = "tls"
	ConnHTTPS ConnType = "https"
	ConnHTTP  ConnType = "http"
	ConnQUIC  ConnType = "quic"
)

// Direction says who opened a flow (net_events.direction).
type Direction string

// Directions. A record from before capsem kept the direction has none:
// every flow then was the guest's (outbound).
const (
	// Outbound: the guest opened it, to a name the policy allows or to a
	// host service a [[forward]] table names.
	Outbound Direction = "outbound"
	// Inbound: a connection to a port published on the host, which capsem
	// opened into the guest.
	Inbound Direction = "inbound"
)

// The HTTP versions a request the MITM decoded is recorded with
// (net_events.http_version): the version the guest spoke, which is not
// always the one capsem spoke upstream.
const (
	HTTP10 = "HTTP/1.0"
	HTTP11 = "HTTP/1.1"
	HTTP2  = "HTTP/2"
	HTTP3  = "HTTP/3"
)

// Event is one record of the log. The payload pointer matching Kind is set;
// for a kind this build does not know (written by a newer capsem) none is.
type Event struct {
	Session string    // filled by Append
	Seq     uint64    // filled by Append: 1, 2, 3, … with no gaps
	Time    time.Time // wall time; Append fills it when zero
	Kind    Kind      // Append infers it from the payload when empty

	DNS       *DNS
	Net       *Net
	ModelCall *ModelCall
	Exec      *Exec
	FS        *FS
	Agent     *Agent
	Recording *Recording
	MCPCall   *MCPCall
}

// DNS is a query the guest sent to capsem's fake DNS server and the answer it
// got. It maps to the dns_events table.
type DNS struct {
	QName         string     // qname: the name asked, in presentation form (the netstack escapes what is not printable)
	QType         string     // qtype: "A", "AAAA", "TXT", … or "TYPE65"
	Transport     Transport  // transport: udp or tcp
	Decision      Decision   // decision
	Reason        string     // reason: why, in words
	MatchedRule   string     // matched_rule: the policy rule that decided, if any
	Answer        string     // answer: what the guest got (a synthetic address, "NXDOMAIN", …)
	ResolverAsked netip.Addr // resolver_asked: the IP the guest sent the query to

	// Count is how many identical queries this event stands for when the
	// netstack aggregates repeated ones (as Net.Count does for drops); 0
	// and 1 both mean one.
	Count int64
}

// Header is one HTTP header line. Headers are kept in the order the recorder
// gives them, duplicates included — the MITM gives wire order where it knows
// it (net_events.request_headers in store/sqliteexport/schema.go says
// where); the exporter writes them as JSON.
type Header struct {
	Name, Value string
}

// Net is a flow, a refused packet, or an HTTP request seen on a flow. It maps
// to the net_events table.
type Net struct {
	Domain    string     // domain: the name behind IP (fake DNS, SNI or Host), if known
	IP        netip.Addr // ip: the destination address
	Port      uint16     // port: the destination port
	SrcIP     netip.Addr // the guest-side address
	SrcPort   uint16     // the guest-side port
	Transport Transport  // transport: tcp, udp, icmp, arp, ipv6, other
	ConnType  ConnType   // conn_type: tcp, tls, https, http, quic
	Direction Direction  // direction: inbound for a published port's connection, else outbound ("" in records from before)

	Decision    Decision // decision
	Reason      string   // reason
	MatchedRule string   // matched_rule

	HTTPVersion   string        // http_version: HTTP11, HTTP2 or HTTP3 (HTTP10 for a 1.0 client) for a request the MITM decoded; "" for a flow
	Method        string        // method
	Path          string        // path
	Query         string        // query
	StatusCode    int           // status_code
	BytesSent     int64         // bytes_sent (guest to upstream)
	BytesReceived int64         // bytes_received (upstream to guest)
	Duration      time.Duration // exported as duration_ms

	RequestHeaders      []Header // request_headers
	ResponseHeaders     []Header // response_headers
	RequestBodyPreview  string   // request_body_preview; may hold arbitrary bytes
	ResponseBodyPreview string   // response_body_preview; may hold arbitrary bytes

	// Count is how many events this one stands for when the caller
	// aggregates repeated ones (the netstack's dropped frames and refused
	// flows, past 50 a second of one reason); 0 and 1 both mean one.
	Count int64
	// Detail is free text for whatever the fields above do not say.
	Detail string
}

// ModelCall is one request to an AI provider's model API and its response,
// as parsed by the MITM. It maps to a model_calls row, plus one tool_calls
// row per ToolCalls entry and one tool_responses row per ToolResults entry
// (both linked to this row). Text fields are previews, capped by the MITM.
type ModelCall struct {
	Provider            string // provider: anthropic, openai, google
	Domain              string // domain: the API host the call was seen on
	Model               string // model, as requested (or as answered when the request does not say)
	Method              string // method
	Path                string // path
	Stream              bool   // stream: the response was streamed (SSE)
	SystemPromptPreview string // system_prompt_preview
	MessagesCount       int    // messages_count: messages (or input items) in the request
	ToolsCount          int    // tools_count: tools offered to the model
	RequestBytes        int64  // request_bytes: body bytes as sent on the wire
	RequestBodyPreview  string // request_body_preview
	MessageID           string // message_id: the provider's id for the response
	StatusCode          int    // status_code
	TextContent         string // text_content: text the model produced
	ThinkingContent     string // thinking_content: reasoning the model exposed
	StopReason          string // stop_reason, as the provider words it
	InputTokens         int64  // input_tokens
	OutputTokens        int64  // output_tokens
	CacheReadTokens     int64  // cache_read_tokens
	CacheWriteTokens    int64  // cache_write_tokens
	Duration            time.Duration
	ResponseBytes       int64   // response_bytes: body bytes as received on the wire
	CostUSD             float64 // estimated_cost_usd, from the embedded pricing table
	TraceID             string  // trace_id: shared by the calls of one tool loop
	UsageDetails        string  // usage_details: the provider's usage object, as JSON

	ToolCalls   []ToolCall   // tool calls the model made in this response
	ToolResults []ToolResult // tool results this request sent back
}

// ToolCall is a tool invocation the model asked for. It maps to tool_calls.
type ToolCall struct {
	Index     int    // call_index: position among the response's tool calls
	CallID    string // call_id: the provider's id, echoed by the tool result
	Name      string // tool_name
	Arguments string // arguments: JSON, assembled from streamed deltas
	Origin    string // origin: native or mcp
}

// ToolResult is the result of an earlier tool call, sent back to the model
// in a later request. It maps to tool_responses.
type ToolResult struct {
	CallID         string // call_id: the ToolCall.CallID it answers
	ContentPreview string // content_preview
	IsError        bool   // is_error
}

// Exec is a command the host asked the guest to run, recorded after it
// ended, from what the host sent and saw (not from the guest's own report).
// It maps to the exec_events table.
type Exec struct {
	Argv     []string      // argv (JSON) and command (as a shell shows it); empty: the guest's interactive shell
	Dir      string        // dir: the working directory, as asked ("" for the workspace)
	TTY      bool          // tty: it ran on a pseudo-terminal rather than pipes
	PID      int           // pid, in the guest, as the agent reported it
	Start    time.Time     // started_at: when the host sent the command, by the host's clock
	Duration time.Duration // exported as duration_ms: until the host saw it end
	ExitCode int           // exit_code: the exit status, or 128+N when killed by signal N; -1 when the guest went away before saying
	Signal   string        // signal: the signal that killed it, without "SIG" ("KILL"), or ""
}

// FS actions: what happened to FS.Path.
const (
	FSCreated  = "created"
	FSModified = "modified"
	FSDeleted  = "deleted"
	FSRenamed  = "renamed"  // Path is the new name, OldPath the old one
	FSOverflow = "overflow" // the guest's kernel dropped events: changes under Path went unrecorded
)

// FS is a change in the workspace, as the guest agent reported it: what the
// guest said happened, not something the host observed. Event.Time is when
// the host received the report (the caller sets it); GuestTime is the time
// the guest claimed. It maps to the fs_events table.
type FS struct {
	Action    string    // action: created, modified, deleted, renamed, overflow, or unknown (capsem run stores any other word the agent sent as "unknown")
	Path      string    // path: relative to the workspace, slash-separated; for renamed the new name
	OldPath   string    // old_path: the name before a rename
	Size      int64     // size, in bytes, when the guest reported one
	Dir       bool      // is_dir: Path is a directory
	GuestTime time.Time // guest_time: when it happened by the guest's clock; zero when not reported
}

// Agent states: what happened to the guest agent (Agent.State).
const (
	// AgentSilent: the guest agent stopped answering the host's pings;
	// from then on nothing the guest reports can be expected.
	AgentSilent = "silent"
	// AgentResumed: a silent agent answered again.
	AgentResumed = "resumed"
	// AgentViolation: the agent broke the control protocol and the host cut
	// it off (and stopped the VM); Detail says how.
	AgentViolation = "protocol-violation"
	// AgentRateLimited: guest-reported events were dropped by the host's
	// rate limit; Count says how many.
	AgentRateLimited = "rate-limited"
	// AgentCapped: a guest-reported field was longer than the host keeps
	// and was truncated; Count says how many fields, Detail which.
	AgentCapped = "capped"
	// AgentSnapshot: the guest was saved (capsem snapshot, suspend);
	// Detail names the snapshot and the pause.
	AgentSnapshot = "snapshot"
	// AgentRestored: the session's guest was restored from a snapshot
	// rather than booted (a fork, a resume); Detail names the snapshot and
	// the session it was taken in.
	AgentRestored = "restored"
)

// Agent is the host's record of the guest agent's behaviour (not something
// the guest reports). It maps to the agent_events table.
type Agent struct {
	State  string // state: silent, resumed, protocol-violation, rate-limited, capped, snapshot, restored
	Detail string // detail: free text, e.g. the violation
	// Count is how many occurrences this event stands for (dropped events
	// for rate-limited, truncated fields for capped); 0 and 1 both mean one.
	Count int64
}

// Recording states: what happened to the record itself (Recording.State).
// The store writes these events; callers do not.
const (
	// RecordingOverBudget: the session stored its byte budget
	// (Options.MaxSessionBytes); from then on Admit refuses and only a
	// small allowance more is stored.
	RecordingOverBudget = "over-budget"
	// RecordingDiskLow: the store's disk had less free space than the
	// reserve (Options.MinFreeDisk); Admit refuses until it has more.
	RecordingDiskLow = "disk-low"
	// RecordingResumed: the disk has room again; Admit admits.
	RecordingResumed = "resumed"
	// RecordingUnstored: Count events were appended but not stored —
	// the disk was full, writing stalled, or the session was past its
	// budget's allowance; Detail says why, when, and of which kinds.
	RecordingUnstored = "unstored"
	// RecordingAuditBehind: the events the session streams to an audit
	// collector (capsem --audit-otlp) have fallen behind past its bound;
	// RecordingAuditResumed: they caught up. Detail says how far and why.
	RecordingAuditBehind  = "audit-behind"
	RecordingAuditResumed = "audit-resumed"
)

// MCPCall is one MCP request (a JSON-RPC 2.0 request or notification over
// one of MCP's transports) and its response. It maps to mcp_calls.
type MCPCall struct {
	ServerName      string        // server_name: the host and path posted to (mcp.example.com/mcp), or a gateway server's name
	Method          string        // method: initialize, tools/list, tools/call, resources/read, …
	ToolName        string        // tool_name: the tool of a tools/call
	RequestID       string        // request_id: the JSON-RPC id as sent (a number or a quoted string); "" for a notification
	RequestPreview  string        // request_preview: the start of the request's params
	ResponsePreview string        // response_preview: the start of the result or error
	Decision        Decision      // decision: allowed, or denied by [[mcp.rules]]
	Reason          string        // reason: why, as for net events
	MatchedRule     string        // matched_rule: the [[mcp.rules]] entry that decided, if any
	Duration        time.Duration // duration_ms: from the request to its response
	ErrorMessage    string        // error_message: a JSON-RPC error's message
	BytesSent       int64         // bytes_sent: of the request message
	BytesReceived   int64         // bytes_received: of the response message
}

// The caps on the guest-controlled fields of an MCPCall, shared by every
// producer (the MITM's mcpscan and the MCP gateway) so that a record means
// the same whichever saw the call. ErrorMessage is capped at the producer's
// preview size.
const (
	// MCPMaxIDBytes caps MCPCall.RequestID. Ids are short in practice (the
	// SDKs count up from 0 or use UUIDs, 38 bytes quoted); a longer one is
	// cut, and a response to it may then not be matched.
	MCPMaxIDBytes = 128
	// MCPMaxToolBytes caps MCPCall.ToolName: a tool name is at most 128
	// characters in the MCP schema, but a resource URI can be long.
	MCPMaxToolBytes = 1 << 10
)

// Recording is an event the store writes about the record itself, so that
// the log says where it has a gap and why. It maps to recording_events.
type Recording struct {
	State  string // state: over-budget, disk-low, resumed, unstored
	Detail string // detail: what happened and what to do, in words
	Count  int64  // count: unstored events; 0 otherwise
}

// Session is the metadata of one run. It maps to the sessions table.
type Session struct {
	ID           string
	StartedAt    time.Time
	EndedAt      time.Time // zero while running, or when the writer crashed
	Command      []string
	ExitCode     *int // nil until End, or when End was given nil
	PolicySHA256 string
	Image        string
	Host         string
	Sandbox      string // the long-lived sandbox the session is a start of ("": a capsem run)
	// Placeholders are those the session's secrets had (Writer.
	// NotePlaceholders): what the guest was given in place of each real
	// value, never a real value. An export with --scrub redacts them in
	// every text it writes; a placeholder the policy fixed has no prefix
	// to be known by. The store's own record keeps them, as its events
	// keep what the guest sent; an export never does.
	Placeholders []Placeholder
	Counts       Counts
	// Chain is the head of the session's hash chain and its seal
	// (chain.go), as of the last committed batch; nil for a session
	// recorded without one (before chains existed).
	Chain *Chain
}

// A Placeholder is a secret's name and the placeholder the guest held
// for it.
type Placeholder struct {
	Name, Value string
}

// Counts summarise a session's events. They are written with every committed
// batch, so a session whose writer crashed still has the counts of its last
// synced batch.
type Counts struct {
	Events int64          // events recorded (equals the highest Seq)
	Kinds  map[Kind]int64 // events recorded, per kind
	// Allowed and Denied are the decisions among DNS and Net events, each
	// weighted by its Count.
	Allowed, Denied int64
	// Agent is, per agent state (AgentSilent, …), the agent events of the
	// session, each weighted by its Count: times the agent went silent,
	// guest-reported events dropped, fields truncated. Nil when there were
	// none (a session without a guest agent, or a quiet one).
	Agent map[string]int64
	// Lost is the number of events that were appended but could not be
	// recorded: a write failed, Append was called after End or Close, or
	// the store held them as counts because its disk was full, writing
	// stalled or the session was past its byte budget (each such gap is
	// also a RecordingUnstored event where the record resumes). It is zero
	// in a healthy store.
	Lost int64
	// Bytes is what the session's events take as encoded (keys and
	// values): what Options.MaxSessionBytes limits.
	Bytes int64
	// InputTokens, OutputTokens and CostUSD sum the session's model calls
	// (ModelCall's fields of the same names), so that a list of sessions
	// needs no scan of their events. Sessions recorded before these
	// existed have zero here; their exports sum model_calls instead.
	InputTokens, OutputTokens int64
	CostUSD                   float64
}
