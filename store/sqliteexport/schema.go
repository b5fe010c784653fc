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
const SchemaVersion = 2

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

// tables is the DDL of every table, in creation order.
var tables = []string{
	`CREATE TABLE sessions (
	id            TEXT PRIMARY KEY,
	started_at    TEXT NOT NULL,
	started_at_ms INTEGER NOT NULL,
	ended_at      TEXT,             -- NULL while running or when the writer crashed
	ended_at_ms   INTEGER,
	command       TEXT,             -- JSON array of the argv
	exit_code     INTEGER,          -- NULL until the session ended with a code
	policy_sha256 TEXT,
	image         TEXT,
	host          TEXT,
	events        INTEGER NOT NULL DEFAULT 0, -- stored events exported, all kinds
	allowed       INTEGER NOT NULL DEFAULT 0, -- allowed decisions: dns_events and net_events, each weighted by count
	denied        INTEGER NOT NULL DEFAULT 0, -- denied decisions, likewise
	dns           INTEGER NOT NULL DEFAULT 0, -- rows in dns_events
	net           INTEGER NOT NULL DEFAULT 0, -- rows in net_events
	model_calls   INTEGER NOT NULL DEFAULT 0, -- rows in model_calls
	input_tokens  INTEGER NOT NULL DEFAULT 0, -- sum of model_calls.input_tokens
	output_tokens INTEGER NOT NULL DEFAULT 0, -- sum of model_calls.output_tokens
	cost_usd      REAL NOT NULL DEFAULT 0,    -- sum of model_calls.estimated_cost_usd
	lost          INTEGER NOT NULL DEFAULT 0, -- events the writer could not record (store Counts.Lost), the unstored counts of recording_events included
	exec          INTEGER NOT NULL DEFAULT 0, -- rows in exec_events
	fs            INTEGER NOT NULL DEFAULT 0, -- rows in fs_events
	agent         INTEGER NOT NULL DEFAULT 0  -- rows in agent_events
)`,
	`CREATE TABLE net_events (
	id                    INTEGER PRIMARY KEY,
	session_id            TEXT NOT NULL REFERENCES sessions(id),
	seq                   INTEGER NOT NULL,
	timestamp             TEXT NOT NULL,
	timestamp_ms          INTEGER NOT NULL,
	domain                TEXT,
	ip                    TEXT,
	port                  INTEGER,
	src_ip                TEXT,
	src_port              INTEGER,
	transport             TEXT,    -- tcp, udp, icmp, arp, ipv6, other
	conn_type             TEXT,    -- tcp, tls, https, http, quic
	decision              TEXT,    -- allowed, denied
	reason                TEXT,
	matched_rule          TEXT,
	method                TEXT,
	path                  TEXT,
	query                 TEXT,
	status_code           INTEGER,
	bytes_sent            INTEGER NOT NULL DEFAULT 0, -- guest to upstream
	bytes_received        INTEGER NOT NULL DEFAULT 0, -- upstream to guest
	duration_ms           REAL NOT NULL DEFAULT 0,
	request_headers       TEXT,    -- JSON [[name, value], …], canonical names, secrets hashed; as the guest sent them in order (HTTP/1.1 with Host; HTTP/2 without pseudo-headers but :protocol, cookie crumbs joined), sorted by name where capsem lost track of the connection
	response_headers      TEXT,    -- likewise: in the upstream's order on capsem's own HTTP/1.1 upstream path; sorted by name for HTTP/2 upstreams and for what Go's http.Transport reads (WebSocket upgrades, Expect: 100-continue)
	request_body_preview  TEXT,
	response_body_preview TEXT,
	count                 INTEGER NOT NULL DEFAULT 1, -- how many events this row stands for: past 50 a second of one reason, one row stands for the rest of dropped frames and refused flows, with the last one's fields
	detail                TEXT
)`,
	`CREATE TABLE dns_events (
	id             INTEGER PRIMARY KEY,
	session_id     TEXT NOT NULL REFERENCES sessions(id),
	seq            INTEGER NOT NULL,
	timestamp      TEXT NOT NULL,
	timestamp_ms   INTEGER NOT NULL,
	qname          TEXT,    -- the name asked, lower-cased, no trailing dot; a byte outside printable ASCII as \DDD, a backslash as \\
	qtype          TEXT,
	transport      TEXT,    -- udp, tcp
	decision       TEXT,    -- allowed, denied
	reason         TEXT,
	matched_rule   TEXT,
	answer         TEXT,    -- what the guest got: the synthetic address of an A answer, else the response code (NOERROR for an allowed name without records of the type, NXDOMAIN, SERVFAIL, REFUSED, FORMERR, NOTIMP); NULL when no reply was sent
	resolver_asked TEXT,    -- the IP the guest sent the query to
	count          INTEGER NOT NULL DEFAULT 1 -- how many queries this row stands for: past 50 a second of one reason and transport, one row stands for the rest, with the last one's name
)`,
	`CREATE TABLE model_calls (
	id                    INTEGER PRIMARY KEY,
	session_id            TEXT NOT NULL REFERENCES sessions(id),
	seq                   INTEGER NOT NULL,
	timestamp             TEXT NOT NULL,
	timestamp_ms          INTEGER NOT NULL,
	provider              TEXT,
	domain                TEXT,    -- the API host the call was seen on (for the provider check)
	model                 TEXT,
	method                TEXT,
	path                  TEXT,
	stream                INTEGER,  -- 0 or 1
	system_prompt_preview TEXT,
	messages_count        INTEGER,
	tools_count           INTEGER,
	request_bytes         INTEGER NOT NULL DEFAULT 0,
	request_body_preview  TEXT,
	message_id            TEXT,
	status_code           INTEGER,
	text_content          TEXT,
	thinking_content      TEXT,
	stop_reason           TEXT,
	input_tokens          INTEGER NOT NULL DEFAULT 0,
	output_tokens         INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens    INTEGER NOT NULL DEFAULT 0,
	duration_ms           REAL NOT NULL DEFAULT 0,
	response_bytes        INTEGER NOT NULL DEFAULT 0,
	estimated_cost_usd    REAL NOT NULL DEFAULT 0,
	trace_id              TEXT,
	usage_details         TEXT      -- JSON, as the provider reported it
)`,
	`CREATE TABLE mcp_calls (
	id               INTEGER PRIMARY KEY,
	session_id       TEXT NOT NULL REFERENCES sessions(id),
	seq              INTEGER NOT NULL,
	timestamp        TEXT NOT NULL,
	timestamp_ms     INTEGER NOT NULL,
	server_name      TEXT,
	method           TEXT,
	tool_name        TEXT,
	request_id       TEXT,
	request_preview  TEXT,
	response_preview TEXT,
	decision         TEXT,
	duration_ms      REAL NOT NULL DEFAULT 0,
	error_message    TEXT,
	bytes_sent       INTEGER NOT NULL DEFAULT 0,
	bytes_received   INTEGER NOT NULL DEFAULT 0
)`,
	`CREATE TABLE tool_calls (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(id),
	seq           INTEGER NOT NULL,
	timestamp     TEXT NOT NULL,
	timestamp_ms  INTEGER NOT NULL,
	model_call_id INTEGER REFERENCES model_calls(id),
	call_index    INTEGER,
	call_id       TEXT,
	tool_name     TEXT,
	arguments     TEXT,    -- JSON
	origin        TEXT,    -- native, mcp
	mcp_call_id   INTEGER REFERENCES mcp_calls(id)
)`,
	`CREATE TABLE tool_responses (
	id              INTEGER PRIMARY KEY,
	session_id      TEXT NOT NULL REFERENCES sessions(id),
	seq             INTEGER NOT NULL,
	timestamp       TEXT NOT NULL,
	timestamp_ms    INTEGER NOT NULL,
	model_call_id   INTEGER REFERENCES model_calls(id),
	call_id         TEXT,
	content_preview TEXT,
	is_error        INTEGER  -- 0 or 1
)`,
	// Guest-reported: what the guest agent said happened (see the
	// conventions above). timestamp is when the host received the report.
	// An event recorded by a capsem older than guest_time has guest_time
	// NULL and the guest's claim in timestamp.
	`CREATE TABLE fs_events (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(id),
	seq           INTEGER NOT NULL,
	timestamp     TEXT NOT NULL,
	timestamp_ms  INTEGER NOT NULL,
	action        TEXT,    -- created, modified, deleted, renamed, overflow (the guest dropped events under path), unknown (the agent sent another word)
	path          TEXT,    -- relative to the workspace, slash-separated; for renamed the new name
	size          INTEGER NOT NULL DEFAULT 0, -- bytes, as the guest reported them
	old_path      TEXT,    -- renamed: the name before
	is_dir        INTEGER, -- 0 or 1: path is a directory
	guest_time    TEXT,    -- when it happened by the guest's clock, as the guest claimed; NULL when not reported
	guest_time_ms INTEGER
)`,
	// Built by the host from the command it sent and the exit it received.
	`CREATE TABLE exec_events (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(id),
	seq           INTEGER NOT NULL,
	timestamp     TEXT NOT NULL,
	timestamp_ms  INTEGER NOT NULL,
	command       TEXT,    -- the argv as a shell shows it; NULL for the guest's interactive shell
	exit_code     INTEGER, -- the exit status, or 128+N when killed by signal N; -1 when the guest went away before saying
	duration_ms   REAL NOT NULL DEFAULT 0, -- from sending the command to seeing it end, by the host's clock
	argv          TEXT,    -- JSON array of the words
	dir           TEXT,    -- the working directory asked for; NULL: the workspace
	tty           INTEGER, -- 0 or 1: it ran on a pseudo-terminal
	pid           INTEGER, -- in the guest, as the agent reported it
	signal        TEXT,    -- the signal that killed it (KILL, TERM, …); NULL when it exited
	started_at    TEXT,    -- when the host sent the command, by the host's clock (in records made before capsem built exec events on the host, the guest's)
	started_at_ms INTEGER
)`,
	// The host's record of the guest agent: what it saw of the agent, not
	// what the agent reported.
	`CREATE TABLE agent_events (
	id           INTEGER PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id),
	seq          INTEGER NOT NULL,
	timestamp    TEXT NOT NULL,
	timestamp_ms INTEGER NOT NULL,
	state        TEXT,    -- silent (stopped answering pings), resumed, protocol-violation (cut off), rate-limited (guest-reported events dropped), capped (a guest-reported field truncated)
	detail       TEXT,
	count        INTEGER NOT NULL DEFAULT 1 -- rate-limited: events dropped; capped: fields truncated; otherwise 1
)`,
	// The store's record of itself: where the record has a gap and why.
	// sessions.lost is the total of unstored counts (and of any other
	// event the writer could not record).
	`CREATE TABLE recording_events (
	id           INTEGER PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id),
	seq          INTEGER NOT NULL,
	timestamp    TEXT NOT NULL,
	timestamp_ms INTEGER NOT NULL,
	state        TEXT,    -- over-budget (new flows refused), disk-low (new flows refused), resumed, unstored (count events not stored)
	detail       TEXT,    -- what happened and what to do; for unstored the span, the kinds and why
	count        INTEGER NOT NULL DEFAULT 0 -- unstored: events not stored; otherwise 0
)`,
	// Events of a kind this build of capsem cannot decode (written by a
	// newer one): kept as a row so that every stored event appears once.
	`CREATE TABLE other_events (
	id           INTEGER PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id),
	seq          INTEGER NOT NULL,
	timestamp    TEXT NOT NULL,
	timestamp_ms INTEGER NOT NULL,
	kind         TEXT NOT NULL
)`,
}

// eventTables are the tables with one row per stored event: (session_id,
// seq) is unique in them.
var eventTables = []string{
	"net_events", "dns_events", "model_calls", "mcp_calls",
	"fs_events", "exec_events", "agent_events", "recording_events", "other_events",
}

// sharedSeqTables hold rows that come several to a stored event (the tool
// calls and tool results of one model call) and share its seq.
var sharedSeqTables = []string{"tool_calls", "tool_responses"}

// indexes are created after the rows are in (building an index once is
// faster than maintaining it row by row).
func indexes() []string {
	var out []string
	for _, t := range eventTables {
		out = append(out,
			"CREATE UNIQUE INDEX "+t+"_session_seq ON "+t+"(session_id, seq)",
			"CREATE INDEX "+t+"_session_time ON "+t+"(session_id, timestamp)")
	}
	for _, t := range sharedSeqTables {
		out = append(out,
			"CREATE INDEX "+t+"_session_seq ON "+t+"(session_id, seq)",
			"CREATE INDEX "+t+"_session_time ON "+t+"(session_id, timestamp)")
	}
	return append(out,
		"CREATE INDEX sessions_started_at ON sessions(started_at)",
		"CREATE INDEX net_events_domain ON net_events(domain)",
		"CREATE INDEX net_events_path ON net_events(path)",
		"CREATE INDEX dns_events_qname ON dns_events(qname)",
		"CREATE INDEX model_calls_trace_id ON model_calls(trace_id)",
		"CREATE INDEX model_calls_path ON model_calls(path)",
		"CREATE INDEX tool_calls_model_call_id ON tool_calls(model_call_id)",
		"CREATE INDEX tool_calls_call_id ON tool_calls(call_id)",
		"CREATE INDEX tool_calls_mcp_call_id ON tool_calls(mcp_call_id)",
		"CREATE INDEX tool_responses_model_call_id ON tool_responses(model_call_id)",
		"CREATE INDEX tool_responses_call_id ON tool_responses(call_id)",
		"CREATE INDEX fs_events_path ON fs_events(path)",
	)
}

// sessionCounts fills the count columns of sessions from the exported
// tables, so that they agree with the rows whatever kinds the store grows.
var sessionCounts = []string{
	`UPDATE sessions SET
	net     = a.n,
	allowed = sessions.allowed + a.allowed,
	denied  = sessions.denied + a.denied
FROM (SELECT session_id,
	count(*) AS n,
	sum(CASE WHEN decision = 'allowed' THEN count ELSE 0 END) AS allowed,
	sum(CASE WHEN decision = 'denied' THEN count ELSE 0 END) AS denied
	FROM net_events GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`,
	`UPDATE sessions SET
	dns     = a.n,
	allowed = sessions.allowed + a.allowed,
	denied  = sessions.denied + a.denied
FROM (SELECT session_id,
	count(*) AS n,
	sum(CASE WHEN decision = 'allowed' THEN count ELSE 0 END) AS allowed,
	sum(CASE WHEN decision = 'denied' THEN count ELSE 0 END) AS denied
	FROM dns_events GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`,
	`UPDATE sessions SET
	model_calls   = a.n,
	input_tokens  = a.input_tokens,
	output_tokens = a.output_tokens,
	cost_usd      = a.cost
FROM (SELECT session_id,
	count(*) AS n,
	sum(input_tokens) AS input_tokens,
	sum(output_tokens) AS output_tokens,
	total(estimated_cost_usd) AS cost
	FROM model_calls GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`,
	`UPDATE sessions SET exec = a.n
FROM (SELECT session_id, count(*) AS n FROM exec_events GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`,
	`UPDATE sessions SET fs = a.n
FROM (SELECT session_id, count(*) AS n FROM fs_events GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`,
	`UPDATE sessions SET agent = a.n
FROM (SELECT session_id, count(*) AS n FROM agent_events GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`,
}
